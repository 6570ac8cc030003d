package server

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/xdsd/xdsd/server/internal/xdswire"
)

// lenientFiles are the API's files that define Node and the requests as a
// decoder that does not know Node.extensions sees them: built from the
// API's descriptors with that field removed, so that a dynamic message
// keeps it as unknown bytes, unchecked. They are the reference the fuzz
// targets hold the decoders to, independent of xdswire.WithoutNodeExtensions.
var lenientFiles = sync.OnceValues(func() (base, disc protoreflect.FileDescriptor) {
	baseProto := protodesc.ToFileDescriptorProto(corev3.File_envoy_config_core_v3_base_proto)
	for _, m := range baseProto.MessageType {
		if m.GetName() == "Node" {
			for i, f := range m.Field {
				if f.GetName() == "extensions" {
					m.Field = append(m.Field[:i:i], m.Field[i+1:]...)
					break
				}
			}
		}
	}
	base, err := protodesc.NewFile(baseProto, protoregistry.GlobalFiles)
	if err != nil {
		panic(err)
	}
	discProto := protodesc.ToFileDescriptorProto(discovery.File_envoy_service_discovery_v3_discovery_proto)
	disc, err = protodesc.NewFile(discProto, overlayResolver{base})
	if err != nil {
		panic(err)
	}
	return base, disc
})

// overlayResolver resolves file's path and names to file, anything else as
// the global registry does.
type overlayResolver struct{ file protoreflect.FileDescriptor }

func (o overlayResolver) FindFileByPath(path string) (protoreflect.FileDescriptor, error) {
	if path == o.file.Path() {
		return o.file, nil
	}
	return protoregistry.GlobalFiles.FindFileByPath(path)
}

func (o overlayResolver) FindDescriptorByName(name protoreflect.FullName) (protoreflect.Descriptor, error) {
	if rel, ok := strings.CutPrefix(string(name), string(o.file.Package())+"."); ok {
		if d := findIn(o.file.Messages(), o.file.Enums(), strings.Split(rel, ".")); d != nil {
			return d, nil
		}
	}
	return protoregistry.GlobalFiles.FindDescriptorByName(name)
}

// findIn finds the message or enum at path among msgs and enums, nested
// messages included.
func findIn(msgs protoreflect.MessageDescriptors, enums protoreflect.EnumDescriptors, path []string) protoreflect.Descriptor {
	name := protoreflect.Name(path[0])
	if len(path) == 1 {
		if e := enums.ByName(name); e != nil {
			return e
		}
	}
	m := msgs.ByName(name)
	if m == nil || len(path) == 1 {
		if m == nil {
			return nil
		}
		return m
	}
	return findIn(m.Messages(), m.Enums(), path[1:])
}

// lenientDecode decodes data as the lenient (see lenientFiles) form of
// out's message, and stores the result in out, which has no extensions.
// It skips the test when there is no reference: protobuf-go's reflective
// decoder panics on a map entry whose key has the wrong wire type
// ("cannot convert nil to map key"; Node.dynamic_parameters), which the
// generated decoders xdsd uses take as the empty key.
func lenientDecode(t testing.TB, data []byte, out proto.Message) error {
	base, disc := lenientFiles()
	name := out.ProtoReflect().Descriptor().Name()
	desc := disc.Messages().ByName(name)
	if desc == nil {
		desc = base.Messages().ByName(name)
	}
	m := dynamicpb.NewMessage(desc)
	if err := unmarshalOrSkip(t, data, m); err != nil {
		return err
	}
	node := protoreflect.Message(m)
	if nf := desc.Fields().ByName("node"); nf != nil {
		node = nil
		if m.Has(nf) {
			node = m.Mutable(nf).Message()
		}
	}
	if node != nil {
		var kept []byte
		for b := node.GetUnknown(); len(b) > 0; {
			num, _, n := protowire.ConsumeField(b)
			if num != xdswire.NodeExtensions.Number() {
				kept = append(kept, b[:n]...)
			}
			b = b[n:]
		}
		node.SetUnknown(kept)
	}
	b, err := proto.Marshal(m)
	if err != nil {
		return fmt.Errorf("re-encoding: %w", err)
	}
	if err := proto.Unmarshal(b, out); err != nil {
		return fmt.Errorf("re-decoding: %w", err)
	}
	return nil
}

// unmarshalOrSkip is proto.Unmarshal that skips the test if it panics.
func unmarshalOrSkip(t testing.TB, data []byte, m proto.Message) (err error) {
	defer func() {
		if p := recover(); p != nil {
			t.Skipf("no reference decoding: protobuf-go's reflective decoder panicked: %v", p)
		}
	}()
	return proto.Unmarshal(data, m)
}
