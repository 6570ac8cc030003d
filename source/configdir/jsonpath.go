package configdir

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// protoErrPos matches protojson's prefix and the position it gives.
var protoErrPos = regexp.MustCompile(`^proto:\s*(?:\(line (\d+):(\d+)\):\s*)?`)

// protoErr rewrites a protojson error about js, the JSON made from a
// file's resource, in the file's terms: its position in js, which would
// mislead, becomes the path of the field it is at, as in
// "endpoints[0].lb_endpoints[1].load_balancing_weight: invalid value ...".
func protoErr(js []byte, err error) string {
	s := strings.ReplaceAll(err.Error(), "\u00a0", " ")
	m := protoErrPos.FindStringSubmatch(s)
	if m == nil {
		return s
	}
	msg := s[len(m[0]):]
	line, _ := strconv.Atoi(m[1])
	col, _ := strconv.Atoi(m[2])
	if line != 1 || col < 1 { // js is one line; no position, or not ours
		return msg
	}
	if p := jsonPath(js, runeOffset(js, col-1)); p != "" {
		return p + ": " + msg
	}
	return msg
}

// runeOffset returns the byte offset of the n-th rune of b (protojson
// counts columns in runes).
func runeOffset(b []byte, n int) int {
	off := 0
	for ; n > 0 && off < len(b); n-- {
		_, size := utf8.DecodeRune(b[off:])
		off += size
	}
	return off
}

// jsonFrame is one open object or array on the way to an offset.
type jsonFrame struct {
	array   bool
	index   int    // of the array's element being read
	key     string // of the object's member being read
	wantKey bool   // the object's next token is a key
}

// jsonPath returns the path, in the document's own field names, of the
// token of js at byte offset off: the value's path for a value, the
// enclosing object's for a key. It is "" at the top level or if js does
// not parse that far.
func jsonPath(js []byte, off int) string {
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	var frames []jsonFrame
	path := func(n int) string {
		var b strings.Builder
		for _, f := range frames[:n] {
			switch {
			case f.array:
				fmt.Fprintf(&b, "[%d]", f.index)
			case b.Len() == 0:
				b.WriteString(f.key)
			default:
				b.WriteString("." + f.key)
			}
		}
		return b.String()
	}
	// valueDone moves the innermost frame past the value just read.
	valueDone := func() {
		if n := len(frames); n > 0 {
			if frames[n-1].array {
				frames[n-1].index++
			} else {
				frames[n-1].wantKey = true
			}
		}
	}
	for {
		tok, err := dec.Token()
		if err != nil {
			return ""
		}
		past := dec.InputOffset() > int64(off) // this token holds off
		n := len(frames)
		if n > 0 && !frames[n-1].array && frames[n-1].wantKey {
			if k, ok := tok.(string); ok {
				if past {
					return path(n - 1)
				}
				frames[n-1].key, frames[n-1].wantKey = k, false
				continue
			}
		}
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			frames = frames[:n-1]
			valueDone()
			continue
		}
		if past {
			return path(n)
		}
		switch tok {
		case json.Delim('{'):
			frames = append(frames, jsonFrame{wantKey: true})
		case json.Delim('['):
			frames = append(frames, jsonFrame{array: true})
		default:
			valueDone()
		}
	}
}
