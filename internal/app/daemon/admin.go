package daemon

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/pprof"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/xdsd/xdsd/h2grpc"
	"github.com/xdsd/xdsd/internal/metrics"
	"github.com/xdsd/xdsd/resource"
	"github.com/xdsd/xdsd/resource/redact"
	"github.com/xdsd/xdsd/server"
)

// adminHandler serves the admin endpoints.
func (d *Daemon) adminHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if d.stopping.Load() {
			http.Error(w, "shutting down", http.StatusServiceUnavailable)
			return
		}
		if !d.ready() {
			http.Error(w, "no configuration loaded yet", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ready\n"))
	})
	mux.HandleFunc("GET /status", d.handleStatus)
	mux.HandleFunc("GET /config_dump", d.handleConfigDump)
	mux.HandleFunc("GET /metrics", d.handleMetrics)
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

// StatusReport is the body of /status.
type StatusReport struct {
	Ready   bool          `json:"ready"`
	Config  ConfigStatus  `json:"config"`
	Store   *StoreStatus  `json:"store,omitempty"`
	Authz   *AuthzStatus  `json:"authz,omitempty"`
	Streams []StreamEntry `json:"streams"`
}

// AuthzStatus tells how the authorization policy file's reads went.
type AuthzStatus struct {
	File string `json:"file"`
	// Rules is how many rules the policy in force has.
	Rules int `json:"rules"`
	// LoadedAt is when the policy in force was read.
	LoadedAt      time.Time `json:"loaded_at"`
	ReloadsOK     uint64    `json:"reloads_ok"`
	ReloadsFailed uint64    `json:"reloads_failed"`
	// LastError is why the file's latest version was refused: the
	// policy in force is an earlier one.
	LastError   string     `json:"last_error,omitempty"`
	LastErrorAt *time.Time `json:"last_error_at,omitempty"`
}

// StoreStatus tells how the configuration's store in etcd stands, for a
// replica that reads it there.
type StoreStatus struct {
	Replica    string `json:"replica"`
	Prefix     string `json:"prefix"`
	Revision   int64  `json:"revision"`
	Generation string `json:"generation,omitempty"`
	Reachable  bool   `json:"reachable"`
	// Since is when Reachable last changed.
	Since *time.Time `json:"since,omitempty"`
	// Error is why etcd was last found unreachable.
	Error string `json:"error,omitempty"`
}

// ConfigStatus tells how loading went.
type ConfigStatus struct {
	ReloadsOK     uint64     `json:"reloads_ok"`
	ReloadsFailed uint64     `json:"reloads_failed"`
	LastError     string     `json:"last_error,omitempty"`
	LastErrorAt   *time.Time `json:"last_error_at,omitempty"`
	// LastLoadedAt is when the configuration served was published.
	LastLoadedAt *time.Time `json:"last_loaded_at,omitempty"`
}

// StreamEntry is one stream in /status.
type StreamEntry struct {
	ID        uint64      `json:"id"`
	NodeID    string      `json:"node_id"`
	Cluster   string      `json:"node_cluster,omitempty"`
	Identity  string      `json:"identity,omitempty"` // the client certificate's (server.StreamStatus.Identity)
	Variant   string      `json:"variant"`
	Connected time.Time   `json:"connected"`
	LastError string      `json:"last_error,omitempty"`
	Types     []TypeEntry `json:"types"`
}

// TypeEntry is one type of one stream in /status.
type TypeEntry struct {
	Type         string     `json:"type"`
	State        string     `json:"state"`
	SentVersion  string     `json:"sent_version,omitempty"`
	AckedVersion string     `json:"acked_version,omitempty"`
	NackVersion  string     `json:"nack_version,omitempty"`
	NackMessage  string     `json:"nack_message,omitempty"`
	NackedAt     *time.Time `json:"nacked_at,omitempty"`
}

// State names how a type stands on a stream: SYNCED (the latest response
// is ACKed), NACKED (it was rejected), STALE (sent, not yet ACKed) or
// NOT SENT.
func State(ts server.TypeStatus) string {
	switch {
	case ts.SentVersion == "":
		return "NOT SENT"
	case ts.NackedVersion == ts.SentVersion && !ts.NackedAt.Before(ts.SentAt):
		return "NACKED"
	case ts.AckedVersion == ts.SentVersion && !ts.AckedAt.Before(ts.SentAt):
		return "SYNCED"
	default:
		return "STALE"
	}
}

func (d *Daemon) handleStatus(w http.ResponseWriter, _ *http.Request) {
	rep := StatusReport{Streams: []StreamEntry{}}
	d.mu.Lock()
	rep.Ready = !d.lastOKAt.IsZero()
	rep.Config = ConfigStatus{ReloadsOK: d.reloads.ok, ReloadsFailed: d.reloads.failed}
	if d.lastErr != nil {
		at := d.lastErrAt
		rep.Config.LastError, rep.Config.LastErrorAt = d.lastErr.Error(), &at
	}
	if !d.lastOKAt.IsZero() {
		at := d.lastOKAt
		rep.Config.LastLoadedAt = &at
	}
	d.mu.Unlock()
	if d.store != nil {
		st := d.store.Status()
		rep.Store = &StoreStatus{Replica: d.opts.Etcd.ReplicaName, Prefix: st.Prefix, Revision: st.Revision,
			Generation: st.Generation, Reachable: st.Reachable, Error: st.Error}
		if !st.Since.IsZero() {
			rep.Store.Since = &st.Since
		}
	}
	if d.authz != nil {
		st := d.authz.Status()
		rep.Authz = &AuthzStatus{File: st.Path, Rules: st.Rules, LoadedAt: st.LoadedAt,
			ReloadsOK: st.ReloadsOK, ReloadsFailed: st.ReloadsFailed, LastError: st.LastError}
		if st.LastError != "" {
			rep.Authz.LastErrorAt = &st.LastErrorAt
		}
	}
	for _, s := range d.server.Status() {
		e := StreamEntry{ID: s.ID, NodeID: s.Node.GetId(), Cluster: s.Node.GetCluster(), Identity: s.Identity, Variant: s.Variant,
			Connected: s.Connected, LastError: s.LastError, Types: []TypeEntry{}}
		for _, ts := range s.Types {
			te := TypeEntry{Type: resource.Lookup(ts.TypeURL).Short, State: State(ts), SentVersion: ts.SentVersion,
				AckedVersion: ts.AckedVersion, NackVersion: ts.NackedVersion, NackMessage: ts.NackMessage}
			if !ts.NackedAt.IsZero() {
				at := ts.NackedAt
				te.NackedAt = &at
			}
			e.Types = append(e.Types, te)
		}
		rep.Streams = append(rep.Streams, e)
	}
	writeJSON(w, rep)
}

// handleConfigDump shows what a node is served: ?node=ID picks the node
// (the node of a connected stream with that id, or a node with just that
// id); every resource of its group, by type, in JSON with the proto field
// names (snake_case), as Envoy's own /config_dump and xdsctl get print them.
// Secret material is redacted (package redact) unless AdminShowSecrets.
func (d *Daemon) handleConfigDump(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("node")
	node := &corev3.Node{Id: id}
	for _, s := range d.server.Status() {
		if s.Node.GetId() == id && s.Node != nil {
			node = s.Node
			break
		}
	}
	snap := d.cache.Snapshot(d.cache.GroupOf(node))
	out := map[string][]json.RawMessage{}
	for _, t := range resource.Types() {
		for _, res := range snap.Resources(t) {
			body := proto.Message(res.Body)
			if !d.opts.AdminShowSecrets {
				body = redact.Message(body)
			}
			b, err := dumpJSON.Marshal(body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			out[t.Short] = append(out[t.Short], b)
		}
	}
	writeJSON(w, map[string]any{"node": id, "resources": out})
}

// dumpJSON writes resources with their proto field names.
var dumpJSON = protojson.MarshalOptions{UseProtoNames: true}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// handleMetrics serves Prometheus metrics: the server's, and the daemon's
// configuration loads: how many, when the last was published, and how long
// a change takes from its first file event to being read and parsed
// (xdsd_config_load_seconds), then to its publication to the streams
// (xdsd_config_publish_seconds), after which the server's
// xdsd_push_latency_seconds times each response; and, with AuthzFile, the
// policy file's reads.
func (d *Daemon) handleMetrics(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	d.server.WritePrometheus(w)
	d.mu.Lock()
	ok, failed, okAt := d.reloads.ok, d.reloads.failed, d.lastOKAt
	d.mu.Unlock()
	metrics.WriteHeader(w, "xdsd_config_reloads_total", "counter", "Configuration loads, by result.")
	fmt.Fprintf(w, "xdsd_config_reloads_total{result=\"ok\"} %d\n", ok)
	fmt.Fprintf(w, "xdsd_config_reloads_total{result=\"failed\"} %d\n", failed)
	loaded := 0
	if !okAt.IsZero() {
		loaded = 1
	}
	metrics.WriteSingle(w, "xdsd_config_loaded", "gauge", "Whether a configuration is being served.", float64(loaded))
	if !okAt.IsZero() {
		metrics.WriteSingle(w, "xdsd_config_last_loaded_timestamp_seconds", "gauge",
			"When the configuration served was published, in seconds since the Unix epoch.", float64(okAt.UnixMilli())/1e3)
	}
	d.loads.WritePrometheus(w, "xdsd_config_load_seconds",
		"Time from a configuration change's first file event until its files were read and parsed, for each configuration that loaded.")
	d.publishes.WritePrometheus(w, "xdsd_config_publish_seconds",
		"Time to publish a configuration that loaded: building the snapshots and handing the changes to the streams.")
	if d.store != nil {
		st := d.store.Status()
		reachable := 0.0
		if st.Reachable {
			reachable = 1
		}
		metrics.WriteSingle(w, "xdsd_store_revision", "gauge", "The latest etcd revision of the configuration read, applied or rejected.", float64(st.Revision))
		metrics.WriteSingle(w, "xdsd_store_reachable", "gauge", "Whether etcd answered the latest probe.", reachable)
	}
	if d.authz != nil {
		st := d.authz.Status()
		metrics.WriteHeader(w, "xdsd_authz_policy_reloads_total", "counter", "Reads of the changed authorization policy file, by result.")
		fmt.Fprintf(w, "xdsd_authz_policy_reloads_total{result=\"ok\"} %d\n", st.ReloadsOK)
		fmt.Fprintf(w, "xdsd_authz_policy_reloads_total{result=\"failed\"} %d\n", st.ReloadsFailed)
		refused := 0.0
		if st.LastError != "" {
			refused = 1
		}
		metrics.WriteSingle(w, "xdsd_authz_policy_refused", "gauge", "Whether the policy file's latest version was refused (an earlier policy is in force).", refused)
		metrics.WriteSingle(w, "xdsd_authz_policy_rules", "gauge", "Rules of the authorization policy in force.", float64(st.Rules))
	}
	d.writeClientLimits(w)
	metrics.WriteProcess(w)
}

// writeClientLimits writes the bounds set on each client (xdsd_client_limit)
// and what they refused (xdsd_client_refusals_total).
func (d *Daemon) writeClientLimits(w io.Writer) {
	o := &d.opts
	perIP := 0
	if d.connLimit != nil {
		perIP = d.connLimit.Max()
	}
	type limit struct {
		name  string
		value int64
	}
	limits := []limit{{"conns_per_ip", int64(perIP)},
		{"streams_per_conn", int64(cmp.Or(o.MaxStreamsPerConn, 1000))},
		{"recv_msg_bytes", int64(cmp.Or(o.MaxRecvMsgSize, 4<<20))}}
	hs, _ := d.grpc.(*h2grpc.Server)
	if hs != nil { // its own defaults
		ho := hs.Options()
		limits = append(limits[:1], limit{"streams_per_conn", int64(ho.MaxConcurrentStreams)}, limit{"recv_msg_bytes", int64(ho.MaxRecvMsgSize)},
			limit{"conn_assembling_bytes", ho.MaxConnAssemblingBytes}, limit{"conn_queued_bytes", ho.MaxConnQueuedBytes})
	}
	metrics.WriteHeader(w, "xdsd_client_limit", "gauge", "The bounds set on each client of the xDS port, by limit (0: none).")
	for _, l := range limits {
		fmt.Fprintf(w, "xdsd_client_limit{limit=%q} %d\n", l.name, l.value)
	}
	metrics.WriteHeader(w, "xdsd_client_refusals_total", "counter", "What the bounds on each client refused, by limit: connections, streams or messages.")
	if d.connLimit != nil {
		fmt.Fprintf(w, "xdsd_client_refusals_total{limit=\"conns_per_ip\"} %d\n", d.connLimit.Refused())
	}
	if hs != nil {
		st := hs.Stats()
		fmt.Fprintf(w, "xdsd_client_refusals_total{limit=\"streams_per_conn\"} %d\n", st.StreamsRefused)
		fmt.Fprintf(w, "xdsd_client_refusals_total{limit=\"recv_msg_bytes\"} %d\n", st.MessagesTooLarge)
		fmt.Fprintf(w, "xdsd_client_refusals_total{limit=\"conn_assembling_bytes\"} %d\n", st.AssemblingRefused)
	}
}
