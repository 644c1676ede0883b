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
			b.WriteString(Escape(r))
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func unsafe(r rune) bool { return Hides(r) }

// Escape writes r as Go quotes it in a string ("\n", "\x1b", "\u202e"), and
// a character Go would print as itself (a Hangul filler, the braille blank)
// as its code point all the same.
func Escape(r rune) string {
	q := strconv.QuoteRune(r)
	if q = q[1 : len(q)-1]; q != string(r) {
		return q
	}
	if r > 0xFFFF {
		return fmt.Sprintf(`\U%08x`, r)
	}
	return fmt.Sprintf(`\u%04x`, r)
}

// Hides reports whether r can hide, fake or reorder text where a person
// reads it: control characters, format characters (the bidirectional
// overrides and isolates, zero-width joiners), line and paragraph
// separators, the default-ignorable characters that draw nothing (the
// Hangul fillers, the combining grapheme joiner, the variation
// selectors), and the braille blank, which draws a space that is not one.
// The terminal, the console's pages and the CLI's JSON all show such a
// character escaped, by this one rule.
func Hides(r rune) bool {
	return unicode.IsControl(r) || r == '\u2800' ||
		unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp, unicode.Other_Default_Ignorable_Code_Point, unicode.Variation_Selector)
}
