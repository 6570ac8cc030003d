package server

import (
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/encoding/protowire"
)

// Field numbers of the control_plane fields.
const (
	sotwControlPlaneField  = 6 // DiscoveryResponse.control_plane
	deltaControlPlaneField = 7 // DeltaDiscoveryResponse.control_plane
	controlPlaneIDField    = 1 // ControlPlane.identifier
)

// controlPlane is the identity every response carries in control_plane,
// as a message and as its encoded fields.
type controlPlane struct {
	msg         *corev3.ControlPlane
	sotw, delta []byte // the field, tag included, of each response type
}

// SetControlPlane makes every response from now on carry identifier in
// control_plane.identifier, which Envoy shows in its config dump (say, a
// replica's name and the revision of the configuration it serves); empty
// means none. Safe to call at any time, from any goroutine.
func (s *Server) SetControlPlane(identifier string) {
	s.controlPlane.Store(newControlPlane(identifier))
}

// newControlPlane returns the control plane identified as identifier; nil
// if it is empty.
func newControlPlane(identifier string) *controlPlane {
	if identifier == "" {
		return nil
	}
	inner := protowire.AppendString(protowire.AppendTag(nil, controlPlaneIDField, protowire.BytesType), identifier)
	field := func(num protowire.Number) []byte {
		return protowire.AppendBytes(protowire.AppendTag(nil, num, protowire.BytesType), inner)
	}
	return &controlPlane{
		msg:  &corev3.ControlPlane{Identifier: identifier},
		sotw: field(sotwControlPlaneField), delta: field(deltaControlPlaneField),
	}
}

// message returns the control plane of responses built as messages; nil
// for none. Shared: read only.
func (cp *controlPlane) message() *corev3.ControlPlane {
	if cp == nil {
		return nil
	}
	return cp.msg
}

// field returns the encoded control_plane field of responses assembled
// from parts, incremental or not; nil for none.
func (cp *controlPlane) field(delta bool) []byte {
	switch {
	case cp == nil:
		return nil
	case delta:
		return cp.delta
	default:
		return cp.sotw
	}
}
