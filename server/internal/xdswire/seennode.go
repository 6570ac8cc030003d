package xdswire

import (
	"hash/maphash"
	"unique"

	"google.golang.org/protobuf/encoding/protowire"
)

// MaxSharedExtensions bounds the encoded extensions a stream shares with
// others through the process-wide table (unique.Make): a node with more
// is remembered by its hash alone.
const MaxSharedExtensions = 256 << 10

// SeenNode is what a stream keeps of the last node repeated in its
// requests that decoded, so that a request repeating it again costs little
// to recognise. An Envoy repeats its node, tens of KB, in every request,
// and most of it is the list of its extensions, which all the Envoys of a
// build share: that run of fields is kept once for the process (a
// unique.Handle, freed once no stream holds it) and compared byte for byte
// (memequal reads about twice as fast as maphash hashes), and the bytes
// before and after it, the node's own, are kept as hashes.
type SeenNode struct {
	set        bool // something is remembered
	size       int
	extAt      int                   // where the extensions' run starts
	extensions unique.Handle[string] // the run; zero if not shared
	head, tail uint64                // hashes of the bytes before and after the run
}

// Same reports whether node is, byte for byte (up to the hashes), the
// node remembered.
func (s *SeenNode) Same(node []byte) bool {
	if !s.set || len(node) != s.size {
		return false
	}
	end := s.extAt
	if s.extensions != (unique.Handle[string]{}) {
		ext := s.extensions.Value()
		end += len(ext)
		if string(node[s.extAt:end]) != ext {
			return false
		}
	}
	return maphash.Bytes(digestSeed, node[:s.extAt]) == s.head &&
		maphash.Bytes(digestSeed, node[end:]) == s.tail
}

// Remember makes s remember node, an encoded Node that parses.
func (s *SeenNode) Remember(node []byte) {
	at, end := extensionsRun(node)
	*s = SeenNode{set: true, size: len(node), extAt: at}
	if end > at && end-at <= MaxSharedExtensions {
		s.extensions = unique.Make(string(node[at:end]))
	} else {
		end = at
	}
	s.head = maphash.Bytes(digestSeed, node[:at])
	s.tail = maphash.Bytes(digestSeed, node[end:])
}

// extensionsRun returns where the first run of consecutive extensions
// fields of node starts and ends; start and end are len(node) if it has
// none. node must parse.
func extensionsRun(node []byte) (start, end int) {
	start = -1
	for i := 0; i < len(node); {
		num, _, n := protowire.ConsumeField(node[i:])
		if n < 0 {
			break
		}
		isExt := num == NodeExtensions.Number()
		if isExt && start < 0 {
			start = i
		} else if !isExt && start >= 0 {
			return start, i
		}
		i += n
	}
	if start < 0 {
		return len(node), len(node)
	}
	return start, len(node)
}
