// Package entbuild checks Ent's dialect/sql builders and the generated
// upsert builder on the fenced table.
package entbuild

import (
	"context"

	"entgo.io/ent/dialect/sql"
	"example.com/app/ent"
)

func builders(ctx context.Context, client *ent.Client, id, attempt int64, cur string) {
	sql.Update("refund_jobs").Set("state", "ready").Where(sql.And(sql.EQ("id", id), sql.EQ("state", cur), sql.EQ("attempt", attempt))).Query()
	sql.Dialect("mysql").Update(ent.RefundJobFencedTable).Set("state", "ready").Where(sql.EQ("state", cur)).Where(sql.EQ("attempt", attempt)).Query()

	sql.Update("refund_jobs").Set("state", "ready").Where(sql.EQ("id", id)).Query()                                                                // want `sql.Update: unfenced UPDATE of refund_jobs: WHERE lacks state = \? and attempt = \?`
	sql.Update("refund_jobs").Set("state", "ready").Where(sql.Or(sql.EQ("state", cur), sql.EQ("attempt", attempt))).Query()                        // want `lacks state = \? and attempt = \?`
	sql.Update("refund_jobs").Add("attempt", 1).Where(sql.EQ("state", cur)).Query()                                                                // want `lacks attempt = \?`
	sql.Update("refund_jobs").Set("writer_attempt", sql.Expr("attempt")).Where(sql.And(sql.EQ("state", cur), sql.EQ("attempt", attempt))).Query()  // want `sets writer_attempt from the row's own attempt`
	sql.Insert("refund_jobs").Columns("id", "state").Values(id, "ready").OnConflict(sql.ConflictColumns("id"), sql.ResolveWithNewValues()).Query() // want `sql.Insert: INSERT … ON DUPLICATE KEY UPDATE writes existing refund_jobs rows`

	sql.Insert("refund_jobs").Columns("id").Values(id).OnConflict(sql.ConflictColumns("id"), sql.DoNothing()).Query()
	sql.Insert("refund_jobs").Columns("id").Values(id).Query()
	sql.Update("refunds").Set("status", "paid").Where(sql.EQ("id", id)).Query()

	// The generated upsert builder.
	client.RefundJob.Create().SetState("ready").OnConflict().UpdateNewValues().Exec(ctx) // want `RefundJobCreate.OnConflict makes an upsert, which writes existing refund_jobs rows and cannot be fenced`
	client.RefundJob.Create().OnConflictColumns("id").UpdateNewValues().Exec(ctx)        // want `RefundJobCreate.OnConflictColumns makes an upsert`
	client.RefundJob.CreateBulk().OnConflict().UpdateNewValues().Exec(ctx)               // want `RefundJobCreateBulk.OnConflict makes an upsert`
}
