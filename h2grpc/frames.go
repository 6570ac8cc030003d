package h2grpc

import (
	"encoding/base64"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// HTTP/2 frame encoding (RFC 9113 section 4.1) and the few header blocks a
// gRPC server sends. Header blocks use only HPACK's static table and
// literals without indexing, so the server keeps no encoder state.

const frameHeaderLen = 9

// appendPingAck appends a PING frame that answers one carrying data.
func appendPingAck(b, data []byte) []byte { return appendPing(b, http2.FlagPingAck, data) }

// appendPing appends a PING frame with flags carrying data (8 bytes).
func appendPing(b []byte, flags http2.Flags, data []byte) []byte {
	return append(appendFrameHeader(b, 8, http2.FramePing, flags, 0), data...)
}

// appendFrameHeader appends a frame header for a payload of length n.
func appendFrameHeader(b []byte, n int, t http2.FrameType, flags http2.Flags, id uint32) []byte {
	return append(b, byte(n>>16), byte(n>>8), byte(n), byte(t), byte(flags),
		byte(id>>24)&0x7f, byte(id>>16), byte(id>>8), byte(id))
}

func appendUint32(b []byte, v uint32) []byte {
	return append(b, byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
}

// appendSettings appends a SETTINGS frame carrying ss.
func appendSettings(b []byte, ss ...http2.Setting) []byte {
	b = appendFrameHeader(b, 6*len(ss), http2.FrameSettings, 0, 0)
	for _, s := range ss {
		b = append(b, byte(s.ID>>8), byte(s.ID))
		b = appendUint32(b, s.Val)
	}
	return b
}

func appendWindowUpdate(b []byte, id, inc uint32) []byte {
	return appendUint32(appendFrameHeader(b, 4, http2.FrameWindowUpdate, 0, id), inc)
}

func appendRSTStream(b []byte, id uint32, code http2.ErrCode) []byte {
	return appendUint32(appendFrameHeader(b, 4, http2.FrameRSTStream, 0, id), uint32(code))
}

func appendGoAway(b []byte, lastID uint32, code http2.ErrCode, debug string) []byte {
	b = appendFrameHeader(b, 8+len(debug), http2.FrameGoAway, 0, 0)
	return append(appendUint32(appendUint32(b, lastID), uint32(code)), debug...)
}

// appendHPACKInt appends v as an HPACK integer with an n-bit prefix whose
// other bits are first's (RFC 7541 section 5.1).
func appendHPACKInt(b []byte, first byte, n uint, v uint64) []byte {
	limit := uint64(1)<<n - 1
	if v < limit {
		return append(b, first|byte(v))
	}
	b = append(b, first|byte(limit))
	for v -= limit; v >= 128; v >>= 7 {
		b = append(b, byte(v&0x7f)|0x80)
	}
	return append(b, byte(v))
}

// appendLiteral appends a header field as a literal without indexing with
// a literal name (RFC 7541 section 6.2.2).
func appendLiteral(b []byte, name, value string) []byte {
	b = append(b, 0)
	b = appendHPACKInt(b, 0, 7, uint64(len(name)))
	b = append(b, name...)
	b = appendHPACKInt(b, 0, 7, uint64(len(value)))
	return append(b, value...)
}

// status200 is ":status: 200", entry 8 of HPACK's static table.
const status200 = 0x88

// responseHeaders is the header block that opens every response.
var responseHeaders = appendLiteral([]byte{status200}, "content-type", "application/grpc")

// appendMD appends md's fields, binary ones base64-encoded.
func appendMD(b []byte, md metadata.MD) []byte {
	for k, vs := range md {
		if isReserved(k) {
			continue
		}
		for _, v := range vs {
			if strings.HasSuffix(k, "-bin") {
				v = base64.RawStdEncoding.EncodeToString([]byte(v))
			}
			b = appendLiteral(b, k, v)
		}
	}
	return b
}

// maxStatusMessage bounds grpc-message (before its percent-encoding, which
// may triple it). A trailer block that does not fit one frame is split
// into CONTINUATION frames (appendHeaderBlock).
const maxStatusMessage = 4 << 10

// appendTrailers appends the trailer fields for st and md.
func appendTrailers(b []byte, st *status.Status, md metadata.MD) []byte {
	b = appendLiteral(b, "grpc-status", strconv.Itoa(int(st.Code())))
	if msg := st.Message(); msg != "" {
		if len(msg) > maxStatusMessage {
			msg = msg[:maxStatusMessage]
		}
		b = appendLiteral(b, "grpc-message", encodeMessage(msg))
	}
	if p := st.Proto(); len(p.GetDetails()) > 0 {
		if enc, err := proto.Marshal(p); err == nil && len(enc) <= maxStatusMessage {
			b = appendLiteral(b, "grpc-status-details-bin", base64.RawStdEncoding.EncodeToString(enc))
		}
	}
	return appendMD(b, md)
}

// encodeMessage percent-encodes what gRPC's grpc-message does not carry as
// it is: bytes outside printable ASCII, and '%'.
func encodeMessage(msg string) string {
	clean := true
	for i := 0; i < len(msg) && clean; i++ {
		clean = msg[i] >= ' ' && msg[i] <= '~' && msg[i] != '%'
	}
	if clean {
		return msg
	}
	var sb strings.Builder
	for i := 0; i < len(msg); i++ {
		if c := msg[i]; c >= ' ' && c <= '~' && c != '%' {
			sb.WriteByte(c)
		} else {
			fmt.Fprintf(&sb, "%%%02X", c)
		}
	}
	return sb.String()
}

// isReserved reports whether a header is the transport's, not metadata.
func isReserved(k string) bool {
	switch k {
	case "content-type", "user-agent", "te", "grpc-message-type", "grpc-encoding", "grpc-message",
		"grpc-status", "grpc-timeout", "grpc-status-details-bin", "grpc-accept-encoding":
		return true
	}
	return strings.HasPrefix(k, ":")
}

// decodeTimeout parses a grpc-timeout value: at most 8 digits and a unit.
func decodeTimeout(s string) (time.Duration, bool) {
	if len(s) < 2 || len(s) > 9 {
		return 0, false
	}
	var unit time.Duration
	switch s[len(s)-1] {
	case 'H':
		unit = time.Hour
	case 'M':
		unit = time.Minute
	case 'S':
		unit = time.Second
	case 'm':
		unit = time.Millisecond
	case 'u':
		unit = time.Microsecond
	case 'n':
		unit = time.Nanosecond
	default:
		return 0, false
	}
	n, err := strconv.ParseUint(s[:len(s)-1], 10, 64)
	if err != nil {
		return 0, false
	}
	if n > uint64(math.MaxInt64/unit) { // from about 2.6 million hours: no deadline to speak of
		return math.MaxInt64, true
	}
	return time.Duration(n) * unit, true
}
