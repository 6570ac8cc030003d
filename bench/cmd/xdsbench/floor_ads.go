package main

import (
	"errors"
	"hash/maphash"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/protobuf/encoding/protowire"
)

// fieldNum is a field number of a request.
type fieldNum = protowire.Number

// Fields of DiscoveryRequest and DeltaDiscoveryRequest the floor server
// reads and the clients encode (see encodedRequest).
const (
	sotwVersionField fieldNum = 1 // version_info
	sotwNodeField    fieldNum = 2 // node
	sotwNamesField   fieldNum = 3 // resource_names
	sotwTypeURLField fieldNum = 4 // type_url
	sotwNonceField   fieldNum = 5 // response_nonce
	deltaNodeField   fieldNum = 1 // node
	deltaTypeURL     fieldNum = 2 // type_url
	deltaSubField    fieldNum = 3 // resource_names_subscribe
	deltaUnsubField  fieldNum = 4 // resource_names_unsubscribe
	deltaNonceField  fieldNum = 6 // response_nonce
)

// sotwNamesTag is the tag of an entry of resource_names.
var sotwNamesTag = byte(protowire.EncodeTag(sotwNamesField, protowire.BytesType))

// StreamAggregatedResources serves a SotW ADS stream: all clusters for the
// first CDS request (ACKs carry a nonce and get nothing), and for each
// endpoint request whose names differ from the last one's, the sets it
// names.
func (s *floor) StreamAggregatedResources(ss discovery.AggregatedDiscoveryService_StreamAggregatedResourcesServer) error {
	st := s.open(ss, modeSotW)
	defer s.close(st)
	var last uint64 // hash of the names of the last endpoint request
	handle := func(raw []byte) error {
		typeURL, nonce, names, err := scanSotW(raw)
		switch {
		case err != nil:
			return err
		case string(typeURL) == clusterTypeURL && !nonce:
			return st.send(s.cds[modeSotW])
		case string(typeURL) == endpointTypeURL && names != last:
			last = names
			return s.subscribe(st, raw, sotwNamesField, 0, true)
		}
		return nil
	}
	for {
		if err := recvRaw(ss, handle); err != nil {
			return endOfStream(err)
		}
	}
}

// scanSotW reads the type URL of a SotW request, whether it has a nonce,
// and a non-zero hash of its list of names, hashed a run of entries at a
// time (an ACK repeats its list: that costs a hash, not a decode).
func scanSotW(b []byte) (typeURL []byte, nonce bool, names uint64, err error) {
	var h maphash.Hash
	h.SetSeed(hashSeed)
	sc := fieldScanner{b: b}
	for {
		if len(sc.b) > 0 && sc.b[0] == sotwNamesTag {
			n, err := skipRun(sc.b, sotwNamesTag)
			if err != nil {
				return nil, false, 0, err
			}
			h.Write(sc.b[:n])
			sc.b = sc.b[n:]
			continue
		}
		num, v, ok := sc.next()
		if !ok {
			return typeURL, nonce, h.Sum64() | 1, sc.err
		}
		switch num {
		case sotwTypeURLField:
			typeURL = v
		case sotwNonceField:
			nonce = len(v) > 0
		}
	}
}

// DeltaAggregatedResources serves an incremental ADS stream: all clusters
// for the first CDS request, and for each endpoint request the sets it
// subscribes to; ACKs get nothing.
func (s *floor) DeltaAggregatedResources(ss discovery.AggregatedDiscoveryService_DeltaAggregatedResourcesServer) error {
	st := s.open(ss, modeDelta)
	defer s.close(st)
	handle := func(raw []byte) error {
		var typeURL []byte
		nonce, names := false, false
		sc := fieldScanner{b: raw}
		for num, v, ok := sc.next(); ok; num, v, ok = sc.next() {
			switch num {
			case deltaTypeURL:
				typeURL = v
			case deltaSubField, deltaUnsubField:
				names = true
			case deltaNonceField:
				nonce = len(v) > 0
			}
		}
		switch {
		case sc.err != nil:
			return sc.err
		case string(typeURL) == clusterTypeURL && !nonce:
			return st.send(s.cds[modeDelta])
		case string(typeURL) == endpointTypeURL && names:
			return s.subscribe(st, raw, deltaSubField, deltaUnsubField, false)
		}
		return nil
	}
	for {
		if err := recvRaw(ss, handle); err != nil {
			return endOfStream(err)
		}
	}
}

// endOfStream is a handler's result once recvRaw failed with err: nil if
// the client closed its side.
func endOfStream(err error) error {
	if errors.Is(err, errEOF) {
		return nil
	}
	return err
}
