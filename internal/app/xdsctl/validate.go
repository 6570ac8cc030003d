package xdsctl

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/xdsd/xdsd/source/configdir"
)

const validateHelp = `Usage: xdsctl validate DIR

Loads the configuration directory DIR exactly as 'xdsd serve --config-dir
DIR' does (the same parsing, validation, reference and node-selector checks,
the same messages), without a server. Prints "ok: N resources in M files",
or every problem as "file: resource: reason" and exits 1.

Examples:
  xdsctl validate ./config
  xdsctl validate ./config.next && rsync -a --delete ./config.next/ ./config/   # check before deploying
`

// Validate is `xdsctl validate`: it loads a configuration directory
// offline and reports every problem.
func Validate(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("validate", validateHelp, stderr)
	rest, done, code := parse(fs, args, stdout)
	if done {
		return code
	}
	if len(rest) != 1 {
		fmt.Fprintln(stderr, "xdsctl validate: want one directory, e.g. xdsctl validate ./config")
		return exitUsage
	}
	dir := rest[0]
	if st, err := os.Stat(dir); err != nil {
		fmt.Fprintln(stderr, "xdsctl validate:", err)
		return exitFail
	} else if !st.IsDir() {
		fmt.Fprintf(stderr, "xdsctl validate: %s is not a directory\n", dir)
		return exitFail
	}
	res, err := configdir.NewLoader(dir).Load()
	var cerr *configdir.Error
	switch {
	case errors.As(err, &cerr):
		for _, p := range cerr.Problems {
			if p.File != "" {
				p.File = filepath.Join(dir, p.File)
			}
			fmt.Fprintln(stdout, p.String())
		}
		fmt.Fprintf(stderr, "xdsctl validate: %s: %d problem(s); xdsd would reject this configuration\n", dir, len(cerr.Problems))
		return exitFail
	case err != nil:
		fmt.Fprintln(stderr, "xdsctl validate:", err)
		return exitFail
	}
	fmt.Fprintf(stdout, "ok: %d resources in %d files\n", res.Count(), res.Files)
	return exitOK
}
