package daemon

import (
	"io"
	"net"
	"strings"
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestClientLimitsInMetrics: on both transports, the bounds set on each
// client are in /metrics, and a connection past --max-conns-per-ip is
// closed and counted.
func TestClientLimitsInMetrics(t *testing.T) {
	for _, transport := range []string{"xdsd", "grpc-go"} {
		t.Run(transport, func(t *testing.T) {
			addrs := startDaemon(t, Options{GRPCTransport: transport, MaxConnsPerIP: 1, MaxStreamsPerConn: 7, MaxRecvMsgSize: 1 << 20})
			first, err := net.Dial("tcp", addrs.XDS)
			if err != nil {
				t.Fatal(err)
			}
			defer first.Close()
			var body string
			eventually(t, "a connection refused", func() bool {
				c, err := net.Dial("tcp", addrs.XDS)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				c.SetReadDeadline(time.Now().Add(waitTimeout))
				_, err = io.Copy(io.Discard, c) // closed by the server: the first is open
				if err != nil {
					t.Logf("the second connection: %v", err)
				}
				_, body = get(t, addrs.Admin, "/metrics", "")
				return strings.Contains(body, `xdsd_client_refusals_total{limit="conns_per_ip"} 1`)
			})
			want := []string{`xdsd_client_limit{limit="conns_per_ip"} 1`, `xdsd_client_limit{limit="streams_per_conn"} 7`,
				`xdsd_client_limit{limit="recv_msg_bytes"} 1048576`}
			if transport == "xdsd" {
				want = append(want, `xdsd_client_limit{limit="conn_assembling_bytes"} 268435456`,
					`xdsd_client_limit{limit="conn_queued_bytes"} 16777216`,
					`xdsd_client_refusals_total{limit="streams_per_conn"} 0`)
			}
			for _, w := range want {
				if !strings.Contains(body, w) {
					t.Errorf("/metrics lacks %s", w)
				}
			}
		})
	}
}

// TestMaxRecvMsgSizeBothTransports: on both transports, a request larger
// than MaxRecvMsgSize fails its stream with RESOURCE_EXHAUSTED, and one
// within it is served.
func TestMaxRecvMsgSizeBothTransports(t *testing.T) {
	for _, transport := range []string{"xdsd", "grpc-go"} {
		t.Run(transport, func(t *testing.T) {
			addrs := startDaemon(t, Options{GRPCTransport: transport, MaxRecvMsgSize: 64 << 10})
			openADS := adsStreams(t, addrs.XDS)
			for _, size := range []int{1 << 10, 100 << 10} {
				s := openADS()
				req := &discovery.DiscoveryRequest{Node: &corev3.Node{Id: "n1", Cluster: strings.Repeat("c", size)},
					TypeUrl: "type.googleapis.com/envoy.config.cluster.v3.Cluster"}
				if err := s.Send(req); err != nil {
					t.Fatal(err)
				}
				_, err := s.Recv()
				if tooLarge := size > 64<<10; tooLarge != (status.Code(err) == codes.ResourceExhausted) || !tooLarge && err != nil {
					t.Errorf("a request of %d KiB: %v", size>>10, err)
				}
			}
		})
	}
}
