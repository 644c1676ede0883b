//go:build !tidb

// The key registry against the application's account: MySQL and MariaDB
// only (TiDB has no triggers; fencedwrite's TestKeyWithoutAJobIsNeverArchived
// shows what the Go layer does there with a key registered alone).

package migrations_test

import (
	"testing"

	"github.com/fencekit/fencekit/ent"
	"github.com/fencekit/fencekit/fencedwrite"
	"github.com/fencekit/fencekit/internal/dbtest"
	"github.com/fencekit/fencekit/ledger"
)

// A row of refund_jobs_keys is written only together with its job. Two
// attacks by the application's own account once made Enqueue answer
// ErrKeyArchived for a key that never had a job, so that the refund was
// never paid: registering a key alone, and binding a registered key through
// an INSERT … ON DUPLICATE KEY UPDATE of refund_jobs that inserts no row.
// Neither leaves a registration behind now, and Enqueue then creates the
// job.
func TestFenceKeyIsRegisteredOnlyWithItsJob(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	app, c := appAccount(t, d)
	ctx := t.Context()
	const alone = "INSERT INTO refund_jobs_keys (operation_key, payment_ref, amount_minor, currency, registered_at) " +
		"VALUES (?, ?, 1250, 'EUR', UTC_TIMESTAMP(6))"
	request := func(key string) ent.RefundJobEnqueue {
		return ent.RefundJobEnqueue{OperationKey: key, PaymentRef: "pay-" + key, AmountMinor: 1250, Currency: "EUR"}
	}
	registrations := func(key string) int {
		t.Helper()
		var n int
		if err := app.QueryRowContext(ctx, "SELECT COUNT(*) FROM refund_jobs_keys WHERE operation_key = ?", key).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	// enqueued wants Enqueue to create key's job, and a claim to take it.
	enqueued := func(t *testing.T, key string) *ent.RefundJob {
		t.Helper()
		job, created, err := c.RefundJob.Enqueue(ctx, request(key), ledger.Open(request(key)))
		if err != nil || !created {
			t.Fatalf("enqueue %s: created=%v err=%v; want its job created", key, created, err)
		}
		if _, err := c.RefundJob.Claim(ctx, job.ID, fencedwrite.ClaimOptions{}); err != nil {
			t.Fatalf("claim the new job of %s: %v", key, err)
		}
		return job
	}

	t.Run("a key registered alone is refused, and its request is then enqueued", func(t *testing.T) {
		refused(t, app, "a key is registered only together with its job", alone, "alone-1", "pay-alone-1")
		if n := registrations("alone-1"); n != 0 {
			t.Fatalf("%d registrations of alone-1 without a job", n)
		}
		enqueued(t, "alone-1")
	})

	t.Run("an upsert that inserts no job registers no key", func(t *testing.T) {
		// The victim is a ready job, on which the update half is a wake-up.
		victim, _, err := c.RefundJob.Enqueue(ctx, request("victim"), nil)
		if err != nil {
			t.Fatal(err)
		}
		// The attack as it worked: the key registered alone (refused now),
		// then bound by an upsert whose row is a duplicate of another job,
		// whose update half is a legal no-op.
		_, _ = app.ExecContext(ctx, alone, "upsert-1", "pay-upsert-1")
		//fencelint:allow the attack: an upsert whose insert half would bind a key and whose update half declares the victim's own attempt
		_, _ = app.ExecContext(ctx, "INSERT INTO refund_jobs (id, operation_key, payment_ref, amount_minor, currency, next_run_at, created_at, updated_at) "+
			"VALUES (?, 'upsert-1', 'pay-upsert-1', 1250, 'EUR', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), UTC_TIMESTAMP(6)) "+
			"ON DUPLICATE KEY UPDATE writer_attempt = attempt", victim.ID)
		if n := registrations("upsert-1"); n != 0 {
			t.Fatalf("%d registrations of upsert-1, whose upsert inserted no job", n)
		}
		enqueued(t, "upsert-1")
	})
}
