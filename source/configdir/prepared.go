package configdir

import "crypto/sha256"

// Prepared is a file parsed ahead of the load that reads it: a writer of
// a configuration store may hand the bytes a file is about to hold to the
// readers before they are to read them (see Loader.Offer).
type Prepared struct{ parsed parsed }

// Prepare parses data, the bytes the file rel (its path relative to the
// directory) may be found to hold. It is safe for concurrent use.
func Prepare(rel string, data []byte) *Prepared {
	return &Prepared{parse(rel, data, sha256.Sum256(data))}
}

// parsed is what a file's bytes parse to.
type parsed struct {
	sum     [sha256.Size]byte // of the bytes
	entries []entry
	probs   []Problem
}

// parse parses data, the bytes of the file rel, whose SHA-256 is sum.
func parse(rel string, data []byte, sum [sha256.Size]byte) parsed {
	entries, probs := parseFile(rel, data)
	return parsed{sum: sum, entries: entries, probs: probs}
}

// Offer gives l's next Load or Reload the file rel parsed ahead: if that
// load reads the file and finds the bytes p was parsed from, it takes p
// rather than parse them again. The offers the next load does not take
// are dropped.
func (l *Loader) Offer(rel string, p *Prepared) {
	if l.offered == nil {
		l.offered = make(map[string]*Prepared)
	}
	l.offered[rel] = p
}

// dropOffers drops the offers a load did not take.
func (l *Loader) dropOffers() { l.offered = nil }
