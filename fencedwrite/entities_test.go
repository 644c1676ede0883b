package fencedwrite_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"

	"github.com/fencekit/fencekit/ent"
	"github.com/fencekit/fencekit/ent/refundjob"
	transcode "github.com/fencekit/fencekit/examples/transcode/ent"
	"github.com/fencekit/fencekit/examples/transcode/ent/transcodejob"
	transcodemigrations "github.com/fencekit/fencekit/examples/transcode/migrations"
	"github.com/fencekit/fencekit/fencedwrite"
	"github.com/fencekit/fencekit/internal/dbtest"
	"github.com/fencekit/fencekit/ledger"
)

// The data layer's conformance suite, parameterised by entity: every fenced
// entity, fencekit's own (package ent) and its example's
// (examples/transcode/ent), runs the same guarantees through its own
// generated API and against its own generated database fence, each on a
// database of its own migrations, on MariaDB or MySQL and, by
// scripts/test-tidb.sh, on TiDB (where the database fence is absent and the
// suite states what then lands). refund_jobs is fencekit's own;
// transcode_jobs (examples/transcode/ent/schema/transcodejob.go, migrated
// from examples/transcode/migrations, which fencekit's migrations never
// install) is fenced by the same annotation under other names: another key
// and request, "transcode" as the action that sends, the encoder's id in
// place of the refund id, and no attempts log.
// TestEveryFencedEntityIsInTheSuite fails when a fenced table is added
// without a kind here.

// held is one claim's lease, through its entity's API.
type held struct {
	id, attempt int64
	action      string
	complete    func(ctx context.Context, ref string) error
	reschedule  func(ctx context.Context, lastError string) error // to send again, due now
	review      func(ctx context.Context, reason string) error
	fail        func(ctx context.Context, reason string) error
}

// jobRow is a job as the suite compares it.
type jobRow struct {
	state   string
	attempt int64
	action  string
	ref     string // the provider's id, "" when NULL
}

// kind is one fenced entity under the suite. Its API runs on a fenced pool
// (one per simulated worker), which the kind wraps in its own generated
// client.
type kind struct {
	entity, table string
	send          string // the action that sends the request
	refWords      string // the provider's id, as the API's messages name it
	// newDB gives a test its own database with the entity's migrations.
	newDB func(t *testing.T) *dbtest.DB
	// enqueue creates the job of key with the request variant v (the same v
	// is the same request, another is a conflict).
	enqueue         func(ctx context.Context, db *sql.DB, key string, v int) (id int64, created bool, err error)
	claim           func(ctx context.Context, db *sql.DB, id int64, o fencedwrite.ClaimOptions) (*held, error)
	takeover        func(ctx context.Context, db *sql.DB, id int64, o fencedwrite.ClaimOptions) (*held, error)
	claimDue        func(ctx context.Context, db *sql.DB, limit int, o fencedwrite.ClaimOptions) ([]*held, error)
	takeoverExpired func(ctx context.Context, db *sql.DB, limit int, o fencedwrite.ClaimOptions) ([]*held, error)
	row             func(ctx context.Context, db *sql.DB, id int64) (jobRow, error)
	// resolveSend resolves a job in manual review to be sent again, with
	// proof; resolveSucceeded as succeeded with the provider's id.
	resolveSend      func(ctx context.Context, db *sql.DB, id int64, proof string) error
	resolveSucceeded func(ctx context.Context, db *sql.DB, id int64, ref, evidence string) error
	// genericUpdate writes the job with Ent's generic builder, which the
	// generated client's backstop refuses.
	genericUpdate func(ctx context.Context, db *sql.DB, id int64) error
	// The article's zombie write, raw: undeclared, and declaring attempt 1.
	rawUndeclared, rawStale string
	// A move outside the state machine: ready straight to succeeded,
	// declaring the row's attempt (SET runs left to right on MariaDB: the
	// declaration comes before the attempt moves).
	rawSkip string
	// A change to a succeeded row.
	rawTerminal string
	// The delete of a settled job.
	rawDelete string
}

var kinds = []kind{refundKind(), transcodeKind()}

// wrapOne and wrapAll adapt an entity's claims to the suite's held leases.
func wrapOne[C, L any](c C, wrap func(C, L) *held) func(L, error) (*held, error) {
	return func(l L, err error) (*held, error) {
		if err != nil {
			return nil, err
		}
		return wrap(c, l), nil
	}
}

func wrapAll[C, L any](c C, wrap func(C, L) *held) func([]L, error) ([]*held, error) {
	return func(ls []L, err error) ([]*held, error) {
		var hs []*held
		for _, l := range ls {
			hs = append(hs, wrap(c, l))
		}
		return hs, err
	}
}

func refundKind() kind {
	req := func(key string, v int) ent.RefundJobEnqueue {
		return ent.RefundJobEnqueue{OperationKey: key, PaymentRef: "pay-" + key, AmountMinor: 1250 + int64(v), Currency: "EUR"}
	}
	wrap := func(c *ent.Client, l *ent.RefundJobLease) *held {
		key := l.Request().OperationKey
		apply := func(ctx context.Context, t *ent.RefundJobTransition, fn func(context.Context, *ent.Tx) error) error {
			return c.RefundJob.Apply(ctx, t, fn)
		}
		return &held{id: l.ID(), attempt: l.Attempt(), action: string(l.NextAction()),
			complete: func(ctx context.Context, ref string) error {
				return apply(ctx, l.Complete(ref), ledger.Refunded(key, ref))
			},
			reschedule: func(ctx context.Context, lastError string) error {
				return apply(ctx, l.Reschedule(refundjob.NextActionRefund, 0, "", lastError), nil)
			},
			review: func(ctx context.Context, reason string) error { return apply(ctx, l.ManualReview(reason, "", ""), nil) },
			fail: func(ctx context.Context, reason string) error {
				return apply(ctx, l.Fail(reason, ""), ledger.Failed(key))
			},
		}
	}
	return kind{
		entity: "RefundJob", table: ent.RefundJobFencedTable, send: fencedwrite.ActionRefund, refWords: "provider refund id",
		newDB: func(t *testing.T) *dbtest.DB { return dbtest.New(t) },
		enqueue: func(ctx context.Context, db *sql.DB, key string, v int) (int64, bool, error) {
			c := refundClient(db)
			j, created, err := c.RefundJob.Enqueue(ctx, req(key, v), ledger.Open(req(key, v)))
			if err != nil {
				return 0, false, err
			}
			return j.ID, created, nil
		},
		claim: func(ctx context.Context, db *sql.DB, id int64, o fencedwrite.ClaimOptions) (*held, error) {
			c := refundClient(db)
			return wrapOne(c, wrap)(c.RefundJob.Claim(ctx, id, o))
		},
		takeover: func(ctx context.Context, db *sql.DB, id int64, o fencedwrite.ClaimOptions) (*held, error) {
			c := refundClient(db)
			return wrapOne(c, wrap)(c.RefundJob.Takeover(ctx, id, o))
		},
		claimDue: func(ctx context.Context, db *sql.DB, limit int, o fencedwrite.ClaimOptions) ([]*held, error) {
			c := refundClient(db)
			return wrapAll(c, wrap)(c.RefundJob.ClaimDue(ctx, limit, o))
		},
		takeoverExpired: func(ctx context.Context, db *sql.DB, limit int, o fencedwrite.ClaimOptions) ([]*held, error) {
			c := refundClient(db)
			return wrapAll(c, wrap)(c.RefundJob.TakeoverExpired(ctx, limit, o))
		},
		row: func(ctx context.Context, db *sql.DB, id int64) (jobRow, error) {
			c := refundClient(db)
			j, err := c.RefundJob.Get(ctx, id)
			if err != nil {
				return jobRow{}, err
			}
			r := jobRow{state: string(j.State), attempt: j.Attempt, action: string(j.NextAction)}
			if j.ProviderRefundID != nil {
				r.ref = *j.ProviderRefundID
			}
			return r, nil
		},
		resolveSend: func(ctx context.Context, db *sql.DB, id int64, proof string) error {
			c := refundClient(db)
			j, err := c.RefundJob.Get(ctx, id)
			if err != nil {
				return err
			}
			return c.RefundJob.Apply(ctx, c.RefundJob.ResolveRefund(j, proof), nil)
		},
		resolveSucceeded: func(ctx context.Context, db *sql.DB, id int64, ref, evidence string) error {
			c := refundClient(db)
			j, err := c.RefundJob.Get(ctx, id)
			if err != nil {
				return err
			}
			return c.RefundJob.Apply(ctx, c.RefundJob.ResolveSucceeded(j, ref, evidence), ledger.Refunded(j.OperationKey, ref))
		},
		genericUpdate: func(ctx context.Context, db *sql.DB, id int64) error {
			c := refundClient(db)
			//fencelint:allow the generic builder the generated client's backstop refuses, under test
			return c.RefundJob.UpdateOneID(id).SetState(refundjob.StateReady).Exec(ctx)
		},
		//fencelint:allow the conformance suite's raw zombie write, refused by the database fence
		rawUndeclared: "UPDATE refund_jobs SET state = 'ready' WHERE id = ?",
		//fencelint:allow the conformance suite's raw stale write, refused by the database fence
		rawStale: "UPDATE refund_jobs SET state = 'ready', writer_attempt = 1 WHERE id = ?",
		//fencelint:allow the conformance suite's raw move outside the state machine, refused by the database fence
		rawSkip: "UPDATE refund_jobs SET writer_attempt = attempt, state = 'succeeded', attempt = attempt + 1, provider_refund_id = 'forged' WHERE id = ?",
		//fencelint:allow the conformance suite's raw change of a settled job, refused by the database fence
		rawTerminal: "UPDATE refund_jobs SET last_error = 'rewritten', writer_attempt = attempt WHERE id = ?",
		rawDelete:   "DELETE FROM refund_jobs WHERE id = ?",
	}
}

func transcodeKind() kind {
	req := func(key string, v int) transcode.TranscodeJobEnqueue {
		return transcode.TranscodeJobEnqueue{JobKey: key, SourceURI: "s3://videos/" + key + ".mov", Preset: "h264-720p", DurationMs: 60_000 + int64(v)}
	}
	wrap := func(c *transcode.Client, l *transcode.TranscodeJobLease) *held {
		apply := func(ctx context.Context, t *transcode.TranscodeJobTransition) error {
			return c.TranscodeJob.Apply(ctx, t, nil)
		}
		return &held{id: l.ID(), attempt: l.Attempt(), action: string(l.NextAction()),
			complete: func(ctx context.Context, ref string) error { return apply(ctx, l.Complete(ref)) },
			reschedule: func(ctx context.Context, lastError string) error {
				return apply(ctx, l.Reschedule(transcodejob.NextActionTranscode, 0, "", lastError))
			},
			review: func(ctx context.Context, reason string) error { return apply(ctx, l.ManualReview(reason, "", "")) },
			fail:   func(ctx context.Context, reason string) error { return apply(ctx, l.Fail(reason, "")) },
		}
	}
	return kind{
		entity: "TranscodeJob", table: transcode.TranscodeJobFencedTable, send: string(transcodejob.NextActionTranscode), refWords: "encoder job id",
		newDB: func(t *testing.T) *dbtest.DB { return dbtest.NewFrom(t, transcodemigrations.Source) },
		enqueue: func(ctx context.Context, db *sql.DB, key string, v int) (int64, bool, error) {
			c := transcodeClient(db)
			j, created, err := c.TranscodeJob.Enqueue(ctx, req(key, v), nil)
			if err != nil {
				return 0, false, err
			}
			return j.ID, created, nil
		},
		claim: func(ctx context.Context, db *sql.DB, id int64, o fencedwrite.ClaimOptions) (*held, error) {
			c := transcodeClient(db)
			return wrapOne(c, wrap)(c.TranscodeJob.Claim(ctx, id, o))
		},
		takeover: func(ctx context.Context, db *sql.DB, id int64, o fencedwrite.ClaimOptions) (*held, error) {
			c := transcodeClient(db)
			return wrapOne(c, wrap)(c.TranscodeJob.Takeover(ctx, id, o))
		},
		claimDue: func(ctx context.Context, db *sql.DB, limit int, o fencedwrite.ClaimOptions) ([]*held, error) {
			c := transcodeClient(db)
			return wrapAll(c, wrap)(c.TranscodeJob.ClaimDue(ctx, limit, o))
		},
		takeoverExpired: func(ctx context.Context, db *sql.DB, limit int, o fencedwrite.ClaimOptions) ([]*held, error) {
			c := transcodeClient(db)
			return wrapAll(c, wrap)(c.TranscodeJob.TakeoverExpired(ctx, limit, o))
		},
		row: func(ctx context.Context, db *sql.DB, id int64) (jobRow, error) {
			c := transcodeClient(db)
			j, err := c.TranscodeJob.Get(ctx, id)
			if err != nil {
				return jobRow{}, err
			}
			r := jobRow{state: string(j.State), attempt: j.Attempt, action: string(j.NextAction)}
			if j.EncoderJobID != nil {
				r.ref = *j.EncoderJobID
			}
			return r, nil
		},
		resolveSend: func(ctx context.Context, db *sql.DB, id int64, proof string) error {
			c := transcodeClient(db)
			j, err := c.TranscodeJob.Get(ctx, id)
			if err != nil {
				return err
			}
			return c.TranscodeJob.Apply(ctx, c.TranscodeJob.ResolveTranscode(j, proof), nil)
		},
		resolveSucceeded: func(ctx context.Context, db *sql.DB, id int64, ref, evidence string) error {
			c := transcodeClient(db)
			j, err := c.TranscodeJob.Get(ctx, id)
			if err != nil {
				return err
			}
			return c.TranscodeJob.Apply(ctx, c.TranscodeJob.ResolveSucceeded(j, ref, evidence), nil)
		},
		genericUpdate: func(ctx context.Context, db *sql.DB, id int64) error {
			c := transcodeClient(db)
			//fencelint:allow the generic builder the generated client's backstop refuses, under test
			return c.TranscodeJob.UpdateOneID(id).SetState(transcodejob.StateReady).Exec(ctx)
		},
		//fencelint:allow the conformance suite's raw zombie write, refused by the database fence
		rawUndeclared: "UPDATE transcode_jobs SET state = 'ready' WHERE id = ?",
		//fencelint:allow the conformance suite's raw stale write, refused by the database fence
		rawStale: "UPDATE transcode_jobs SET state = 'ready', writer_attempt = 1 WHERE id = ?",
		//fencelint:allow the conformance suite's raw move outside the state machine, refused by the database fence
		rawSkip: "UPDATE transcode_jobs SET writer_attempt = attempt, state = 'succeeded', attempt = attempt + 1, encoder_job_id = 'forged' WHERE id = ?",
		//fencelint:allow the conformance suite's raw change of a settled job, refused by the database fence
		rawTerminal: "UPDATE transcode_jobs SET last_error = 'rewritten', writer_attempt = attempt WHERE id = ?",
		rawDelete:   "DELETE FROM transcode_jobs WHERE id = ?",
	}
}

// refundClient and transcodeClient wrap a fenced pool in each entity's
// generated client.
func refundClient(db *sql.DB) *ent.Client {
	return ent.NewClient(ent.Driver(entsql.OpenDB(dialect.MySQL, db)))
}

func transcodeClient(db *sql.DB) *transcode.Client {
	return transcode.NewClient(transcode.Driver(entsql.OpenDB(dialect.MySQL, db)))
}

// kindEnv is one kind's test: its own database (env's db and raw) and the
// service's fenced pool.
type kindEnv struct {
	*env
	c *sql.DB // the service's own pool
}

// worker opens a fenced pool of its own: workers never share connections.
func (e *kindEnv) worker() *sql.DB { return e.db.FencedDB(fencedwrite.DSNOptions{}) }

// forEachKind runs f for every fenced entity, in parallel, each on its own
// database, migrated by the entity's own migrations.
func forEachKind(t *testing.T, f func(t *testing.T, k kind, e *kindEnv)) {
	t.Helper()
	for _, k := range kinds {
		t.Run(k.entity, func(t *testing.T) {
			t.Parallel()
			d := k.newDB(t)
			e := &kindEnv{env: &env{t: t, db: d, raw: d.RawDB()}, c: d.FencedDB(fencedwrite.DSNOptions{})}
			f(t, k, e)
		})
	}
}

func (k kind) mustEnqueue(t *testing.T, e *kindEnv, key string) int64 {
	t.Helper()
	id, created, err := k.enqueue(t.Context(), e.c, key, 0)
	if err != nil || !created {
		t.Fatalf("%s: enqueue %s: created=%v err=%v", k.table, key, created, err)
	}
	return id
}

func (k kind) wantRow(t *testing.T, e *kindEnv, id int64, want jobRow) {
	t.Helper()
	got, err := k.row(t.Context(), e.c, id)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Fatalf("%s#%d = %+v, want %+v", k.table, id, got, want)
	}
}

func TestEveryFencedEntityIsInTheSuite(t *testing.T) {
	t.Parallel()
	var tables, suite []string
	for _, f := range ent.FencedTables {
		tables = append(tables, f.Table)
	}
	for _, f := range transcode.FencedTables {
		tables = append(tables, f.Table)
	}
	for _, k := range kinds {
		suite = append(suite, k.table)
	}
	if !slices.Equal(tables, suite) {
		t.Fatalf("fenced tables %v, the suite's kinds %v: add a kind for each", tables, suite)
	}
}

// Each kind runs on a database of its own migrations: the refund tables
// from fencekit's, transcode_jobs from its example's directory alone.
func TestKindsRunOnTheirOwnMigrations(t *testing.T) {
	t.Parallel()
	forEachKind(t, func(t *testing.T, k kind, e *kindEnv) {
		for _, other := range kinds {
			var n int
			if err := e.raw.QueryRow("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?", other.table).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if want := other.table == k.table; (n == 1) != want {
				t.Errorf("%s's database holds %s: %v, want %v", k.entity, other.table, n == 1, want)
			}
		}
	})
}

func TestKindsEnqueueOnceByKey(t *testing.T) {
	t.Parallel()
	forEachKind(t, func(t *testing.T, k kind, e *kindEnv) {
		ctx := t.Context()
		id := k.mustEnqueue(t, e, "k-1")
		again, created, err := k.enqueue(ctx, e.c, "k-1", 0)
		if err != nil || created || again != id {
			t.Fatalf("the same request again: id %d created=%v err=%v, want job %d, not created", again, created, err, id)
		}
		if _, _, err := k.enqueue(ctx, e.c, "k-1", 1); !errors.Is(err, fencedwrite.ErrKeyConflict) {
			t.Fatalf("the key with another request: %v, want ErrKeyConflict", err)
		}
		k.wantRow(t, e, id, jobRow{state: fencedwrite.StateReady, attempt: 0, action: k.send})
	})
}

// A claim sends with the entity's own action; a takeover after the lease
// expired reconciles at the next attempt; the first holder's writes are then
// superseded, and the newer decision stands.
func TestKindsZombieLateWriteIsRefused(t *testing.T) {
	t.Parallel()
	forEachKind(t, func(t *testing.T, k kind, e *kindEnv) {
		ctx := t.Context()
		id := k.mustEnqueue(t, e, "zombie")
		a, b := e.worker(), e.worker()
		la, err := k.claim(ctx, a, id, instant)
		if err != nil {
			t.Fatal(err)
		}
		if la.attempt != 1 || la.action != k.send {
			t.Fatalf("A's claim: attempt %d to %s, want attempt 1 to %s", la.attempt, la.action, k.send)
		}
		e.wantLeaseExpiredIn(k.table, id)
		lb, err := k.takeover(ctx, b, id, opts)
		if err != nil {
			t.Fatal(err)
		}
		if lb.attempt != 2 || lb.action != fencedwrite.ActionReconcile {
			t.Fatalf("B's takeover: attempt %d to %s, want attempt 2 to reconcile", lb.attempt, lb.action)
		}
		if err := lb.complete(ctx, "ref-b"); err != nil {
			t.Fatalf("B's completion: %v", err)
		}
		for name, write := range map[string]func() error{
			"complete":      func() error { return la.complete(ctx, "ref-a") },
			"reschedule":    func() error { return la.reschedule(ctx, "socket timeout") },
			"manual review": func() error { return la.review(ctx, "socket timeout") },
			"fail":          func() error { return la.fail(ctx, "socket timeout") },
		} {
			if err := write(); !errors.Is(err, fencedwrite.ErrSuperseded) {
				t.Errorf("the zombie's %s: %v, want ErrSuperseded", name, err)
			}
		}
		k.wantRow(t, e, id, jobRow{state: fencedwrite.StateSucceeded, attempt: 2, action: fencedwrite.ActionReconcile, ref: "ref-b"})
	})
}

// Two workers claim the same job at once, released together by a barrier:
// exactly one holds it.
func TestKindsOneOfTwoConcurrentClaimsWins(t *testing.T) {
	t.Parallel()
	forEachKind(t, func(t *testing.T, k kind, e *kindEnv) {
		id := k.mustEnqueue(t, e, "race")
		start := make(chan struct{})
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i := range errs {
			c := e.worker()
			wg.Go(func() {
				<-start
				_, errs[i] = k.claim(t.Context(), c, id, opts)
			})
		}
		close(start)
		wg.Wait()
		won := 0
		for _, err := range errs {
			switch {
			case err == nil:
				won++
			case !errors.Is(err, fencedwrite.ErrNotClaimable):
				t.Fatalf("the losing claim: %v, want ErrNotClaimable", err)
			}
		}
		if won != 1 {
			t.Fatalf("%d claims won, want exactly 1 (%v)", won, errs)
		}
		k.wantRow(t, e, id, jobRow{state: fencedwrite.StateRunning, attempt: 1, action: k.send})
	})
}

// The batch claims: ClaimDue claims every due job once, TakeoverExpired
// takes each over once its lease expired, each at the next attempt.
func TestKindsBatchClaimsAndTakeovers(t *testing.T) {
	t.Parallel()
	forEachKind(t, func(t *testing.T, k kind, e *kindEnv) {
		ctx := t.Context()
		var ids []int64
		for i := range 3 {
			ids = append(ids, k.mustEnqueue(t, e, fmt.Sprintf("batch-%d", i)))
		}
		claimed, err := k.claimDue(ctx, e.worker(), 10, instant)
		if err != nil || len(claimed) != 3 {
			t.Fatalf("ClaimDue: %d claims, %v; want 3", len(claimed), err)
		}
		for _, h := range claimed {
			if h.attempt != 1 || h.action != k.send || !slices.Contains(ids, h.id) {
				t.Fatalf("ClaimDue's claim %+v, want one of %v at attempt 1 to %s", h, ids, k.send)
			}
		}
		if again, err := k.claimDue(ctx, e.worker(), 10, opts); err != nil || len(again) != 0 {
			t.Fatalf("ClaimDue with every job running: %d claims, %v; want none", len(again), err)
		}
		for _, id := range ids {
			e.wantLeaseExpiredIn(k.table, id)
		}
		taken, err := k.takeoverExpired(ctx, e.worker(), 10, opts)
		if err != nil || len(taken) != 3 {
			t.Fatalf("TakeoverExpired: %d, %v; want 3", len(taken), err)
		}
		for _, h := range taken {
			if h.attempt != 2 || h.action != fencedwrite.ActionReconcile {
				t.Fatalf("TakeoverExpired's takeover %+v, want attempt 2 to reconcile", h)
			}
		}
		for _, h := range claimed {
			if err := h.reschedule(ctx, "late"); !errors.Is(err, fencedwrite.ErrSuperseded) {
				t.Fatalf("a batch claim's late write: %v, want ErrSuperseded", err)
			}
		}
	})
}

// An operator's resolutions of a job in manual review: back to the entity's
// send action at the next attempt, and as succeeded with the provider's id;
// a resolution built from a stale read is superseded.
func TestKindsOperatorResolutions(t *testing.T) {
	t.Parallel()
	forEachKind(t, func(t *testing.T, k kind, e *kindEnv) {
		ctx := t.Context()
		id := k.mustEnqueue(t, e, "review")
		h, err := k.claim(ctx, e.c, id, opts)
		if err != nil {
			t.Fatal(err)
		}
		if err := h.review(ctx, "ambiguous answer"); err != nil {
			t.Fatal(err)
		}
		if err := k.resolveSend(ctx, e.c, id, "the provider's definitive 'not executed' for the key"); err != nil {
			t.Fatalf("resolution to send again: %v", err)
		}
		k.wantRow(t, e, id, jobRow{state: fencedwrite.StateReady, attempt: 2, action: k.send})
		h, err = k.claim(ctx, e.c, id, opts)
		if err != nil || h.attempt != 3 || h.action != k.send {
			t.Fatalf("the claim after the resolution: %+v, %v; want attempt 3 to %s", h, err, k.send)
		}
		if err := h.review(ctx, "ambiguous again"); err != nil {
			t.Fatal(err)
		}
		// Without the provider's id it is refused, in the entity's own words.
		if err := k.resolveSucceeded(ctx, e.c, id, "", "the provider's dashboard shows it done"); !errors.Is(err, fencedwrite.ErrInvalid) ||
			!strings.Contains(err.Error(), "the "+k.refWords+" and the evidence are both required") {
			t.Fatalf("a resolution as succeeded without the %s: %v, want it refused naming it", k.refWords, err)
		}
		k.wantRow(t, e, id, jobRow{state: fencedwrite.StateManualReview, attempt: 3, action: k.send})
		if err := k.resolveSucceeded(ctx, e.c, id, "ref-op", "the provider's dashboard shows it done"); err != nil {
			t.Fatalf("resolution as succeeded: %v", err)
		}
		k.wantRow(t, e, id, jobRow{state: fencedwrite.StateSucceeded, attempt: 4, action: k.send, ref: "ref-op"})
		if err := k.resolveSend(ctx, e.c, id, "proof"); !errors.Is(err, fencedwrite.ErrUnexpectedState) && !errors.Is(err, fencedwrite.ErrSuperseded) {
			t.Fatalf("a resolution of a settled job: %v, want it refused", err)
		}
		k.wantRow(t, e, id, jobRow{state: fencedwrite.StateSucceeded, attempt: 4, action: k.send, ref: "ref-op"})
	})
}

// Ent's generic builders cannot write a fenced entity: the generated
// client's backstop refuses them before they reach the database.
func TestKindsGenericBuildersAreRefused(t *testing.T) {
	t.Parallel()
	forEachKind(t, func(t *testing.T, k kind, e *kindEnv) {
		id := k.mustEnqueue(t, e, "generic")
		if err := k.genericUpdate(t.Context(), e.c, id); !errors.Is(err, fencedwrite.ErrBypass) {
			t.Fatalf("%s's generic UpdateOneID: %v, want ErrBypass", k.entity, err)
		}
		k.wantRow(t, e, id, jobRow{state: fencedwrite.StateReady, attempt: 0, action: k.send})
	})
}

// The database fence generated from each entity's annotation refuses what
// bypasses the fenced layer: the article's zombie write (undeclared, or
// declaring a stale attempt), a move outside the state machine, a change to a
// settled row and its delete. Without a database fence (TiDB) the suite
// states that the zombie's raw write lands.
func TestKindsDatabaseFenceRefusesRawWrites(t *testing.T) {
	t.Parallel()
	forEachKind(t, func(t *testing.T, k kind, e *kindEnv) {
		ctx := t.Context()
		id := k.mustEnqueue(t, e, "raw")
		a, b := e.worker(), e.worker()
		if _, err := k.claim(ctx, a, id, instant); err != nil {
			t.Fatal(err)
		}
		e.wantLeaseExpiredIn(k.table, id)
		lb, err := k.takeover(ctx, b, id, opts)
		if err != nil {
			t.Fatal(err)
		}
		if !e.db.Engine().DatabaseFence {
			res, err := a.ExecContext(ctx, k.rawUndeclared, id)
			if err != nil {
				t.Fatalf("%s: the zombie's raw write: %v, want it to land (no database fence)", e.db.Engine().Name, err)
			}
			if n, _ := res.RowsAffected(); n != 1 {
				t.Fatalf("the zombie's raw write changed %d rows, want 1", n)
			}
			return
		}
		skip := k.mustEnqueue(t, e, "raw-skip")
		for _, c := range []struct {
			name, sql, rule string
			id              int64
		}{
			{"undeclared zombie", k.rawUndeclared, "must declare the attempt it holds", id},
			{"stale zombie", k.rawStale, "stale writer declares attempt 1, row is at 2", id},
			{"ready straight to succeeded", k.rawSkip, "not a move of the state machine", skip},
		} {
			if _, err := a.ExecContext(ctx, c.sql, c.id); !dbtest.IsTriggerRefusal(err, c.rule) {
				t.Errorf("%s: %v, want the trigger's refusal %q", c.name, err, c.rule)
			}
		}
		k.wantRow(t, e, id, jobRow{state: fencedwrite.StateRunning, attempt: 2, action: fencedwrite.ActionReconcile})
		k.wantRow(t, e, skip, jobRow{state: fencedwrite.StateReady, attempt: 0, action: k.send})
		if err := lb.complete(ctx, "ref-b"); err != nil {
			t.Fatalf("B's completion after the refused writes: %v", err)
		}
		if _, err := a.ExecContext(ctx, k.rawTerminal, id); !dbtest.IsTriggerRefusal(err, "") {
			t.Errorf("a change to the succeeded job: %v, want the trigger's refusal", err)
		}
		if _, err := a.ExecContext(ctx, k.rawDelete, id); !dbtest.IsTriggerRefusal(err, "") {
			t.Errorf("the delete of the succeeded job: %v, want the trigger's refusal", err)
		}
		k.wantRow(t, e, id, jobRow{state: fencedwrite.StateSucceeded, attempt: 2, action: fencedwrite.ActionReconcile, ref: "ref-b"})
	})
}
