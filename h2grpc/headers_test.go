package h2grpc_test

import (
	"bytes"
	"encoding/binary"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/protobuf/proto"

	"github.com/xdsd/xdsd/h2grpc"
)

// TestEmptyContinuationFlood: a client that opens a header block and sends
// CONTINUATION frames with nothing in them, without end, is sent GOAWAY
// ENHANCE_YOUR_CALM and disconnected, at once rather than never; other
// clients are served.
func TestEmptyContinuationFlood(t *testing.T) {
	_, _, addr := start(t, h2grpc.Options{})
	c := dial(t, addr)
	nc, fr := dialFramer(t, addr)
	nc.SetDeadline(time.Now().Add(5 * time.Second))
	var w bytes.Buffer
	wfr := http2.NewFramer(&w, nil)
	wfr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: headerBlock(callFields("/grpc.testing.TestService/UnaryCall"))})
	for range 1000 {
		wfr.WriteContinuation(1, false, nil)
	}
	nc.Write(w.Bytes()) // the server may close before it has read it all
	readFrames(t, fr, "GOAWAY", func(f http2.Frame) bool {
		g, ok := f.(*http2.GoAwayFrame)
		if ok && (g.ErrCode != http2.ErrCodeEnhanceYourCalm || string(g.DebugData()) != "too_many_empty_continuations") {
			t.Fatalf("GOAWAY %v %q, want ENHANCE_YOUR_CALM \"too_many_empty_continuations\"", g.ErrCode, g.DebugData())
		}
		return ok
	})
	if _, err := c.UnaryCall(ctx(t), &testgrpc.SimpleRequest{ResponseSize: 1}); err != nil {
		t.Fatalf("another client is not served: %v", err)
	}
}

// TestHeaderBlockInTinyFrames: a header block of nearly
// SETTINGS_MAX_HEADER_LIST_SIZE in frames of one byte each, the most
// CONTINUATION frames a block within the limit can take, and a few empty
// ones, is a request like any other.
func TestHeaderBlockInTinyFrames(t *testing.T) {
	_, _, addr := start(t, h2grpc.Options{})
	nc, fr := dialFramer(t, addr)
	fields := append(callFields("/grpc.testing.TestService/UnaryCall"), [2]string{"echo", "tiny"},
		[2]string{"x-big", strings.Repeat("x", 60<<10)})
	block := headerBlock(fields)
	var w bytes.Buffer
	wfr := http2.NewFramer(&w, nil)
	wfr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block[:1]})
	for i := 1; i < len(block); i++ {
		wfr.WriteContinuation(1, false, block[i:i+1])
		if i%10_000 == 0 {
			wfr.WriteContinuation(1, false, nil)
		}
	}
	wfr.WriteContinuation(1, true, nil)
	wfr.WriteData(1, true, grpcMsg(t, &testgrpc.SimpleRequest{ResponseSize: 1}))
	go nc.Write(w.Bytes())
	var header []hpack.HeaderField
	readFrames(t, fr, "the call's trailers", func(f http2.Frame) bool {
		switch f := f.(type) {
		case *http2.GoAwayFrame:
			t.Fatalf("GOAWAY %v %q", f.ErrCode, f.DebugData())
		case *http2.RSTStreamFrame:
			t.Fatalf("RST_STREAM %v", f.ErrCode)
		case *http2.MetaHeadersFrame:
			if !f.StreamEnded() {
				header = f.Fields
				return false
			}
			if !slices.Contains(f.Fields, hpack.HeaderField{Name: "grpc-status", Value: "0"}) {
				t.Fatalf("trailers %v, want grpc-status 0", f.Fields)
			}
			return true
		}
		return false
	})
	if !slices.Contains(header, hpack.HeaderField{Name: "echo", Value: "tiny"}) {
		t.Errorf("response headers %v, want echo: tiny", header)
	}
}

// TestOversizedHeadersRefuseTheirStreamOnly: the server advertises
// SETTINGS_MAX_HEADER_LIST_SIZE; a request whose header fields pass it (a
// client that does not honour it, in several frames) is answered
// RESOURCE_EXHAUSTED alone, and the connection goes on: the block was
// decoded all the same, so the fields it added to the HPACK table, after
// those that passed the limit, serve the next request on the connection.
func TestOversizedHeadersRefuseTheirStreamOnly(t *testing.T) {
	const path = "/grpc.testing.TestService/UnaryCall"
	for _, tc := range []struct {
		name string
		big  [][2]string
	}{
		{"fields_adding_up_past_it", [][2]string{{"x-big-1", strings.Repeat("a", 40<<10)},
			{"x-big-2", strings.Repeat("b", 40<<10)}, {"x-big-3", strings.Repeat("c", 40<<10)}}},
		{"one_field_past_it", [][2]string{{"x-big", strings.Repeat("{", 70<<10)}}}, // longer in Huffman code: sent as it is
	} {
		t.Run(tc.name, func(t *testing.T) {
			oversizedHeaders(t, append(callFields(path), append(tc.big, [2]string{"echo", "in step"})...))
		})
	}
}

// oversizedHeaders sends a request with the fields big, then one that
// names the last of them again, and checks that the first alone is
// refused.
func oversizedHeaders(t *testing.T, big [][2]string) {
	_, _, addr := start(t, h2grpc.Options{})
	_, fr := dialFramer(t, addr)
	if v, ok := serverSetting(t, fr, http2.SettingMaxHeaderListSize); !ok || v != 64<<10 {
		t.Errorf("SETTINGS_MAX_HEADER_LIST_SIZE %d (set %v), want 65536", v, ok)
	}
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb) // the client's, for both requests: its table goes on from one to the next
	encode := func(fields [][2]string) []byte {
		hb.Reset()
		for _, f := range fields {
			enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
		}
		return slices.Clone(hb.Bytes())
	}
	const path = "/grpc.testing.TestService/UnaryCall"
	block := encode(big)
	for id, b := range [][]byte{block, encode(append(callFields(path), [2]string{"echo", "in step"}))} {
		id := uint32(2*id + 1)
		for first := true; first || len(b) > 0; first = false {
			n := min(len(b), 16<<10)
			if first {
				fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: b[:n], EndHeaders: n == len(b)})
			} else {
				fr.WriteContinuation(id, n == len(b), b[:n])
			}
			b = b[n:]
		}
		fr.WriteData(id, true, grpcMsg(t, &testgrpc.SimpleRequest{ResponseSize: 1}))
	}
	if len(block) <= 64<<10 {
		t.Fatalf("the oversized block is %d bytes, want frames after those that pass the limit", len(block))
	}
	var header []hpack.HeaderField
	refused := false
	readFrames(t, fr, "stream 3's trailers", func(f http2.Frame) bool {
		switch f := f.(type) {
		case *http2.GoAwayFrame:
			t.Fatalf("GOAWAY %v %q: the connection ended", f.ErrCode, f.DebugData())
		case *http2.RSTStreamFrame:
			if f.StreamID != 1 || f.ErrCode != http2.ErrCodeNo {
				t.Fatalf("RST_STREAM %v on stream %d", f.ErrCode, f.StreamID)
			}
		case *http2.MetaHeadersFrame:
			switch {
			case f.StreamID == 1:
				if !f.StreamEnded() || !slices.Contains(f.Fields, hpack.HeaderField{Name: "grpc-status", Value: "8"}) {
					t.Fatalf("stream 1 answered %v, want trailers only, grpc-status 8 (RESOURCE_EXHAUSTED)", f.Fields)
				}
				refused = true
			case !f.StreamEnded():
				header = f.Fields
			default:
				if !slices.Contains(f.Fields, hpack.HeaderField{Name: "grpc-status", Value: "0"}) {
					t.Fatalf("stream 3's trailers %v, want grpc-status 0", f.Fields)
				}
				return true
			}
		}
		return false
	})
	if !refused {
		t.Error("stream 1 not refused")
	}
	if !slices.Contains(header, hpack.HeaderField{Name: "echo", Value: "in step"}) {
		t.Errorf("stream 3's response headers %v, want echo: in step", header)
	}
}

// TestHeaderBlockWithoutEnd: a header block that goes on past a bound of
// its encoded bytes, in frames that carry some, ends the connection with
// ENHANCE_YOUR_CALM, though its fields were dropped long before.
func TestHeaderBlockWithoutEnd(t *testing.T) {
	_, _, addr := start(t, h2grpc.Options{})
	nc, fr := dialFramer(t, addr)
	go func() {
		wfr := http2.NewFramer(nc, nil)
		wfr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: headerBlock(callFields("/grpc.testing.TestService/UnaryCall"))})
		// Fields of the static table, indexed: each byte decodes to a field.
		frag := bytes.Repeat([]byte{0x80 | 2}, 16<<10) // :method: GET
		for range 1 << 10 {
			if wfr.WriteContinuation(1, false, frag) != nil {
				return // closed
			}
		}
	}()
	readFrames(t, fr, "GOAWAY", func(f http2.Frame) bool {
		g, ok := f.(*http2.GoAwayFrame)
		if ok && (g.ErrCode != http2.ErrCodeEnhanceYourCalm || string(g.DebugData()) != "header_block_too_large") {
			t.Fatalf("GOAWAY %v %q, want ENHANCE_YOUR_CALM \"header_block_too_large\"", g.ErrCode, g.DebugData())
		}
		return ok
	})
}

// grpcMsg returns m as a gRPC message: prefix and encoding.
func grpcMsg(t *testing.T, m proto.Message) []byte {
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return append(binary.BigEndian.AppendUint32([]byte{0}, uint32(len(b))), b...)
}
