package sqlcheck

import (
	"testing"
)

func TestReplaceNamedParams(t *testing.T) {
	for in, want := range map[string]string{
		"WHERE id = :id AND attempt = :attempt": "WHERE id = ? AND attempt = ?",
		"SET @x := 1, y = ':no' -- :no\n":       "SET @x := 1, y = ':no' -- :no\n",
		"/* :c */ a = :p.q":                     "/* :c */ a = ?",
		"a::b `:x` \":y\"":                      "a::b `:x` \":y\"",
		"a = $1 AND b = $12, c$1, $d, '$2'":     "a = ? AND b = ?, c$1, $d, '$2'",
		"$1abc = $2":                            "$1abc = ?",
	} {
		if got := ReplaceNamedParams(in); got != want {
			t.Errorf("ReplaceNamedParams(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestParseTables(t *testing.T) {
	tables, err := ParseTables("refund_jobs, payouts:status:version:held_until")
	if err != nil {
		t.Fatal(err)
	}
	if len(tables) != 2 || tables[0] != (Table{"refund_jobs", "state", "attempt", "lease_until", "writer_attempt"}) ||
		tables[1] != (Table{"payouts", "status", "version", "held_until", "writer_attempt"}) {
		t.Errorf("ParseTables = %+v", tables)
	}
	tables, err = ParseTables("payouts:status:version:held_until:declared_version")
	if err != nil || tables[0].Writer != "declared_version" {
		t.Errorf("ParseTables with a writer column = %+v, %v", tables, err)
	}
	for _, bad := range []string{"", "a:b:b", "a-b", "a,a", "a:b:c:d:e:f", "a:s:t:l:t", "a:s:t:s"} {
		if _, err := ParseTables(bad); err == nil {
			t.Errorf("ParseTables(%q) succeeded, want error", bad)
		}
	}
}

func TestWhereStart(t *testing.T) {
	for _, c := range []struct {
		s  string
		n  int
		ok bool
	}{
		{"UPDATE t SET a = ? WHERE id = ?", 1, true},
		{"UPDATE t SET a = ?, b = (SELECT x FROM y WHERE z = ?) WHERE id = ?", 2, true},
		{"UPDATE t SET a = '? where' WHERE id = ?", 0, true},
		{"UPDATE t SET nowhere = ? WHERE id = ?", 1, true},
		{"UPDATE t SET a = ? -- where ?\n", 0, false},
		{"update t set a = ? where id = ?", 1, true},
	} {
		n, ok := WhereStart(c.s)
		if n != c.n || ok != c.ok {
			t.Errorf("WhereStart(%q) = %d, %v; want %d, %v", c.s, n, ok, c.n, c.ok)
		}
	}
}

// TestQuestionKeysDoNotCollide: the helper's answers are remembered by
// question; a text that looks like a field separator must not make two
// questions one.
func TestQuestionKeysDoNotCollide(t *testing.T) {
	cfg := &Config{Tables: []Table{{Name: "refund_jobs"}}}
	qs := []request{
		{Config: cfg, Template: true, Parts: []Part{{Text: "UPDATE some_table SET a = 1 WHERE "}, {Hole: true}}},
		{Config: cfg, Template: true, Parts: []Part{{Text: `UPDATE some_table SET a = 1 WHERE " false 0 0 "" | "`}, {Text: "", Hole: true}}},
		{Config: cfg, Template: true, Parts: []Part{{Text: "UPDATE some_table SET a = 1 WHERE "}, {Hole: true, Param: 1}}},
		{Config: cfg, Template: true, Parts: []Part{{Text: "UPDATE some_table SET a = 1 WHERE "}, {Hole: true, Name: "cond"}}},
		{Config: cfg, Text: "UPDATE some_table SET a = 1 WHERE "},
		{Config: &Config{Tables: cfg.Tables, Delete: true}, Text: "UPDATE some_table SET a = 1 WHERE "},
		// One part that prints, under %+v, as the two parts after it.
		{Config: cfg, Template: true, Parts: []Part{{Text: "UPDATE some_table SET a = 1 WHERE Hole:false Param:0 Outer:0 Name:} {Text:x"}}},
		{Config: cfg, Template: true, Parts: []Part{{Text: "UPDATE some_table SET a = 1 WHERE"}, {Text: "x"}}},
		{Config: cfg, Text: "UPDATE some_table SET a = '\xff' WHERE "},
		{Config: cfg, Text: "UPDATE some_table SET a = '\ufffd' WHERE "},
	}
	seen := map[string]int{}
	for i, q := range qs {
		k := questionKey(q)
		if j, ok := seen[k]; ok {
			t.Errorf("questions %d and %d share the key %q", j, i, k)
		}
		seen[k] = i
	}
}
