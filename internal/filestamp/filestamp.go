// Package filestamp holds what tells that a file changed without reading
// it, beyond what os.FileInfo says portably: its change time.
package filestamp
