package h2grpc_test

import (
	"errors"
	"io"
	"net"
	"slices"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/xdsd/xdsd/h2grpc"
)

// TestConformance: what RFC 9113 asks of a server that h2spec checks, and
// that a gRPC request shows (h2spec's own requests are not gRPC, so the
// server answers them with a gRPC status and ends them first). Each case
// sends a frame after the preface and checks the error frame it gets: a
// connection error (GOAWAY with the code, then the close) or a stream
// error (RST_STREAM with the code, the connection going on).
func TestConformance(t *testing.T) {
	_, _, addr := start(t, h2grpc.Options{})
	const path = "/grpc.testing.TestService/UnaryCall"
	request := callFields(path)
	with := func(name, value string) [][2]string {
		return append(request[:len(request):len(request)], [2]string{name, value})
	}
	// A call that answers only at the end of its stream, for cases whose
	// first DATA frame is a whole request: a unary call could answer it
	// before the frame that breaks the rule is read.
	streaming := callFields("/grpc.testing.TestService/StreamingInputCall")
	streamingWith := func(name, value string) [][2]string {
		return append(streaming[:len(streaming):len(streaming)], [2]string{name, value})
	}
	without := func(name string) [][2]string {
		var out [][2]string
		for _, f := range request {
			if f[0] != name {
				out = append(out, f)
			}
		}
		return out
	}
	set := func(name, value string) [][2]string {
		out := slices.Clone(request)
		for i := range out {
			if out[i][0] == name {
				out[i][1] = value
			}
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		send   func(fr *http2.Framer)
		goAway bool // a connection error, else a stream error on stream 1
		code   http2.ErrCode
	}{
		{"a frame larger than SETTINGS_MAX_FRAME_SIZE (4.2)", func(fr *http2.Framer) {
			writeHeaders(t, fr, request)
			fr.WriteData(1, false, make([]byte, 16<<10+1))
		}, true, http2.ErrCodeFrameSize},
		{"RST_STREAM on a stream of the server's, idle (5.1, 6.4)", func(fr *http2.Framer) {
			fr.WriteRSTStream(2, http2.ErrCodeCancel)
		}, true, http2.ErrCodeProtocol},
		{"PRIORITY depending on its own stream (5.3.1)", func(fr *http2.Framer) {
			fr.WritePriority(1, http2.PriorityParam{StreamDep: 1, Weight: 16})
		}, false, http2.ErrCodeProtocol},
		{"HEADERS depending on its own stream (5.3.1)", func(fr *http2.Framer) {
			fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: headerBlock(request), EndHeaders: true,
				Priority: http2.PriorityParam{StreamDep: 1, Weight: 16}})
		}, false, http2.ErrCodeProtocol},
		{"a connection-specific header (8.2.2)", func(fr *http2.Framer) {
			writeHeaders(t, fr, with("connection", "keep-alive"))
		}, false, http2.ErrCodeProtocol},
		{"te other than trailers (8.2.2)", func(fr *http2.Framer) {
			writeHeaders(t, fr, set("te", "trailers, deflate"))
		}, false, http2.ErrCodeProtocol},
		{"an empty :path (8.3.1)", func(fr *http2.Framer) {
			writeHeaders(t, fr, set(":path", ""))
		}, false, http2.ErrCodeProtocol},
		{"no :method (8.3.1)", func(fr *http2.Framer) {
			writeHeaders(t, fr, without(":method"))
		}, false, http2.ErrCodeProtocol},
		{"no :scheme (8.3.1)", func(fr *http2.Framer) {
			writeHeaders(t, fr, without(":scheme"))
		}, false, http2.ErrCodeProtocol},
		{"no :path (8.3.1)", func(fr *http2.Framer) {
			writeHeaders(t, fr, without(":path"))
		}, false, http2.ErrCodeProtocol},
		{"content-length other than the DATA's length (8.1.1)", func(fr *http2.Framer) {
			writeHeaders(t, fr, with("content-length", "1"))
			fr.WriteData(1, true, emptyMessage)
		}, false, http2.ErrCodeProtocol},
		{"content-length above the DATA frames' sum (8.1.1)", func(fr *http2.Framer) {
			writeHeaders(t, fr, streamingWith("content-length", "11"))
			fr.WriteData(1, false, emptyMessage)
			fr.WriteData(1, true, emptyMessage)
		}, false, http2.ErrCodeProtocol},
		{"content-length below the DATA frames' sum, before the end (8.1.1)", func(fr *http2.Framer) {
			writeHeaders(t, fr, streamingWith("content-length", "9"))
			fr.WriteData(1, false, emptyMessage)
			fr.WriteData(1, false, emptyMessage)
		}, false, http2.ErrCodeProtocol},
		{"content-length above the DATA, ended by trailers (8.1.1)", func(fr *http2.Framer) {
			writeHeaders(t, fr, streamingWith("content-length", "6"))
			fr.WriteData(1, false, emptyMessage)
			fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: headerBlock([][2]string{{"x", "y"}}), EndHeaders: true, EndStream: true})
		}, false, http2.ErrCodeProtocol},
		{"content-length on HEADERS that end the stream (8.1.1)", func(fr *http2.Framer) {
			fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: headerBlock(with("content-length", "5")), EndHeaders: true, EndStream: true})
		}, false, http2.ErrCodeProtocol},
		{"content-length not a number (8.1.1)", func(fr *http2.Framer) {
			writeHeaders(t, fr, with("content-length", "+5"))
		}, false, http2.ErrCodeProtocol},
		{"content-length not digits (8.1.1)", func(fr *http2.Framer) {
			writeHeaders(t, fr, with("content-length", "-0"))
		}, false, http2.ErrCodeProtocol},
		{"two content-lengths that differ (8.1.1)", func(fr *http2.Framer) {
			writeHeaders(t, fr, append(with("content-length", "5"), [2]string{"content-length", "6"}))
		}, false, http2.ErrCodeProtocol},
		{"a stream's send window above 2^31-1 (6.9.1)", func(fr *http2.Framer) {
			writeHeaders(t, fr, request)
			fr.WriteWindowUpdate(1, 1<<31-1)
		}, false, http2.ErrCodeFlowControl},
		{"SETTINGS_INITIAL_WINDOW_SIZE taking a stream's window above 2^31-1 (6.9.2)", func(fr *http2.Framer) {
			writeHeaders(t, fr, request)
			fr.WriteWindowUpdate(1, 1<<31-1-65535) // the stream's window at the most
			fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 65536})
		}, true, http2.ErrCodeFlowControl},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nc, fr := dialFramer(t, addr)
			tc.send(fr)
			readFrames(t, fr, "an error frame", func(f http2.Frame) bool {
				switch f := f.(type) {
				case *http2.GoAwayFrame:
					if !tc.goAway || f.ErrCode != tc.code {
						t.Fatalf("GOAWAY %v, want %s", f.ErrCode, want(tc.goAway, tc.code))
					}
					// Closed: a reset if the client's frame was left unread.
					if _, err := io.Copy(io.Discard, nc); err != nil && !errors.Is(err, syscall.ECONNRESET) {
						t.Fatalf("after GOAWAY: %v, want the connection closed", err)
					}
					return true
				case *http2.RSTStreamFrame:
					if tc.goAway || f.StreamID != 1 || f.ErrCode != tc.code {
						t.Fatalf("RST_STREAM %v on stream %d, want %s", f.ErrCode, f.StreamID, want(tc.goAway, tc.code))
					}
					// The connection goes on: a PING is answered.
					fr.WritePing(false, [8]byte{1})
					readFrames(t, fr, "the PING answered", pingAnswer)
					return true
				case *http2.MetaHeadersFrame:
					if f.StreamEnded() {
						t.Fatalf("stream %d answered with %v, want %s", f.StreamID, f.Fields, want(tc.goAway, tc.code))
					}
				}
				return false
			})
		})
	}
}

// TestOneRSTStreamPerReset: once the server has reset a stream, the frames
// the client had in flight on it are ignored (RFC 9113 §5.1), not each
// answered with another RST_STREAM.
func TestOneRSTStreamPerReset(t *testing.T) {
	_, _, addr := start(t, h2grpc.Options{})
	_, fr := dialFramer(t, addr)
	writeHeaders(t, fr, append(callFields("/grpc.testing.TestService/StreamingInputCall"), [2]string{"content-length", "0"}))
	for range 20 {
		fr.WriteData(1, false, emptyMessage)
		fr.WriteWindowUpdate(0, 1) // between the DATA frames: not joined
	}
	fr.WritePing(false, [8]byte{7})
	resets := 0
	readFrames(t, fr, "the PING answered", func(f http2.Frame) bool {
		if _, ok := f.(*http2.RSTStreamFrame); ok {
			resets++
		}
		return pingAnswer(f)
	})
	if resets != 1 {
		t.Fatalf("%d RST_STREAM frames on stream 1, want 1", resets)
	}
}

// dialFramer opens a connection to addr, closed when the test ends, and
// starts HTTP/2 on it with settings; it returns the connection and a
// framer on it that writes frames as told, legal or not, and reads header
// blocks whole.
func dialFramer(t *testing.T, addr string, settings ...http2.Setting) (net.Conn, *http2.Framer) {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	fr := http2.NewFramer(nc, nc)
	fr.AllowIllegalWrites = true
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	nc.Write([]byte(http2.ClientPreface))
	fr.WriteSettings(settings...)
	return nc, fr
}

// serverSetting reads frames until the server's SETTINGS and returns the
// value it gives setting id, and whether it gives one.
func serverSetting(t *testing.T, fr *http2.Framer, id http2.SettingID) (v uint32, ok bool) {
	t.Helper()
	readFrames(t, fr, "the server's SETTINGS", func(f http2.Frame) bool {
		sf, isSettings := f.(*http2.SettingsFrame)
		if !isSettings || sf.IsAck() {
			return false
		}
		v, ok = sf.Value(id)
		return true
	})
	return v, ok
}

// emptyMessage is a gRPC message of no bytes, as a DATA payload.
var emptyMessage = []byte{0, 0, 0, 0, 0}

// TestContentLengthThatAddsUp: a request whose content-length the DATA add
// up to, in one frame or several, is served.
func TestContentLengthThatAddsUp(t *testing.T) {
	_, _, addr := start(t, h2grpc.Options{})
	request := append(callFields("/grpc.testing.TestService/UnaryCall"), [2]string{"content-length", "5"})
	for _, frames := range [][][]byte{{emptyMessage}, {emptyMessage[:2], emptyMessage[2:]}, {emptyMessage, nil}} {
		_, fr := dialFramer(t, addr)
		writeHeaders(t, fr, request)
		for i, b := range frames {
			fr.WriteData(1, i == len(frames)-1, b)
		}
		readFrames(t, fr, "the call's trailers", func(f http2.Frame) bool {
			switch f := f.(type) {
			case *http2.RSTStreamFrame:
				t.Fatalf("%d DATA frames: RST_STREAM %v", len(frames), f.ErrCode)
			case *http2.MetaHeadersFrame:
				if !f.StreamEnded() {
					return false
				}
				if !slices.Contains(f.Fields, hpack.HeaderField{Name: "grpc-status", Value: "0"}) {
					t.Fatalf("%d DATA frames: trailers %v, want grpc-status 0", len(frames), f.Fields)
				}
				return true
			}
			return false
		})
	}
}

func want(goAway bool, code http2.ErrCode) string {
	if goAway {
		return "GOAWAY " + code.String()
	}
	return "RST_STREAM " + code.String() + " on stream 1"
}

// writeHeaders writes a header block of fields, in order, on stream 1.
func writeHeaders(t *testing.T, fr *http2.Framer, fields [][2]string) {
	t.Helper()
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: headerBlock(fields), EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
}

// TestRSTStreamBeforeHeadersKeepsConnection: gRPC's C-core (grpc/grpc#19655,
// #38758; Debian's python3-grpcio 1.51 does it) gives a call its stream id
// when the call starts and, if the call is cancelled before its HEADERS are
// written, sends RST_STREAM for that id and never the HEADERS. The server
// must not take the connection, and the other calls on it, down for that,
// though RFC 9113 calls it a connection error: grpc-go's server ignores it.
func TestRSTStreamBeforeHeadersKeepsConnection(t *testing.T) {
	_, _, addr := start(t, h2grpc.Options{})
	nc, rfr := openCall(t, addr) // stream 1: a StreamingInputCall, left open
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	wfr := http2.NewFramer(nc, nil)
	wfr.WriteRSTStream(3, http2.ErrCodeCancel)                               // call 3, cancelled before its HEADERS went out
	writeCallHeaders(wfr, 5, "/grpc.testing.TestService/StreamingInputCall") // the next call
	wfr.WritePing(false, [8]byte{7})
	readFrames(t, rfr, "the PING answered", func(f http2.Frame) bool {
		switch f := f.(type) {
		case *http2.GoAwayFrame:
			t.Fatalf("GOAWAY %v after RST_STREAM on a stream the client cancelled before its HEADERS: the open call on stream 1 is lost", f.ErrCode)
		case *http2.RSTStreamFrame:
			t.Fatalf("RST_STREAM %v on stream %d", f.ErrCode, f.StreamID)
		}
		return pingAnswer(f)
	})
}

// readFrames reads the server's frames and passes each to f until f
// returns true; the connection ending first fails the test, which was
// waiting for what.
func readFrames(t *testing.T, fr *http2.Framer, what string, f func(http2.Frame) bool) {
	t.Helper()
	for {
		frame, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		if f(frame) {
			return
		}
	}
}

// pingAnswer reports whether f answers a PING.
func pingAnswer(f http2.Frame) bool {
	p, ok := f.(*http2.PingFrame)
	return ok && p.IsAck()
}

// TestDefaultMaxConcurrentStreams: by default a connection may hold 1,000
// streams, as the server's SETTINGS say: a client with tens of thousands
// held hundreds of MB.
func TestDefaultMaxConcurrentStreams(t *testing.T) {
	_, _, addr := start(t, h2grpc.Options{})
	_, fr := dialFramer(t, addr)
	if v, ok := serverSetting(t, fr, http2.SettingMaxConcurrentStreams); !ok || v != 1000 {
		t.Errorf("SETTINGS_MAX_CONCURRENT_STREAMS %d (set %v), want 1000", v, ok)
	}
}
