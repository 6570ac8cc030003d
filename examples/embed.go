// Package examples holds xdsd's example configuration, embedded so that
// `xdsd serve` without --config-dir serves it.
package examples

import (
	"embed"
	"io/fs"
)

//go:embed config
var config embed.FS

// Config returns the example configuration directory.
func Config() fs.FS {
	sub, err := fs.Sub(config, "config")
	if err != nil {
		panic(err)
	}
	return sub
}
