// Package embedded checks SQL in embedded files, judged like constants.
package embedded

import (
	"context"
	"database/sql"
	"embed"
	"io/fs"
	"os"
)

//go:embed reset.sql
var resetSQL string // want `reset.sql: unfenced UPDATE of refund_jobs`

//go:embed complete.sql
var completeSQL []byte

// Each file of a file system is judged at the declaration; _ignored.sql is
// not embedded.
//
//go:embed queries
var queries embed.FS // want `queries/upsert.sql: INSERT … ON DUPLICATE KEY UPDATE writes existing refund_jobs rows and cannot be fenced` `queries/wake.sql: unfenced UPDATE of refund_jobs`

func use(ctx context.Context, db *sql.DB) error {
	db.ExecContext(ctx, resetSQL)
	db.ExecContext(ctx, string(completeSQL))
	b, err := queries.ReadFile("queries/fenced.sql")
	if err != nil {
		return err
	}
	db.ExecContext(ctx, string(b))
	db.ExecContext(ctx, string(b)+" "+os.Getenv("EXTRA")) // want `the fence of this UPDATE cannot be proven: its WHERE is built at run time from os\.Getenv\("EXTRA"\)`
	r, _ := fs.ReadFile(queries, "queries/read.sql")
	db.QueryContext(ctx, string(r)+os.Getenv("EXTRA"))
	return nil
}
