package fencedwrite_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fencekit/fencekit/ent"
	"github.com/fencekit/fencekit/ent/refundjob"
	"github.com/fencekit/fencekit/ent/refundjobattempt"
	"github.com/fencekit/fencekit/fencedwrite"
	"github.com/fencekit/fencekit/internal/dbtest"
)

// attemptRow is one row of the attempts log, as a test compares it.
type attemptRow struct {
	Attempt    int64
	Op         string
	Holder     string
	ClaimedAt  time.Time
	LeaseUntil time.Time // zero for NULL
}

// attempts reads job id's rows of the attempts log, by attempt.
func (e *env) attempts(id int64) []attemptRow {
	e.t.Helper()
	rows, err := e.c.RefundJobAttempt.Query().Where(refundjobattempt.JobID(id)).Order(refundjobattempt.ByAttempt()).All(e.t.Context())
	if err != nil {
		e.t.Fatal(err)
	}
	out := make([]attemptRow, len(rows))
	for i, r := range rows {
		out[i] = attemptRow{Attempt: r.Attempt, Op: string(r.Op), Holder: r.Holder, ClaimedAt: r.ClaimedAt}
		if r.LeaseUntil != nil {
			out[i].LeaseUntil = *r.LeaseUntil
		}
	}
	return out
}

func rowOf(l *ent.RefundJobLease, op, holder string) attemptRow {
	return attemptRow{Attempt: l.Attempt(), Op: op, Holder: holder, ClaimedAt: l.ClaimedAt(), LeaseUntil: l.LeaseUntil()}
}

func (e *env) wantAttempts(id int64, want ...attemptRow) {
	e.t.Helper()
	got := e.attempts(id)
	if !slices.EqualFunc(got, want, func(a, b attemptRow) bool {
		return a.Attempt == b.Attempt && a.Op == b.Op && a.Holder == b.Holder && a.ClaimedAt.Equal(b.ClaimedAt) && a.LeaseUntil.Equal(b.LeaseUntil)
	}) {
		e.t.Fatalf("job %d's attempts log:\n got  %+v\n want %+v", id, got, want)
	}
}

// Every committed claim and takeover leaves its row in the attempts log,
// written in its own transaction: which process took which attempt, when
// (the claim's reading of the database clock) and until when.
func TestClaimsAndTakeoversRecordTheirHolders(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()

	t.Run("a claim and the takeover that moved it on each name their process", func(t *testing.T) {
		job := e.enqueue("held")
		a, b := e.worker(), e.worker()
		la, err := a.RefundJob.Claim(ctx, job.ID, fencedwrite.ClaimOptions{Lease: time.Microsecond, Holder: "worker-a.example/101"})
		if err != nil {
			t.Fatal(err)
		}
		e.wantLeaseExpired(job.ID)
		lb, err := b.RefundJob.Takeover(ctx, job.ID, fencedwrite.ClaimOptions{Holder: "worker-b.example/202"})
		if err != nil {
			t.Fatal(err)
		}
		e.wantAttempts(job.ID, rowOf(la, fencedwrite.AttemptClaim, "worker-a.example/101"), rowOf(lb, fencedwrite.AttemptTakeover, "worker-b.example/202"))
		if j := e.job(job.ID); !j.LeaseUntil.Equal(lb.LeaseUntil()) {
			t.Errorf("the job holds lease %v; the log says %v", j.LeaseUntil, lb.LeaseUntil())
		}
	})

	t.Run("an empty holder records this process as hostname/pid", func(t *testing.T) {
		job := e.enqueue("default")
		l, err := e.c.RefundJob.Claim(ctx, job.ID, opts)
		if err != nil {
			t.Fatal(err)
		}
		if h := fencedwrite.DefaultHolder(); !strings.HasSuffix(h, fmt.Sprintf("/%d", os.Getpid())) {
			t.Errorf("default holder %q does not end with this process's id", h)
		}
		e.wantAttempts(job.ID, rowOf(l, fencedwrite.AttemptClaim, fencedwrite.DefaultHolder()))
	})

	t.Run("a batch claim and a batch takeover record every job they moved", func(t *testing.T) {
		ids := map[int64]bool{}
		for i := range 4 {
			ids[e.enqueue(fmt.Sprintf("batch-%d", i)).ID] = true
		}
		claimed, err := e.worker().RefundJob.ClaimDue(ctx, 10, fencedwrite.ClaimOptions{Lease: time.Microsecond, Holder: "batch-claimer"})
		if err != nil || len(claimed) != len(ids) {
			t.Fatalf("claimed %d of %d (%v)", len(claimed), len(ids), err)
		}
		for _, l := range claimed {
			e.wantLeaseExpired(l.ID())
		}
		taken, err := e.worker().RefundJob.TakeoverExpired(ctx, 10, fencedwrite.ClaimOptions{Holder: "batch-taker"})
		if err != nil || len(taken) != len(ids) {
			t.Fatalf("took over %d of %d (%v)", len(taken), len(ids), err)
		}
		byID := map[int64]*ent.RefundJobLease{}
		for _, l := range taken {
			byID[l.ID()] = l
		}
		for _, l := range claimed {
			e.wantAttempts(l.ID(), rowOf(l, fencedwrite.AttemptClaim, "batch-claimer"), rowOf(byID[l.ID()], fencedwrite.AttemptTakeover, "batch-taker"))
		}
	})
}

// A claim that does not commit leaves no row: the log's row is written in
// the claim's transaction, so it rolls back with it.
func TestRolledBackClaimRecordsNoAttempt(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()

	t.Run("the connection is cut right before COMMIT", func(t *testing.T) {
		job := e.enqueue("cut")
		proxy := dbtest.NewProxy(t, e.db)
		db := dbtest.OpenDSN(t, proxy.DSN(fencedwrite.DSNOptions{}))
		if err := db.PingContext(ctx); err != nil {
			t.Fatal(err)
		}
		c := dbtest.ClientOn(t, db)
		// Closing the proxy drops the connection before COMMIT is sent.
		// The driver cannot tell that COMMIT never left (ErrCommitUnknown);
		// the server rolls the claim back with its log row.
		l, err := c.RefundJob.Claim(fencedwrite.WithHooks(ctx, fencedwrite.Hooks{BeforeClaimCommit: proxy.Close}), job.ID,
			fencedwrite.ClaimOptions{Holder: "cut-before-commit"})
		if l != nil || err == nil {
			t.Fatalf("a claim cut before its COMMIT: lease %v, %v; want no lease", l, err)
		}
		e.waitRolledBack(job.ID)
		e.wantJob(job.ID, refundjob.StateReady, 0)
		e.wantAttempts(job.ID)
	})

	t.Run("a batch claim cut right before COMMIT", func(t *testing.T) {
		job := e.enqueue("batch-cut")
		proxy := dbtest.NewProxy(t, e.db)
		db := dbtest.OpenDSN(t, proxy.DSN(fencedwrite.DSNOptions{}))
		if err := db.PingContext(ctx); err != nil {
			t.Fatal(err)
		}
		c := dbtest.ClientOn(t, db)
		leases, err := c.RefundJob.ClaimDue(fencedwrite.WithHooks(ctx, fencedwrite.Hooks{BeforeClaimCommit: proxy.Close}), 5,
			fencedwrite.ClaimOptions{Holder: "batch-cut-before-commit"})
		if leases != nil || err == nil {
			t.Fatalf("a batch cut before its COMMIT: leases %v, %v; want none", leases, err)
		}
		e.waitRolledBack(job.ID)
		e.wantJob(job.ID, refundjob.StateReady, 0)
		e.wantAttempts(job.ID)
	})
}

// waitRolledBack returns once no transaction holds job id's row: a
// locking read waits for the server to roll back a cut connection's
// transaction (a barrier, not a sleep).
func (e *env) waitRolledBack(id int64) {
	e.t.Helper()
	err := func() error {
		tx, err := e.raw.BeginTx(e.t.Context(), nil)
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback() }()
		var attempt int64
		return tx.QueryRow("SELECT attempt FROM refund_jobs WHERE id = ? FOR UPDATE", id).Scan(&attempt)
	}()
	if err != nil {
		e.t.Fatal(err)
	}
}

// A holder is printed on the operators' pages and in the CLI: one that
// could forge a line or a terminal sequence, or that does not fit the
// log's column, is refused before anything is sent, naming the field.
func TestClaimRefusesAForgedHolder(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	job := e.enqueue("forged")
	for name, holder := range map[string]string{
		"a line break":        "worker-a/1\nworker-b/2 took over",
		"a terminal sequence": "worker\x1b[2J/1",
		"a DEL":               "worker\x7f/1",
		"not ASCII":           "wörker/1",
		"too long":            strings.Repeat("h", fencedwrite.MaxHolderLen+1),
	} {
		t.Run(name, func(t *testing.T) {
			for what, err := range map[string]error{
				"claim":            errOf(e.c.RefundJob.Claim(t.Context(), job.ID, fencedwrite.ClaimOptions{Holder: holder})),
				"takeover":         errOf(e.c.RefundJob.Takeover(t.Context(), job.ID, fencedwrite.ClaimOptions{Holder: holder})),
				"claim due":        errOf(e.c.RefundJob.ClaimDue(t.Context(), 1, fencedwrite.ClaimOptions{Holder: holder})),
				"takeover expired": errOf(e.c.RefundJob.TakeoverExpired(t.Context(), 1, fencedwrite.ClaimOptions{Holder: holder})),
			} {
				var fe *fencedwrite.FieldError
				if !errors.As(err, &fe) || fe.Field != "ClaimOptions.Holder" || !errors.Is(err, fencedwrite.ErrInvalid) {
					t.Errorf("%s with holder %q: %v; want a FieldError naming ClaimOptions.Holder", what, holder, err)
				}
			}
		})
	}
	e.wantJob(job.ID, refundjob.StateReady, 0)
	e.wantAttempts(job.ID)
	if err := (fencedwrite.ClaimOptions{Holder: strings.Repeat("h", fencedwrite.MaxHolderLen)}).Validate(); err != nil {
		t.Errorf("a holder of %d printable characters: %v", fencedwrite.MaxHolderLen, err)
	}
}

// An operator's resolution records its attempt under the operator's name,
// in the resolution's transaction; outside one it is refused.
func TestResolutionRecordsItsAttempt(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	job, l := e.claim("resolved")
	if err := e.c.RefundJob.Apply(ctx, l.ManualReview("unknown outcome", "{}", ""), nil); err != nil {
		t.Fatal(err)
	}
	seen := e.job(job.ID)
	if err := e.c.RefundJob.RecordResolution(ctx, job.ID, seen.Attempt+1, "alice"); !errors.Is(err, fencedwrite.ErrInvalid) {
		t.Fatalf("RecordResolution outside a transaction: %v, want ErrInvalid", err)
	}
	err := e.c.RefundJob.Apply(ctx, e.c.RefundJob.ResolveReconcile(seen, "alice: ask again"), func(ctx context.Context, tx *ent.Tx) error {
		return tx.RefundJob.RecordResolution(ctx, job.ID, seen.Attempt+1, "alice")
	})
	if err != nil {
		t.Fatal(err)
	}
	got := e.attempts(job.ID)
	if len(got) != 2 || got[1].Op != fencedwrite.AttemptResolution || got[1].Holder != "alice" || got[1].Attempt != 2 || !got[1].LeaseUntil.IsZero() {
		t.Fatalf("attempts after the resolution: %+v; want attempt 2 resolved by alice, no lease", got)
	}
	// A resolution that records an attempt the job is not at rolls back
	// with its fenced write.
	l2, err := e.c.RefundJob.Claim(ctx, job.ID, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.c.RefundJob.Apply(ctx, l2.ManualReview("still unknown", "{}", ""), nil); err != nil {
		t.Fatal(err)
	}
	seen = e.job(job.ID)
	err = e.c.RefundJob.Apply(ctx, e.c.RefundJob.ResolveReconcile(seen, "bob"), func(ctx context.Context, tx *ent.Tx) error {
		return tx.RefundJob.RecordResolution(ctx, job.ID, seen.Attempt+2, "bob")
	})
	if !errors.Is(err, fencedwrite.ErrUnexpectedState) && !errors.Is(err, fencedwrite.ErrRolledBack) {
		t.Errorf("a resolution recording the wrong attempt: %v", err)
	}
	e.wantJob(job.ID, refundjob.StateManualReview, 3)
	if got := e.attempts(job.ID); len(got) != 3 {
		t.Errorf("a rolled-back resolution left a row: %+v", got)
	}
}

func errOf[T any](_ T, err error) error { return err }
