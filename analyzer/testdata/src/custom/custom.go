// Package custom is checked with
// -sinks=runSQL,custom/dbx.Pool.Do,custom/dbx.Send: in-house wrappers that
// analysis cannot see through.
package custom

import (
	"context"
	"os"

	"custom/dbx"
)

var where = os.Getenv("WHERE")

func runSQL(ctx context.Context, q string) {}

func calls(ctx context.Context, p *dbx.Pool) {
	runSQL(ctx, "UPDATE refund_jobs SET state = 'ready' WHERE "+where) // want `the fence of this UPDATE cannot be proven: its WHERE is built at run time from where`
	p.Do(ctx, "UPDATE refund_jobs SET state = 'ready' WHERE "+where)   // want `the fence of this UPDATE cannot be proven: its WHERE is built at run time from where`
	dbx.Send(1, "UPDATE refund_jobs SET state = 'ready' WHERE "+where) // want `the fence of this UPDATE cannot be proven: its WHERE is built at run time from where`
	p.Other(ctx, "UPDATE refund_jobs SET state = 'ready' WHERE "+where)
	runSQL(ctx, "SELECT * FROM refund_jobs WHERE "+where)
}
