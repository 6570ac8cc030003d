package h2grpc_test

import (
	"errors"
	"io"
	"sync"
	"testing"

	"google.golang.org/grpc"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
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
	for {
		req, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return stream.SendAndClose(&testgrpc.StreamingInputCallResponse{})
		}
		if err != nil {
			return err
		}
		s.record(len(req.GetPayload().GetBody()), false)
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
