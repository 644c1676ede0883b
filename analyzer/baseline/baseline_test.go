package baseline

import (
	"errors"
	"go/token"
	"reflect"
	"strings"
	"testing"
)

// TestFormatParseRoundTrip: odd fields (spaces, quotes, a leading #, a
// newline in a message) are quoted and read back; the output is sorted and
// the same for the same entries in any order.
func TestFormatParseRoundTrip(t *testing.T) {
	es := []Entry{
		{Key: Key{"example.com/b", "b/b.go", "F", "m"}, Count: 1},
		{Key: Key{"example.com/a", "a/my file.go", "T.M", `"quoted" first`}, Count: 2},
		{Key: Key{"example.com/a", "#a.go", PackageLevel, "two\nlines "}, Count: 3},
		{Key: Key{"example.com/a", "a/a.go", "F", "unfenced UPDATE of refund_jobs: WHERE lacks state = ?; add AND state = ? AND attempt = ?"}, Count: 1},
	}
	text := Format(es)
	rev := append([]Entry(nil), es...)
	for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
		rev[i], rev[j] = rev[j], rev[i]
	}
	if string(Format(rev)) != string(text) {
		t.Errorf("Format depends on the order of its entries")
	}
	b, err := Parse("x.baseline", text)
	if err != nil {
		t.Fatalf("Parse(Format(...)): %v\n%s", err, text)
	}
	got := map[Key]int{}
	for _, e := range b.Entries {
		got[e.Key] = e.Count
	}
	for _, e := range es {
		if got[e.Key] != e.Count {
			t.Errorf("entry %+v read back as count %d; file:\n%s", e.Key, got[e.Key], text)
		}
	}
	var keys []Key
	for _, e := range b.Entries {
		keys = append(keys, e.Key)
	}
	for i := 1; i < len(keys); i++ {
		if !Less(keys[i-1], keys[i]) {
			t.Errorf("file not sorted at entry %d:\n%s", i, text)
		}
	}
}

func TestParseErrorsNameFileAndLine(t *testing.T) {
	for _, c := range []struct{ text, want string }{
		{"p f F 0 m", `x.baseline:1: count "0" is not a positive integer`},
		{"\n\np f F -2 m", `x.baseline:3: count "-2" is not a positive integer`},
		{"p f", "x.baseline:1: missing function"},
		{"p f F 1", "x.baseline:1: missing message"},
		{"p f F 1   ", "x.baseline:1: missing message"},
		{`p "f F 1 m`, "x.baseline:1: file: starts with '\"' but is not a Go string literal"},
		{`p "f"x F 1 m`, "x.baseline:1: file: text after the closing quote"},
		{"p f F 1 \"m", "x.baseline:1: message starts with '\"' but is not a Go string literal"},
		{"p f F 1 m\np f F 1 m", "x.baseline:2: entry repeats line 1"},
	} {
		_, err := Parse("x.baseline", []byte(c.text))
		var se *SyntaxError
		if !errors.As(err, &se) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Parse(%q) = %v, want a *SyntaxError containing %q", c.text, err, c.want)
		}
	}
}

// TestRewriteOnlyShrinks: fixed entries and counts come down; findings
// beyond the old baseline stay out unless add; entries the run did not
// judge are kept unless their file is gone; a new baseline takes all.
func TestRewriteOnlyShrinks(t *testing.T) {
	k := func(fn string) Key { return Key{"p", "f.go", fn, "m"} }
	found := func(fns ...string) []Found {
		var fs []Found
		for i, fn := range fns {
			fs = append(fs, Found{Key: k(fn), Pos: token.Position{Filename: "f.go", Line: i + 1}})
		}
		return fs
	}
	old := &Baseline{Entries: []Entry{
		{Key: k("Fixed"), Count: 1, Line: 1},
		{Key: k("Lowered"), Count: 3, Line: 2},
		{Key: k("Same"), Count: 1, Line: 3},
		{Key: k("Grown"), Count: 1, Line: 4},
		{Key: Key{"q", "g.go", "Unseen", "m"}, Count: 2, Line: 5},
		{Key: Key{"q", "gone.go", "Gone", "m"}, Count: 1, Line: 6},
	}}
	judged := func(k Key) bool { return k.Package == "p" }
	gone := func(k Key) bool { return k.File == "gone.go" }
	now := found("Lowered", "Same", "Grown", "Grown", "New")

	u := Rewrite(old, now, judged, gone, false)
	want := []Entry{
		{Key: k("Grown"), Count: 1},
		{Key: k("Lowered"), Count: 1},
		{Key: k("Same"), Count: 1},
		{Key: Key{"q", "g.go", "Unseen", "m"}, Count: 2},
	}
	if !reflect.DeepEqual(u.Entries, want) {
		t.Errorf("entries:\n%+v\nwant:\n%+v", u.Entries, want)
	}
	if len(u.Removed) != 3 || len(u.NotAdded) != 2 || len(u.Added) != 0 {
		t.Errorf("removed %+v, not added %+v, added %+v: want 3 removed (Fixed, 2 of Lowered, Gone), 2 left out (a Grown, New)", u.Removed, u.NotAdded, u.Added)
	}

	u = Rewrite(old, now, judged, gone, true)
	counts := map[string]int{}
	for _, e := range u.Entries {
		counts[e.Func] = e.Count
	}
	if counts["Grown"] != 2 || counts["New"] != 1 || counts["Fixed"] != 0 || len(u.Added) != 2 || len(u.NotAdded) != 0 {
		t.Errorf("with add: entries %+v, added %+v", u.Entries, u.Added)
	}

	u = Rewrite(nil, now, judged, gone, false)
	if len(u.Entries) != 4 || len(u.Added) != 5 || len(u.NotAdded) != 0 {
		t.Errorf("new baseline: entries %+v, added %d, left out %d", u.Entries, len(u.Added), len(u.NotAdded))
	}
}
