package resource

import "github.com/xdsd/xdsd/internal/xdsinternal/hooks"

// init hands xdsd's own packages, through package xdsinternal, what this
// package keeps out of its API.
func init() {
	hooks.Placeholder = placeholder
	hooks.SotWField = (*Resource).sotwField
	hooks.DeltaField = (*Resource).deltaField
	hooks.SetVersion = formatSetVersion
	hooks.RemovalTypes = removalTypes
}
