package server

import (
	"slices"
	"sort"
	"sync"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/proto"

	"github.com/xdsd/xdsd/resource"
)

// StreamStatus is a copy of what one stream has sent and what its client
// has ACKed or NACKed, per type.
type StreamStatus struct {
	// ID identifies the stream within the server.
	ID uint64
	// Node is the node of the stream's first request (nil until then),
	// without its extensions (the list of every extension an Envoy was
	// built with, which the server has no use for). The stream keeps it
	// encoded: each Status call decodes it afresh.
	Node *corev3.Node
	// Variant is "ads" or a type's short name, plus "/sotw" or "/delta".
	Variant string
	// Identity is the identity of the client's verified certificate: its
	// first URI SAN, else its first DNS SAN, else its subject's common
	// name; empty without a client certificate.
	Identity string
	// Connected is when the stream opened.
	Connected time.Time
	// Types holds one entry per type the stream has sent or been asked for,
	// in ADS order.
	Types []TypeStatus
	// LastError is the latest request the server ignored and why (for
	// example an unknown type URL on ADS); empty if none was.
	LastError string
	// LastErrorAt is when LastError was recorded.
	LastErrorAt time.Time
}

// TypeStatus is the state of one type on one stream.
type TypeStatus struct {
	// TypeURL is the resource type.
	TypeURL string
	// SentVersion is the version of the latest response. A SotW type
	// resumed at the version its client held (S13), which is sent
	// nothing, has that version as sent and ACKed, with no nonce.
	SentVersion string
	// SentNonce is the latest response's nonce.
	SentNonce string
	// SentAt is when the latest response was sent.
	SentAt time.Time
	// AckedVersion is the latest version the client ACKed.
	AckedVersion string
	// AckedAt is when the client ACKed AckedVersion.
	AckedAt time.Time
	// NackedVersion is the version of the latest NACKed response. It and
	// the two fields below stay set after a later ACK, as history.
	NackedVersion string
	// NackMessage is the latest NACK's error_detail message.
	NackMessage string
	// NackedAt is when the latest NACK came.
	NackedAt time.Time
}

// statusRegistry holds the status of every open stream.
type statusRegistry struct {
	mu      sync.Mutex // guards streams and nextID
	streams map[uint64]*streamStatus
	nextID  uint64
}

// streamStatus is the shared, locked status of one stream; its stream
// writes it, Server.Status reads it.
type streamStatus struct {
	mu   sync.Mutex // guards s and node
	s    StreamStatus
	node []byte // the stream's node, encoded (s.Node is left nil)
}

func (r *statusRegistry) add(variant string) *streamStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.streams == nil {
		r.streams = make(map[uint64]*streamStatus)
	}
	r.nextID++
	ss := &streamStatus{s: StreamStatus{ID: r.nextID, Variant: variant, Connected: time.Now()}}
	r.streams[ss.s.ID] = ss
	return ss
}

// opened returns how many streams have been added.
func (r *statusRegistry) opened() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.nextID
}

func (r *statusRegistry) remove(ss *streamStatus) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.streams, ss.s.ID)
}

// snapshot copies the status of every open stream, with their nodes
// decoded if nodes is set.
func (r *statusRegistry) snapshot(nodes bool) []StreamStatus {
	r.mu.Lock()
	list := make([]*streamStatus, 0, len(r.streams))
	for _, ss := range r.streams {
		list = append(list, ss)
	}
	r.mu.Unlock()
	out := make([]StreamStatus, 0, len(list))
	for _, ss := range list {
		ss.mu.Lock()
		c := ss.s
		c.Types = append([]TypeStatus(nil), ss.s.Types...)
		node := ss.node
		ss.mu.Unlock()
		if nodes && node != nil {
			c.Node = new(corev3.Node)
			_ = proto.Unmarshal(node, c.Node) // it decoded when the stream started
		}
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// setNode records the stream's node, encoded, which nothing changes
// afterwards.
func (ss *streamStatus) setNode(node []byte) {
	ss.mu.Lock()
	ss.node = node
	ss.mu.Unlock()
}

// setIdentity records the client's certificate identity.
func (ss *streamStatus) setIdentity(id string) {
	ss.mu.Lock()
	ss.s.Identity = id
	ss.mu.Unlock()
}

// typeLocked returns the entry for t, creating it in ADS order.
func (ss *streamStatus) typeLocked(t *resource.Type) *TypeStatus {
	for i := range ss.s.Types { // a few types: found without a lookup
		if ss.s.Types[i].TypeURL == t.URL {
			return &ss.s.Types[i]
		}
	}
	i := sort.Search(len(ss.s.Types), func(i int) bool {
		return resource.Lookup(ss.s.Types[i].TypeURL).Order >= t.Order
	})
	ss.s.Types = slices.Insert(ss.s.Types, i, TypeStatus{TypeURL: t.URL})
	return &ss.s.Types[i]
}

// resumed records that t was resumed at version, which its client holds.
func (ss *streamStatus) resumed(t *resource.Type, version string) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ts := ss.typeLocked(t)
	now := time.Now()
	ts.SentVersion, ts.SentNonce, ts.SentAt = version, "", now
	ts.AckedVersion, ts.AckedAt = version, now
}

func (ss *streamStatus) sent(t *resource.Type, version, nonce string) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ts := ss.typeLocked(t)
	ts.SentVersion, ts.SentNonce, ts.SentAt = version, nonce, time.Now()
}

func (ss *streamStatus) ack(t *resource.Type, version string) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ts := ss.typeLocked(t)
	ts.AckedVersion, ts.AckedAt = version, time.Now()
}

func (ss *streamStatus) nack(t *resource.Type, version, msg string) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ts := ss.typeLocked(t)
	ts.NackedVersion, ts.NackMessage, ts.NackedAt = version, msg, time.Now()
}

func (ss *streamStatus) recordError(msg string) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.s.LastError, ss.s.LastErrorAt = msg, time.Now()
}
