package server

import (
	"errors"
	"hash/maphash"
	"unicode/utf8"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/xdsd/xdsd/cache"
	"github.com/xdsd/xdsd/resource"
)

// Field number of resource_names in DiscoveryRequest, and its tag byte.
const (
	requestNamesField = 3
	namesTag          = requestNamesField<<3 | byte(protowire.BytesType)
)

// sotwRequest receives a SotW DiscoveryRequest. With Codec installed it
// keeps the encoded bytes, so that the subscription list an ACK repeats
// (often thousands of names) need not be decoded again; with any other
// codec it is decoded into msg as usual.
type sotwRequest struct {
	msg  discovery.DiscoveryRequest
	raw  []byte      // set by Codec instead of decoding
	buf  mem.Buffer  // holds raw, from gRPC's buffer pool: see release
	node requestNode // the node, which decode leaves out of msg
}

// release gives raw's buffer back to gRPC's pool once the request is
// handled (nothing keeps a reference into raw).
func (r *sotwRequest) release() {
	if r.buf != nil {
		r.buf.Free()
		r.buf, r.raw = nil, nil
	}
}

// ProtoReflect lets codecs other than ours decode into msg.
func (r *sotwRequest) ProtoReflect() protoreflect.Message { return r.msg.ProtoReflect() }

// deltaRequest receives an incremental request. With Codec installed it
// is decoded without its node, which node takes (see requestNode), and
// each subscribed name that snap has is snap's own string rather than a
// copy: a client's first subscription names every cluster, and a string
// per name per client was the largest part of what an initial sync
// allocated. With any other codec it is decoded into msg as usual.
type deltaRequest struct {
	msg discovery.DeltaDiscoveryRequest
	// What to share the names' strings with, set before decoding: the
	// stream's latest snapshot (nil: none yet) and its only type, if any.
	snap *cache.Snapshot
	only *resource.Type
	node requestNode // the node, which msg does not hold
}

// ProtoReflect lets codecs other than ours decode into msg.
func (r *deltaRequest) ProtoReflect() protoreflect.Message { return r.msg.ProtoReflect() }

// Field numbers of DeltaDiscoveryRequest's resource_names_subscribe.
const deltaReqSubscribeField = 3

// decode fills r.msg from an encoded request, but for its node, which
// r.node takes (see requestNode) rather than r.msg.
func (r *deltaRequest) decode(raw []byte) error {
	count, nodes, typeURL, node := 0, 0, []byte(nil), []byte(nil)
	for b := raw; len(b) > 0; {
		num, typ, n := protowire.ConsumeField(b)
		if n < 0 {
			return proto.Unmarshal(raw, &r.msg) // fails as it should
		}
		if typ == protowire.BytesType {
			_, _, tagLen := protowire.ConsumeTag(b)
			v, _ := protowire.ConsumeBytes(b[tagLen:n])
			switch num {
			case deltaReqTypeURLField:
				typeURL = v // the last one counts
			case deltaReqSubscribeField:
				count++
			case deltaReqNodeField:
				node = v
				nodes++
			}
		}
		b = b[n:]
	}
	if nodes > 1 { // protobuf merges them: left to it
		return proto.Unmarshal(withoutNodeExtensions(raw, deltaReqNodeField), &r.msg)
	}
	if nodes == 1 {
		if err := r.node.take(node); err != nil {
			return err
		}
	} else if count == 0 {
		return proto.Unmarshal(raw, &r.msg)
	}
	t := r.only
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
		if typ == protowire.BytesType && num == deltaReqNodeField {
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
		if res := r.snap.GetBytes(t, name); res != nil {
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
	if err := proto.Unmarshal(rest, &r.msg); err != nil {
		return err
	}
	if count > 0 {
		r.msg.ResourceNamesSubscribe = names
	}
	if ok && versions != nil {
		r.msg.InitialResourceVersions = versions
	}
	return nil
}

// Field numbers of DeltaDiscoveryRequest's initial_resource_versions and of
// a map entry's key and value.
const (
	deltaReqInitialField = 5
	mapKeyField          = 1
	mapValueField        = 2
)

// initialVersions decodes the entries of initial_resource_versions, each
// key that snap has (of type t) its own string rather than a copy: a
// client back from another server names everything it holds. It decodes
// only entries of a key and a value, each once at most and valid UTF-8,
// and reports whether every entry was one (not ok: protobuf decodes them).
func (r *deltaRequest) initialVersions(fields [][]byte, t *resource.Type) (map[string]string, bool) {
	if len(fields) == 0 {
		return nil, true
	}
	out := make(map[string]string, len(fields))
	for _, f := range fields {
		_, _, tagLen := protowire.ConsumeTag(f)
		entry, _ := protowire.ConsumeBytes(f[tagLen:])
		var key, value []byte
		seenKey, seenValue := false, false
		for len(entry) > 0 {
			num, typ, n := protowire.ConsumeTag(entry)
			if n < 0 || typ != protowire.BytesType || (num != mapKeyField && num != mapValueField) {
				return nil, false
			}
			v, m := protowire.ConsumeBytes(entry[n:])
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
			entry = entry[n+m:]
		}
		name := string(key)
		if res := r.snap.GetBytes(t, key); res != nil {
			name = res.Name
		}
		out[name] = string(value)
	}
	return out, true
}

// namesDigest identifies a resource_names list by its encoding.
type namesDigest struct {
	hash  uint64
	count int
}

var digestSeed = maphash.MakeSeed()

// decode fills r.msg from r.raw, except resource_names, and returns the
// digest of the names' encoding and a function that decodes them.
func (r *sotwRequest) decode() (namesDigest, func() ([]string, error), error) {
	if r.raw == nil {
		return namesDigest{}, func() ([]string, error) { return r.msg.ResourceNames, nil }, nil
	}
	rest := make([]byte, 0, 256)
	var nodes [][]byte // the node fields, whole
	d, err := sotwFields(r.raw, func(field []byte) {
		if num, typ, _ := protowire.ConsumeTag(field); num == sotwReqNodeField && typ == protowire.BytesType {
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
		if err := r.node.take(node); err != nil {
			return d, nil, err
		}
	default: // protobuf merges them: left to it
		for _, f := range nodes {
			rest = append(rest, f...)
		}
		rest = withoutNodeExtensions(rest, sotwReqNodeField)
	}
	if err := proto.Unmarshal(rest, &r.msg); err != nil {
		return d, nil, err
	}
	names := func() ([]string, error) {
		out := make([]string, 0, d.count)
		for b := r.raw; len(b) > 0; {
			num, typ, n := protowire.ConsumeTag(b)
			m := protowire.ConsumeFieldValue(num, typ, b[n:])
			if num == requestNamesField && typ == protowire.BytesType {
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
func sotwFields(raw []byte, other func(field []byte)) (namesDigest, error) {
	var d namesDigest
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
				d.count++
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
		if num == requestNamesField && typ == protowire.BytesType {
			if run == 0 {
				runStart = b
			}
			run += n + m // names usually come in one run: hashed in one write
			d.count++
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
	d.hash = h.Sum64()
	return d, nil
}

// handleSotwWire applies a request received as a sotwRequest: a name list
// whose encoding is the same as the type's previous one is not decoded.
func (st *stream) handleSotwWire(r *sotwRequest) error {
	r.node.known = st.node
	d, names, err := r.decode()
	if err != nil {
		return errInvalidRequest(err)
	}
	if err := st.startFrom(&r.node); err != nil {
		return err
	}
	if r.raw == nil {
		return st.handleSotw(&r.msg)
	}
	var ts *typeState
	if t := resource.Lookup(r.msg.GetTypeUrl()); t != nil {
		ts = st.types.get(t)
	} else if st.only != nil && r.msg.GetTypeUrl() == "" {
		ts = st.types.get(st.only)
	}
	if ts == nil || !ts.namesKnown || ts.namesDigest != d {
		if r.msg.ResourceNames, err = names(); err != nil {
			return errInvalidRequest(err)
		}
	}
	return st.handleSotwDigest(&r.msg, d)
}

// digestNames is the digest of names as a request encodes them: the same
// as sotwRequest.decode's for the same names, however they are split into
// runs (the hash is streamed), unless a client encodes tags or lengths in
// more bytes than needed.
func digestNames(names []string) namesDigest {
	var h maphash.Hash
	h.SetSeed(digestSeed)
	var b []byte
	for _, n := range names {
		b = protowire.AppendTag(b[:0], requestNamesField, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(len(n)))
		h.Write(b)
		h.WriteString(n)
	}
	return namesDigest{hash: h.Sum64(), count: len(names)}
}

// errInvalidRequest is the error that ends a stream sent an undecodable
// request: the code grpc-go gives when its own codec cannot decode one, so
// every variant answers garbage alike.
func errInvalidRequest(err error) error {
	return status.Errorf(codes.Internal, "grpc: failed to unmarshal the received message: %v", err)
}
