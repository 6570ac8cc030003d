package xdswire

import (
	"errors"
	"hash/maphash"
	"unicode/utf8"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/xdsd/xdsd/cache"
	"github.com/xdsd/xdsd/resource"
)

// SotwRequest receives a SotW DiscoveryRequest. Received from its
// encoding (Receive, as the server's codec does) it keeps the encoded
// bytes, so that the subscription list an ACK repeats (often thousands of
// names) need not be decoded again; with any other codec it is decoded
// into Msg as usual.
type SotwRequest struct {
	Msg  discovery.DiscoveryRequest
	Raw  []byte      // set by Receive instead of decoding
	Buf  mem.Buffer  // holds Raw, from gRPC's buffer pool: see Release
	Node RequestNode // the node, which Decode leaves out of Msg
}

// Receive keeps data, a request's encoding, for Decode: without a copy if
// it is in one piece.
func (r *SotwRequest) Receive(data mem.BufferSlice) {
	r.Buf = data.MaterializeToBuffer(mem.DefaultBufferPool())
	r.Raw = r.Buf.ReadOnlyData()
}

// Release gives Raw's buffer back to gRPC's pool once the request is
// handled (nothing keeps a reference into Raw).
func (r *SotwRequest) Release() {
	if r.Buf != nil {
		r.Buf.Free()
		r.Buf, r.Raw = nil, nil
	}
}

// ProtoReflect lets codecs other than the server's decode into Msg.
func (r *SotwRequest) ProtoReflect() protoreflect.Message { return r.Msg.ProtoReflect() }

// DeltaRequest receives an incremental request. Received from its encoding
// (Receive, as the server's codec does) it is decoded without its node,
// which Node takes (see RequestNode), and each subscribed name that Snap
// has is Snap's own string rather than a copy: a client's first
// subscription names every cluster, and a string per name per client was
// the largest part of what an initial sync allocated. With any other codec
// it is decoded into Msg as usual.
type DeltaRequest struct {
	Msg discovery.DeltaDiscoveryRequest
	// What to share the names' strings with, set before decoding: the
	// stream's latest snapshot (nil: none yet) and its only type, if any.
	Snap *cache.Snapshot
	Only *resource.Type
	Node RequestNode // the node, which Msg does not hold
}

// ProtoReflect lets codecs other than the server's decode into Msg.
func (r *DeltaRequest) ProtoReflect() protoreflect.Message { return r.Msg.ProtoReflect() }

// Receive decodes data, a request's encoding (see Decode).
func (r *DeltaRequest) Receive(data mem.BufferSlice) error {
	buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
	defer buf.Free()
	return r.Decode(buf.ReadOnlyData())
}

// Field numbers of DeltaDiscoveryRequest's resource_names_subscribe.
const deltaReqSubscribeField = 3

// Decode fills r.Msg from an encoded request, but for its node, which
// r.Node takes (see RequestNode) rather than r.Msg.
func (r *DeltaRequest) Decode(raw []byte) error {
	count, nodes, typeURL, node := 0, 0, []byte(nil), []byte(nil)
	for b := raw; len(b) > 0; {
		num, typ, n := protowire.ConsumeField(b)
		if n < 0 {
			return proto.Unmarshal(raw, &r.Msg) // fails as it should
		}
		if typ == protowire.BytesType {
			_, _, tagLen := protowire.ConsumeTag(b)
			v, _ := protowire.ConsumeBytes(b[tagLen:n])
			switch num {
			case DeltaReqTypeURLField:
				typeURL = v // the last one counts
			case deltaReqSubscribeField:
				count++
			case DeltaReqNodeField:
				node = v
				nodes++
			}
		}
		b = b[n:]
	}
	if nodes > 1 { // protobuf merges them: left to it
		return proto.Unmarshal(WithoutNodeExtensions(raw, DeltaReqNodeField), &r.Msg)
	}
	if nodes == 1 {
		if err := r.Node.Take(node); err != nil {
			return err
		}
	} else if count == 0 {
		return proto.Unmarshal(raw, &r.Msg)
	}
	t := r.Only
	if t == nil {
		t = resource.Lookup(string(typeURL))
	}
	names := make([]string, 0, count)
	var rest []byte      // raw without the names, the node and the initial versions
	var initial [][]byte // the initial versions' entries, whole fields
	for b := raw; len(b) > 0; {
		num, typ, n := protowire.ConsumeField(b)
		field := b[:n]
		b = b[n:]
		if typ == protowire.BytesType && num == DeltaReqNodeField {
			continue
		}
		if typ == protowire.BytesType && num == deltaReqInitialField {
			initial = append(initial, field)
			continue
		}
		if num != deltaReqSubscribeField || typ != protowire.BytesType {
			rest = append(rest, field...)
			continue
		}
		_, _, tagLen := protowire.ConsumeTag(field)
		name, _ := protowire.ConsumeBytes(field[tagLen:])
		if !utf8.Valid(name) {
			return errors.New("resource_names_subscribe: invalid UTF-8")
		}
		if res := r.Snap.GetBytes(t, name); res != nil {
			names = append(names, res.Name)
		} else {
			names = append(names, string(name))
		}
	}
	versions, ok := r.initialVersions(initial, t)
	if !ok { // left to protobuf, which decodes every form of a map entry
		for _, f := range initial {
			rest = append(rest, f...)
		}
	}
	if err := proto.Unmarshal(rest, &r.Msg); err != nil {
		return err
	}
	if count > 0 {
		r.Msg.ResourceNamesSubscribe = names
	}
	if ok && versions != nil {
		r.Msg.InitialResourceVersions = versions
	}
	return nil
}

// initialVersions decodes the entries of initial_resource_versions, each
// key that r.Snap has (of type t) its own string rather than a copy: a
// client back from another server names everything it holds. It decodes
// only entries of a key and a value, each once at most and valid UTF-8,
// and reports whether every entry was one (not ok: protobuf decodes them).
func (r *DeltaRequest) initialVersions(fields [][]byte, t *resource.Type) (map[string]string, bool) {
	if len(fields) == 0 {
		return nil, true
	}
	out := make(map[string]string, len(fields))
	for _, f := range fields {
		_, _, tagLen := protowire.ConsumeTag(f)
		Entry, _ := protowire.ConsumeBytes(f[tagLen:])
		var key, value []byte
		seenKey, seenValue := false, false
		for len(Entry) > 0 {
			num, typ, n := protowire.ConsumeTag(Entry)
			if n < 0 || typ != protowire.BytesType || (num != mapKeyField && num != mapValueField) {
				return nil, false
			}
			v, m := protowire.ConsumeBytes(Entry[n:])
			if m < 0 || !utf8.Valid(v) {
				return nil, false
			}
			if num == mapKeyField {
				if seenKey {
					return nil, false
				}
				key, seenKey = v, true
			} else {
				if seenValue {
					return nil, false
				}
				value, seenValue = v, true
			}
			Entry = Entry[n+m:]
		}
		name := string(key)
		if res := r.Snap.GetBytes(t, key); res != nil {
			name = res.Name
		}
		out[name] = string(value)
	}
	return out, true
}

// NamesDigest identifies a resource_names list by its encoding: the hash
// of its fields' bytes and their count.
type NamesDigest struct {
	Hash  uint64
	Count int
}

var digestSeed = maphash.MakeSeed()

// NamesHash is NamesDigest's Hash of a run of encoded resource_names
// fields.
func NamesHash(names []byte) uint64 { return maphash.Bytes(digestSeed, names) }

// Decode fills r.Msg from r.Raw, except resource_names, and returns the
// digest of the names' encoding and a function that decodes them.
func (r *SotwRequest) Decode() (NamesDigest, func() ([]string, error), error) {
	if r.Raw == nil {
		return NamesDigest{}, func() ([]string, error) { return r.Msg.ResourceNames, nil }, nil
	}
	rest := make([]byte, 0, 256)
	var nodes [][]byte // the node fields, whole
	d, err := sotwFields(r.Raw, func(field []byte) {
		if num, typ, _ := protowire.ConsumeTag(field); num == SotwReqNodeField && typ == protowire.BytesType {
			nodes = append(nodes, field)
		} else {
			rest = append(rest, field...)
		}
	})
	if err != nil {
		return d, nil, err
	}
	switch len(nodes) {
	case 0:
	case 1:
		_, _, tagLen := protowire.ConsumeTag(nodes[0])
		node, _ := protowire.ConsumeBytes(nodes[0][tagLen:])
		if err := r.Node.Take(node); err != nil {
			return d, nil, err
		}
	default: // protobuf merges them: left to it
		for _, f := range nodes {
			rest = append(rest, f...)
		}
		rest = WithoutNodeExtensions(rest, SotwReqNodeField)
	}
	if err := proto.Unmarshal(rest, &r.Msg); err != nil {
		return d, nil, err
	}
	names := func() ([]string, error) {
		out := make([]string, 0, d.Count)
		for b := r.Raw; len(b) > 0; {
			num, typ, n := protowire.ConsumeTag(b)
			m := protowire.ConsumeFieldValue(num, typ, b[n:])
			if num == SotwReqNamesField && typ == protowire.BytesType {
				v, _ := protowire.ConsumeBytes(b[n:])
				if !utf8.Valid(v) {
					return nil, errors.New("resource_names: invalid UTF-8")
				}
				out = append(out, string(v))
			}
			b = b[n+m:]
		}
		return out, nil
	}
	return d, names, nil
}

// sotwFields walks a SotW request's encoding: it hashes the resource_names
// fields into their digest (a run of names at the cost of a varint each)
// and calls other with every other field's whole encoding.
func sotwFields(raw []byte, other func(field []byte)) (NamesDigest, error) {
	var d NamesDigest
	var h maphash.Hash
	h.SetSeed(digestSeed)
	b := raw
	var runStart []byte // where the current run of names began
	run := 0            // its length
	for len(b) > 0 {
		if b[0] == namesTag {
			if run == 0 {
				runStart = b
			}
			for len(b) > 0 && b[0] == namesTag {
				l, n := protowire.ConsumeVarint(b[1:])
				if n < 0 || uint64(len(b)-1-n) < l {
					return d, errors.New("resource_names: truncated")
				}
				size := 1 + n + int(l)
				run += size
				d.Count++
				b = b[size:]
			}
			continue
		}
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return d, protowire.ParseError(n)
		}
		var m int
		if typ == protowire.BytesType {
			_, m = protowire.ConsumeBytes(b[n:])
		} else {
			m = protowire.ConsumeFieldValue(num, typ, b[n:])
		}
		if m < 0 {
			return d, protowire.ParseError(m)
		}
		if num == SotwReqNamesField && typ == protowire.BytesType {
			if run == 0 {
				runStart = b
			}
			run += n + m // names usually come in one run: hashed in one write
			d.Count++
		} else {
			if run > 0 {
				h.Write(runStart[:run])
				run = 0
			}
			other(b[:n+m])
		}
		b = b[n+m:]
	}
	if run > 0 {
		h.Write(runStart[:run])
	}
	d.Hash = h.Sum64()
	return d, nil
}

// DigestNames is the digest of names as a request encodes them: the same
// as SotwRequest.Decode's for the same names, however they are split into
// runs (the hash is streamed), unless a client encodes tags or lengths in
// more bytes than needed.
func DigestNames(names []string) NamesDigest {
	var h maphash.Hash
	h.SetSeed(digestSeed)
	var b []byte
	for _, n := range names {
		b = protowire.AppendTag(b[:0], SotwReqNamesField, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(len(n)))
		h.Write(b)
		h.WriteString(n)
	}
	return NamesDigest{Hash: h.Sum64(), Count: len(names)}
}
