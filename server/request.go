package server

import (
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/xdsd/xdsd/resource"
	"github.com/xdsd/xdsd/server/internal/xdswire"
)

// handleSotwWire applies a request received as an xdswire.SotwRequest: a name list
// whose encoding is the same as the type's previous one is not decoded.
func (st *stream) handleSotwWire(r *xdswire.SotwRequest) error {
	r.Node.Known = st.node
	d, names, err := r.Decode()
	if err != nil {
		return errInvalidRequest(err)
	}
	if err := st.startFrom(&r.Node); err != nil {
		return err
	}
	if r.Raw == nil {
		return st.handleSotw(&r.Msg)
	}
	var ts *typeState
	if t := resource.Lookup(r.Msg.GetTypeUrl()); t != nil {
		ts = st.types.get(t)
	} else if st.only != nil && r.Msg.GetTypeUrl() == "" {
		ts = st.types.get(st.only)
	}
	if ts == nil || !ts.namesKnown || ts.namesDigest != d {
		if r.Msg.ResourceNames, err = names(); err != nil {
			return errInvalidRequest(err)
		}
	}
	return st.handleSotwDigest(&r.Msg, d)
}

// errInvalidRequest is the error that ends a stream sent an undecodable
// request: the code grpc-go gives when its own codec cannot decode one, so
// every variant answers garbage alike.
func errInvalidRequest(err error) error {
	return status.Errorf(codes.Internal, "grpc: failed to unmarshal the received message: %v", err)
}
