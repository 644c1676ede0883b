package sqlparse

import (
	"io"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/fencekit/fencekit/analyzer/internal/sqlcheck"
	"github.com/pingcap/log"
)

// TestTheHelperAnswersAsTheParser: fencelint asks the fencelint-sql helper
// (Serve, here at the other end of two pipes) what this package answers in
// process, and must get the same problems back, field for field, for every
// statement of the check cases and for templates made from each by
// turning every word in turn into a hole, under two configurations (the
// default, and two tables with DELETE judged). A field the wire dropped or
// renamed would show here.
func TestTheHelperAnswersAsTheParser(t *testing.T) {
	reqR, reqW := io.Pipe()
	ansR, ansW := io.Pipe()
	logs := &lockedBuffer{}
	served := make(chan error, 1)
	go func() {
		served <- Serve(reqR, ansW, logs)
		ansW.Close()
	}()
	j, err := sqlcheck.Connect(reqW, ansR)
	if err != nil {
		t.Fatal(err)
	}
	two, err := sqlcheck.ParseTables("refund_jobs,payouts:status:version:held_until:declared")
	if err != nil {
		t.Fatal(err)
	}
	configs := []*sqlcheck.Config{defaultConfig(t), {Tables: two, Delete: true}}
	asked, problems := 0, 0
	cases := parseCases(t)
	// Bytes that are not UTF-8 cross the wire as they are.
	cases = append(cases,
		checkCase{sql: "UPDATE refund_jobs SET note = '\xff\xfe' WHERE id = ?"}, //fencelint:allow an unfenced statement the judge must report, under test
		checkCase{sql: "UPDATE refund_jobs SET note = ? WHERE id = ? AND state = ? AND attempt = ? AND \xc3 SOUNDS LIKE x"},
		checkCase{sql: "UPDATE `refund_jobs` r SET r.state = ? WHERE r.id = ?; UPDATE refund_jobs SET note = '\x80' WHERE ~~ id = ?"}) //fencelint:allow unfenced statements the judge must report, under test
	for _, tc := range cases {
		for _, cfg := range configs {
			want, got := check(tc.sql, cfg), j.Check(tc.sql, cfg)
			asked++
			problems += len(want)
			if !sameProblems(got, want) {
				t.Errorf("Check(%q, %+v) through the helper = %+v, in process %+v", tc.sql, *cfg, got, want)
			}
			words := strings.Fields(tc.sql)
			for i := range words {
				parts := []sqlcheck.Part{
					{Text: strings.Join(words[:i], " ") + " "},
					{Hole: true, Param: 1, Name: "cond"},
					{Text: " " + strings.Join(words[i+1:], " ")},
				}
				want, got := checkTemplate(parts, cfg), j.CheckTemplate(parts, cfg)
				asked++
				problems += len(want)
				if !sameProblems(got, want) {
					t.Errorf("CheckTemplate(%+v, %+v) through the helper = %+v, in process %+v", parts, *cfg, got, want)
				}
			}
		}
	}
	t.Logf("%d questions, %d problems, the same through the helper", asked, problems)
	if problems < 100 {
		t.Fatalf("only %d problems among the answers: the comparison proves little", problems)
	}
	reqW.Close()
	if err := <-served; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	// The parser's logger no longer writes on the answers' stream.
	log.Warn("fencelint-sql log probe")
	if !strings.Contains(logs.String(), "fencelint-sql log probe") {
		t.Fatalf("the parser's log went elsewhere than Serve's logs: %q", logs.String())
	}
}

// sameProblems compares answers, an empty list equal to none.
func sameProblems(a, b []sqlcheck.Problem) bool {
	if len(a) == 0 && len(b) == 0 {
		return true
	}
	return reflect.DeepEqual(a, b)
}

type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
