package evidence_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fencekit/fencekit/evidence"
	"github.com/fencekit/fencekit/fencedwrite"
	"github.com/fencekit/fencekit/internal/dbtest"
)

func TestRecordDeduplicatesAndStampsDatabaseTime(t *testing.T) {
	d := dbtest.New(t)
	c := d.Client()
	ctx := t.Context()
	o := evidence.Observation{OperationKey: "k", JobID: 3, Attempt: 7, Source: evidence.ProviderResponse,
		ProviderRefundID: "re_1", Status: evidence.Succeeded, Payload: []byte(`{"id":"re_1","status":"succeeded"}`)}
	id, created, err := evidence.Record(ctx, c, o)
	if err != nil || !created {
		t.Fatalf("first record: %d %v %v", id, created, err)
	}
	again, created, err := evidence.Record(ctx, c, o)
	if err != nil || created || again != id {
		t.Fatalf("the same evidence again: id %d created %v err %v; want the first row %d", again, created, err, id)
	}
	// Other evidence about the same refund is a new row; a webhook is
	// identified by its event id, whatever its payload.
	other := o
	other.Source, other.Attempt = evidence.Reconcile, 8
	if _, created, err := evidence.Record(ctx, c, other); err != nil || !created {
		t.Fatalf("reconcile evidence: %v %v", created, err)
	}
	hook := evidence.Observation{OperationKey: "k", Source: evidence.Webhook, Status: evidence.Succeeded, Payload: []byte("a"), EventID: "evt_1"}
	if _, created, _ := evidence.Record(ctx, c, hook); !created {
		t.Fatal("webhook not recorded")
	}
	hook.Payload = []byte("redelivered with other headers")
	if _, created, _ := evidence.Record(ctx, c, hook); created {
		t.Fatal("a redelivered webhook was recorded twice")
	}

	log, err := evidence.ForKey(ctx, c, "k")
	if err != nil {
		t.Fatal(err)
	}
	if len(log) != 3 {
		t.Fatalf("log has %d entries, want 3", len(log))
	}
	var dbNow time.Time
	if err := d.RawDB().QueryRow("SELECT UTC_TIMESTAMP(6)").Scan(&dbNow); err != nil {
		t.Fatal(err)
	}
	if got := log[0]; got.Attempt != 7 || got.JobID != 3 || got.ProviderRefundID != "re_1" || dbNow.Sub(got.ReceivedAt) < 0 || dbNow.Sub(got.ReceivedAt) > time.Minute {
		t.Fatalf("entry = %+v (database now %v)", got, dbNow)
	}
}

func TestRecordRefusesBadInputNamingFields(t *testing.T) {
	c := dbtest.New(t).Client()
	_, _, err := evidence.Record(t.Context(), c, evidence.Observation{Source: "email", Status: "maybe"})
	if !errors.Is(err, fencedwrite.ErrInvalid) {
		t.Fatalf("got %v, want ErrInvalid", err)
	}
	for _, want := range []string{"operation_key: must not be empty", `source: unknown source "email"`, `provider_status: unknown status "maybe"`, "payload: must not be empty"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

func TestMarkProcessedOnce(t *testing.T) {
	c := dbtest.New(t).Client()
	ctx := t.Context()
	id, _, err := evidence.Record(ctx, c, evidence.Observation{OperationKey: "k", Source: evidence.Webhook, Status: evidence.Pending, Payload: []byte("p")})
	if err != nil {
		t.Fatal(err)
	}
	pending, err := evidence.Unprocessed(ctx, c, 10)
	if err != nil || len(pending) != 1 || pending[0].ID != id {
		t.Fatalf("unprocessed = %+v, %v", pending, err)
	}
	if err := evidence.MarkProcessed(ctx, c, id); err != nil {
		t.Fatal(err)
	}
	if err := evidence.MarkProcessed(ctx, c, id); !errors.Is(err, evidence.ErrAlreadyProcessed) {
		t.Fatalf("second mark: %v, want ErrAlreadyProcessed", err)
	}
	if pending, _ := evidence.Unprocessed(ctx, c, 10); len(pending) != 0 {
		t.Fatalf("still unprocessed: %+v", pending)
	}
}
