package fencedwrite_test

import (
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/fencekit/fencekit/ent"
	"github.com/fencekit/fencekit/ent/refund"
	"github.com/fencekit/fencekit/ent/refundjob"
	"github.com/fencekit/fencekit/fencedwrite"
	"github.com/fencekit/fencekit/internal/dbtest"
	"github.com/fencekit/fencekit/ledger"
)

// opts are the claim options of every test: the demo's defaults.
var opts = fencedwrite.ClaimOptions{}

// env is one test's database with a client per simulated worker.
type env struct {
	t   *testing.T
	db  *dbtest.DB
	raw *sql.DB     // an unconfigured session, for raw SQL and checks
	c   *ent.Client // the service's own client
}

func newEnv(t *testing.T) *env {
	t.Helper()
	d := dbtest.New(t)
	return &env{t: t, db: d, raw: d.RawDB(), c: d.Client()}
}

// worker opens a client with its own pool: workers never share connections.
func (e *env) worker() *ent.Client { return e.db.Client() }

func request(key string) ent.RefundJobEnqueue {
	return ent.RefundJobEnqueue{OperationKey: key, PaymentRef: "pay-" + key, AmountMinor: 1250, Currency: "EUR"}
}

// enqueue creates a job and its ledger row in one transaction.
func (e *env) enqueue(key string) *ent.RefundJob {
	e.t.Helper()
	p := request(key)
	job, created, err := e.c.RefundJob.Enqueue(e.t.Context(), p, ledger.Open(p))
	if err != nil || !created {
		e.t.Fatalf("enqueue %s: created=%v err=%v", key, created, err)
	}
	return job
}

// job reads the job afresh.
func (e *env) job(id int64) *ent.RefundJob {
	e.t.Helper()
	j, err := e.c.RefundJob.Get(e.t.Context(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	return j
}

// instant are claim options whose lease has expired by the time anyone
// else looks: a lease of one microsecond, the column's resolution. Tests use
// it to expire a lease on their own job, never by moving the server's clock.
var instant = fencedwrite.ClaimOptions{Lease: time.Microsecond}

// wantLeaseExpired checks, on the database clock, that the job's lease has
// expired: a test that relies on it says so rather than waiting for it.
func (e *env) wantLeaseExpired(id int64) {
	e.t.Helper()
	e.wantLeaseExpiredIn(ent.RefundJobFencedTable, id)
}

// wantLeaseExpiredIn is wantLeaseExpired for a job of the fenced table.
func (e *env) wantLeaseExpiredIn(table string, id int64) {
	e.t.Helper()
	var expired bool
	if err := e.raw.QueryRow("SELECT lease_until < "+fencedwrite.ClockUTC+" FROM `"+table+"` WHERE id = ?", id).Scan(&expired); err != nil {
		e.t.Fatal(err)
	}
	if !expired {
		e.t.Fatalf("%s#%d's lease has not expired on the database clock", table, id)
	}
}

// advance claims and reschedules the job until its attempt is n, so that a
// scenario can start where the article's does (attempt 7 is claimed next
// when n is 6).
func (e *env) advance(id, n int64) {
	e.t.Helper()
	for e.job(id).Attempt < n {
		l, err := e.c.RefundJob.Claim(e.t.Context(), id, opts)
		if err != nil {
			e.t.Fatal(err)
		}
		if err := e.c.RefundJob.Apply(e.t.Context(), l.Reschedule(refundjob.NextActionRefund, 0, "", "provider rate limited before processing"), nil); err != nil {
			e.t.Fatal(err)
		}
	}
}

// ledger returns the ledger row of key.
func (e *env) ledger(key string) *ent.Refund {
	e.t.Helper()
	r, err := e.c.Refund.Query().Where(refund.OperationKey(key)).Only(e.t.Context())
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

// wantJob checks the job's state and attempt.
func (e *env) wantJob(id int64, state refundjob.State, attempt int64) *ent.RefundJob {
	e.t.Helper()
	j := e.job(id)
	if j.State != state || j.Attempt != attempt {
		e.t.Fatalf("job %d is %s at attempt %d, want %s at attempt %d", id, j.State, j.Attempt, state, attempt)
	}
	return j
}

// wantOutcome checks that err matches want (and is a *fencedwrite.WriteError
// when want is a write outcome).
func wantOutcome(t *testing.T, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("got %v, want %v", err, want)
	}
}

// inMemoryProvider stands for the provider in tests where only the data
// layer is under test: it refunds each operation key at most once.
type inMemoryProvider struct {
	mu      sync.Mutex
	refunds map[string]string
	calls   int
}

func (p *inMemoryProvider) refund(key string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls++
	if p.refunds == nil {
		p.refunds = map[string]string{}
	}
	if id, ok := p.refunds[key]; ok {
		return id
	}
	p.refunds[key] = fmt.Sprintf("re_%d", len(p.refunds)+1)
	return p.refunds[key]
}

func (p *inMemoryProvider) lookup(key string) (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	id, ok := p.refunds[key]
	return id, ok
}

// executed returns how many refund calls the provider saw and for how many
// keys it moved money.
func (p *inMemoryProvider) executed() (calls, keys int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls, len(p.refunds)
}
