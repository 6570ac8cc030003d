// Package clientinterop tests xdsd's client library against
// go-control-plane's xDS server and its snapshot and linear caches. It
// lives in the bench module so that the main module needs only
// go-control-plane's generated API.
package clientinterop
