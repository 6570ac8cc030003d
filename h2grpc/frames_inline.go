package h2grpc

import (
	"encoding/binary"

	"golang.org/x/net/http2"
)

// frameHandler handles the frames that are whole at the start of b, as far
// as it can, inside the socket read (see pooledReader). It returns how many
// bytes it used and whether it stopped only because the rest of b is not a
// whole frame (true), rather than at a frame it leaves to the read loop
// (false). An error fails the connection.
type frameHandler func(b []byte) (used int, whole bool, err error)

// handleWhole is the connection's frameHandler. It handles DATA,
// WINDOW_UPDATE and PING frames, which are nearly all a client sends once
// its streams are open (a request, an ACK, grpc-go's bandwidth probe),
// exactly as readLoop would; any
// other frame, or one of these that readLoop reports an error for before
// reading its payload (too large, DATA on stream 0, any frame while a header
// block is open), it leaves to readLoop.
func (c *conn) handleWhole(b []byte) (int, bool, error) {
	if c.headerOpen {
		return 0, false, nil // only CONTINUATION may come: the framer checks it
	}
	used := 0
	for len(b)-used >= frameHeaderLen {
		h := b[used : used+frameHeaderLen]
		fh := http2.FrameHeader{
			Length:   uint32(h[0])<<16 | uint32(h[1])<<8 | uint32(h[2]),
			Type:     http2.FrameType(h[3]),
			Flags:    http2.Flags(h[4]),
			StreamID: binary.BigEndian.Uint32(h[5:]) & (1<<31 - 1),
		}
		if fh.Length > maxFrameSize {
			return used, false, nil
		}
		end := used + frameHeaderLen + int(fh.Length)
		if end > len(b) {
			return used, true, nil
		}
		payload := b[used+frameHeaderLen : end : end]
		var err error
		switch {
		case fh.Type == http2.FrameData && fh.StreamID != 0:
			if fh.Flags&(http2.FlagDataPadded|http2.FlagDataEndStream) == 0 {
				end, payload, fh = c.joinData(b, end, payload, fh)
			}
			err = c.onData(fh, payload)
		case fh.Type == http2.FrameWindowUpdate && fh.Length == 4:
			err = c.windowUpdate(fh, payload)
		case fh.Type == http2.FramePing && fh.Length == 8 && fh.StreamID == 0:
			err = c.onPing(fh.Flags.Has(http2.FlagPingAck), payload) // grpc-go's clients ping on every response they get
		default:
			return used, false, nil
		}
		used = end
		if err = c.streamFailed(err); err != nil {
			return used, false, err
		}
	}
	return used, true, nil
}

// joinData joins to a DATA frame, whose payload ends at b[end], the DATA
// frames whole in b right after it on the same stream, unpadded, up to one
// that ends the stream: it moves their payloads back over the frame headers
// between them, in place. A message the client split into frames (grpc-go
// cuts at 16 KiB: an Envoy's node repeated in an ACK takes three) then
// reaches its stream whole, which takes it inline without assembling it in a
// buffer of its own. It returns the end of the last frame joined, the joined
// payload and a header for it, counting the frames' lengths together: what
// onData checks against the windows and credits back. It joins no more than
// the connection's window admits, so that a client that overruns it fails
// at the same frame as it would frame by frame; a client keeping to the
// windows could not have counted on credit for the first frame when it sent
// the others, which the socket already held.
func (c *conn) joinData(b []byte, end int, payload []byte, fh http2.FrameHeader) (int, []byte, http2.FrameHeader) {
	start := end - len(payload) // the joined payload's first byte
	size := len(payload)
	for len(b)-end >= frameHeaderLen {
		h := b[end : end+frameHeaderLen]
		n := int(h[0])<<16 | int(h[1])<<8 | int(h[2])
		flags := http2.Flags(h[4])
		if http2.FrameType(h[3]) != http2.FrameData || flags.Has(http2.FlagDataPadded) ||
			binary.BigEndian.Uint32(h[5:])&(1<<31-1) != fh.StreamID ||
			n > maxFrameSize || len(b)-end-frameHeaderLen < n || int64(fh.Length)+int64(n) > int64(c.recvWin) {
			break
		}
		copy(b[start+size:], b[end+frameHeaderLen:end+frameHeaderLen+n])
		size += n
		end += frameHeaderLen + n
		fh.Length += uint32(n)
		if flags.Has(http2.FlagDataEndStream) {
			fh.Flags |= http2.FlagDataEndStream
			break
		}
	}
	return end, b[start : start+size : start+size], fh
}
