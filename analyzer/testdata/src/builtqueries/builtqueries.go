// Package builtqueries checks queries built by other means than
// concatenation: fmt.Fprint and Fprintln into a builder, text/template
// and html/template text, strings.Join of literal clauses, and query
// strings that travel through a channel or a map before they are run.
package builtqueries

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	htmltemplate "html/template"
	"strconv"
	"strings"
	"text/template"
)

func fprint(ctx context.Context, db *sql.DB, id int64) {
	var b strings.Builder
	fmt.Fprint(&b, "UPDATE refund_jobs SET state = 'ready' WHERE id = ", strconv.FormatInt(id, 10))
	db.ExecContext(ctx, b.String()) // want `the fence of this UPDATE cannot be proven: its WHERE is built at run time from strconv\.FormatInt\(id, 10\)`

	var buf bytes.Buffer
	fmt.Fprintln(&buf, "UPDATE refund_jobs SET state = 'ready' WHERE id = ? AND state = 'running' AND attempt = ?")
	db.ExecContext(ctx, buf.String(), id, 1)
}

// The template text is judged where it is parsed: an action is a value
// known at run time.
var requeueTmpl = template.Must(template.New("requeue").Parse("UPDATE refund_jobs SET state = 'ready' WHERE id = {{.ID}}")) // want `query built at run time writes refund_jobs`

var patchTmpl = template.Must(template.New("patch").Parse(
	"UPDATE refund_jobs SET state = ?{{if .Error}}, last_error = ?{{end}} WHERE id = ? AND state = ? AND attempt = ?"))

// A template without actions is constant SQL.
var fencedTmpl = template.Must(template.New("fenced").Parse("REPLACE INTO refund_jobs (id, state) VALUES (?, ?)")) // want `REPLACE writes existing refund_jobs rows and cannot be fenced`

var htmlTmpl = htmltemplate.Must(htmltemplate.New("h").Parse("UPDATE refund_jobs SET state = 'x' WHERE id = ?{{.More}}")) // want `query built at run time writes refund_jobs`

func fromTemplate(ctx context.Context, db *sql.DB, id int64) error {
	var b bytes.Buffer
	if err := requeueTmpl.Execute(&b, map[string]any{"ID": id}); err != nil {
		return err
	}
	_, err := db.ExecContext(ctx, b.String())
	return err
}

func joined(ctx context.Context, db *sql.DB, id int64) {
	db.ExecContext(ctx, "UPDATE refund_jobs SET state = 'x' WHERE "+strings.Join([]string{"id = ?", "state = ?"}, " AND "), id, "running") // want `unfenced UPDATE of refund_jobs: WHERE lacks attempt = \?`
}

// A queue of statements run by one writer goroutine.
func viaChannel(ctx context.Context, db *sql.DB, ids []int64) {
	queries := make(chan string)
	go func() {
		defer close(queries)
		for _, id := range ids {
			queries <- "UPDATE refund_jobs SET state = 'ready' WHERE id = " + strconv.FormatInt(id, 10)
		}
	}()
	for q := range queries {
		db.ExecContext(ctx, q) // want `the fence of this UPDATE cannot be proven: its WHERE is built at run time from strconv\.FormatInt\(id, 10\)`
	}
}

// Statements kept in a map by name.
func viaMap(ctx context.Context, db *sql.DB, id int64, attempt int) {
	stmts := map[string]string{}
	stmts["requeue"] = "UPDATE refund_jobs SET state = 'ready' WHERE id = " + strconv.FormatInt(id, 10)
	stmts["finish"] = "UPDATE refund_jobs SET state = 'succeeded', finished_at = NOW() - INTERVAL " + strconv.Itoa(attempt) + " SECOND WHERE id = ? AND state = ? AND attempt = ?"
	db.ExecContext(ctx, stmts["requeue"]) // want `the fence of this UPDATE cannot be proven: its WHERE is built at run time from strconv\.FormatInt\(id, 10\)`
	db.ExecContext(ctx, stmts["finish"], id, "running", attempt)
}
