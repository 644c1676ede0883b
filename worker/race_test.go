package worker_test

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fencekit/fencekit/ent/refundjob"
	"github.com/fencekit/fencekit/evidence"
	"github.com/fencekit/fencekit/fencedwrite"
	"github.com/fencekit/fencekit/internal/dbtest"
	"github.com/fencekit/fencekit/provider/fakeprovider"
	"github.com/fencekit/fencekit/worker"
)

// DESIGN.md's four race tests, with real workers, the fake provider behind
// HTTP and the database: the old worker comes back.

func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(patience):
		t.Fatalf("timed out waiting for %s", what)
	}
}

// instantLease expires at once: a takeover may follow the claim at any
// moment. Isolated test data, never a moved server clock. One slot, so that
// the worker cannot take over its own job while it holds it.
func instantLease(c *worker.Config) { c.Lease, c.Workers = time.Microsecond, 1 }

// Zombie late write: A sends and pauses before writing back; B takes over,
// reconciles the same key, completes; A comes back and its write is refused.
// The provider paid once; A's late answer is kept as evidence.
func TestWorkerZombieLateWriteIsRefused(t *testing.T) {
	f := newFleet(t, fakeprovider.Config{})
	const key = "zombie"
	f.enqueue(key)
	resume := make(chan struct{})
	ma := newCallKinds()
	_, evA := f.worker("A", func(c *worker.Config) {
		instantLease(c)
		c.Metrics = ma
		c.Hooks.AfterProviderCall = func(worker.Job) { <-resume }
	})
	waitClosed(t, f.srv.Executed(key, 1), "A's refund to execute")

	mb := newCallKinds()
	_, evB := f.worker("B", func(c *worker.Config) { c.Metrics = mb })
	won := evB.await(t, key, nil)
	if won.err != nil || won.job.Attempt != 2 || won.job.Action != string(refundjob.NextActionReconcile) {
		t.Fatalf("B's write-back: %+v, want a reconcile at attempt 2 that completed", won)
	}
	f.wantSettled(key, refundjob.StateSucceeded, 1)

	close(resume)
	late := evA.await(t, key, nil)
	wantErr(t, late.err, fencedwrite.ErrSuperseded)
	j := f.wantSettled(key, refundjob.StateSucceeded, 1)
	if j.Attempt != 2 {
		t.Fatalf("job at attempt %d, want 2", j.Attempt)
	}
	if mb.get(worker.CallSend)+mb.get(worker.CallResend) != 0 || mb.get(worker.CallReconcile) != 1 {
		t.Fatalf("B made %v calls, want one reconcile and no send", mb.n)
	}
	if ma.stale["complete"] != 1 {
		t.Fatalf("A's stale writes %v, want its completion", ma.stale)
	}
	if n := mb.count(func(c *callKinds) int { return c.takeovers }); n != 1 {
		t.Fatalf("B counted %d takeovers, want 1", n)
	}
	var kept bool
	for _, e := range f.evidenceOf(key) {
		kept = kept || e.Source == evidence.ProviderResponse && e.Attempt == 1 && e.Status == evidence.Succeeded
	}
	if !kept {
		t.Fatalf("A's late success is not in the observation log: %+v", f.evidenceOf(key))
	}
}

// Expired but not taken over: expiry alone never takes A's rights away, for
// a completion, a reschedule or a manual review; a later worker finds
// nothing to take over.
func TestWorkerExpiredButNotTakenOverStillWrites(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(f *fleet, key string)
		op    string
	}{
		{"complete", func(*fleet, string) {}, "complete"},
		{"reschedule", func(f *fleet, key string) { f.srv.Script(key, fakeprovider.Fault{Pending: true}) }, "reschedule"},
		{"manual review", func(f *fleet, key string) {
			other := request(key)
			other.AmountMinor = 1
			if _, err := f.srv.Client().Refund(context.Background(), other); err != nil {
				t.Fatal(err)
			}
		}, "manual review"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFleet(t, fakeprovider.Config{})
			key := "expired-" + tc.op[:4]
			f.enqueue(key)
			tc.setup(f, key)
			_, ev := f.worker("A", instantLease)
			// A's first write-back lands although its lease expired a
			// microsecond after the claim.
			w := ev.await(t, key, func(w wrote) bool { return w.job.Attempt == 1 })
			if w.err != nil {
				t.Fatalf("A's %s after its lease expired: %v", tc.op, w.err)
			}
			if tc.op != "complete" {
				return
			}
			f.wantSettled(key, refundjob.StateSucceeded, 1)
			_, evB := f.worker("B", nil)
			select {
			case p := <-evB.passes:
				if p.TakenOver != 0 || p.Claimed != 0 {
					t.Fatalf("B's pass %+v found work in a settled job", p)
				}
			case <-time.After(patience):
				t.Fatal("B ran no pass")
			}
		})
	}
}

// Refunded, reply lost: the provider executes A's refund and A never hears;
// B's takeover reconciles the same key and completes without paying again;
// A's success, when it finally arrives, lands in the observation log.
func TestWorkerRefundedButReplyLost(t *testing.T) {
	t.Run("the answer arrives late: evidence, not a write", func(t *testing.T) {
		f := newFleet(t, fakeprovider.Config{})
		const key = "late"
		f.enqueue(key)
		release := make(chan struct{})
		f.srv.Script(key, fakeprovider.Fault{Hold: release})
		_, evA := f.worker("A", instantLease)
		waitClosed(t, f.srv.Executed(key, 1), "A's refund to execute")
		_, evB := f.worker("B", nil)
		if w := evB.await(t, key, nil); w.err != nil {
			t.Fatalf("B: %v", w.err)
		}
		f.wantSettled(key, refundjob.StateSucceeded, 1)
		close(release)
		wantErr(t, evA.await(t, key, nil).err, fencedwrite.ErrSuperseded)
		f.wantSettled(key, refundjob.StateSucceeded, 1)
		var kept bool
		for _, e := range f.evidenceOf(key) {
			kept = kept || e.Source == evidence.ProviderResponse && e.Status == evidence.Succeeded && e.Attempt == 1
		}
		if !kept {
			t.Fatal("A's late success is not in the observation log")
		}
	})
	t.Run("the reply is cut: reconcile, never resend", func(t *testing.T) {
		f := newFleet(t, fakeprovider.Config{})
		const key = "cut"
		f.enqueue(key)
		f.srv.Script(key, fakeprovider.Fault{After: fakeprovider.Cut})
		m := newCallKinds()
		_, ev := f.worker("A", func(c *worker.Config) { c.Metrics = m })
		first := ev.await(t, key, nil)
		if first.err != nil || first.job.Action != string(refundjob.NextActionRefund) {
			t.Fatalf("first write-back %+v, want the send's reschedule", first)
		}
		ev.settled(t, f, key)
		f.wantSettled(key, refundjob.StateSucceeded, 1)
		if m.get(worker.CallResend) != 0 || m.get(worker.CallSend) != 1 || m.get(worker.CallReconcile) < 1 {
			t.Fatalf("calls %v, want one send, reconciles and no resend", m.n)
		}
	})
}

// Commit acknowledged to nobody: the completion's COMMIT lands but its reply
// is cut, and the runner cannot re-read. The worker says the outcome is
// unknown and does nothing more; the job is settled once, and nobody pays
// again.
func TestWorkerCommitAcknowledgedToNobody(t *testing.T) {
	f := newFleet(t, fakeprovider.Config{})
	const key = "lost-ack"
	f.enqueue(key)
	proxy := dbtest.NewProxy(t, f.db)
	restored := make(chan struct{})
	_, ev := f.worker("A", func(c *worker.Config) {
		c.DB = proxy.FencedDB(fencedwrite.DSNOptions{})
		c.Hooks.WriteBackContext = func(ctx context.Context, j worker.Job) context.Context {
			// The network stays down until the write-back gives up: after
			// the unknown outcome, the worker tries to keep the provider's
			// answer as evidence until its context ends. Three seconds, not
			// the write-back's thirty, keep the test short.
			ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
			t.Cleanup(cancel)
			return fencedwrite.WithHooks(ctx, fencedwrite.Hooks{BeforeCommit: proxy.CutReplies})
		}
		c.Hooks.WroteBack = func(j worker.Job, err error) {
			proxy.Restore()
			close(restored)
		}
	})
	waitClosed(t, restored, "A's write-back")
	_ = ev
	f.wantSettled(key, refundjob.StateSucceeded, 1)
	b, evB := f.worker("B", nil)
	select {
	case p := <-evB.passes:
		if p.Claimed+p.TakenOver != 0 {
			t.Fatalf("B claimed %+v of a settled job", p)
		}
	case <-time.After(patience):
		t.Fatal("B ran no pass")
	}
	_ = b
	f.wantSettled(key, refundjob.StateSucceeded, 1)
}

// A claim whose COMMIT reply is lost: the worker counts it as unknown and
// sends nothing; the claim did land, so the job is taken over once its
// lease expires, and the new holder reconciles before anything is sent.
func TestWorkerLostClaimCommitSendsNothing(t *testing.T) {
	f := newFleet(t, fakeprovider.Config{})
	const key = "lost-claim"
	f.enqueue(key)
	proxy := dbtest.NewProxy(t, f.db)
	m := newCallKinds()
	claimed := make(chan error, 1)
	_, _ = f.worker("A", func(c *worker.Config) {
		instantLease(c)
		c.Metrics = m
		c.DB = proxy.FencedDB(fencedwrite.DSNOptions{})
		c.Hooks.ClaimContext = func(ctx context.Context, what string) context.Context {
			if what != "claim" {
				return ctx
			}
			return fencedwrite.WithHooks(ctx, fencedwrite.Hooks{BeforeClaimCommit: proxy.CutReplies})
		}
		c.Hooks.Claimed = func(_ context.Context, what string, jobs []worker.Job, err error) {
			// A pass claims the due reconciles first: none here, and a
			// batch that claims nothing sends no COMMIT to cut.
			if what == "claim" && (len(jobs) > 0 || err != nil) {
				proxy.Restore()
				claimed <- err
			}
		}
	})
	select {
	case err := <-claimed:
		wantErr(t, err, fencedwrite.ErrCommitUnknown)
	case <-time.After(patience):
		t.Fatal("A made no claim")
	}
	if n := m.count(func(c *callKinds) int { return c.unknown }); n != 1 {
		t.Fatalf("%d claims counted as unknown, want 1", n)
	}
	if j := f.job(key); j.State != refundjob.StateRunning || j.Attempt != 1 {
		t.Fatalf("job is %s at attempt %d, want the claim that landed: running at 1", j.State, j.Attempt)
	}
	if n := len(f.srv.Requests()); n != 0 {
		t.Fatalf("%d provider requests after a claim whose outcome was unknown, want none", n)
	}
	_, evB := f.worker("B", nil)
	won := evB.await(t, key, nil)
	if won.err != nil || won.job.Attempt != 2 || won.job.Action != string(refundjob.NextActionReconcile) {
		t.Fatalf("B's write-back %+v, want a takeover at attempt 2 that reconciled first", won)
	}
	var sends, lookups int
	for _, r := range f.srv.Requests() {
		if r.Method == http.MethodPost {
			sends++
		} else {
			lookups++
		}
	}
	if sends != 0 || lookups == 0 {
		t.Fatalf("%d sends and %d lookups when B's reconcile wrote back, want only lookups", sends, lookups)
	}
	// The lookup found nothing inside the key's window: the next claim
	// sends the same key, once.
	evB.settled(t, f, key)
	f.wantSettled(key, refundjob.StateSucceeded, 1)
}

// signalHandler is a slog handler that closes once when a record's message
// contains want: a test waits for the worker to reach a logged moment.
type signalHandler struct {
	want string
	once *sync.Once
	ch   chan struct{}
}

func (h signalHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h signalHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h signalHandler) WithGroup(string) slog.Handler            { return h }
func (h signalHandler) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, h.want) {
		h.once.Do(func() { close(h.ch) })
	}
	return nil
}

// staleCut cuts the database path the moment a write-back is found stale,
// before its answer is kept as evidence.
type staleCut struct {
	*callKinds
	proxy *dbtest.Proxy
}

func (m staleCut) StaleWrite(tr string) { m.callKinds.StaleWrite(tr); m.proxy.CutReplies() }

// A zombie's late answer survives a database cut: the write-back was
// superseded, the database is unreachable when the answer is to be kept as
// evidence, and the worker keeps trying until it is back (found by refundd
// chaos: with one try, the answer was lost).
func TestWorkerKeepsALateAnswerThroughACut(t *testing.T) {
	f := newFleet(t, fakeprovider.Config{})
	const key = "zombie-cut"
	f.enqueue(key)
	proxy := dbtest.NewProxy(t, f.db)
	resume := make(chan struct{})
	retrying := signalHandler{want: "trying again", once: &sync.Once{}, ch: make(chan struct{})}
	_, evA := f.worker("A", func(c *worker.Config) {
		instantLease(c)
		c.DB = proxy.FencedDB(fencedwrite.DSNOptions{})
		c.Metrics = staleCut{newCallKinds(), proxy}
		c.Logger = slog.New(retrying)
		c.Hooks.AfterProviderCall = func(worker.Job) { <-resume }
	})
	waitClosed(t, f.srv.Executed(key, 1), "A's refund to execute")
	_, evB := f.worker("B", nil)
	if won := evB.await(t, key, nil); won.err != nil || won.job.Attempt != 2 {
		t.Fatalf("B's write-back: %+v, want attempt 2 settled", won)
	}
	close(resume)
	waitClosed(t, retrying.ch, "A's first failed try to keep its answer")
	proxy.Restore()
	wantErr(t, evA.await(t, key, nil).err, fencedwrite.ErrSuperseded)
	var kept bool
	for _, e := range f.evidenceOf(key) {
		kept = kept || e.Source == evidence.ProviderResponse && e.Attempt == 1 && e.Status == evidence.Succeeded
	}
	if !kept {
		t.Fatalf("A's late success is not in the observation log: %+v", f.evidenceOf(key))
	}
	f.wantSettled(key, refundjob.StateSucceeded, 1)
}

// A process that starts while another holds the fleet's budget row (a
// process frozen mid-take, say) waits for it instead of failing: Start
// tries a lock wait timeout again (found by refundd chaos: a rolling
// restart's new process exited with 1205).
func TestWorkerStartWaitsOutALockedBudget(t *testing.T) {
	f := newFleet(t, fakeprovider.Config{})
	f.worker("first", nil) // creates the budget's row
	root := f.db.FencedDB(fencedwrite.DSNOptions{})
	tx, err := root.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	var name string
	if err := tx.QueryRow("SELECT name FROM provider_budgets WHERE name = ? FOR UPDATE", worker.DefaultBudgetName).Scan(&name); err != nil {
		t.Fatal(err)
	}
	retrying := signalHandler{want: "trying again", once: &sync.Once{}, ch: make(chan struct{})}
	// TiDB does not end this wait at the lock wait timeout; the read timeout
	// (3 s) ends it there, which Start tries again too.
	w, err := worker.New(worker.Config{DB: f.db.FencedDB(fencedwrite.DSNOptions{LockWaitTimeout: time.Second, ReadTimeout: 3 * time.Second}), Provider: f.srv.Client(),
		BudgetRate: 10_000, BudgetBurst: 10_000, // the fleet's (f.worker's)
		WebhookSecret: webhookSecret, Logger: slog.New(retrying)})
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan error, 1)
	go func() { started <- w.Start(t.Context()) }()
	waitClosed(t, retrying.ch, "Start's first try to time out on the locked row")
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-started:
		if err != nil {
			t.Fatalf("Start with the budget's row locked for a while: %v", err)
		}
	case <-time.After(patience):
		t.Fatal("Start did not return once the row was free")
	}
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	if err := w.StopAndCancel(ctx); err != nil {
		t.Fatal(err)
	}
}
