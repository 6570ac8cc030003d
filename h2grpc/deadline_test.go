package h2grpc_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"golang.org/x/net/http2"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"

	"github.com/xdsd/xdsd/h2grpc"
)

// TestDeadlineEndsSendWaitingForWindow: a call whose grpc-timeout passes
// while its handler's send waits for window ends as grpc-go's server ends
// it: RST_STREAM CANCEL, no trailers, and the handler's send fails with the
// context's DeadlineExceeded. The sender waited until the connection closed.
func TestDeadlineEndsSendWaitingForWindow(t *testing.T) {
	s, svc, addr := start(t, h2grpc.Options{})
	_, fr := dialFramer(t, addr, windows(0))
	fields := append(callFields("/grpc.testing.TestService/FullDuplexCall"), [2]string{"grpc-timeout", "500m"})
	fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: headerBlock(fields), EndHeaders: true})
	req := &testgrpc.StreamingOutputCallRequest{ResponseParameters: []*testgrpc.ResponseParameters{{Size: 100}}}
	if err := fr.WriteData(1, false, grpcMsg(t, req)); err != nil {
		t.Fatal(err)
	}
	waitSenders(t, s, 1) // the 500 ms must outlast the handler's way to its send: a stalled machine could fail it
	readFrames(t, fr, "RST_STREAM", func(f http2.Frame) bool {
		switch f := f.(type) {
		case *http2.RSTStreamFrame:
			if f.StreamID != 1 || f.ErrCode != http2.ErrCodeCancel {
				t.Fatalf("RST_STREAM %v on stream %d, want CANCEL on 1", f.ErrCode, f.StreamID)
			}
			return true
		case *http2.MetaHeadersFrame:
			if f.StreamEnded() {
				t.Fatalf("trailers %v at the deadline, want RST_STREAM CANCEL alone", f.Fields)
			}
		case *http2.DataFrame:
			t.Fatalf("DATA on stream %d with no window", f.StreamID)
		}
		return false
	})
	select {
	case err := <-svc.ended:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("the handler's context ended with %v, want DeadlineExceeded", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the handler did not end after its call was reset")
	}
	waitSenders(t, s, 0)
}
