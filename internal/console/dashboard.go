package console

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/fencekit/fencekit/ent"
	"github.com/fencekit/fencekit/fencedwrite"
	"github.com/fencekit/fencekit/operator"
)

// dashTTL is how long the dashboard's figures are reused: a room full of
// operators reloading the page costs the database one set of queries per
// dashTTL.
const dashTTL = 5 * time.Second

type stateCount struct {
	Name string
	N    int
	More bool // N stopped at MaxCounted
}

type named struct {
	Name string
	N    float64
}

type countersView struct {
	Takeovers, StaleTotal, Calls float64
	Stale                        []named
	ReconcileShare               float64
}

type budgetView struct {
	Name                        string
	Tokens, Capacity, Rate, Use float64
}

type dashData struct {
	AsOf time.Time
	// Takeovers and Claims count the fleet's takeovers and claims over the
	// last Window, from the attempts log (every process's, this one's
	// included).
	Window           time.Duration
	Takeovers        stateCount
	Claims           stateCount
	Cap              int
	States           []stateCount
	Review           stateCount
	PendingApprovals stateCount
	OldestID         int64
	Oldest, SLO      time.Duration
	Breach           bool
	Counters         *countersView
	Budget           *budgetView
}

type dashCache struct {
	mu   sync.Mutex
	at   time.Time
	data dashData
}

// The dashboard's queries. Each reads an index of refund_jobs, never the
// whole table: the per-state counts stop at MaxCounted rows of the index
// whose first column is state, and the oldest unfinished job is the lowest
// id of each unfinished state's index range (ids grow with creation), read
// from the index alone. Both work on MySQL 8 and MariaDB 10.6+.
var (
	countState   = fmt.Sprintf("SELECT COUNT(*) FROM (SELECT 1 FROM refund_jobs WHERE state = ? LIMIT %d) capped", MaxCounted+1)
	lowestID     = "SELECT MIN(id) FROM refund_jobs WHERE state = ?"
	jobAge       = "SELECT TIMESTAMPDIFF(MICROSECOND, created_at, " + fencedwrite.ClockUTC + ") FROM refund_jobs WHERE id = ?"
	budgetRow    = "SELECT tokens, capacity, rate, TIMESTAMPDIFF(MICROSECOND, refilled_at, " + fencedwrite.ClockUTC + ") FROM provider_budgets WHERE name = ?"
	databaseTime = "SELECT " + fencedwrite.ClockUTC
	// The fleet's claims or takeovers since a moment (the database clock,
	// read once by databaseTime, less the window), a range of the attempts
	// log's (op, claimed_at) index. Not the clock in the query: SYSDATE(6)
	// is evaluated per row, so the optimizer reads every row of the op
	// (BenchmarkConsolePages at 1M jobs: 434 ms a view; with the value, 14 ms).
	countAttempts = fmt.Sprintf("SELECT COUNT(*) FROM (SELECT 1 FROM %s WHERE op = ? AND claimed_at >= ? LIMIT %d) capped",
		ent.RefundJobAttemptsTable, MaxCounted+1)
)

var (
	allStates        = []string{fencedwrite.StateReady, fencedwrite.StateRunning, fencedwrite.StateManualReview, fencedwrite.StateSucceeded, fencedwrite.StateFailed}
	unfinishedStates = []string{fencedwrite.StateReady, fencedwrite.StateRunning, fencedwrite.StateManualReview}
)

func (c *Console) dashboard(rw http.ResponseWriter, r *http.Request) {
	d, err := c.dashData(r.Context())
	if err != nil {
		c.failed(rw, r, "the dashboard", err)
		return
	}
	c.render(rw, r, http.StatusOK, "dashboard", page{Title: "Dashboard", Data: d})
}

func (c *Console) dashData(ctx context.Context) (dashData, error) {
	c.dash.mu.Lock()
	defer c.dash.mu.Unlock()
	if !c.dash.at.IsZero() && c.cfg.Now().Sub(c.dash.at) < dashTTL {
		return c.dash.data, nil
	}
	d, err := c.readDash(ctx)
	if err != nil {
		return d, err
	}
	c.dash.at, c.dash.data = c.cfg.Now(), d
	return d, nil
}

func (c *Console) queryRow(ctx context.Context, q string, args []any, dest ...any) error {
	rows, err := c.cfg.Client.QueryContext(ctx, q, args...)
	if err != nil {
		return fmt.Errorf("query dashboard: %w", err)
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return fmt.Errorf("query dashboard: %w", err)
		}
		return sql.ErrNoRows
	}
	if err := rows.Scan(dest...); err != nil {
		return fmt.Errorf("scan dashboard: %w", err)
	}
	return rows.Close()
}

func (c *Console) readDash(ctx context.Context) (dashData, error) {
	d := dashData{Cap: MaxCounted, SLO: c.cfg.SLO}
	if err := c.queryRow(ctx, databaseTime, nil, &d.AsOf); err != nil {
		return d, err
	}
	for _, s := range allStates {
		sc := stateCount{Name: s}
		if err := c.queryRow(ctx, countState, []any{s}, &sc.N); err != nil {
			return d, err
		}
		if sc.N > MaxCounted {
			sc.N, sc.More = MaxCounted, true
		}
		d.States = append(d.States, sc)
		if s == fencedwrite.StateManualReview {
			d.Review = sc
		}
	}
	d.Window = TakeoverWindow
	for _, sc := range []*stateCount{{Name: fencedwrite.AttemptTakeover}, {Name: fencedwrite.AttemptClaim}} {
		if err := c.queryRow(ctx, countAttempts, []any{sc.Name, d.AsOf.Add(-d.Window)}, &sc.N); err != nil {
			return d, err
		}
		if sc.N > MaxCounted {
			sc.N, sc.More = MaxCounted, true
		}
		if sc.Name == fencedwrite.AttemptTakeover {
			d.Takeovers = *sc
		} else {
			d.Claims = *sc
		}
	}
	for _, s := range unfinishedStates {
		var id sql.NullInt64
		if err := c.queryRow(ctx, lowestID, []any{s}, &id); err != nil {
			return d, err
		}
		if id.Valid && (d.OldestID == 0 || id.Int64 < d.OldestID) {
			d.OldestID = id.Int64
		}
	}
	if d.OldestID != 0 {
		var micros int64
		switch err := c.queryRow(ctx, jobAge, []any{d.OldestID}, &micros); {
		case errors.Is(err, sql.ErrNoRows): // settled and archived meanwhile
			d.OldestID = 0
		case err != nil:
			return d, err
		default:
			d.Oldest = time.Duration(micros) * time.Microsecond
			d.Breach = d.Oldest > d.SLO
		}
	}
	ap, err := c.cfg.Operator.Approvals(ctx, true, operator.Page{Limit: 100})
	if err != nil {
		return d, fmt.Errorf("read approvals: %w", err)
	}
	d.PendingApprovals = stateCount{Name: "pending", N: len(ap.Approvals), More: ap.Next != ""}
	var b budgetView
	var micros int64
	switch err := c.queryRow(ctx, budgetRow, []any{c.cfg.BudgetName}, &b.Tokens, &b.Capacity, &b.Rate, &micros); {
	case errors.Is(err, sql.ErrNoRows): // no worker opened it yet
	case err != nil:
		return d, err
	default:
		b.Name = c.cfg.BudgetName
		b.Tokens = min(b.Capacity, b.Tokens+b.Rate*float64(micros)/1e6)
		if b.Capacity > 0 {
			b.Use = 1 - b.Tokens/b.Capacity
		}
		d.Budget = &b
	}
	if c.cfg.Counters != nil {
		k := c.cfg.Counters()
		v := &countersView{Takeovers: k.Takeovers}
		for name, n := range k.StaleWrites {
			v.Stale = append(v.Stale, named{name, n})
			v.StaleTotal += n
		}
		sort.Slice(v.Stale, func(i, j int) bool { return v.Stale[i].Name < v.Stale[j].Name })
		for _, n := range k.Calls {
			v.Calls += n
		}
		if v.Calls > 0 {
			v.ReconcileShare = k.Calls["reconcile"] / v.Calls
		}
		d.Counters = v
	}
	return d, nil
}
