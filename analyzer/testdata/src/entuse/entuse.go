// Package entuse checks calls of Ent's generic builders on fenced entities.
package entuse

import (
	"context"

	"example.com/app/ent"
)

func builders(ctx context.Context, client *ent.Client, job *ent.RefundJob) error {
	client.RefundJob.UpdateOneID(job.ID).SetState("ready").Exec(ctx) // want `RefundJob.UpdateOneID bypasses the fence on refund_jobs: write through the fenced API \(a RefundJobLease from Claim/Takeover, applied with RefundJobClient.Apply\)`
	client.RefundJob.UpdateOne(job).SetState("ready").Exec(ctx)      // want `RefundJob.UpdateOne bypasses the fence on refund_jobs`
	client.RefundJob.Update().SetState("ready").Save(ctx)            // want `RefundJob.Update bypasses the fence on refund_jobs`

	tx, err := client.Tx(ctx)
	if err != nil {
		return err
	}
	tx.RefundJob.UpdateOneID(job.ID).Exec(ctx) // want `RefundJob.UpdateOneID bypasses the fence`

	// Modify on builders obtained elsewhere.
	var u *ent.RefundJobUpdateOne
	u.Modify() // want `RefundJobUpdateOne.Modify bypasses the fence on refund_jobs`
	var bulk *ent.RefundJobUpdate
	bulk.Modify() // want `RefundJobUpdate.Modify bypasses the fence on refund_jobs`

	// A method value is a use too.
	update := client.RefundJob.UpdateOneID // want `RefundJob.UpdateOneID bypasses the fence`
	_ = update

	// Reads, creates and the fenced API are fine; deletes need -delete.
	client.RefundJob.Query().All(ctx)
	client.RefundJob.Get(ctx, job.ID)
	client.RefundJob.Create().Save(ctx)
	client.RefundJob.DeleteOneID(job.ID).Exec(ctx)
	lease, _ := client.RefundJob.Claim(ctx, job.ID)
	client.RefundJob.Apply(ctx, lease.Complete(), func(context.Context, *ent.Tx) error { return nil })

	// Entities whose tables are not fenced.
	client.Refund.UpdateOneID(1).Modify()
	client.AuditEntry.Update()
	return nil
}
