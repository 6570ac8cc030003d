package h2grpc

import (
	"encoding/binary"

	"golang.org/x/net/http2"
)

// frameHandler handles the frames that are whole at the start of b, as far
// as it can, inside the socket read (see pooledReader). It returns how many
// bytes it used, and need: 0 if it stopped at a frame it leaves to the read
// loop; else how many bytes of b[used:] it needs before it can go on, which
// b does not hold yet (a frame header, the rest of a frame, or frames it
// waits to join). An error fails the connection.
type frameHandler func(b []byte) (used, need int, err error)

// handleWhole is the connection's frameHandler. It handles DATA,
// WINDOW_UPDATE and PING frames, which are nearly all a client sends once
// its streams are open (a request, an ACK, grpc-go's bandwidth probe),
// exactly as readLoop would; any
// other frame, or one of these that readLoop reports an error for before
// reading its payload (too large, DATA on stream 0, any frame while a header
// block is open), it leaves to readLoop.
func (c *conn) handleWhole(b []byte) (int, int, error) {
	if c.hb.open {
		return 0, 0, nil // only CONTINUATION may come: the framer checks it
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
			return used, 0, nil
		}
		end := used + frameHeaderLen + int(fh.Length)
		if end > len(b) {
			return used, end - used, nil
		}
		payload := b[used+frameHeaderLen : end : end]
		var err error
		switch {
		case fh.Type == http2.FrameData && fh.StreamID != 0:
			var wait bool
			if end, payload, fh, wait = c.joinData(b, used, fh); wait {
				return used, end - used, nil
			}
			err = c.onData(fh, payload)
		case fh.Type == http2.FrameWindowUpdate && fh.Length == 4:
			err = c.windowUpdate(fh, payload)
		case fh.Type == http2.FramePing && fh.Length == 8 && fh.StreamID == 0:
			err = c.onPing(fh.Flags.Has(http2.FlagPingAck), payload) // grpc-go's clients ping on every response they get
		default:
			return used, 0, nil
		}
		used = end
		if err = c.streamFailed(err); err != nil {
			return used, 0, err
		}
	}
	return used, frameHeaderLen, nil
}

// joinData takes the DATA frame at b[at:], whole in b, with its header fh,
// and joins to it the DATA frames whole in b right after it on the same
// stream, unpadded, up to one that ends the stream: it moves their payloads
// back over the frame headers between them, in place. A message the client
// cut into frames (grpc-go cuts at 16 KiB: an Envoy's node repeated in an
// ACK takes three) then reaches its stream whole, which takes it inline
// without assembling it in a buffer of its own. It returns the end of the
// last frame joined, the payload (padding included, if the frame is padded:
// such a frame is not joined, nor one that ends its stream, nor one on a
// stream that is not open), and a header that counts the frames' lengths
// together: what onData checks against the windows and credits back.
//
// It joins no more than the connection's and the stream's windows admit,
// and no more than keeps the stream's queue within a window (see
// joinable), so that frames that would pass the flow-control checks one by
// one pass them joined, and are credited back as far: one by one, the
// server credits back as frames come, and a client sending before it has
// seen the server's SETTINGS, as RFC 9113 allows, may count on that credit.
// (Joined, a few such bursts pass that one by one would fail: credit for
// the frames joined comes at once, not a quarter window at a time.)
//
// If the frames are followed by the start of the stream's next DATA frame,
// which the client is sending whole, a read buffer holds them all, and they
// end no message (see endsNoMessage), it moves nothing and reports wait,
// with end the end of that frame: the reader waits for the rest, to join it
// too, rather than have the stream copy this part of a message aside.
func (c *conn) joinData(b []byte, at int, fh http2.FrameHeader) (end int, payload []byte, joined http2.FrameHeader, wait bool) {
	start := at + frameHeaderLen // of the joined payload
	end = start + int(fh.Length)
	if fh.Flags&(http2.FlagDataPadded|http2.FlagDataEndStream) != 0 || len(b)-end < frameHeaderLen {
		return end, b[start:end:end], fh, false
	}
	st := c.stream(fh.StreamID)
	if st == nil {
		return end, b[start:end:end], fh, false
	}
	win := min(int64(c.recvWin.Load()), st.joinable())
	last := end // the end of the last frame to join
	for next, total := end, int64(fh.Length); len(b)-next >= frameHeaderLen; {
		h := b[next : next+frameHeaderLen]
		n := int(h[0])<<16 | int(h[1])<<8 | int(h[2])
		flags := http2.Flags(h[4])
		if http2.FrameType(h[3]) != http2.FrameData || flags.Has(http2.FlagDataPadded) ||
			binary.BigEndian.Uint32(h[5:])&(1<<31-1) != fh.StreamID ||
			n > maxFrameSize || total+int64(n) > win {
			break
		}
		if next+frameHeaderLen+n > len(b) {
			if next+frameHeaderLen+n-at <= bigReadBufSize && st.endsNoMessage(b[start:end], int(total)) {
				return next + frameHeaderLen + n, nil, fh, true
			}
			break
		}
		next += frameHeaderLen + n
		total += int64(n)
		last = next
		if flags.Has(http2.FlagDataEndStream) {
			break
		}
	}
	for end < last {
		h := b[end : end+frameHeaderLen]
		n := int(h[0])<<16 | int(h[1])<<8 | int(h[2])
		fh.Flags |= http2.Flags(h[4]) & http2.FlagDataEndStream // read before the move overwrites h
		copy(b[start+int(fh.Length):], b[end+frameHeaderLen:end+frameHeaderLen+n])
		end += frameHeaderLen + n
		fh.Length += uint32(n)
	}
	return end, b[start : start+int(fh.Length) : start+int(fh.Length)], fh, false
}
