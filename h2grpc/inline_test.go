package h2grpc_test

import (
	"errors"
	"io"
	"slices"
	"sync"
	"testing"

	"google.golang.org/grpc"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	"github.com/xdsd/xdsd/h2grpc"
)

// inlineService's StreamingInputCall takes the requests whose payload is
// one byte (or whose size takes accepts, if set) inline, and the others
// through Recv; both log each request's size in the order they handle them.
type inlineService struct {
	testgrpc.UnimplementedTestServiceServer
	takes    func(size int) bool
	mu       sync.Mutex
	log      []int // payload sizes, as handled
	inlined  int
	received int
	seen     chan struct{} // a request was handled, either way
}

func (s *inlineService) record(size int, inline bool) {
	s.mu.Lock()
	s.log = append(s.log, size)
	if inline {
		s.inlined++
	} else {
		s.received++
	}
	s.mu.Unlock()
	s.seen <- struct{}{}
}

func (s *inlineService) StreamingInputCall(stream testgrpc.TestService_StreamingInputCallServer) error {
	g := stream.(*grpc.GenericServerStream[testgrpc.StreamingInputCallRequest, testgrpc.StreamingInputCallResponse])
	r, ok := g.ServerStream.(h2grpc.InlineReceiver)
	if !ok {
		return errors.New("not an h2grpc.InlineReceiver")
	}
	r.SetInline(func(msg []byte) bool {
		var req testgrpc.StreamingInputCallRequest
		if err := proto.Unmarshal(msg, &req); err != nil {
			return false
		}
		n := len(req.GetPayload().GetBody())
		if s.takes != nil && !s.takes(n) || s.takes == nil && n != 1 {
			return false
		}
		s.record(n, true)
		return true
	})
	return receiveAll(stream, func(size int) { s.record(size, false) })
}

// receiveAll receives the client's requests until it ends its side,
// passing each payload's size to got, and ends the call.
func receiveAll(stream testgrpc.TestService_StreamingInputCallServer, got func(size int)) error {
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return stream.SendAndClose(&testgrpc.StreamingInputCallResponse{})
		}
		if err != nil {
			return err
		}
		got(len(req.GetPayload().GetBody()))
	}
}

// TestInlineKeepsOrder sends a mix of requests that the inline receiver
// takes and requests it leaves (a large one among them spans frames) and
// checks that every request was handled once, in the order sent, and that
// both paths were used. The large ones are left, or taken: their frames
// are then joined when a read holds them all.
func TestInlineKeepsOrder(t *testing.T) {
	for name, takes := range map[string]func(int) bool{
		"large ones left":  nil,
		"large ones taken": func(size int) bool { return size != 2 },
	} {
		t.Run(name, func(t *testing.T) { testInlineKeepsOrder(t, takes) })
	}
}

func testInlineKeepsOrder(t *testing.T, takes func(int) bool) {
	svc := &inlineService{seen: make(chan struct{}, 1024), takes: takes}
	_, addr := serve(t, h2grpc.Options{}, svc)
	c := dial(t, addr)
	callCtx := ctx(t)
	stream, err := c.StreamingInputCall(callCtx)
	if err != nil {
		t.Fatal(err)
	}
	var want []int
	for i := range 300 {
		size := 1
		switch {
		case i%7 == 3:
			size = 2
		case i%50 == 10:
			size = 100_000 // several DATA frames: assembled before it goes inline or not
		}
		want = append(want, size)
		if err := stream.Send(&testgrpc.StreamingInputCallRequest{Payload: &testgrpc.Payload{Body: make([]byte, size)}}); err != nil {
			t.Fatal(err)
		}
		if i%3 == 0 { // now and then, let the handler catch up
			for len(svc.seenSoFar()) < i+1 {
				select {
				case <-svc.seen: // one per request handled
				case <-callCtx.Done():
					t.Fatalf("%d requests handled, want %d", len(svc.seenSoFar()), i+1)
				}
			}
		}
	}
	if _, err := stream.CloseAndRecv(); err != nil {
		t.Fatal(err)
	}
	svc.checkHandled(t, want)
}

// checkHandled checks that the requests handled had the sizes in want, in
// order, and that both paths were used.
func (s *inlineService) checkHandled(t *testing.T, want []int) {
	t.Helper()
	got := s.seenSoFar()
	if len(got) != len(want) {
		t.Fatalf("%d requests handled, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("request %d handled with size %d, want %d: order lost", i, got[i], want[i])
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inlined == 0 || s.received == 0 {
		t.Errorf("%d requests inline and %d received: want both paths used", s.inlined, s.received)
	}
}

func (s *inlineService) seenSoFar() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int(nil), s.log...)
}

// shrinkService's StreamingInputCall shrinks the queued requests whose
// payload starts with shrinkMe to their first shrunkSize bytes, and takes
// nothing from Recv until gate is closed.
type shrinkService struct {
	testgrpc.UnimplementedTestServiceServer
	ready chan struct{} // closed once the handler has set its shrink function
	gate  chan struct{}

	mu       sync.Mutex
	offered  []int // sizes of the messages offered to shrink
	received []int // payload sizes, as received
}

const (
	shrinkMe   = 1
	shrunkSize = 10
)

func (s *shrinkService) StreamingInputCall(stream testgrpc.TestService_StreamingInputCallServer) error {
	g := stream.(*grpc.GenericServerStream[testgrpc.StreamingInputCallRequest, testgrpc.StreamingInputCallResponse])
	sh, ok := g.ServerStream.(h2grpc.Shrinker)
	if !ok {
		return errors.New("not an h2grpc.Shrinker")
	}
	sh.SetShrink(func(msg []byte) mem.Buffer {
		s.mu.Lock()
		s.offered = append(s.offered, len(msg))
		s.mu.Unlock()
		var req testgrpc.StreamingInputCallRequest
		if proto.Unmarshal(msg, &req) != nil || req.GetPayload().GetBody()[0] != shrinkMe {
			return nil
		}
		req.Payload.Body = req.Payload.Body[:shrunkSize]
		out, err := proto.Marshal(&req)
		if err != nil {
			return nil
		}
		return mem.SliceBuffer(out)
	})
	close(s.ready)
	select {
	case <-s.gate:
	case <-stream.Context().Done(): // the test failed, and stops the server
		return stream.Context().Err()
	}
	return receiveAll(stream, func(size int) {
		s.mu.Lock()
		s.received = append(s.received, size)
		s.mu.Unlock()
	})
}

// TestShrinkQueued checks that the messages queued for a busy handler are
// shrunk as they arrive, whether whole in a frame or spread over several:
// the client, with a 64 KiB window, sends twelve times that while
// the handler takes nothing, which it can only if the queue holds the
// shrunk messages and credits back the rest. Messages under ShrinkMin are
// not offered, those the function leaves are queued as sent, and the
// handler receives them all in order.
func TestShrinkQueued(t *testing.T) {
	svc := &shrinkService{ready: make(chan struct{}), gate: make(chan struct{})}
	const window = 64 << 10
	_, addr := serve(t, h2grpc.Options{InitialWindowSize: window}, svc)
	callCtx := ctx(t)
	stream, err := dial(t, addr).StreamingInputCall(callCtx)
	if err != nil {
		t.Fatal(err)
	}
	select { // messages that come before the handler sets its function are queued as they are
	case <-svc.ready:
	case <-callCtx.Done():
		t.Fatal("the handler did not start")
	}
	type msg struct {
		size   int
		shrink bool
	}
	var msgs []msg
	for i := range 40 {
		switch {
		case i%10 == 3:
			msgs = append(msgs, msg{h2grpc.ShrinkMin / 2, true}) // too small to be offered
		case i%10 == 6:
			msgs = append(msgs, msg{8_000, false}) // offered, and left
		case i%2 == 0:
			msgs = append(msgs, msg{8_000, true}) // whole in a frame
		default:
			msgs = append(msgs, msg{40_000, true}) // over three frames
		}
	}
	var want, wantOffered []int
	sent := make(chan error, 1)
	go func() {
		for _, m := range msgs {
			body := make([]byte, m.size)
			if m.shrink {
				body[0] = shrinkMe
			}
			req := &testgrpc.StreamingInputCallRequest{Payload: &testgrpc.Payload{Body: body}}
			if err := stream.Send(req); err != nil {
				sent <- err
				return
			}
		}
		sent <- nil
	}()
	for _, m := range msgs {
		size := proto.Size(&testgrpc.StreamingInputCallRequest{Payload: &testgrpc.Payload{Body: make([]byte, m.size)}})
		if size >= h2grpc.ShrinkMin {
			wantOffered = append(wantOffered, size)
		}
		if m.shrink && size >= h2grpc.ShrinkMin {
			want = append(want, shrunkSize)
		} else {
			want = append(want, m.size)
		}
	}
	select {
	case err := <-sent:
		if err != nil {
			t.Fatal(err)
		}
	case <-callCtx.Done():
		t.Fatal("the client could not send while the handler was busy: the queue holds what it received, not what shrink made of it")
	}
	close(svc.gate)
	if _, err := stream.CloseAndRecv(); err != nil {
		t.Fatal(err)
	}
	svc.mu.Lock()
	defer svc.mu.Unlock()
	if !slices.Equal(svc.offered, wantOffered) {
		t.Errorf("offered to shrink: %v, want %v", svc.offered, wantOffered)
	}
	if !slices.Equal(svc.received, want) {
		t.Errorf("received payload sizes %v, want %v", svc.received, want)
	}
}
