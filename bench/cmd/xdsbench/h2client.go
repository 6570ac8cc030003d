package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/protobuf/proto"
)

// The ADS methods, as HTTP/2 paths.
const (
	sotwPath  = "/envoy.service.discovery.v3.AggregatedDiscoveryService/StreamAggregatedResources"
	deltaPath = "/envoy.service.discovery.v3.AggregatedDiscoveryService/DeltaAggregatedResources"
)

// h2Stream is one ADS stream on a connection of its own, spoken by a minimal
// HTTP/2 gRPC client that runs on its caller's goroutine: Recv reads the
// socket until a whole response has come, answering SETTINGS and PING and
// crediting flow-control windows on the way; Send writes the socket. Unlike
// grpc-go's client, it has no reader and writer goroutines of its own, so a
// response and its ACK cost one goroutine wake-up instead of three: the
// load tool takes less of the CPU it shares with the server under test. It
// is a real HTTP/2 client of one stream (stream 1), as an Envoy's
// connection to its management server is; it does not compress. It does not
// read while it writes: with windows larger than the sockets' buffers, a
// large request and a large response could wait for each other, which
// the windows the load tool allows (-window, default 64 KiB) keep far off.
type h2Stream[Req, Resp proto.Message] struct {
	nc     net.Conn
	fr     *http2.Framer // reads nc through a buffer
	stop   func() bool   // stops the context's closing of nc
	newMsg func() Resp

	window   int32 // our receive window, per stream and connection
	unacked  int32 // received on the stream, not yet credited back
	cunacked int32 // received on the connection, not yet credited back
	sendWin  int64 // the server's window for our stream
	initWin  int64 // the server's SETTINGS_INITIAL_WINDOW_SIZE
	csendWin int64 // the server's window for the connection
	maxFrame int   // the server's SETTINGS_MAX_FRAME_SIZE

	msg     []byte // the message being received, prefix included
	out     []byte // frames to write
	pending []byte // encoded requests (prefixes included); pending[sent:] waits for window
	sent    int
}

// dialH2 opens a connection to addr, counting the bytes read in n, and
// starts an ADS stream on it at path. The connection closes when ctx is
// done or Close is called.
func dialH2[Req, Resp proto.Message](ctx context.Context, addr, path string, window int, n *atomic.Int64, newMsg func() Resp) (*h2Stream[Req, Resp], error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	nc := &countingConn{Conn: c, n: n}
	s := &h2Stream[Req, Resp]{nc: nc, newMsg: newMsg, window: int32(window),
		sendWin: 65535, initWin: 65535, csendWin: 65535, maxFrame: 16384}
	s.fr = http2.NewFramer(io.Discard, bufio.NewReaderSize(nc, 16<<10))
	s.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	s.fr.SetReuseFrames()
	s.stop = context.AfterFunc(ctx, func() { nc.Close() })
	s.out = append(s.out, http2.ClientPreface...)
	settings := binary.BigEndian.AppendUint32([]byte{0, byte(http2.SettingEnablePush)}, 0)
	settings = binary.BigEndian.AppendUint32(append(settings, 0, byte(http2.SettingInitialWindowSize)), uint32(window))
	s.frame(http2.FrameSettings, 0, 0, settings)
	if inc := window - 65535; inc > 0 {
		s.frame(http2.FrameWindowUpdate, 0, 0, binary.BigEndian.AppendUint32(nil, uint32(inc)))
	}
	s.frame(http2.FrameHeaders, http2.FlagHeadersEndHeaders, 1, requestHeaders(addr, path))
	if err := s.flush(); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

var headerBlocks sync.Map // addr + path → HPACK block, the same on every connection

// requestHeaders returns the HPACK block of a gRPC call of path on addr,
// as the first header block of a connection: encoded against an empty
// dynamic table, it is valid on every new connection, and no other header
// block may follow it on one (the client opens one stream).
func requestHeaders(addr, path string) []byte {
	if b, ok := headerBlocks.Load(addr + path); ok {
		return b.([]byte)
	}
	var buf bytes.Buffer
	enc := hpack.NewEncoder(&buf)
	for _, f := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", path},
		{":authority", addr}, {"content-type", "application/grpc"}, {"te", "trailers"}} {
		_ = enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]}) // writes to a bytes.Buffer do not fail
	}
	headerBlocks.Store(addr+path, buf.Bytes())
	return buf.Bytes()
}

// Close closes the connection.
func (s *h2Stream[Req, Resp]) Close() {
	s.stop()
	s.nc.Close()
}

// frame appends a frame to out.
func (s *h2Stream[Req, Resp]) frame(t http2.FrameType, flags http2.Flags, id uint32, payload []byte) {
	n := len(payload)
	s.out = append(s.out, byte(n>>16), byte(n>>8), byte(n), byte(t), byte(flags))
	s.out = binary.BigEndian.AppendUint32(s.out, id)
	s.out = append(s.out, payload...)
}

func (s *h2Stream[Req, Resp]) flush() error {
	if len(s.out) == 0 {
		return nil
	}
	_, err := s.nc.Write(s.out)
	s.out = s.out[:0]
	return err
}

// Send sends req, or queues it behind what waits for the server's window.
func (s *h2Stream[Req, Resp]) Send(req Req) error { return s.SendMsg(req) }

// SendMsg sends m, a Req or an encodedRequest, as Send does.
func (s *h2Stream[Req, Resp]) SendMsg(m any) error {
	at := len(s.pending)
	b := append(s.pending, 0, 0, 0, 0, 0)
	switch m := m.(type) {
	case encodedRequest:
		b = m.appendTo(b)
	case Req:
		var err error
		if b, err = marshalRequest.MarshalAppend(b, m); err != nil {
			return err // nothing queued
		}
	default:
		return fmt.Errorf("h2: cannot send a %T", m)
	}
	s.pending = b
	binary.BigEndian.PutUint32(s.pending[at+1:], uint32(len(s.pending)-at-5))
	return s.sendPending()
}

// sendPending writes as much of pending as the windows allow.
func (s *h2Stream[Req, Resp]) sendPending() error {
	for s.sent < len(s.pending) {
		n := int(min(int64(len(s.pending)-s.sent), int64(s.maxFrame), s.sendWin, s.csendWin))
		if n <= 0 {
			break
		}
		s.frame(http2.FrameData, 0, 1, s.pending[s.sent:s.sent+n])
		s.sent += n
		s.sendWin -= int64(n)
		s.csendWin -= int64(n)
	}
	if s.sent == len(s.pending) {
		s.pending, s.sent = s.pending[:0], 0
	}
	return s.flush()
}

// Recv reads frames until a whole response has come, and returns it.
func (s *h2Stream[Req, Resp]) Recv() (Resp, error) {
	var zero Resp
	for {
		if len(s.msg) >= 5 {
			if s.msg[0] != 0 {
				return zero, errors.New("h2: a compressed response")
			}
			if size := 5 + int(binary.BigEndian.Uint32(s.msg[1:])); len(s.msg) >= size {
				m := s.newMsg()
				err := proto.Unmarshal(s.msg[5:size], m)
				s.msg = append(s.msg[:0], s.msg[size:]...)
				if len(s.msg) == 0 && cap(s.msg) > 64<<10 {
					s.msg = nil // an initial state's buffer is not kept by an idle client
				}
				if err != nil {
					return zero, err
				}
				return m, nil
			}
		}
		if err := s.readFrame(); err != nil {
			return zero, err
		}
	}
}

// readFrame reads and handles one frame.
func (s *h2Stream[Req, Resp]) readFrame() error {
	f, err := s.fr.ReadFrame()
	if err != nil {
		return err
	}
	switch f := f.(type) {
	case *http2.DataFrame:
		n := int32(f.Length)
		s.cunacked += n
		if f.StreamID == 1 {
			s.unacked += n
			s.msg = append(s.msg, f.Data()...)
			if f.StreamEnded() {
				return errors.New("h2: the server ended the stream without trailers")
			}
		}
		if s.unacked >= s.window/4 {
			s.frame(http2.FrameWindowUpdate, 0, 1, binary.BigEndian.AppendUint32(nil, uint32(s.unacked)))
			s.unacked = 0
		}
		if s.cunacked >= s.window/4 {
			s.frame(http2.FrameWindowUpdate, 0, 0, binary.BigEndian.AppendUint32(nil, uint32(s.cunacked)))
			s.cunacked = 0
		}
		return s.flush()
	case *http2.MetaHeadersFrame:
		if f.StreamEnded() {
			return fmt.Errorf("h2: the stream ended: grpc-status %s: %s", headerField(f, "grpc-status"), headerField(f, "grpc-message"))
		}
	case *http2.SettingsFrame:
		if f.IsAck() {
			return nil
		}
		err := f.ForeachSetting(func(st http2.Setting) error {
			switch st.ID {
			case http2.SettingInitialWindowSize:
				s.sendWin += int64(st.Val) - s.initWin
				s.initWin = int64(st.Val)
			case http2.SettingMaxFrameSize:
				s.maxFrame = int(st.Val)
			}
			return nil
		})
		if err != nil {
			return err
		}
		s.frame(http2.FrameSettings, http2.FlagSettingsAck, 0, nil)
		return s.sendPending()
	case *http2.WindowUpdateFrame:
		switch f.StreamID {
		case 0:
			s.csendWin += int64(f.Increment)
		case 1:
			s.sendWin += int64(f.Increment)
		}
		return s.sendPending()
	case *http2.PingFrame:
		if !f.IsAck() {
			s.frame(http2.FramePing, http2.FlagPingAck, 0, f.Data[:])
			return s.flush()
		}
	case *http2.RSTStreamFrame:
		return fmt.Errorf("h2: the server reset the stream: %v", f.ErrCode)
	case *http2.GoAwayFrame:
		if f.ErrCode != http2.ErrCodeNo {
			return fmt.Errorf("h2: GOAWAY %v: %s", f.ErrCode, f.DebugData())
		}
	}
	return nil
}

// headerField returns the value of header name in f.
func headerField(f *http2.MetaHeadersFrame, name string) string {
	for _, hf := range f.Fields {
		if hf.Name == name {
			return hf.Value
		}
	}
	return ""
}

// newSotWResponse and newDeltaResponse make the messages h2Stream decodes
// responses into.
func newSotWResponse() *discovery.DiscoveryResponse { return new(discovery.DiscoveryResponse) }
func newDeltaResponse() *discovery.DeltaDiscoveryResponse {
	return new(discovery.DeltaDiscoveryResponse)
}
