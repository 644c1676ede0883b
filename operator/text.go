package operator

import (
	"strings"
	"time"

	"github.com/fencekit/fencekit/internal/term"
)

// TimeFormat is how both front ends print a database time: UTC, to the
// millisecond.
const TimeFormat = "2006-01-02 15:04:05.000 UTC"

// Stamp prints t as TimeFormat.
func Stamp(t time.Time) string { return t.UTC().Format(TimeFormat) }

// stampOf prints t, or "never".
func stampOf(t *time.Time) string {
	if t == nil {
		return "never"
	}
	return Stamp(*t)
}

// Visible returns s, which someone else wrote (a provider, a webhook, an
// operator's reason), safe to show a person deciding about money: control
// characters, bidirectional controls (U+202A to U+202E, U+2066 to U+2069)
// and other invisible format characters, line and paragraph separators and
// invalid UTF-8 are written out as Go quotes them ("\u202e"), so that a
// refund id or a reason cannot display as something else. Text that needs
// none is returned as is.
func Visible(s string) string { return term.Inert(s) }

// visibleLines is Visible for text of several lines: each line made
// visible, the line breaks kept.
func visibleLines(s string) string {
	s = strings.NewReplacer("\r\n", "\n").Replace(s)
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = Visible(l)
	}
	return strings.Join(lines, "\n")
}

// oneLine is s on one line, visible, at most 160 bytes (cut at a rune).
func oneLine(s string) string {
	s = Visible(strings.Join(strings.Fields(s), " "))
	if len(s) > 160 {
		cut := 157
		for cut > 0 && !utf8RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "..."
	}
	return s
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func utc(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

// quote is an operator's or provider's words inside a sentence.
func quote(s string) string { return "“" + oneLine(s) + "”" }
