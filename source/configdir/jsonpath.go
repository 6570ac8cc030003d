package configdir

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"google.golang.org/protobuf/reflect/protoreflect"
)

// protoErrPos matches protojson's prefix and the position it gives.
var protoErrPos = regexp.MustCompile(`^proto:\s*(?:syntax error\s*)?(?:\(line (\d+):(\d+)\):\s*)?`)

// protoErr rewrites a protojson error about js, the JSON made from doc, a
// file's resource of type md, in the file's terms: its position in js,
// which would mislead, becomes the path of the field it is at, as in
// "endpoints[0].lb_endpoints[1].load_balancing_weight: invalid value ...".
// A value it quotes from within secret material is replaced with
// "[redacted]" (see sensitiveAt).
func protoErr(md protoreflect.MessageDescriptor, doc map[string]any, js []byte, err error) string {
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
	off := runeOffset(js, col-1)
	path, key := jsonPath(js, off)
	if !key && sensitiveAt(md, doc, path) {
		msg = hideToken(msg, js, off)
	}
	if p := formatPath(path); p != "" {
		return p + ": " + msg
	}
	return msg
}

// formatPath writes a path as "endpoints[0].lb_endpoints[1].address".
func formatPath(path []any) string {
	var b strings.Builder
	for _, step := range path {
		switch s := step.(type) {
		case int:
			fmt.Fprintf(&b, "[%d]", s)
		case string:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(s)
		}
	}
	return b.String()
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
// enclosing object's for a key, which key reports. Each step is an
// object's key (a string) or an array's index (an int). It is empty at
// the top level or if js does not parse that far.
func jsonPath(js []byte, off int) (path []any, key bool) {
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	var frames []jsonFrame
	steps := func(n int) []any {
		steps := make([]any, n)
		for i, f := range frames[:n] {
			if f.array {
				steps[i] = f.index
			} else {
				steps[i] = f.key
			}
		}
		return steps
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
			return nil, false
		}
		past := dec.InputOffset() > int64(off) // this token holds off
		n := len(frames)
		if n > 0 && !frames[n-1].array && frames[n-1].wantKey {
			if k, ok := tok.(string); ok {
				if past {
					return steps(n - 1), true
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
			return steps(n), false
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
