package unprovable

import (
	"context"
	"database/sql"
	"strconv"
	"testing"

	"example.com/assert"
)

// 8. SQL text in a test's table of expectations never reaches a sink: it
// is no write.

func buildRequeue(cond string) string {
	return "UPDATE refund_jobs SET state = 'ready' WHERE " + cond
}

func TestBuildRequeue(t *testing.T) {
	cases := []struct {
		name, cond, want string
	}{
		{"by id", "id = ?", "UPDATE refund_jobs SET state = 'ready' WHERE id = ?"},
		{name: "fenced", cond: fenced, want: "UPDATE refund_jobs SET state = 'ready' WHERE " + fenced},
	}
	for _, c := range cases {
		if got := buildRequeue(c.cond); got != c.want {
			t.Errorf("%s: got %q", c.name, got)
		}
	}
	if buildRequeue("id = 1") != "UPDATE refund_jobs SET state = 'ready' WHERE id = 1" {
		t.Error("literal")
	}
	assert.Equal(t, "UPDATE refund_jobs SET state = 'ready' WHERE id = 2", buildRequeue("id = 2"))
}

// A table whose queries a test runs is a table of writes: its SQL is
// judged where it stands.
func TestResetFixtures(t *testing.T) {
	var db *sql.DB
	fixtures := []struct {
		query string
		args  []any
	}{
		{"UPDATE refund_jobs SET state = 'ready' WHERE id = ?", []any{1}}, // want `unfenced UPDATE of refund_jobs: WHERE lacks state = \? and attempt = \?`
		{"UPDATE refund_jobs SET state = 'ready' WHERE " + fenced, []any{2, "failed", 1}},
		{"UPDATE refund_jobs SET state = 'ready' WHERE id = " + strconv.Itoa(3), nil},
	}
	for _, f := range fixtures {
		db.ExecContext(context.Background(), f.query, f.args...) // want `the fence of this UPDATE cannot be proven: its WHERE is built at run time from strconv.Itoa\(3\)`
	}
	// Outside a table, a test's write is a write.
	db.ExecContext(context.Background(), "UPDATE refund_jobs SET state = 'ready' WHERE id = 3") // want `unfenced UPDATE of refund_jobs`
}
