package resource

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	clusterv3 "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	routev3 "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// Resource is one xDS resource, encoded once. It is immutable: every stream
// that sends it shares Body.
type Resource struct {
	// Type is the resource's type.
	Type *Type
	// Name is the resource's name (Cluster.name, ClusterLoadAssignment.cluster_name, ...).
	Name string
	// Version is a short hash of the deterministic encoding (and the TTL):
	// equal content has an equal version everywhere.
	Version string
	// Aliases are other names a client may subscribe by (PROTOCOL D7). A
	// VirtualHost named "<route config>/<vhost>" has "<route config>/<domain>"
	// for each of its domains.
	Aliases []string
	// TTL, when non-zero, is sent with the resource (PROTOCOL L1).
	TTL time.Duration
	// Body is the encoded message. Its bytes must not be modified.
	Body *anypb.Any
	// Message is the decoded message. It must not be modified.
	Message proto.Message
	// DependsOn names the resources of type DependsOnType that a client
	// fetches because of this one, on the stream it got this one on (the
	// config source is ads or self): a cluster's endpoints, a listener's
	// routes. The ADS ordering waits for them (PROTOCOL O1).
	DependsOn []string
	// DependsOnType is the type of DependsOn's resources; nil when there
	// are none.
	DependsOnType *Type

	// hash is the 64-bit form of Version mixed with Name, used to derive
	// order-independent versions of sets of resources.
	hash uint64
	// wire caches the resource's encodings as a response entry.
	wire wire
}

// Option changes how New builds a Resource.
type Option func(*Resource)

// WithTTL gives the resource a TTL (PROTOCOL L1).
func WithTTL(d time.Duration) Option { return func(r *Resource) { r.TTL = d } }

// WithName overrides the name taken from the message. Only VirtualHost
// resources need this, when their message name is the bare vhost name.
func WithName(name string) Option { return func(r *Resource) { r.Name = name } }

// ErrUnknownType is returned by New for a message xdsd does not serve.
var ErrUnknownType = errors.New("not an xDS resource type xdsd serves")

// New validates m, encodes it deterministically and returns the Resource.
// Errors name the type and resource. The Resource keeps m as its Message:
// do not modify m afterwards (the Body would no longer be its encoding);
// to change a resource, make a new one from a new message or a clone.
func New(m proto.Message, opts ...Option) (*Resource, error) {
	if m == nil {
		return nil, errors.New("resource.New: no message")
	}
	url := typePrefix + string(m.ProtoReflect().Descriptor().FullName())
	t := Lookup(url)
	if t == nil {
		return nil, fmt.Errorf("%s: %w", url, ErrUnknownType)
	}
	r := &Resource{Type: t, Name: t.name(m), Message: m}
	for _, o := range opts {
		o(r)
	}
	if r.Name == "" {
		return nil, fmt.Errorf("%s: resource has no name", t.Short)
	}
	if err := validate(m); err != nil {
		return nil, fmt.Errorf("%s %q: %w", t.Short, r.Name, err)
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("%s %q: encode: %w", t.Short, r.Name, err)
	}
	r.Body = &anypb.Any{TypeUrl: url, Value: b}
	h := sha256.New()
	h.Write(b)
	if r.TTL > 0 {
		fmt.Fprintf(h, "\x00ttl=%d", r.TTL)
	}
	sum := h.Sum(nil)
	r.Version = hex.EncodeToString(sum[:8])
	nh := sha256.Sum256([]byte(r.Name + "\x00" + r.Version))
	r.hash = binary.LittleEndian.Uint64(nh[:8])
	r.DependsOnType, r.DependsOn = adsDependencies(m)
	if vh, ok := m.(*routev3.VirtualHost); ok {
		r.Aliases = vhostAliases(r.Name, vh.GetDomains())
	}
	return r, nil
}

// MustNew is New that panics on error, for tests and static configuration.
func MustNew(m proto.Message, opts ...Option) *Resource {
	r, err := New(m, opts...)
	if err != nil {
		panic(err)
	}
	return r
}

// Hash returns a 64-bit hash of the resource's name and version. The XOR of
// the hashes of a set of resources is a version for the set that does not
// depend on order.
func (r *Resource) Hash() uint64 { return r.hash }

// SetVersion is the version of a set of resources: the XOR of their
// hashes (Resource.Hash), formatted. Equal sets have equal versions on
// every server, whatever the order in which their resources came.
func SetVersion(xor uint64) string {
	slot := &setVersions[xor%uint64(len(setVersions))] // xor is a hash: well spread
	if v := slot.Load(); v != nil && v.xor == xor {
		return v.s
	}
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], xor)
	v := &setVersion{xor, hex.EncodeToString(b[:])}
	slot.Store(v)
	return v.s
}

// setVersions holds recently formatted set versions: after a change, every
// stream that holds the same set asks for the same one.
var setVersions [256]atomic.Pointer[setVersion]

type setVersion struct {
	xor uint64
	s   string
}

// vhostAliases derives VHDS aliases: a vhost named "<rc>/<vh>" is also known
// as "<rc>/<domain>" for each domain (Envoy's on-demand convention).
func vhostAliases(name string, domains []string) []string {
	i := strings.LastIndexByte(name, '/')
	if i < 0 {
		return nil
	}
	out := make([]string, 0, len(domains))
	for _, d := range domains {
		if a := name[:i+1] + d; a != name {
			out = append(out, a)
		}
	}
	return out
}

// EDSName returns the name of the ClusterLoadAssignment a cluster takes its
// endpoints from, and whether it uses EDS at all.
func EDSName(c *clusterv3.Cluster) (string, bool) {
	if c.GetType() != clusterv3.Cluster_EDS {
		return "", false
	}
	if n := c.GetEdsClusterConfig().GetServiceName(); n != "" {
		return n, true
	}
	return c.GetName(), true
}

// validate runs the generated Validate method (protoc-gen-validate rules).
func validate(m proto.Message) error {
	if v, ok := m.(interface{ ValidateAll() error }); ok {
		return v.ValidateAll()
	}
	if v, ok := m.(interface{ Validate() error }); ok {
		return v.Validate()
	}
	return nil
}

// Placeholder returns a bodiless Resource standing for a version a client
// says it holds (delta initial_resource_versions): it compares equal by
// version and hash to the real resource with that name and version, and
// must not be sent.
func Placeholder(t *Type, name, version string) *Resource {
	nh := sha256.Sum256([]byte(name + "\x00" + version))
	return &Resource{Type: t, Name: name, Version: version, hash: binary.LittleEndian.Uint64(nh[:8])}
}
