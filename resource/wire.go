package resource

import (
	"sync"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
)

// Field number of `resources` in DiscoveryResponse and DeltaDiscoveryResponse.
const responseResourcesField = 2

// wire holds a resource's encodings as one entry of a response, made once
// on first use and shared by every stream that sends it.
type wire struct {
	sotwOnce, deltaOnce sync.Once
	sotw, delta         []byte
}

// SotWField returns the resource encoded as one entry of a
// DiscoveryResponse's resources field (tag, length and the Any), ready to
// be concatenated into a response. It is made once and shared: the bytes
// must not be modified.
func (r *Resource) SotWField() []byte {
	r.wire.sotwOnce.Do(func() {
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(r.Body)
		if err != nil {
			panic("resource: encoding an Any: " + err.Error()) // cannot happen: Body was encoded by New
		}
		r.wire.sotw = field(b)
	})
	return r.wire.sotw
}

// DeltaField returns the resource encoded as one entry of a
// DeltaDiscoveryResponse's resources field: a Resource with the name,
// version, body and TTL (no aliases). It is made once and shared: the
// bytes must not be modified.
func (r *Resource) DeltaField() []byte {
	r.wire.deltaOnce.Do(func() {
		dr := &discovery.Resource{Name: r.Name, Version: r.Version, Resource: r.Body}
		if r.TTL > 0 {
			dr.Ttl = durationpb.New(r.TTL)
		}
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(dr)
		if err != nil {
			panic("resource: encoding a Resource: " + err.Error())
		}
		r.wire.delta = field(b)
	})
	return r.wire.delta
}

func field(msg []byte) []byte {
	out := protowire.AppendTag(make([]byte, 0, len(msg)+8), responseResourcesField, protowire.BytesType)
	out = protowire.AppendVarint(out, uint64(len(msg)))
	return append(out, msg...)
}
