package sqltext

import (
	"slices"
	"testing"
)

func keywords(stmts []Statement) []string {
	var out []string
	for _, s := range stmts {
		k := s.Keyword
		if s.Executable {
			k += "!"
		}
		out = append(out, k)
	}
	return out
}

func TestSplit(t *testing.T) {
	for _, tc := range []struct {
		query string
		want  []string
	}{
		{"SELECT 1", []string{"SELECT"}},
		{"  (SELECT 1) UNION (SELECT 2)", []string{"SELECT"}},
		{"DO 0; COMMIT", []string{"DO", "COMMIT"}},
		{"DO 0;COMMIT;", []string{"DO", "COMMIT"}},
		{"SELECT ';COMMIT' ; DO 1", []string{"SELECT", "DO"}},
		{`SELECT 'it\'s;' ; DO 1`, []string{"SELECT", "DO"}},
		{`SELECT 'it''s;' ; DO 1`, []string{"SELECT", "DO"}},
		{`SELECT "a;b"`, []string{"SELECT"}},
		{"SELECT `a;b` FROM t", []string{"SELECT"}},
		{"SELECT 1 -- ; COMMIT\n; DO 2", []string{"SELECT", "DO"}},
		{"SELECT 1 --; COMMIT", []string{"SELECT", "COMMIT"}}, // "--" without a space is arithmetic
		{"SELECT 1 # ; COMMIT", []string{"SELECT"}},
		{"/* COMMIT; */ SELECT 1", []string{"SELECT"}},
		{"/*! COMMIT */", []string{"COMMIT!"}},
		{"/*!50110 SET NAMES gbk */", []string{"SET!"}},
		{"/*M!100101 SET autocommit=0 */", []string{"SET!"}},
		{"SELECT 1 /*! ; COMMIT */", []string{"SELECT!", "COMMIT!"}},
		{"/*+ BKA(t) */ SELECT 1", []string{"SELECT"}},
		{"", nil},
		{" ; ; -- nothing", nil},
		{"SELECT 'unterminated; COMMIT", []string{"SELECT"}},
		{"@x := 1", []string{""}},
	} {
		if got := keywords(Split(tc.query)); !slices.Equal(got, tc.want) {
			t.Errorf("Split(%q) = %q, want %q", tc.query, got, tc.want)
		}
	}
}
