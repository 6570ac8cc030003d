// Package etcdstore keeps xdsd's configuration in etcd, for several
// replicas: the configuration directory's files, one key per file, which
// every replica reads whole at a revision and then watches
// (Replica), and which Apply changes in one step, however many files
// the change holds.
//
// The keys under a prefix P (docs/etcd.md shows them with etcdctl):
//
//	P + "current"                    the generation in force; absent means "0"
//	P + "config/" + G + "/" + path   the file at path in generation G: its bytes
//	P + "staging/" + G               generation G is being written, under its writer's lease
//	P + "replicas/" + name           a replica's registration, under its lease
//
// A change that fits in one etcd transaction (etcd's default limit is 128
// operations and 1.5 MiB) is made in the generation in force, in one
// transaction that also rewrites P+"current". A larger one is written as a
// new generation, a transaction at a time, which no replica reads until
// one small transaction makes it current; the old generation is then
// deleted. So every replica goes from one whole configuration to the next.
// A generation that is neither in force nor being written (its writer
// died, and its lease with it) is deleted by the next large change.
package etcdstore

import (
	"strings"
)

// DefaultPrefix is the prefix of xdsd's keys unless told otherwise.
const DefaultPrefix = "/xdsd/"

// firstGeneration is the generation in force when P+"current" is absent.
const firstGeneration = "0"

// FileKey returns the key of the file at path in generation gen under
// prefix (DefaultPrefix if empty), for a writer that commits its own
// transactions (see Apply for the guards it then owes).
func FileKey(prefix, gen, path string) string { return layout{orDefault(prefix)}.fileKey(gen, path) }

// CurrentKey returns the key of the generation in force under prefix
// (DefaultPrefix if empty); every change of the configuration rewrites it.
func CurrentKey(prefix string) string { return layout{orDefault(prefix)}.current() }

func orDefault(prefix string) string {
	if prefix == "" {
		return DefaultPrefix
	}
	return prefix
}

// layout names the keys under a prefix.
type layout struct{ prefix string }

// current is the key of the generation in force.
func (l layout) current() string { return l.prefix + "current" }

// generation is the prefix of generation g's files.
func (l layout) generation(g string) string { return l.prefix + "config/" + g + "/" }

// fileKey is the key of the file at path in generation g.
func (l layout) fileKey(g, path string) string { return l.generation(g) + path }

// staging is the key that marks generation g as being written, under the
// writer's lease: a generation neither in force nor marked is garbage.
func (l layout) staging(g string) string { return l.prefix + "staging/" + g }

// generations is the prefix of every generation's files.
func (l layout) generations() string { return l.prefix + "config/" }

// replicas is the prefix of the replicas' registrations.
func (l layout) replicas() string { return l.prefix + "replicas/" }

// watched returns the range a replica watches: every generation's files
// and the key of the generation in force, not the registrations (which
// each replica rewrites as it applies revisions).
func (l layout) watched() (start, end string) {
	return l.prefix + "config/", l.current() + "\x00"
}

// file returns the generation and path of a file's key.
func (l layout) file(key string) (gen, path string, ok bool) {
	rest, ok := strings.CutPrefix(key, l.prefix+"config/")
	if !ok {
		return "", "", false
	}
	gen, path, ok = strings.Cut(rest, "/")
	return gen, path, ok && gen != "" && path != ""
}

// generationOf returns the generation a value of P+"current" names.
func generationOf(value []byte) string {
	if g := strings.TrimSpace(string(value)); g != "" {
		return g
	}
	return firstGeneration
}
