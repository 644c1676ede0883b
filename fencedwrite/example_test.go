package fencedwrite_test

import (
	"context"
	"errors"
	"log"
	"time"

	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"

	"github.com/fencekit/fencekit/ent"
	"github.com/fencekit/fencekit/evidence"
	"github.com/fencekit/fencekit/fencedwrite"
	"github.com/fencekit/fencekit/ledger"
)

// A service enqueues a refund request; a worker claims it, calls the provider
// with no transaction open, and writes back through the fence. This is the
// README's example, compiled.
func Example() {
	ctx := context.Background()
	db, err := fencedwrite.OpenDB("app:secret@tcp(db:3306)/payments", fencedwrite.DSNOptions{})
	if err != nil {
		log.Fatal(err)
	}
	client := ent.NewClient(ent.Driver(entsql.OpenDB(dialect.MySQL, db)))

	req := ent.RefundJobEnqueue{OperationKey: "refund-123", PaymentRef: "pay-9", AmountMinor: 1250, Currency: "EUR"}
	job, _, err := client.RefundJob.Enqueue(ctx, req, ledger.Open(req))
	if err != nil {
		log.Fatal(err)
	}

	lease, err := client.RefundJob.Claim(ctx, job.ID, fencedwrite.ClaimOptions{Lease: 30 * time.Second})
	if err != nil {
		// ErrCommitUnknown: do not call the provider, do not retry.
		log.Fatal(err)
	}

	providerRefundID, raw := "re_1", []byte(`{"id":"re_1","status":"succeeded"}`) // the provider's verified answer

	err = client.RefundJob.Apply(ctx, lease.Complete(providerRefundID), ledger.Refunded(req.OperationKey, providerRefundID))
	switch {
	case err == nil, errors.Is(err, fencedwrite.ErrAlreadySettled):
		// Done.
	case errors.Is(err, fencedwrite.ErrSuperseded):
		// Another worker took over: keep the receipt as evidence, and stop.
		_, _, err = evidence.Record(ctx, client, evidence.Observation{
			OperationKey: req.OperationKey, JobID: job.ID, Attempt: lease.Attempt(),
			Source: evidence.ProviderResponse, ProviderRefundID: providerRefundID, Status: evidence.Succeeded, Payload: raw,
		})
	case errors.Is(err, fencedwrite.ErrCommitUnknown):
		// Do not act again until a read shows the truth.
	}
	if err != nil {
		log.Print(err)
	}
}
