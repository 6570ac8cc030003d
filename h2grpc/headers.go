package h2grpc

import (
	"errors"

	"golang.org/x/net/http/httpguts"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// maxHeaderBlock bounds a header block's encoded bytes (its fragments,
// padding left out). A block whose fields pass maxHeaderListSize is still
// decoded to its end, its fields dropped, so that the HPACK decoder's
// table stays in step with the client's encoder: only its stream is
// refused (RFC 9113 §8.2.3, §10.5.1), and the connection's other streams
// go on. A block longer than this ends the connection, so that a block
// that does not end holds it no longer.
const maxHeaderBlock = 4 * maxHeaderListSize

// maxEmptyContinuations bounds the CONTINUATION frames with an empty
// fragment in a header block. An encoder has no use for them (one, at
// most, to carry END_HEADERS), and while a block is open the connection
// carries nothing else: a client sending them without end held it, at the
// cost of a frame's handling each. Every other frame of a block carries a
// byte at least, which maxHeaderBlock bounds: a block of 64 KiB in frames
// of one byte each passes.
const maxEmptyContinuations = 16

// The errors that end a connection whose client sends a header block past
// the bounds above.
var (
	errHeaderBlockTooLarge = goAwayError{code: http2.ErrCodeEnhanceYourCalm, debug: "header_block_too_large"}
	errEmptyContinuations  = goAwayError{code: http2.ErrCodeEnhanceYourCalm, debug: "too_many_empty_continuations"}
)

// headerBlock is the header block being read (RFC 9113 §4.3): from its
// HEADERS frame to the frame that carries END_HEADERS. It is serve's
// only.
type headerBlock struct {
	open    bool                   // only CONTINUATION may come
	mh      http2.MetaHeadersFrame // the HEADERS frame, and the fields decoded so far
	left    uint32                 // the decoded size (hpack.HeaderField.Size) the fields may still take
	invalid error                  // the first malformed field, if any
	regular bool                   // a regular field came: no pseudo-field may follow
	bytes   int                    // the fragments' bytes so far
	empty   int                    // the CONTINUATION frames with an empty fragment so far
}

// newHeaderDecoder returns the connection's HPACK decoder: its fields go to
// the header block being read (addField).
func (c *conn) newHeaderDecoder() *hpack.Decoder {
	d := hpack.NewDecoder(4096, c.addField)
	// A string longer than the fields may take is decoded all the same
	// (and then dropped: see addField), so that one too large a field
	// refuses its stream only; the block's bound bounds it.
	d.SetMaxStringLength(maxHeaderBlock)
	return d
}

// onHeaderFrame handles a HEADERS or CONTINUATION frame, f, or the error
// err the framer read it with: it decodes the frame's fragment and, at the
// end of the block, handles the block (onHeaders).
//
// The framer's own reading of header blocks (Framer.ReadMetaHeaders) is
// not used: it ends the connection on a block whose fields pass
// maxHeaderListSize when the block goes on in CONTINUATION frames, and
// reads CONTINUATION frames with empty fragments without end.
func (c *conn) onHeaderFrame(fh http2.FrameHeader, f http2.Frame, err error) error {
	b := &c.hb
	var frag []byte
	switch f := f.(type) {
	case *http2.HeadersFrame:
		*b = headerBlock{open: true, mh: http2.MetaHeadersFrame{HeadersFrame: f}, left: maxHeaderListSize}
		c.hdec.SetEmitEnabled(true)
		frag = f.HeaderBlockFragment()
	case *http2.ContinuationFrame: // the framer checks that it continues an open block
		frag = f.HeaderBlockFragment()
		if len(frag) == 0 {
			if b.empty++; b.empty > maxEmptyContinuations {
				return errEmptyContinuations
			}
		}
	default:
		var se http2.StreamError
		if errors.As(err, &se) {
			// The framer's stream error for a HEADERS frame (its padding
			// as long as the frame, or longer) leaves its fragment
			// undecoded, and the HPACK table out of step with the
			// client's: a connection error (RFC 9113 §6.2).
			return http2.ConnectionError(http2.ErrCodeProtocol)
		}
		return err
	}
	if b.bytes += len(frag); b.bytes > maxHeaderBlock {
		return errHeaderBlockTooLarge
	}
	if _, err := c.hdec.Write(frag); err != nil {
		return http2.ConnectionError(http2.ErrCodeCompression)
	}
	if !fh.Flags.Has(http2.FlagHeadersEndHeaders) { // CONTINUATION's END_HEADERS is the same bit
		return nil
	}
	b.open = false
	mh := b.mh
	b.mh = http2.MetaHeadersFrame{} // its fields are not kept
	if err := c.hdec.Close(); err != nil {
		return http2.ConnectionError(http2.ErrCodeCompression)
	}
	if b.invalid == nil {
		b.invalid = checkPseudos(mh.PseudoFields())
	}
	if b.invalid != nil {
		return http2.StreamError{StreamID: mh.StreamID, Code: http2.ErrCodeProtocol, Cause: b.invalid}
	}
	return c.onHeaders(&mh)
}

// addField adds a decoded field to the header block being read, checked
// as the HTTP/2 framer checks it. Once a field is malformed, or the fields
// pass maxHeaderListSize (the block is then Truncated, and its fields
// dropped), the rest are decoded for the HPACK table only.
func (c *conn) addField(hf hpack.HeaderField) {
	b := &c.hb
	switch {
	case !httpguts.ValidHeaderFieldValue(hf.Value):
		b.invalid = errors.New("h2grpc: invalid value in header field " + hf.Name)
	case hf.IsPseudo():
		if b.regular {
			b.invalid = errors.New("h2grpc: pseudo-header field after a regular one")
		}
	default:
		b.regular = true
		if !validFieldName(hf.Name) {
			b.invalid = errors.New("h2grpc: invalid header field name")
		}
	}
	if b.invalid != nil {
		c.hdec.SetEmitEnabled(false)
		return
	}
	if size := hf.Size(); size <= b.left {
		b.left -= size
		b.mh.Fields = append(b.mh.Fields, hf)
		return
	}
	b.mh.Truncated, b.mh.Fields = true, nil
	c.hdec.SetEmitEnabled(false)
}

// validFieldName reports whether name is a valid field name on the wire: a
// token, in lower case (RFC 9113 §8.2.1).
func validFieldName(name string) bool {
	if name == "" {
		return false
	}
	for _, r := range name {
		if !httpguts.IsTokenRune(r) || 'A' <= r && r <= 'Z' {
			return false
		}
	}
	return true
}

// checkPseudos returns why a request's pseudo-header fields are malformed,
// if they are: one not of a request, or one repeated (RFC 9113 §8.3).
func checkPseudos(pf []hpack.HeaderField) error {
	for i, hf := range pf {
		switch hf.Name {
		case ":method", ":path", ":scheme", ":authority", ":protocol":
		default:
			return errors.New("h2grpc: invalid pseudo-header field " + hf.Name)
		}
		for _, prev := range pf[:i] {
			if prev.Name == hf.Name {
				return errors.New("h2grpc: duplicate pseudo-header field " + hf.Name)
			}
		}
	}
	return nil
}
