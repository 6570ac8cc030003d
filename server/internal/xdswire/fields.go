package xdswire

import "google.golang.org/protobuf/encoding/protowire"

// Field numbers of the request fields a plain ACK carries.
const (
	SotwReqVersionField  = 1 // DiscoveryRequest.version_info
	SotwReqNodeField     = 2 // DiscoveryRequest.node
	SotwReqTypeURLField  = 4 // DiscoveryRequest.type_url
	SotwReqNonceField    = 5 // DiscoveryRequest.response_nonce
	DeltaReqNodeField    = 1 // DeltaDiscoveryRequest.node
	DeltaReqTypeURLField = 2 // DeltaDiscoveryRequest.type_url
	DeltaReqNonceField   = 6 // DeltaDiscoveryRequest.response_nonce
)

// Field number of resource_names in DiscoveryRequest, and its tag byte.
const (
	SotwReqNamesField = 3
	namesTag          = SotwReqNamesField<<3 | byte(protowire.BytesType)
)

// Field numbers of DeltaDiscoveryRequest's initial_resource_versions and of
// a map entry's key and value.
const (
	deltaReqInitialField = 5
	mapKeyField          = 1
	mapValueField        = 2
)

// Field numbers of DiscoveryResponse and DeltaDiscoveryResponse written by
// hand (the resources field, 2, comes pre-encoded from each Resource).
const (
	sotwVersionField  = 1 // version_info
	sotwTypeURLField  = 4 // type_url
	sotwNonceField    = 5 // nonce
	deltaVersionField = 1 // system_version_info
	deltaTypeURLField = 4 // type_url
	deltaNonceField   = 5 // nonce
	deltaRemovedField = 6 // removed_resources
)
