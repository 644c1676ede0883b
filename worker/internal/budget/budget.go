// Package budget is the provider's outbound budget, shared by every worker
// process of the fleet: a token bucket kept in one row of provider_budgets
// (migrations/20261203130000_provider_budgets.sql).
//
// Every provider call costs one token: first sends, resends and reconciles
// alike, and a takeover adds no quota (DESIGN.md, "Scheduling and budgets").
// The bucket refills continuously at its rate, up to its capacity, measured
// on the database's real clock (fencedwrite.ClockMicros), which neither a
// worker's clock nor a session's SET timestamp can move.
//
// Tokens are taken in a short transaction of their own, never inside a
// claim: a budget row locked by every claim would be a hot spot and a
// deadlock risk. The worker takes tokens first, claims at most as many jobs
// as it was granted, and gives back what it could not use.
//
// The row's rate and capacity are the fleet's: Open refuses other settings
// unless asked to change them (ErrSettingsDiffer).
package budget

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-sql-driver/mysql"

	"github.com/fencekit/fencekit/fencedwrite"
)

// MaxNameLen is the longest budget name, in characters (provider_budgets.name).
const MaxNameLen = 64

// The outcomes of Take and Return besides validation (which matches
// fencedwrite.ErrInvalid through a *fencedwrite.FieldError). Every error
// Take returns matches exactly one of ErrInvalid, ErrNotFound, ErrRolledBack
// and ErrCommitUnknown, and comes with 0 tokens granted.
var (
	// ErrCommitUnknown means the change was sent (Take's COMMIT, Return's
	// UPDATE) and its reply never arrived: the tokens may or may not have
	// moved. From Take it means granted is 0: make no provider call on the
	// strength of this Take, even though the tokens may be gone, and do not
	// Return them either (they may never have been taken). At worst the
	// fleet's budget is short by the tokens asked for until the refill
	// replaces them; calling Take again is safe. From Return, do not retry:
	// a second Return could give back tokens twice. It matches
	// fencedwrite.ErrCommitUnknown.
	ErrCommitUnknown = fmt.Errorf("budget %w", fencedwrite.ErrCommitUnknown)

	// ErrRolledBack means nothing was changed: a statement failed (a lock
	// wait timeout, a deadlock, a broken connection) or the server refused
	// the COMMIT. No tokens were taken or given back; retrying later is safe.
	// It matches fencedwrite.ErrRolledBack.
	ErrRolledBack = fmt.Errorf("budget change %w", fencedwrite.ErrRolledBack)

	// ErrNotFound means the budget's row does not exist (Open creates it).
	ErrNotFound = errors.New("budget not found")
)

// Bucket is one named budget of the fleet. It holds no state of its own:
// every call reads and writes the row, so any number of Buckets in any
// number of processes share the same tokens. A Bucket is safe for
// concurrent use.
type Bucket struct {
	db   *sql.DB
	name string
}

// Name returns the budget's name.
func (b *Bucket) Name() string { return b.name }

// ErrSettingsDiffer means the budget's row exists with another rate or
// capacity than the ones Open was given, and Open was not asked to change
// them: nothing was changed. The error is a *SettingsError.
var ErrSettingsDiffer = errors.New("budget settings differ from the fleet's")

// SettingsError is Open's refusal to change a fleet's budget behind its
// back. It matches ErrSettingsDiffer.
type SettingsError struct {
	Name                     string
	Rate, Capacity           float64 // what Open was given
	FleetRate, FleetCapacity float64 // what the row holds
}

func (e *SettingsError) Error() string {
	return fmt.Sprintf("rate %v/s and burst %v differ from the fleet's %v/s and %v", e.Rate, e.Capacity, e.FleetRate, e.FleetCapacity)
}

func (e *SettingsError) Unwrap() error { return ErrSettingsDiffer }

// Change is a change of a budget's settings that Open made.
type Change struct {
	FromRate, FromCapacity float64
	ToRate, ToCapacity     float64
}

// Open returns the budget named name on db, creating its row full (burst
// tokens) when it is missing. rate is the tokens added per second, burst
// the capacity; the row's are the ones every Take of the fleet uses.
//
// When the row exists with the same settings, Open keeps its tokens (a
// restart does not refill a drained budget). With other settings it
// refuses (a *SettingsError, matching ErrSettingsDiffer) and changes
// nothing, unless change is true: then it settles the refill earned so far
// at the row's old rate and capacity, sets the new ones, caps the tokens at
// the new capacity, and returns what it changed (nil when nothing). One
// process started with another rate must not rewrite the whole fleet's
// behind its back.
//
// It runs one short transaction: BEGIN, an INSERT that creates the row or
// leaves it, a locking read, an UPDATE only when it changes the settings,
// COMMIT. db should be opened with fencedwrite.DSN: a short lock wait
// timeout bounds how long Open waits for the row, network timeouts bound a
// dead server, and interpolateParams keeps Take at four round trips.
//
// Invalid arguments return an error naming each field that matches
// fencedwrite.ErrInvalid; nothing was sent. Any other error but a
// *SettingsError means the row may or may not have been created or
// changed; calling Open again is safe.
func Open(ctx context.Context, db *sql.DB, name string, rate float64, burst int, change bool) (*Bucket, *Change, error) {
	if err := validate(name, rate, burst); err != nil {
		return nil, nil, fmt.Errorf("open budget %q: %w", name, err)
	}
	c, err := open(ctx, db, name, rate, float64(burst), change)
	if err != nil {
		return nil, nil, fmt.Errorf("open budget %q: %w", name, err)
	}
	return &Bucket{db: db, name: name}, c, nil
}

func open(ctx context.Context, db *sql.DB, name string, rate, capacity float64, change bool) (*Change, error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }() // a no-op after COMMIT
	// A new row starts full; an existing one is left as it is (and locked).
	if _, err := tx.ExecContext(ctx, "INSERT INTO `provider_budgets` (`name`, `tokens`, `capacity`, `rate`, `refilled_at`) "+
		"VALUES (?, ?, ?, ?, "+fencedwrite.ClockUTC+") ON DUPLICATE KEY UPDATE `name` = `name`", name, capacity, capacity, rate); err != nil {
		return nil, fmt.Errorf("create: %w", err)
	}
	var r row
	if err := tx.QueryRowContext(ctx, "SELECT `tokens`, `capacity`, `rate`, "+fencedwrite.Micros("`refilled_at`")+", "+fencedwrite.ClockMicros+
		" FROM `provider_budgets` WHERE `name` = ? FOR UPDATE", name).Scan(&r.tokens, &r.capacity, &r.rate, &r.refilledAt, &r.now); err != nil {
		return nil, fmt.Errorf("lock: %w", err)
	}
	if r.rate == rate && r.capacity == capacity {
		return nil, tx.Commit()
	}
	if !change {
		return nil, &SettingsError{Name: name, Rate: rate, Capacity: capacity, FleetRate: r.rate, FleetCapacity: r.capacity}
	}
	// The refill earned so far is settled at the old rate and capacity; the
	// new ones apply from now on.
	g := r.take(0)
	if _, err := tx.ExecContext(ctx, "UPDATE `provider_budgets` SET `tokens` = ?, `refilled_at` = "+fromMicros("?")+", `capacity` = ?, `rate` = ? WHERE `name` = ?",
		min(g.tokens, capacity), g.refilledAt, capacity, rate, name); err != nil {
		return nil, fmt.Errorf("change: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("commit: %w", err)
	}
	return &Change{FromRate: r.rate, FromCapacity: r.capacity, ToRate: rate, ToCapacity: capacity}, nil
}

func validate(name string, rate float64, burst int) error {
	var errs []error
	switch n := utf8.RuneCountInString(name); {
	case name == "":
		errs = append(errs, &fencedwrite.FieldError{Field: "name", Problem: "must not be empty"})
	case !utf8.ValidString(name):
		errs = append(errs, &fencedwrite.FieldError{Field: "name", Problem: "must be valid UTF-8"})
	case n > MaxNameLen:
		errs = append(errs, &fencedwrite.FieldError{Field: "name", Problem: fmt.Sprintf("must be at most %d characters, got %d", MaxNameLen, n)})
	case strings.TrimSpace(name) != name:
		// The column's collation ignores trailing spaces: "a" and "a " would
		// be the same budget.
		errs = append(errs, &fencedwrite.FieldError{Field: "name", Problem: "must not begin or end with spaces"})
	}
	if !(rate > 0) || math.IsInf(rate, 0) {
		errs = append(errs, &fencedwrite.FieldError{Field: "rate", Problem: fmt.Sprintf("must be a positive number of tokens per second, got %v", rate)})
	}
	if burst < 1 {
		errs = append(errs, &fencedwrite.FieldError{Field: "burst", Problem: fmt.Sprintf("must be at least 1, got %d", burst)})
	}
	return errors.Join(errs...)
}

// Grant is what a Take granted, and the budget as the Take left it.
type Grant struct {
	// Granted is how many tokens were taken: min(n, the whole tokens
	// available), possibly 0.
	Granted int
	// RetryIn, when fewer than n were granted, is how long, on the
	// database's clock, until the next whole token (n larger than the
	// capacity is never granted at once; RetryIn still says when the next
	// token comes). Zero when all were granted.
	RetryIn time.Duration
	// Left is the tokens the row holds after the grant, a fraction
	// included; Capacity and Rate are the row's settings. A caller that
	// keeps a reserve for some of its calls measures it against them.
	Left, Capacity, Rate float64
}

// Take asks for n tokens (n ≥ 1), one per provider call, and returns the
// Grant. Take never waits for tokens; it only waits for the row's lock, at
// most the session's innodb_lock_wait_timeout.
//
// It runs one short transaction of its own: BEGIN, a SELECT … FOR UPDATE of
// the row by primary key, an UPDATE, COMMIT. Call it outside any claim.
//
// Only a nil error grants tokens, and only after the server acknowledged
// the COMMIT. On any error the Grant is zero and the caller makes no
// provider call: ErrRolledBack (nothing was taken; retry later), ErrCommitUnknown
// (the reply of the COMMIT was lost, so the tokens may be gone; see there),
// ErrNotFound, or an invalid n (fencedwrite.ErrInvalid).
func (b *Bucket) Take(ctx context.Context, n int) (Grant, error) {
	if n < 1 {
		return Grant{}, fmt.Errorf("take from budget %q: %w", b.name, &fencedwrite.FieldError{Field: "n", Problem: fmt.Sprintf("must be at least 1, got %d", n)})
	}
	g, r, err := b.take(ctx, n)
	if err != nil {
		return Grant{}, fmt.Errorf("take %d from budget %q: %w", n, b.name, err)
	}
	return Grant{Granted: g.granted, RetryIn: g.retryIn, Left: g.tokens, Capacity: r.capacity, Rate: r.rate}, nil
}

func (b *Bucket) take(ctx context.Context, n int) (grant, row, error) {
	tx, err := b.db.BeginTx(ctx, nil)
	if err != nil {
		return grant{}, row{}, fmt.Errorf("%w: begin: %w", ErrRolledBack, err)
	}
	defer func() { _ = tx.Rollback() }() // a no-op after COMMIT
	var r row
	err = tx.QueryRowContext(ctx, "SELECT `tokens`, `capacity`, `rate`, "+fencedwrite.Micros("`refilled_at`")+", "+fencedwrite.ClockMicros+
		" FROM `provider_budgets` WHERE `name` = ? FOR UPDATE", b.name).Scan(&r.tokens, &r.capacity, &r.rate, &r.refilledAt, &r.now)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return grant{}, row{}, ErrNotFound
	case err != nil:
		return grant{}, row{}, fmt.Errorf("%w: lock the budget: %w", ErrRolledBack, err)
	}
	g := r.take(n)
	if _, err := tx.ExecContext(ctx, "UPDATE `provider_budgets` SET `tokens` = ?, `refilled_at` = "+fromMicros("?")+" WHERE `name` = ?",
		g.tokens, g.refilledAt, b.name); err != nil {
		return grant{}, row{}, fmt.Errorf("%w: update the budget: %w", ErrRolledBack, err)
	}
	hooksOf(ctx).call(hookBeforeCommit)
	if err := tx.Commit(); err != nil {
		if fencedwrite.CommitMayHaveLanded(err) {
			return grant{}, row{}, fmt.Errorf("%w: make no call on these tokens and do not return them: %w", ErrCommitUnknown, err)
		}
		return grant{}, row{}, fmt.Errorf("%w: commit: %w", ErrRolledBack, err)
	}
	return g, r, nil
}

// Return gives back n unused tokens (n ≥ 0; 0 sends nothing), never filling
// the budget past its capacity. It is one UPDATE statement. Return to a
// budget whose row does not exist changes nothing.
//
// A nil error means the tokens are back. ErrRolledBack means they are not;
// retrying is safe. ErrCommitUnknown means they may or may not be: do not
// retry (that could give them back twice); at worst the budget is short by
// n until the refill replaces them.
func (b *Bucket) Return(ctx context.Context, n int) error {
	switch {
	case n < 0:
		return fmt.Errorf("return to budget %q: %w", b.name, &fencedwrite.FieldError{Field: "n", Problem: fmt.Sprintf("must not be negative, got %d", n)})
	case n == 0:
		return nil
	}
	_, err := b.db.ExecContext(ctx, "UPDATE `provider_budgets` SET `tokens` = LEAST(`capacity`, `tokens` + ?) WHERE `name` = ?", n, b.name)
	if err != nil {
		outcome := ErrCommitUnknown
		if statementNeverRan(err) {
			outcome = ErrRolledBack
		}
		return fmt.Errorf("return %d to budget %q: %w: %w", n, b.name, outcome, err)
	}
	return nil
}

// statementNeverRan reports whether err proves an autocommit statement did
// not run: the server answered with an error, or the driver sent nothing.
// A context error does not prove it: the driver reports one when it gives up
// on a statement already sent.
func statementNeverRan(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) || errors.Is(err, driver.ErrBadConn)
}

// fromMicros is the SQL of a UTC DATETIME(6) from microseconds since the
// epoch (the inverse of fencedwrite.Micros), independent of the session's
// time zone and the driver's loc.
func fromMicros(expr string) string {
	return "TIMESTAMPADD(MICROSECOND, " + expr + ", TIMESTAMP'1970-01-01 00:00:00')"
}

// row is a budget as Take's locking read found it, with the database's
// clock at that moment; times are microseconds since the epoch.
type row struct {
	tokens, capacity, rate float64
	refilledAt, now        int64
}

// grant is what Take decided: the tokens granted and the row to write.
type grant struct {
	granted    int
	retryIn    time.Duration
	tokens     float64
	refilledAt int64
}

// take refills r up to now and takes up to n whole tokens. A clock that
// stepped back (now before refilled_at) refills nothing, and refilled_at
// never moves back, so no stretch of time is ever counted twice.
func (r row) take(n int) grant {
	elapsed := max(0, r.now-r.refilledAt)
	avail := min(r.capacity, r.tokens+float64(elapsed)*r.rate/1e6)
	avail = max(0, avail)
	g := grant{refilledAt: max(r.refilledAt, r.now)}
	whole := math.Floor(avail)
	if float64(n) <= whole {
		g.granted = n
	} else {
		g.granted = int(whole)
	}
	g.tokens = avail - float64(g.granted)
	if g.granted < n {
		// g.tokens < 1 here. The next whole token comes once the clock
		// reaches refilledAt again (if it stepped back) and the missing
		// fraction has dripped in; round up to the clock's microsecond.
		drip := math.Ceil((1 - g.tokens) / r.rate * 1e6)
		if g.tokens+drip*r.rate/1e6 < 1 {
			// Rounding left the refill a hair short of the token.
			drip += roundingSlack(r.rate)
		}
		wait := float64(g.refilledAt-r.now) + drip
		g.retryIn = maxRetry
		if wait < float64(maxRetry/time.Microsecond) {
			g.retryIn = time.Duration(wait) * time.Microsecond
		}
	}
	return g
}

// roundingSlack is the microseconds that outweigh a few units of rounding
// error in a refill of about one token at rate: at most a microsecond for
// any rate of a token per second or more.
func roundingSlack(rate float64) float64 {
	return math.Ceil(4 * 0x1p-52 * 1e6 / rate)
}

// maxRetry caps retryIn for budgets so slow that the next token is further
// away than a Duration can say.
const maxRetry = time.Duration(math.MaxInt64)
