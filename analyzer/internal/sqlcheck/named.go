package sqlcheck

import "strings"

// ReplaceNamedParams rewrites named placeholders (:name, :obj.field, as
// sqlx and the article write them) and numbered ones ($1, as pgx, lib/pq
// and sqlx's Rebind write them) into MySQL's "?", so that the statement
// parses and the bound values count as values. Quoted strings, quoted
// identifiers and comments are left alone, and so are ":=" (assignment),
// "::" and "$" inside an identifier (a$1).
func ReplaceNamedParams(s string) string { return replaceParams(s, nil) }

// ReplaceParamsMapped is ReplaceNamedParams that also returns the map from
// an offset in the rewritten text back to the offset in s.
func ReplaceParamsMapped(s string) (string, func(int) int) {
	var shifts []shift
	text := replaceParams(s, &shifts)
	return text, func(o int) int { return origOffset(o, shifts) }
}

// shift records that offset out of the rewritten text is offset in of the
// original (just past a rewritten placeholder).
type shift struct{ out, in int }

// origOffset maps an offset of the rewritten text back to the original.
func origOffset(o int, shifts []shift) int {
	in := o
	for _, sh := range shifts {
		if sh.out <= o {
			in = sh.in + o - sh.out
		}
	}
	return in
}

func replaceParams(s string, shifts *[]shift) string {
	if strings.IndexByte(s, ':') < 0 && strings.IndexByte(s, '$') < 0 {
		return s
	}
	var b strings.Builder
	last := 0 // s[last:i] is pending copy
	for i := 0; i < len(s); {
		if j, ok := SkipNonCode(s, i); ok {
			i = j
			continue
		}
		switch c := s[i]; {
		case c == ':' && i+1 < len(s) && IsNameStart(s[i+1]) && (i == 0 || s[i-1] != ':'):
			j := i + 2
			for j < len(s) && (IsWordByte(s[j]) || s[j] == '.' && j+1 < len(s) && IsNameStart(s[j+1])) {
				j++
			}
			b.WriteString(s[last:i])
			b.WriteByte('?')
			i, last = j, j
			if shifts != nil {
				*shifts = append(*shifts, shift{b.Len(), j})
			}
		case c == '$' && i+1 < len(s) && IsDigit(s[i+1]) && (i == 0 || !IsWordByte(s[i-1]) && s[i-1] != '$'):
			j := i + 2
			for j < len(s) && IsDigit(s[j]) {
				j++
			}
			if j < len(s) && (IsWordByte(s[j]) || s[j] == '$') {
				i = j // $1abc is an identifier
				continue
			}
			b.WriteString(s[last:i])
			b.WriteByte('?')
			i, last = j, j
			if shifts != nil {
				*shifts = append(*shifts, shift{b.Len(), j})
			}
		default:
			i++
		}
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

func IsDigit(c byte) bool { return c >= '0' && c <= '9' }

func IsNameStart(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// SkipNonCode returns the index just past the quoted text or the comment
// that starts at s[i], and true; i and false when neither starts there. As
// in MySQL, "--" starts a comment only before whitespace, a control
// character or the end of s (a--1 is a minus minus one).
func SkipNonCode(s string, i int) (int, bool) {
	c := s[i]
	switch {
	case c == '\'' || c == '"' || c == '`':
		return SkipQuoted(s, i), true
	case c == '/' && i+1 < len(s) && s[i+1] == '*':
		if j := strings.Index(s[i+2:], "*/"); j >= 0 {
			return i + j + 4, true
		}
		return len(s), true
	case c == '#' || c == '-' && i+1 < len(s) && s[i+1] == '-' && (i+2 == len(s) || s[i+2] <= ' '):
		if j := strings.IndexByte(s[i:], '\n'); j >= 0 {
			return i + j + 1, true
		}
		return len(s), true
	}
	return i, false
}

// SkipQuoted returns the index just past the quoted text that starts at
// s[i], honouring backslash escapes (not in identifiers) and doubled quotes.
func SkipQuoted(s string, i int) int {
	q := s[i]
	for j := i + 1; j < len(s); j++ {
		switch s[j] {
		case '\\':
			if q != '`' {
				j++
			}
		case q:
			if j+1 < len(s) && s[j+1] == q {
				j++
				continue
			}
			return j + 1
		}
	}
	return len(s)
}

// Placeholders counts the "?" placeholders of s outside quoted text and
// comments. ok is false when s also holds named or numbered placeholders
// (:name, $1), whose order against "?" a caller cannot tell.
func Placeholders(s string) (n int, ok bool) {
	if ReplaceNamedParams(s) != s {
		return 0, false
	}
	for i := 0; i < len(s); {
		if j, skipped := SkipNonCode(s, i); skipped {
			i = j
			continue
		}
		if s[i] == '?' {
			n++
		}
		i++
	}
	return n, true
}

// WhereStart counts the "?" placeholders of s before its last WHERE
// keyword outside parentheses, quoted text and comments: in a
// single-table UPDATE, the arguments from that index on are the WHERE
// clause's. ok is false when s has no such WHERE.
func WhereStart(s string) (n int, ok bool) {
	depth, count := 0, 0
	for i := 0; i < len(s); {
		if j, skipped := SkipNonCode(s, i); skipped {
			i = j
			continue
		}
		switch c := s[i]; {
		case c == '(':
			depth++
		case c == ')':
			depth--
		case c == '?':
			count++
		case depth == 0 && (c == 'w' || c == 'W') && i+5 <= len(s) && strings.EqualFold(s[i:i+5], "where") &&
			(i == 0 || !IsWordByte(s[i-1])) && (i+5 == len(s) || !IsWordByte(s[i+5])):
			n, ok = count, true
		}
		i++
	}
	return n, ok
}
