package h2grpc_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/net/http2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/xdsd/xdsd/h2grpc"
	"github.com/xdsd/xdsd/internal/testutil/testcerts"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// service is grpc.testing.TestService, answered by grpc-go's generated
// handlers running on h2grpc.
type service struct {
	testgrpc.UnimplementedTestServiceServer
	ended chan error // each FullDuplexCall's context error when it ends
}

// UnaryCall echoes the metadata "echo" into the header and the trailer,
// answers with ResponseSize bytes, fails with ResponseStatus if set, and
// reports the peer in the payload.
func (s *service) UnaryCall(ctx context.Context, r *testgrpc.SimpleRequest) (*testgrpc.SimpleResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	if v := md.Get("echo"); len(v) > 0 {
		grpc.SetHeader(ctx, metadata.Pairs("echo", v[0]))
		grpc.SetTrailer(ctx, metadata.Pairs("echo-trailer", v[0]))
	}
	if st := r.GetResponseStatus(); st != nil {
		return nil, status.Error(codes.Code(st.GetCode()), st.GetMessage())
	}
	if r.GetFillUsername() { // wait for the deadline
		<-ctx.Done()
		return nil, ctx.Err()
	}
	p, _ := peer.FromContext(ctx)
	return &testgrpc.SimpleResponse{
		Payload:  &testgrpc.Payload{Body: make([]byte, r.GetResponseSize())},
		Username: fmt.Sprintf("%s %x", p.Addr, md.Get("bin-bin")),
	}, nil
}

// StreamingInputCall adds up the payloads until the client ends its side.
func (s *service) StreamingInputCall(stream testgrpc.TestService_StreamingInputCallServer) error {
	total := 0
	for {
		r, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return stream.SendAndClose(&testgrpc.StreamingInputCallResponse{AggregatedPayloadSize: int32(total)})
		}
		if err != nil {
			return err
		}
		total += len(r.GetPayload().GetBody())
	}
}

// FullDuplexCall answers each request with a response per parameter.
func (s *service) FullDuplexCall(stream testgrpc.TestService_FullDuplexCallServer) error {
	defer func() { s.ended <- stream.Context().Err() }()
	for {
		r, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		for _, p := range r.GetResponseParameters() {
			body := bytes.Repeat([]byte{byte(p.GetSize())}, int(p.GetSize()))
			if err := stream.Send(&testgrpc.StreamingOutputCallResponse{Payload: &testgrpc.Payload{Body: body}}); err != nil {
				return err
			}
		}
	}
}

// start serves a service on 127.0.0.1 with opts and returns its address;
// the server stops when the test ends.
func start(t *testing.T, opts h2grpc.Options) (*h2grpc.Server, *service, string) {
	t.Helper()
	svc := &service{ended: make(chan error, 16)}
	s, addr := serve(t, opts, svc)
	return s, svc, addr
}

// serve serves svc on 127.0.0.1 with opts and returns its address; the
// server stops when the test ends.
func serve(t testing.TB, opts h2grpc.Options, svc testgrpc.TestServiceServer) (*h2grpc.Server, string) {
	t.Helper()
	s := h2grpc.NewServer(opts)
	return s, serveOn(t, s, svc)
}

// serveOn serves svc with s on 127.0.0.1 and returns its address; s stops
// when the test ends.
func serveOn(t testing.TB, s *h2grpc.Server, svc testgrpc.TestServiceServer) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	serveListener(t, s, lis, svc)
	return lis.Addr().String()
}

func dial(t *testing.T, addr string, opts ...grpc.DialOption) testgrpc.TestServiceClient {
	t.Helper()
	opts = append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)
	cc, err := grpc.NewClient(addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return testgrpc.NewTestServiceClient(cc)
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return c
}

func TestUnaryMetadataAndPeer(t *testing.T) {
	_, _, addr := start(t, h2grpc.Options{})
	c := dial(t, addr)
	var header, trailer metadata.MD
	octx := metadata.AppendToOutgoingContext(ctx(t), "echo", "hello", "bin-bin", "\x00\xff")
	r, err := c.UnaryCall(octx, &testgrpc.SimpleRequest{ResponseSize: 100_000}, grpc.Header(&header), grpc.Trailer(&trailer))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(r.GetPayload().GetBody()); n != 100_000 {
		t.Errorf("payload of %d bytes, want 100000", n)
	}
	if got := header.Get("echo"); len(got) != 1 || got[0] != "hello" {
		t.Errorf("header echo = %q", got)
	}
	if got := trailer.Get("echo-trailer"); len(got) != 1 || got[0] != "hello" {
		t.Errorf("trailer echo-trailer = %q", got)
	}
	if !strings.HasPrefix(r.GetUsername(), "127.0.0.1:") || !strings.HasSuffix(r.GetUsername(), " [00ff]") {
		t.Errorf("peer and binary metadata seen by the server: %q", r.GetUsername())
	}
}

func TestStatusCodesAndMessages(t *testing.T) {
	_, _, addr := start(t, h2grpc.Options{})
	c := dial(t, addr)
	for _, msg := range []string{"plain", "100% ünïcode\nand a newline", strings.Repeat("long ", 2000)} {
		_, err := c.UnaryCall(ctx(t), &testgrpc.SimpleRequest{ResponseStatus: &testgrpc.EchoStatus{Code: int32(codes.NotFound), Message: msg}})
		st := status.Convert(err)
		want := msg
		if len(want) > 4096 {
			want = want[:4096]
		}
		if st.Code() != codes.NotFound || st.Message() != want {
			t.Errorf("got %v %q, want NotFound %q", st.Code(), st.Message(), want)
		}
	}
	// A method the server does not have.
	_, err := testgrpc.NewUnimplementedServiceClient(dialConn(t, addr)).UnimplementedCall(ctx(t), &testgrpc.Empty{})
	if status.Code(err) != codes.Unimplemented {
		t.Errorf("unknown method: %v, want Unimplemented", err)
	}
}

func dialConn(t *testing.T, addr string) *grpc.ClientConn {
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

// Messages larger than every window, both ways, with the smallest windows
// a client can ask for (which also turns off grpc-go's window growth).
func TestFlowControlBothWays(t *testing.T) {
	_, _, addr := start(t, h2grpc.Options{InitialWindowSize: 64 << 10, InitialConnWindowSize: 64 << 10})
	c := dial(t, addr, grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(8<<20)))
	s, err := c.FullDuplexCall(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	sizes := []int32{3 << 20, 1, 0, 200 << 10}
	var params []*testgrpc.ResponseParameters
	for _, n := range sizes {
		params = append(params, &testgrpc.ResponseParameters{Size: n})
	}
	if err := s.Send(&testgrpc.StreamingOutputCallRequest{ResponseParameters: params}); err != nil {
		t.Fatal(err)
	}
	for _, n := range sizes {
		r, err := s.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if got := len(r.GetPayload().GetBody()); got != int(n) {
			t.Fatalf("response of %d bytes, want %d", got, n)
		}
	}
	s.CloseSend()
	if _, err := s.Recv(); err != io.EOF {
		t.Fatalf("after the last response: %v, want EOF", err)
	}

	in, err := c.StreamingInputCall(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{3 << 20, 10, 0, 3 << 20} {
		if err := in.Send(&testgrpc.StreamingInputCallRequest{Payload: &testgrpc.Payload{Body: make([]byte, n)}}); err != nil {
			t.Fatal(err)
		}
	}
	r, err := in.CloseAndRecv()
	if err != nil {
		t.Fatal(err)
	}
	if r.GetAggregatedPayloadSize() != 6<<20+10 {
		t.Errorf("aggregated %d bytes, want %d", r.GetAggregatedPayloadSize(), 6<<20+10)
	}
}

func TestMessageTooLarge(t *testing.T) {
	_, _, addr := start(t, h2grpc.Options{MaxRecvMsgSize: 1 << 10})
	c := dial(t, addr)
	_, err := c.UnaryCall(ctx(t), &testgrpc.SimpleRequest{Payload: &testgrpc.Payload{Body: make([]byte, 2<<10)}})
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("got %v, want ResourceExhausted", err)
	}
	if _, err := c.UnaryCall(ctx(t), &testgrpc.SimpleRequest{ResponseSize: 10}); err != nil {
		t.Fatalf("the connection serves on: %v", err)
	}
}

func TestCancelAndDeadline(t *testing.T) {
	_, svc, addr := start(t, h2grpc.Options{})
	c := dial(t, addr)
	sctx, cancel := context.WithCancel(ctx(t))
	s, err := c.FullDuplexCall(sctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(&testgrpc.StreamingOutputCallRequest{ResponseParameters: []*testgrpc.ResponseParameters{{Size: 1}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(); err != nil {
		t.Fatal(err)
	}
	cancel() // the client resets the stream
	select {
	case err := <-svc.ended:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("the handler's context ended with %v, want Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the handler did not end after the client cancelled")
	}

	dctx, dcancel := context.WithTimeout(ctx(t), 50*time.Millisecond)
	defer dcancel()
	_, err = c.UnaryCall(dctx, &testgrpc.SimpleRequest{FillUsername: true})
	if status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("got %v, want DeadlineExceeded", err)
	}
}

// GracefulStop lets an open stream carry on, refuses new calls, and returns
// once the stream ends.
func TestGracefulStop(t *testing.T) {
	s, _, addr := start(t, h2grpc.Options{})
	c := dial(t, addr)
	st, err := c.FullDuplexCall(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	exchange := func() error {
		if err := st.Send(&testgrpc.StreamingOutputCallRequest{ResponseParameters: []*testgrpc.ResponseParameters{{Size: 3}}}); err != nil {
			return err
		}
		_, err := st.Recv()
		return err
	}
	if err := exchange(); err != nil {
		t.Fatal(err)
	}
	stopped := make(chan struct{})
	go func() {
		s.GracefulStop()
		close(stopped)
	}()
	// New calls fail once the GOAWAY is in: poll until they do.
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := c.UnaryCall(ctx(t), &testgrpc.SimpleRequest{})
		if err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("calls still served after GracefulStop")
		}
	}
	if err := exchange(); err != nil {
		t.Fatalf("the open stream broke: %v", err)
	}
	select {
	case <-stopped:
		t.Fatal("GracefulStop returned with a stream open")
	default:
	}
	st.CloseSend()
	if _, err := st.Recv(); err != io.EOF {
		t.Fatalf("got %v, want EOF", err)
	}
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("GracefulStop did not return once the last stream ended")
	}
}

// Stop ends a handler stuck sending to a client that never reads; other
// connections are served meanwhile.
func TestStuckClient(t *testing.T) {
	s, svc, addr := start(t, h2grpc.Options{})
	stuck := dial(t, addr, grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
	st, err := stuck.FullDuplexCall(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	params := []*testgrpc.ResponseParameters{{Size: 1}, {Size: 1 << 20}, {Size: 1 << 20}}
	if err := st.Send(&testgrpc.StreamingOutputCallRequest{ResponseParameters: params}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Recv(); err != nil { // the handler runs
		t.Fatal(err)
	}
	// Never read again. Another client is served at once.
	if _, err := dial(t, addr).UnaryCall(ctx(t), &testgrpc.SimpleRequest{ResponseSize: 10}); err != nil {
		t.Fatal(err)
	}
	s.Stop() // must not hang on the stuck handler
	select {
	case <-svc.ended:
	case <-time.After(10 * time.Second):
		t.Fatal("the stuck handler did not end")
	}
}

// Garbage and protocol errors end their own connection and nothing else.
func TestMalformedConnections(t *testing.T) {
	_, _, addr := start(t, h2grpc.Options{HandshakeTimeout: time.Second})
	c := dial(t, addr)
	for name, send := range map[string]func(net.Conn, *http2.Framer){
		"not HTTP/2": func(nc net.Conn, _ *http2.Framer) { nc.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")) },
		"no SETTINGS first": func(nc net.Conn, fr *http2.Framer) {
			nc.Write([]byte(http2.ClientPreface))
			fr.WritePing(false, [8]byte{})
		},
		"DATA on stream 0": func(nc net.Conn, fr *http2.Framer) {
			nc.Write([]byte(http2.ClientPreface))
			fr.WriteSettings()
			fr.WriteData(0, false, []byte("x"))
		},
		"DATA on an idle stream": func(nc net.Conn, fr *http2.Framer) {
			nc.Write([]byte(http2.ClientPreface))
			fr.WriteSettings()
			fr.WriteData(7, false, []byte("x"))
		},
		"window overflow": func(nc net.Conn, fr *http2.Framer) {
			nc.Write([]byte(http2.ClientPreface))
			fr.WriteSettings()
			fr.WriteWindowUpdate(0, 1<<31-1)
		},
		"WINDOW_UPDATE of 3 bytes": func(nc net.Conn, fr *http2.Framer) {
			nc.Write([]byte(http2.ClientPreface))
			fr.WriteSettings()
			fr.WriteRawFrame(http2.FrameWindowUpdate, 0, 0, []byte{0, 0, 1})
		},
		"WINDOW_UPDATE on an idle stream": func(nc net.Conn, fr *http2.Framer) {
			nc.Write([]byte(http2.ClientPreface))
			fr.WriteSettings()
			fr.WriteWindowUpdate(9, 0) // a zero increment too: still the connection's error
		},
		"WINDOW_UPDATE of 0 on the connection": func(nc net.Conn, fr *http2.Framer) {
			nc.Write([]byte(http2.ClientPreface))
			fr.WriteSettings()
			fr.WriteWindowUpdate(0, 0)
		},
		"silence": func(net.Conn, *http2.Framer) {}, // the handshake timeout closes it
	} {
		t.Run(name, func(t *testing.T) {
			nc, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer nc.Close()
			fr := http2.NewFramer(nc, nc)
			fr.AllowIllegalWrites = true
			send(nc, fr)
			nc.SetReadDeadline(time.Now().Add(10 * time.Second))
			if _, err := io.Copy(io.Discard, nc); err != nil {
				t.Fatalf("the server did not close the connection: %v", err)
			}
			if _, err := c.UnaryCall(ctx(t), &testgrpc.SimpleRequest{ResponseSize: 1}); err != nil {
				t.Fatalf("another client is not served: %v", err)
			}
		})
	}
}

// TestPingFlood: a client that pings faster than MinPingInterval, with
// nothing sent to it, gets its pings answered (acknowledged, with their
// data, in order) up to the third strike, then
// GOAWAY ENHANCE_YOUR_CALM "too_many_pings", and is disconnected; others
// are served.
func TestPingFlood(t *testing.T) {
	_, _, addr := start(t, h2grpc.Options{MinPingInterval: time.Hour})
	c := dial(t, addr)
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.Write([]byte(http2.ClientPreface))
	fr := http2.NewFramer(nc, nc)
	fr.WriteSettings()
	for i := range 10 {
		fr.WritePing(false, [8]byte{byte(i)})
	}
	nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	acks := 0
	var away *http2.GoAwayFrame
	for away == nil {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("after %d ping ACKs, no GOAWAY: %v", acks, err)
		}
		switch f := f.(type) {
		case *http2.PingFrame:
			if !f.IsAck() || f.Data != [8]byte{byte(acks)} {
				t.Fatalf("ping answer %d: ack %v, data %v", acks, f.IsAck(), f.Data)
			}
			acks++
		case *http2.GoAwayFrame:
			away = f
		}
	}
	if away.ErrCode != http2.ErrCodeEnhanceYourCalm || string(away.DebugData()) != "too_many_pings" || acks != 4 {
		t.Fatalf("GOAWAY %v %q after %d ping ACKs, want ENHANCE_YOUR_CALM \"too_many_pings\" after 4 (the last one struck out)", away.ErrCode, away.DebugData(), acks)
	}
	// Closed: by a FIN, or by a reset for the pings it did not read.
	if _, err := io.Copy(io.Discard, nc); err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("the server did not close the connection: %v", err)
	}
	if _, err := c.UnaryCall(ctx(t), &testgrpc.SimpleRequest{ResponseSize: 1}); err != nil {
		t.Fatalf("another client is not served: %v", err)
	}
}

func TestTLS(t *testing.T) {
	ca := testcerts.NewCA(t, "ca")
	cert := ca.Issue(t, "localhost", true).TLSCertificate(t)
	_, _, addr := start(t, h2grpc.Options{TLS: &tls.Config{Certificates: []tls.Certificate{cert}}})
	c := dial(t, addr, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: ca.Pool(), ServerName: "localhost"})))
	if _, err := c.UnaryCall(ctx(t), &testgrpc.SimpleRequest{ResponseSize: 1}); err != nil {
		t.Fatal(err)
	}
	// A plaintext client is refused.
	_, err := dial(t, addr).UnaryCall(ctx(t), &testgrpc.SimpleRequest{})
	if status.Code(err) != codes.Unavailable {
		t.Errorf("plaintext client: %v, want Unavailable", err)
	}
}

// Stop and GracefulStop end connections still in their handshake at once.
func TestStopDuringHandshake(t *testing.T) {
	for _, graceful := range []bool{false, true} {
		s, _, addr := start(t, h2grpc.Options{})
		// A call answered: Serve runs (stopped before it ran, it would
		// return ErrServerStopped).
		if _, err := dial(t, addr).UnaryCall(ctx(t), &testgrpc.SimpleRequest{}); err != nil {
			t.Fatal(err)
		}
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		nc.Write([]byte(http2.ClientPreface[:10])) // the handshake is under way
		began := time.Now()
		if graceful {
			s.GracefulStop()
		} else {
			s.Stop()
		}
		if d := time.Since(began); d > 5*time.Second {
			t.Errorf("graceful=%v: stopping took %v: it waited for the handshake timeout", graceful, d)
		}
	}
}

// outOfFiles is a listener whose first fails Accepts fail as accept(2)
// does when the process has no file descriptor left.
type outOfFiles struct {
	net.Listener
	fails int
}

func (l *outOfFiles) Accept() (net.Conn, error) {
	if l.fails > 0 {
		l.fails--
		return nil, &net.OpError{Op: "accept", Net: "tcp", Addr: l.Addr(), Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	return l.Listener.Accept()
}

// TestAcceptOutOfFiles: a server out of file descriptors waits and
// accepts again, rather than return from Serve.
func TestAcceptOutOfFiles(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := h2grpc.NewServer(h2grpc.Options{})
	testgrpc.RegisterTestServiceServer(s, &service{})
	done := make(chan error, 1)
	go func() { done <- s.Serve(&outOfFiles{Listener: lis, fails: 3}) }()
	client := dial(t, lis.Addr().String())
	if _, err := client.UnaryCall(ctx(t), &testgrpc.SimpleRequest{}); err != nil {
		t.Errorf("a call after three accepts out of files: %v", err)
	}
	select {
	case err := <-done:
		t.Fatalf("Serve returned while running: %v", err)
	default:
	}
	s.Stop()
	if err := <-done; err != nil {
		t.Errorf("Serve after Stop: %v", err)
	}
}

// sendTooLarge is a TestService whose FullDuplexCall sends a message
// larger than the server allows from another goroutine while it waits to
// receive, as xdsd's pushes do.
type sendTooLarge struct {
	testgrpc.UnimplementedTestServiceServer
	recvErr chan error
}

func (s *sendTooLarge) FullDuplexCall(stream testgrpc.TestService_FullDuplexCallServer) error {
	sent := make(chan error, 1)
	go func() {
		sent <- stream.Send(&testgrpc.StreamingOutputCallResponse{Payload: &testgrpc.Payload{Body: make([]byte, 1024)}})
	}()
	stream.SetTrailer(metadata.Pairs("set", "while-sending")) // the failed send writes the trailers
	_, err := stream.Recv()
	s.recvErr <- err
	return <-sent
}

// TestSendTooLargeEndsTheCall: a message larger than MaxSendMsgSize ends
// the call with ResourceExhausted, as grpc-go's server does: the client
// gets the status, and a receive waiting for the client fails.
func TestSendTooLargeEndsTheCall(t *testing.T) {
	svc := &sendTooLarge{recvErr: make(chan error, 1)}
	_, addr := serve(t, h2grpc.Options{MaxSendMsgSize: 100}, svc)
	// No deadline: one would end the call all the same, later.
	callCtx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream, err := dial(t, addr).FullDuplexCall(callCtx)
	if err != nil {
		t.Fatal(err)
	}
	received := make(chan error, 1)
	go func() {
		_, err := stream.Recv()
		received <- err
	}()
	select {
	case err := <-received:
		if status.Code(err) != codes.ResourceExhausted {
			t.Errorf("the client's Recv: %v; want ResourceExhausted", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the call did not end within 10s")
	}
	if err := <-svc.recvErr; err == nil {
		t.Error("the handler's Recv succeeded")
	}
}

// TestRegisterAfterServePanics: connections read the services without a
// lock, so a service registered once Serve has begun is refused.
func TestRegisterAfterServePanics(t *testing.T) {
	s, _, addr := start(t, h2grpc.Options{})
	if _, err := dial(t, addr).UnaryCall(context.Background(), &testgrpc.SimpleRequest{}); err != nil {
		t.Fatal(err) // Serve has begun
	}
	defer func() {
		if recover() == nil {
			t.Fatal("RegisterService after Serve did not panic")
		}
	}()
	s.RegisterService(&grpc.ServiceDesc{ServiceName: "late.Service"}, nil)
}
