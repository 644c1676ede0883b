package term

import "testing"

func TestInert(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"plain text, ünïcode 12.50 €", "plain text, ünïcode 12.50 €"},
		{"a\nb\rc\td", `a\nb\rc\td`},
		{"\x1b[2Jcleared", `\x1b[2Jcleared`},
		{"evil\u202etxt.exe", `evil\u202etxt.exe`},
		{"line\u2028sep", `line\u2028sep`},
		{"bad \xff byte", `bad \xff byte`},
		{"a real \uFFFD stays", "a real \uFFFD stays"},
		// Characters that draw nothing, or a blank that is not a space:
		// the Hangul fillers, the braille blank, the combining grapheme
		// joiner, a variation selector.
		{"re\u3164_3", `re\u3164_3`},
		{"re\u115f\u1160_3", `re\u115f\u1160_3`},
		{"re\uffa0_3", `re\uffa0_3`},
		{"re\u2800_3", `re\u2800_3`},
		{"re\u034f_3", `re\u034f_3`},
		{"re\ufe0f_3", `re\ufe0f_3`},
	} {
		if got := Inert(tc.in); got != tc.want {
			t.Errorf("Inert(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
