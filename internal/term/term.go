// Package term makes text that others wrote safe to print on an
// operator's terminal.
package term

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Inert returns s with control characters (ESC sequences can erase or
// rewrite lines, CR and LF can forge a row or end a SQL comment), Unicode
// format characters (bidi overrides reorder what is read), line and
// paragraph separators and invalid UTF-8 escaped as Go quotes them ("\n",
// "\x1b", "\u202e"). Text that needs none is returned as is.
func Inert(s string) string {
	if !strings.ContainsFunc(s, unsafe) && utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i, r := range s {
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD"):
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case unsafe(r):
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func unsafe(r rune) bool {
	return unicode.IsControl(r) || unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp)
}
