package handler

import (
	"strconv"
	"unicode/utf8"
)

// fastJSON parses the JSON documents json() sees most, small and well-formed, about
// twice as fast as encoding/json, into the same Go values parseJSON makes from
// encoding/json's (map[string]any, []any, string, int64 for integers that fit, float64,
// bool, nil). It accepts a strict subset of what encoding/json accepts and reports
// false for anything else (malformed input, invalid UTF-8, lone surrogates, deep
// nesting), which then goes to encoding/json for its result and its error message. A
// differential fuzz test holds the two to the same output.
func fastJSON(b []byte) (any, bool) {
	p := jsonParser{b: b}
	v, ok := p.value()
	if !ok {
		return nil, false
	}
	p.space()
	return v, p.i == len(p.b)
}

// maxFastJSONDepth bounds nesting on the fast path; deeper documents go to encoding/json.
const maxFastJSONDepth = 100

type jsonParser struct {
	b     []byte
	i     int
	depth int
}

func (p *jsonParser) space() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *jsonParser) value() (any, bool) {
	p.space()
	if p.i >= len(p.b) {
		return nil, false
	}
	switch c := p.b[p.i]; {
	case c == '{':
		return p.object()
	case c == '[':
		return p.array()
	case c == '"':
		s, ok := p.str()
		return s, ok
	case c == 't':
		return true, p.literal("true")
	case c == 'f':
		return false, p.literal("false")
	case c == 'n':
		return nil, p.literal("null")
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	}
	return nil, false
}

func (p *jsonParser) literal(word string) bool {
	if len(p.b)-p.i < len(word) || string(p.b[p.i:p.i+len(word)]) != word {
		return false
	}
	p.i += len(word)
	return true
}

func (p *jsonParser) object() (any, bool) {
	if p.depth++; p.depth > maxFastJSONDepth {
		return nil, false
	}
	defer func() { p.depth-- }()
	p.i++ // {
	m := map[string]any{}
	p.space()
	if p.i < len(p.b) && p.b[p.i] == '}' {
		p.i++
		return m, true
	}
	for {
		p.space()
		if p.i >= len(p.b) || p.b[p.i] != '"' {
			return nil, false
		}
		k, ok := p.str()
		if !ok {
			return nil, false
		}
		p.space()
		if p.i >= len(p.b) || p.b[p.i] != ':' {
			return nil, false
		}
		p.i++
		v, ok := p.value()
		if !ok {
			return nil, false
		}
		m[k] = v // a repeated key: the last one wins, as in encoding/json
		p.space()
		if p.i >= len(p.b) {
			return nil, false
		}
		switch p.b[p.i] {
		case ',':
			p.i++
		case '}':
			p.i++
			return m, true
		default:
			return nil, false
		}
	}
}

func (p *jsonParser) array() (any, bool) {
	if p.depth++; p.depth > maxFastJSONDepth {
		return nil, false
	}
	defer func() { p.depth-- }()
	p.i++ // [
	l := []any{}
	p.space()
	if p.i < len(p.b) && p.b[p.i] == ']' {
		p.i++
		return l, true
	}
	for {
		v, ok := p.value()
		if !ok {
			return nil, false
		}
		l = append(l, v)
		p.space()
		if p.i >= len(p.b) {
			return nil, false
		}
		switch p.b[p.i] {
		case ',':
			p.i++
		case ']':
			p.i++
			return l, true
		default:
			return nil, false
		}
	}
}

// str reads a string at p.i (which holds the opening quote).
func (p *jsonParser) str() (string, bool) {
	start := p.i + 1
	nonASCII := false
	for j := start; j < len(p.b); j++ {
		switch c := p.b[j]; {
		case c == '"':
			p.i = j + 1
			seg := p.b[start:j]
			if nonASCII && !utf8.Valid(seg) {
				return "", false
			}
			return string(seg), true
		case c == '\\':
			return p.escapedStr(start)
		case c < 0x20:
			return "", false
		case c >= 0x80:
			nonASCII = true
		}
	}
	return "", false
}

// escapedStr is str for strings with escapes, decoded into a new buffer.
func (p *jsonParser) escapedStr(start int) (string, bool) {
	buf := make([]byte, 0, 32)
	for j := start; j < len(p.b); j++ {
		c := p.b[j]
		switch {
		case c == '"':
			p.i = j + 1
			if !utf8.Valid(buf) {
				return "", false
			}
			return string(buf), true
		case c < 0x20:
			return "", false
		case c != '\\':
			buf = append(buf, c)
			continue
		}
		j++
		if j >= len(p.b) {
			return "", false
		}
		switch p.b[j] {
		case '"', '\\', '/':
			buf = append(buf, p.b[j])
		case 'b':
			buf = append(buf, '\b')
		case 'f':
			buf = append(buf, '\f')
		case 'n':
			buf = append(buf, '\n')
		case 'r':
			buf = append(buf, '\r')
		case 't':
			buf = append(buf, '\t')
		case 'u':
			r, ok := hex4(p.b, j+1)
			if !ok {
				return "", false
			}
			j += 4
			switch {
			case r >= 0xDC00 && r <= 0xDFFF:
				return "", false // a lone low surrogate
			case r >= 0xD800 && r <= 0xDBFF:
				if j+6 >= len(p.b) || p.b[j+1] != '\\' || p.b[j+2] != 'u' {
					return "", false
				}
				lo, ok := hex4(p.b, j+3)
				if !ok || lo < 0xDC00 || lo > 0xDFFF {
					return "", false
				}
				j += 6
				r = 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00)
			}
			buf = utf8.AppendRune(buf, r)
		default:
			return "", false
		}
	}
	return "", false
}

func hex4(b []byte, at int) (rune, bool) {
	if at+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[at : at+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}

// number reads a JSON number: an int64 when it is an integer that fits, else a float64
// (as parseJSON's json.Number conversion does).
func (p *jsonParser) number() (any, bool) {
	start := p.i
	if p.b[p.i] == '-' {
		p.i++
	}
	digits := func() int {
		n := 0
		for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
			p.i++
			n++
		}
		return n
	}
	if p.i >= len(p.b) {
		return nil, false
	}
	if p.b[p.i] == '0' {
		p.i++
	} else if digits() == 0 {
		return nil, false
	}
	integer := true
	if p.i < len(p.b) && p.b[p.i] == '.' {
		p.i++
		integer = false
		if digits() == 0 {
			return nil, false
		}
	}
	if p.i < len(p.b) && (p.b[p.i] == 'e' || p.b[p.i] == 'E') {
		p.i++
		integer = false
		if p.i < len(p.b) && (p.b[p.i] == '+' || p.b[p.i] == '-') {
			p.i++
		}
		if digits() == 0 {
			return nil, false
		}
	}
	s := p.b[start:p.i]
	if integer && len(s) <= 18 {
		// At most 18 digits always fit an int64: no need for strconv.
		neg := s[0] == '-'
		if neg {
			s = s[1:]
		}
		var n int64
		for _, c := range s {
			n = n*10 + int64(c-'0')
		}
		if neg {
			n = -n
		}
		return n, true
	}
	if integer {
		if n, err := strconv.ParseInt(string(s), 10, 64); err == nil {
			return n, true
		}
	}
	f, _ := strconv.ParseFloat(string(s), 64) // out of range gives ±Inf, as on the slow path
	return f, true
}
