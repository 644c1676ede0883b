package console

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"
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

func (s stateCount) String() string {
	if s.More {
		return strconv.Itoa(s.N) + "+"
	}
	return strconv.Itoa(s.N)
}

// stateMoney is one state's jobs and the money they hold, per currency.
type stateMoney struct {
	Count stateCount
	Label string
	Link  string
	Money []operator.Amount
}

type countersView struct {
	Takeovers  float64
	Stale      string // "3 (complete 2, reschedule 1)", or "none"
	Calls      float64
	Reconciles float64
	SharePct   int
	HasCalls   bool
}

type budgetView struct {
	Name                 string
	Free, Capacity, Rate float64
	UsePct               int
}

type dashData struct {
	AsOf time.Time
	// AtStake is the money of the unfinished jobs, by state: in manual
	// review (an operator must decide), waiting and running.
	AtStake []stateMoney
	// Settled are the finished jobs' counts.
	Settled          []stateMoney
	Review           stateCount
	PendingApprovals stateCount
	OldestID         int64
	Oldest, SLO      time.Duration
	Breach           bool
	Cap              int
	// The engineering figures: takeovers and claims of the fleet over the
	// last Window, from the attempts log; this process's counters; the
	// outbound budget.
	Window    time.Duration
	Takeovers stateCount
	Claims    stateCount
	Counters  *countersView
	Budget    *budgetView
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
	countState = fmt.Sprintf("SELECT COUNT(*) FROM (SELECT 1 FROM refund_jobs WHERE state = ? LIMIT %d) capped", MaxCounted+1)
	// The money of a state's jobs, per currency, over at most MaxCounted
	// jobs of the state's index range (unfinished states only: they are
	// few).
	stateMoneyQ  = fmt.Sprintf("SELECT currency, COUNT(*), SUM(amount_minor) FROM (SELECT currency, amount_minor FROM refund_jobs WHERE state = ? LIMIT %d) capped GROUP BY currency ORDER BY currency", MaxCounted+1)
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

var unfinishedStates = []string{fencedwrite.StateManualReview, fencedwrite.StateReady, fencedwrite.StateRunning}

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
	labels := map[string][2]string{
		fencedwrite.StateManualReview: {"In manual review: an operator must decide", "/queue"},
		fencedwrite.StateReady:        {"Waiting to be sent or checked", "/search?state=ready"},
		fencedwrite.StateRunning:      {"Being sent or checked now", "/search?state=running"},
		fencedwrite.StateSucceeded:    {"Refunded", "/search?state=succeeded"},
		fencedwrite.StateFailed:       {"Not refunded (declined)", "/search?state=failed"},
	}
	for _, s := range unfinishedStates {
		sm := stateMoney{Count: stateCount{Name: s}, Label: labels[s][0], Link: labels[s][1], Money: []operator.Amount{}}
		rows, err := c.cfg.Client.QueryContext(ctx, stateMoneyQ, s)
		if err != nil {
			return d, fmt.Errorf("query dashboard: %w", err)
		}
		for rows.Next() {
			var a operator.Amount
			var n int
			if err := rows.Scan(&a.Currency, &n, &a.Minor); err != nil {
				rows.Close()
				return d, fmt.Errorf("scan dashboard: %w", err)
			}
			sm.Count.N += n
			sm.Money = append(sm.Money, a)
		}
		if err := rows.Close(); err != nil {
			return d, fmt.Errorf("query dashboard: %w", err)
		}
		if sm.Count.N > MaxCounted {
			sm.Count.N, sm.Count.More = MaxCounted, true
		}
		d.AtStake = append(d.AtStake, sm)
		if s == fencedwrite.StateManualReview {
			d.Review = sm.Count
		}
	}
	for _, s := range []string{fencedwrite.StateSucceeded, fencedwrite.StateFailed} {
		sm := stateMoney{Count: stateCount{Name: s}, Label: labels[s][0], Link: labels[s][1]}
		if err := c.queryRow(ctx, countState, []any{s}, &sm.Count.N); err != nil {
			return d, err
		}
		if sm.Count.N > MaxCounted {
			sm.Count.N, sm.Count.More = MaxCounted, true
		}
		d.Settled = append(d.Settled, sm)
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
	switch err := c.queryRow(ctx, budgetRow, []any{c.cfg.BudgetName}, &b.Free, &b.Capacity, &b.Rate, &micros); {
	case errors.Is(err, sql.ErrNoRows): // no worker opened it yet
	case err != nil:
		return d, err
	default:
		b.Name = c.cfg.BudgetName
		b.Free = min(b.Capacity, b.Free+b.Rate*float64(micros)/1e6)
		if b.Capacity > 0 {
			b.UsePct = int(math.Round(100 * (1 - b.Free/b.Capacity)))
		}
		d.Budget = &b
	}
	if c.cfg.Counters != nil {
		d.Counters = countersOf(c.cfg.Counters())
	}
	return d, nil
}

// countersOf says this process's counters for people.
func countersOf(k Counters) *countersView {
	v := &countersView{Takeovers: k.Takeovers, Stale: "none"}
	var names []string
	var total float64
	for name, n := range k.StaleWrites {
		if n > 0 {
			names = append(names, name)
			total += n
		}
	}
	sort.Strings(names)
	if total > 0 {
		parts := make([]string, len(names))
		for i, name := range names {
			parts[i] = fmt.Sprintf("%s %s", name, num(k.StaleWrites[name]))
		}
		v.Stale = num(total) + " (" + strings.Join(parts, ", ") + ")"
	}
	for _, n := range k.Calls {
		v.Calls += n
	}
	v.Reconciles = k.Calls["reconcile"]
	if v.Calls > 0 {
		v.HasCalls = true
		v.SharePct = int(math.Round(100 * v.Reconciles / v.Calls))
	}
	return v
}

func num(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// dashboard shows the money first: what is not settled yet, per state and
// currency, the oldest job, the approvals, the settled counts.
func (c *Console) dashboard(rw http.ResponseWriter, r *http.Request) {
	c.figures(rw, r, "dashboard", "Dashboard")
}

// engineering shows the figures for whoever runs the fleet: takeovers,
// stale writes refused by the fence, the reconcile share, the budget.
func (c *Console) engineering(rw http.ResponseWriter, r *http.Request) {
	c.figures(rw, r, "engineering", "Engineering")
}

// figures renders page (its template and tab) with the dashboard's figures.
func (c *Console) figures(rw http.ResponseWriter, r *http.Request, name, title string) {
	d, err := c.dashData(r.Context())
	if err != nil {
		c.failed(rw, r, "the "+name+"'s figures", err)
		return
	}
	c.render(rw, r, http.StatusOK, name, page{Title: title, Tab: name, Data: d})
}
