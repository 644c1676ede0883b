package budget_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/fencekit/fencekit/fencedwrite"
	"github.com/fencekit/fencekit/internal/dbtest"
	"github.com/fencekit/fencekit/migrations"
	"github.com/fencekit/fencekit/worker/internal/budget"
)

// slow refills one token every 1000 s: over a test's lifetime it adds a few
// hundredths of a token at most, so whole-token counts are exact.
const slow = 0.001

type env struct {
	t   *testing.T
	d   *dbtest.DB
	raw *sql.DB
}

func newEnv(t *testing.T) *env {
	d := dbtest.New(t)
	return &env{t: t, d: d, raw: d.RawDB()}
}

// process opens the budget as one more worker process would: its own pool,
// the fenced session settings.
func (e *env) process(name string, rate float64, burst int) *budget.Bucket {
	e.t.Helper()
	return e.openOn(e.d.FencedDB(fencedwrite.DSNOptions{}), name, rate, burst)
}

func (e *env) openOn(db *sql.DB, name string, rate float64, burst int) *budget.Bucket {
	e.t.Helper()
	b, changed, err := budget.Open(e.t.Context(), db, name, rate, burst, false)
	if err != nil || changed != nil {
		e.t.Fatalf("open budget %q: %v (changed %+v)", name, err, changed)
	}
	return b
}

// change opens the budget as a process told to change the fleet's
// settings would, and returns what it changed.
func (e *env) change(name string, rate float64, burst int) (*budget.Bucket, *budget.Change) {
	e.t.Helper()
	b, changed, err := budget.Open(e.t.Context(), e.d.FencedDB(fencedwrite.DSNOptions{}), name, rate, burst, true)
	if err != nil {
		e.t.Fatalf("change budget %q: %v", name, err)
	}
	return b, changed
}

// budgetRow is the row as a locking read finds it: the read waits for any
// transaction still holding the row to end, so what it shows is final.
type budgetRow struct {
	tokens, capacity, rate float64
	refilledAt, now        int64 // microseconds on the database's clock
}

func (e *env) row(name string) budgetRow {
	e.t.Helper()
	tx, err := e.raw.BeginTx(e.t.Context(), nil)
	if err != nil {
		e.t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	var r budgetRow
	if err := tx.QueryRow("SELECT tokens, capacity, rate, "+fencedwrite.Micros("refilled_at")+", "+fencedwrite.ClockMicros+
		" FROM provider_budgets WHERE name = ? FOR UPDATE", name).Scan(&r.tokens, &r.capacity, &r.rate, &r.refilledAt, &r.now); err != nil {
		e.t.Fatalf("read budget %q: %v", name, err)
	}
	return r
}

// age rewrites a budget's row as if it held tokens, last refilled ago
// before now by the database's clock (in the future for a negative ago):
// test data only, the server clock never moves.
func (e *env) age(name string, tokens float64, ago time.Duration) {
	e.t.Helper()
	if _, err := e.raw.Exec("UPDATE provider_budgets SET tokens = ?, refilled_at = TIMESTAMPADD(MICROSECOND, "+fencedwrite.ClockMicros+
		" - ?, TIMESTAMP'1970-01-01 00:00:00') WHERE name = ?", tokens, ago.Microseconds(), name); err != nil {
		e.t.Fatal(err)
	}
}

func take(t *testing.T, b *budget.Bucket, n int) (int, time.Duration) {
	t.Helper()
	g, err := b.Take(t.Context(), n)
	granted, retryIn := g.Granted, g.RetryIn
	if err != nil {
		t.Fatalf("take %d: %v", n, err)
	}
	if granted < 0 || granted > n {
		t.Fatalf("take %d granted %d", n, granted)
	}
	return granted, retryIn
}

func wantTake(t *testing.T, b *budget.Bucket, n, want int) time.Duration {
	t.Helper()
	got, retryIn := take(t, b, n)
	if got != want {
		t.Fatalf("take %d granted %d, want %d", n, got, want)
	}
	if got == n && retryIn != 0 {
		t.Fatalf("take %d granted all, but says retry in %v", n, retryIn)
	}
	if got < n && retryIn <= 0 {
		t.Fatalf("take %d granted %d, and says retry in %v", n, got, retryIn)
	}
	return retryIn
}

func wantBetween(t *testing.T, what string, got, lo, hi time.Duration) {
	t.Helper()
	if got < lo || got > hi {
		t.Fatalf("%s = %v, want between %v and %v", what, got, lo, hi)
	}
}

func TestTakeNeverGrantsMoreThanAvailable(t *testing.T) {
	e := newEnv(t)
	t.Run("a new budget starts full and grants up to its capacity", func(t *testing.T) {
		b := e.process("full", slow, 5)
		wantTake(t, b, 3, 3)
		wantTake(t, b, 10, 2)
		wantTake(t, b, 1, 0)
		if r := e.row("full"); r.tokens >= 1 || r.tokens < 0 {
			t.Fatalf("%v tokens left after taking all 5", r.tokens)
		}
	})
	t.Run("a fraction of a token is not a token", func(t *testing.T) {
		b := e.process("fraction", slow, 5)
		e.age("fraction", 2.75, 0)
		g, err := b.Take(t.Context(), 3)
		if err != nil || g.Granted != 2 || math.Abs(g.Left-0.75) > 0.01 || g.Capacity != 5 || g.Rate != slow {
			t.Fatalf("take 3 of 2.75: %+v, %v; want 2 granted, 0.75 left, capacity 5 at the slow rate", g, err)
		}
		if r := e.row("fraction"); math.Abs(r.tokens-0.75) > 0.01 {
			t.Fatalf("%v tokens left, want the 0.75 that was not a whole token", r.tokens)
		}
	})
	t.Run("every grant is paid from the row, whatever the sizes asked", func(t *testing.T) {
		b := e.process("sequence", slow, 20)
		total := 0
		for i, n := range []int{1, 7, 2, 9, 1, 4, 30, 1} {
			got, _ := take(t, b, n)
			total += got
			left := e.row("sequence").tokens
			if total > 20 || math.Abs(float64(total)+left-20) > 0.01 {
				t.Fatalf("after take #%d of %d: granted %d in all with %v left, want granted + left = 20", i, n, total, left)
			}
		}
		if total != 20 {
			t.Fatalf("granted %d in all, want the whole capacity 20", total)
		}
	})
}

// Two processes (two pools) share one budget: whatever the interleaving of
// their takes and returns, the tokens granted minus those returned never
// exceed the capacity, and the row accounts for every token.
func TestBucketsOfTwoProcessesShareOneBudget(t *testing.T) {
	e := newEnv(t)
	const capacity, rate = 25, 1e-6
	buckets := []*budget.Bucket{e.process("shared", rate, capacity), e.process("shared", rate, capacity)}
	ctx := t.Context()
	var (
		start              = make(chan struct{})
		wg                 sync.WaitGroup
		granted, returned  atomic.Int64
		outstanding, worst atomic.Int64
		errs               = make(chan error, 64)
	)
	for i := range 8 {
		b := buckets[i%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			for j := range 12 {
				n := 1 + (i+j)%3
				g, err := b.Take(ctx, n)
				got := g.Granted
				if err != nil {
					errs <- fmt.Errorf("worker %d take %d: %w", i, n, err)
					return
				}
				if got < 0 || got > n {
					errs <- fmt.Errorf("worker %d: take %d granted %d", i, n, got)
				}
				granted.Add(int64(got))
				// outstanding is added after a take committed and lowered before
				// a return is sent, so it never counts more than the row had out.
				o := outstanding.Add(int64(got))
				for w := worst.Load(); o > w && !worst.CompareAndSwap(w, o); w = worst.Load() {
				}
				// Every other grant of two or more could not all be used.
				if got >= 2 && j%2 == 0 {
					outstanding.Add(-1)
					if err := b.Return(ctx, 1); err != nil {
						errs <- fmt.Errorf("worker %d return: %w", i, err)
						return
					}
					returned.Add(1)
				}
			}
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if w := worst.Load(); w > capacity {
		t.Errorf("%d tokens were out at once, capacity %d", w, capacity)
	}
	left := e.row("shared").tokens
	spent := granted.Load() - returned.Load()
	if spent > capacity || math.Abs(float64(spent)+left-capacity) > 0.01 {
		t.Fatalf("granted %d, returned %d, %v left: want granted - returned + left = %d", granted.Load(), returned.Load(), left, capacity)
	}
	if left >= 1 {
		t.Fatalf("%v tokens left although the workers asked for far more than the capacity", left)
	}
	t.Logf("granted %d, returned %d", granted.Load(), returned.Load())
}

func TestRefillFollowsTheDatabaseClock(t *testing.T) {
	e := newEnv(t)
	t.Run("time past refills at the rate", func(t *testing.T) {
		b := e.process("past", slow, 10)
		e.age("past", 0, 5500*time.Second) // 5.5 tokens earned
		retryIn := wantTake(t, b, 10, 5)
		// Half a token is missing: 500 s at one token per 1000 s, less the
		// moments the test took.
		wantBetween(t, "retryIn", retryIn, 440*time.Second, 500*time.Second)
	})
	t.Run("refill stops at the capacity", func(t *testing.T) {
		b := e.process("capped", slow, 10)
		e.age("capped", 0, 365*24*time.Hour)
		wantTake(t, b, 100, 10)
	})
	t.Run("take records the refill on the database clock", func(t *testing.T) {
		b := e.process("recorded", slow, 10)
		e.age("recorded", 0, 2000*time.Second)
		wantTake(t, b, 2, 2)
		r := e.row("recorded")
		if r.refilledAt > r.now || r.now-r.refilledAt > int64(time.Minute/time.Microsecond) {
			t.Fatalf("refilled_at is %d µs before the database clock, want a moment", r.now-r.refilledAt)
		}
		wantTake(t, b, 1, 0) // the same 2000 s are never counted twice
	})
	t.Run("a session clock moved ahead refills nothing", func(t *testing.T) {
		// One connection whose NOW() and UTC_TIMESTAMP() say next year, in
		// another time zone. The budget must not believe it.
		db := e.d.RawDB()
		db.SetMaxOpenConns(1)
		for _, q := range []string{"SET timestamp = UNIX_TIMESTAMP(SYSDATE(6)) + 365 * 86400", "SET time_zone = '+13:00'"} {
			if _, err := db.Exec(q); err != nil {
				t.Fatal(err)
			}
		}
		b := e.openOn(db, "session-clock", slow, 4)
		wantTake(t, b, 4, 4)
		wantTake(t, b, 1, 0)
		if _, _, err := budget.Open(t.Context(), db, "session-clock", slow, 4, false); err != nil {
			t.Fatal(err)
		}
		wantTake(t, b, 1, 0)
		r := e.row("session-clock")
		if d := r.now - r.refilledAt; d < 0 || d > int64(time.Minute/time.Microsecond) {
			t.Fatalf("refilled_at is %d µs before the database clock, want a moment (the session's clock leaked in)", d)
		}
	})
	t.Run("a clock that stepped back refills nothing and never moves refilled_at back", func(t *testing.T) {
		b := e.process("stepped-back", slow, 10)
		e.age("stepped-back", 0.5, -time.Hour) // refilled "an hour from now"
		before := e.row("stepped-back").refilledAt
		retryIn := wantTake(t, b, 1, 0)
		// The clock must first reach refilled_at, then earn half a token.
		wantBetween(t, "retryIn", retryIn, time.Hour+440*time.Second, time.Hour+500*time.Second)
		if r := e.row("stepped-back"); r.refilledAt != before || math.Abs(r.tokens-0.5) > 1e-9 {
			t.Fatalf("row moved to %v tokens refilled at %d, want 0.5 at %d", r.tokens, r.refilledAt, before)
		}
	})
}

func TestRetryInSaysWhenTheNextTokenComes(t *testing.T) {
	e := newEnv(t)
	b := e.process("retry", slow, 3)
	if _, retryIn := take(t, b, 3); retryIn != 0 {
		t.Fatalf("a take granted in full says retry in %v, want 0", retryIn)
	}
	retryIn := wantTake(t, b, 1, 0)
	wantBetween(t, "retryIn of an empty budget", retryIn, 940*time.Second, 1000*time.Second)
	e.age("retry", 0.75, 0)
	retryIn = wantTake(t, b, 2, 0)
	wantBetween(t, "retryIn with 0.75 tokens", retryIn, 190*time.Second, 250*time.Second)
	e.age("retry", 3, 0)
	// More than the capacity is never granted at once; the next token is
	// still a full period away.
	retryIn = wantTake(t, b, 5, 3)
	wantBetween(t, "retryIn after draining", retryIn, 940*time.Second, 1000*time.Second)
	// A fast budget says microseconds, rounded up.
	fast := e.process("fast", 1e6, 1)
	wantTake(t, fast, 1, 1)
	if _, retryIn := take(t, fast, 2); retryIn > time.Microsecond {
		t.Fatalf("a budget of a million tokens per second says retry in %v", retryIn)
	}
}

func TestReturnCapsAtCapacity(t *testing.T) {
	e := newEnv(t)
	b := e.process("return", slow, 5)
	wantTake(t, b, 4, 4)
	if err := b.Return(t.Context(), 2); err != nil {
		t.Fatal(err)
	}
	wantTake(t, b, 5, 3)
	if err := b.Return(t.Context(), 0); err != nil {
		t.Fatal(err)
	}
	if err := b.Return(t.Context(), 100); err != nil {
		t.Fatal(err)
	}
	if r := e.row("return"); r.tokens != r.capacity {
		t.Fatalf("returning more than was taken left %v tokens, want the capacity %v", r.tokens, r.capacity)
	}
	wantTake(t, b, 10, 5)
}

func TestOpenValidatesAndNamesFields(t *testing.T) {
	db := newEnv(t).d.FencedDB(fencedwrite.DSNOptions{})
	for _, c := range []struct {
		name   string
		rate   float64
		burst  int
		fields []string
	}{
		{"", 0, 0, []string{"name", "rate", "burst"}},
		{strings.Repeat("é", budget.MaxNameLen+1), 1, 1, []string{"name"}},
		{"trailing ", 1, 1, []string{"name"}},
		{"\xff", 1, 1, []string{"name"}},
		{"p", -1, 1, []string{"rate"}},
		{"p", math.NaN(), 1, []string{"rate"}},
		{"p", math.Inf(1), 1, []string{"rate"}},
		{"p", 1, -3, []string{"burst"}},
	} {
		b, _, err := budget.Open(t.Context(), db, c.name, c.rate, c.burst, false)
		if b != nil || !errors.Is(err, fencedwrite.ErrInvalid) {
			t.Errorf("Open(%q, %v, %d) = %v, %v; want ErrInvalid", c.name, c.rate, c.burst, b, err)
			continue
		}
		var fe *fencedwrite.FieldError
		if !errors.As(err, &fe) {
			t.Errorf("Open(%q, %v, %d): %v is no FieldError", c.name, c.rate, c.burst, err)
		}
		for _, f := range c.fields {
			if !strings.Contains(err.Error(), f+": ") {
				t.Errorf("Open(%q, %v, %d): %q does not name %s", c.name, c.rate, c.burst, err, f)
			}
		}
	}
	if _, _, err := budget.Open(t.Context(), db, strings.Repeat("é", budget.MaxNameLen), 1, 1, false); err != nil {
		t.Errorf("a name of %d characters: %v", budget.MaxNameLen, err)
	}
	b, _, err := budget.Open(t.Context(), db, "valid", 1, 1, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []func() error{
		func() error { _, err := b.Take(t.Context(), 0); return err },
		func() error { _, err := b.Take(t.Context(), -1); return err },
		func() error { return b.Return(t.Context(), -1) },
	} {
		var fe *fencedwrite.FieldError
		if err := f(); !errors.Is(err, fencedwrite.ErrInvalid) || !errors.As(err, &fe) || fe.Field != "n" {
			t.Errorf("%v, want a FieldError naming n", err)
		}
	}
}

func TestRestartDoesNotRefill(t *testing.T) {
	e := newEnv(t)
	b := e.process("restart", slow, 5)
	wantTake(t, b, 5, 5)
	t.Run("a second Open with the same settings", func(t *testing.T) {
		again := e.process("restart", slow, 5)
		wantTake(t, again, 1, 0)
		wantTake(t, b, 1, 0)
	})
	t.Run("a larger burst raises the capacity, not the tokens", func(t *testing.T) {
		bigger, _ := e.change("restart", slow, 50)
		wantTake(t, bigger, 1, 0)
		if r := e.row("restart"); r.capacity != 50 {
			t.Fatalf("capacity %v, want 50", r.capacity)
		}
	})
	t.Run("a new rate applies from now on; time already past keeps the old rate", func(t *testing.T) {
		e.age("restart", 0, 3000*time.Second) // 3 tokens earned at the old rate
		faster, _ := e.change("restart", 1, 50)
		r := e.row("restart")
		if r.rate != 1 || r.tokens < 3 || r.tokens > 3.5 {
			t.Fatalf("rate %v with %v tokens, want rate 1 with the 3 tokens earned at the old rate", r.rate, r.tokens)
		}
		if got, _ := take(t, faster, 50); got < 3 || got > 10 {
			t.Fatalf("granted %d, want the 3 earned plus a few seconds at the new rate", got)
		}
	})
	t.Run("a smaller burst caps the tokens", func(t *testing.T) {
		e.age("restart", 40, 0)
		smaller, _ := e.change("restart", slow, 2)
		if r := e.row("restart"); r.capacity != 2 || r.tokens != 2 {
			t.Fatalf("%v tokens of capacity %v, want 2 of 2", r.tokens, r.capacity)
		}
		wantTake(t, smaller, 3, 2)
	})
}

// The fleet's budget has one rate and one capacity. Open with others is
// refused and changes nothing, unless asked to change them: then it says
// from what to what.
func TestOpenRefusesOtherSettingsUnlessAskedToChange(t *testing.T) {
	e := newEnv(t)
	b := e.process("fleet", slow, 5)
	wantTake(t, b, 2, 2)
	for _, other := range []struct {
		rate  float64
		burst int
	}{{1, 5}, {slow, 50}, {1, 50}} {
		_, changed, err := budget.Open(t.Context(), e.d.FencedDB(fencedwrite.DSNOptions{}), "fleet", other.rate, other.burst, false)
		var se *budget.SettingsError
		if !errors.Is(err, budget.ErrSettingsDiffer) || !errors.As(err, &se) || changed != nil {
			t.Fatalf("open with %v/s and %d: %+v, %v; want ErrSettingsDiffer", other.rate, other.burst, changed, err)
		}
		if se.FleetRate != slow || se.FleetCapacity != 5 || se.Rate != other.rate || se.Capacity != float64(other.burst) {
			t.Errorf("the refusal names %+v, want both settings", se)
		}
		if r := e.row("fleet"); r.rate != slow || r.capacity != 5 || r.tokens < 3 || r.tokens > 3.01 {
			t.Fatalf("the refused Open changed the row: %+v", r)
		}
	}
	if _, changed := e.change("fleet", slow, 5); changed != nil {
		t.Fatalf("the same settings changed %+v", changed)
	}
	_, changed := e.change("fleet", 1, 50)
	if changed == nil || *changed != (budget.Change{FromRate: slow, FromCapacity: 5, ToRate: 1, ToCapacity: 50}) {
		t.Fatalf("changed %+v, want from %v/s and 5 to 1/s and 50", changed, slow)
	}
	if r := e.row("fleet"); r.rate != 1 || r.capacity != 50 {
		t.Fatalf("after the change the row is %+v", r)
	}
}

// Take is BEGIN, SELECT … FOR UPDATE, UPDATE, COMMIT: four statements,
// counted on the wire, on a pool of one connection. Return is one.
func TestTakeCostsFourStatements(t *testing.T) {
	e := newEnv(t)
	db, sent := e.d.CountedDB(fencedwrite.DSNOptions{})
	b := e.openOn(db, "counted", slow, 3)
	cost := func(what string, want int64, f func()) {
		t.Helper()
		before := sent.Sent()
		f()
		if got := sent.Sent() - before; got != want {
			t.Errorf("%s cost %d statements, want %d", what, got, want)
		}
	}
	cost("a take granted in full", 4, func() { wantTake(t, b, 2, 2) })
	cost("a take granted in part", 4, func() { wantTake(t, b, 2, 1) })
	cost("a take of an empty budget", 4, func() { wantTake(t, b, 1, 0) })
	cost("a return", 1, func() {
		if err := b.Return(t.Context(), 1); err != nil {
			t.Fatal(err)
		}
	})
	cost("an empty return", 0, func() {
		if err := b.Return(t.Context(), 0); err != nil {
			t.Fatal(err)
		}
	})
	cost("an open", 4, func() { e.openOn(db, "counted", slow, 3) }) // BEGIN, INSERT, SELECT … FOR UPDATE, COMMIT
}

// The COMMIT of a take reaches the server but its reply is lost: the tokens
// are gone, and the caller is told it was granted none, because it cannot
// prove it paid.
func TestLostCommitReplyGrantsNothing(t *testing.T) {
	e := newEnv(t)
	e.process("lost", slow, 5)
	proxy := dbtest.NewProxy(t, e.d)
	db := proxy.FirstConnectionDB(fencedwrite.DSNOptions{})
	if err := db.PingContext(t.Context()); err != nil { // open the connection before the cut
		t.Fatal(err)
	}
	b := budget.Attach(db, "lost")
	g, err := b.Take(budget.WithBeforeCommit(t.Context(), proxy.CutReplies), 3)
	granted, retryIn := g.Granted, g.RetryIn
	if granted != 0 || retryIn != 0 {
		t.Fatalf("a take whose COMMIT reply was lost granted %d (retry in %v)", granted, retryIn)
	}
	if !errors.Is(err, budget.ErrCommitUnknown) || !errors.Is(err, fencedwrite.ErrCommitUnknown) || errors.Is(err, budget.ErrRolledBack) {
		t.Fatalf("take: %v, want ErrCommitUnknown alone", err)
	}
	if want := "make no call on these tokens"; !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not say %q", err, want)
	}
	// The COMMIT did land: the fleet is 3 tokens short until the refill
	// replaces them, which is the safe side.
	if r := e.row("lost"); math.Abs(r.tokens-2) > 0.01 {
		t.Fatalf("%v tokens left, want the 2 the landed COMMIT left", r.tokens)
	}
	// The pool's next connection goes straight to the server.
	wantTake(t, b, 3, 2)
}

// cutStep is the stride of the byte sweep below.
const cutStep = 11

// onlyOne returns the one sentinel of set that err matches.
func onlyOne(err error, set ...error) (error, error) {
	var got []error
	for _, s := range set {
		if errors.Is(err, s) {
			got = append(got, s)
		}
	}
	if len(got) != 1 {
		return nil, fmt.Errorf("%v matches %d of the outcomes %v", err, len(got), got)
	}
	return got[0], nil
}

// A connection cut at any byte of a take, in either direction, ends in
// exactly one outcome, grants nothing unless the row paid for it, and
// reports "rolled back" only when the row is untouched.
func TestEveryCutOfATakeHasOneTrueOutcome(t *testing.T) {
	e := newEnv(t)
	outcomes := []error{budget.ErrRolledBack, budget.ErrCommitUnknown, budget.ErrNotFound, fencedwrite.ErrInvalid}
	setup := e.d.FencedDB(fencedwrite.DSNOptions{}) // one pool for every budget's row: a pool per cut would hold a connection each
	for _, dir := range []dbtest.Stream{dbtest.Upstream, dbtest.Downstream} {
		seen := map[error]int{}
		for n := 0; ; n += cutStep {
			name := fmt.Sprintf("cut-%s-%d", dir, n)
			e.openOn(setup, name, slow, 3)
			proxy := dbtest.NewProxy(t, e.d)
			proxy.CutAfter(dir, n)
			db := dbtest.OpenDSN(t, proxy.DSN(fencedwrite.DSNOptions{}))
			g, err := budget.Attach(db, name).Take(t.Context(), 2)
			granted := g.Granted
			_ = db.Close()
			proxy.Close()
			left := e.row(name).tokens
			paid, untouched := math.Abs(left-1) < 0.01, math.Abs(left-3) < 0.01
			if !paid && !untouched {
				t.Fatalf("%s cut at %d: %v tokens left, want 3 or 1", dir, n, left)
			}
			if err == nil {
				if granted != 2 || !paid {
					t.Fatalf("%s cut at %d: granted %d with %v tokens left", dir, n, granted, left)
				}
				t.Logf("%s: %d cuts, outcomes %v", dir, n/cutStep, seen)
				break
			}
			if granted != 0 {
				t.Fatalf("%s cut at %d: granted %d with the error %v", dir, n, granted, err)
			}
			outcome, oerr := onlyOne(err, outcomes...)
			if oerr != nil {
				t.Fatalf("%s cut at %d: %v", dir, n, oerr)
			}
			seen[outcome]++
			switch outcome {
			case budget.ErrRolledBack:
				if !untouched {
					t.Fatalf("%s cut at %d: %v, but the row paid", dir, n, err)
				}
			case budget.ErrCommitUnknown:
			default:
				t.Fatalf("%s cut at %d: unexpected %v", dir, n, err)
			}
		}
	}
}

// The application's least-privilege account (migrations.AppGrants) runs the
// budget, and cannot delete it.
func TestLeastPrivilegeAccountRunsTheBudget(t *testing.T) {
	e := newEnv(t)
	app := dbtest.Account(t, e.raw, e.d.Name, migrations.AppGrants)
	dsn, err := fencedwrite.DSN(app.FormatDSN(), fencedwrite.DSNOptions{})
	if err != nil {
		t.Fatal(err)
	}
	db := dbtest.OpenDSN(t, dsn)
	b := e.openOn(db, "app", slow, 3)
	wantTake(t, b, 2, 2)
	if err := b.Return(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	if _, changed, err := budget.Open(t.Context(), db, "app", slow, 4, true); err != nil || changed == nil {
		t.Fatalf("change the burst as the application: %+v, %v", changed, err)
	}
	wantTake(t, b, 5, 2)
	for _, q := range []string{"DELETE FROM provider_budgets", "TRUNCATE provider_budgets", "REPLACE INTO provider_budgets SELECT * FROM provider_budgets"} {
		var me *mysql.MySQLError
		if _, err := db.Exec(q); !errors.As(err, &me) || me.Number != 1142 {
			t.Errorf("%s as the application: %v, want a privilege error", q, err)
		}
	}
}

// The table's constraints hold whoever writes.
func TestTableRefusesImpossibleBudgets(t *testing.T) {
	e := newEnv(t)
	e.process("checked", slow, 3)
	for _, q := range []string{
		"UPDATE provider_budgets SET tokens = -1 WHERE name = 'checked'",
		"UPDATE provider_budgets SET tokens = capacity + 1 WHERE name = 'checked'",
		"UPDATE provider_budgets SET rate = 0 WHERE name = 'checked'",
		"UPDATE provider_budgets SET capacity = 0.5, tokens = 0 WHERE name = 'checked'",
	} {
		var me *mysql.MySQLError
		// 4025 is MariaDB's CONSTRAINT_FAILED, 3819 MySQL's.
		if _, err := e.raw.ExecContext(context.Background(), q); !errors.As(err, &me) || (me.Number != 4025 && me.Number != 3819) {
			t.Errorf("%s: %v, want a check constraint violation", q, err)
		}
	}
}
