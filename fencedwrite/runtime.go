package fencedwrite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"

	"entgo.io/ent/dialect"
	"github.com/go-sql-driver/mysql"
)

// What services need from the fenced layer's runtime, without its
// constructors: the database clock, the batch bound, the COMMIT outcome rule,
// the test signals and deferred business rows. The runtime itself
// (fencedwrite/fencedrt) is for generated code only; fencelint reports any
// other use.

// The database clock that no session can move. NOW(), UTC_TIMESTAMP() and
// UNIX_TIMESTAMP() follow a session's `SET timestamp = …`, and NOW() and
// SYSDATE() follow its time_zone. SYSDATE() reads the server's real clock,
// and UNIX_TIMESTAMP(SYSDATE(6)) turns it back into seconds since the epoch
// through the session's own time zone, so the result is the same whatever
// either setting says. MySQL and MariaDB both behave so, unless the server
// runs with --sysdate-is-now (docs/mysql-mariadb.md).
const (
	// ClockMicros is the real time, in microseconds since the Unix epoch.
	ClockMicros = "CAST(UNIX_TIMESTAMP(SYSDATE(6)) * 1000000 AS SIGNED)"
	// ClockUTC is the real time as a UTC DATETIME(6).
	ClockUTC = "TIMESTAMPADD(MICROSECOND, " + ClockMicros + ", TIMESTAMP'1970-01-01 00:00:00')"
	// ScanClock is ClockUTC read once for a scan: a derived table of one
	// row, joined in the FROM clause, whose value (ScanNow) the optimizer
	// takes as a constant, so that `col <= ScanNow` bounds a range of col's
	// index. ClockUTC itself in a WHERE is evaluated per row (SYSDATE), and
	// the scan reads the index by its earlier columns alone. MySQL 8 never
	// merges a derived table without an underlying table into the outer
	// query; MariaDB reads it as a system table.
	ScanClock = "(SELECT " + ClockUTC + " AS `fk_scan_now`) `fk_clock`"
	// ScanNow is ScanClock's value.
	ScanNow = "`fk_clock`.`fk_scan_now`"
)

// Micros is the SQL that turns a UTC DATETIME(6) column into microseconds
// since the epoch: readers then never depend on the driver's loc setting.
func Micros(col string) string {
	return "TIMESTAMPDIFF(MICROSECOND, TIMESTAMP'1970-01-01 00:00:00', " + col + ")"
}

// MaxBatch bounds how many jobs one batch claim (ClaimDue, TakeoverExpired)
// takes.
const MaxBatch = 1000

// CommitMayHaveLanded reports whether err, returned by COMMIT, leaves the
// outcome open. A server error reply, or an error raised before anything was
// sent, means the transaction did not commit; a broken connection after the
// COMMIT was sent (mysql.ErrInvalidConn, an I/O error) means it may have.
// When in doubt it says true: the caller then re-reads, or reports the
// outcome unknown.
func CommitMayHaveLanded(err error) bool {
	var me *mysql.MySQLError
	switch {
	case err == nil:
		return false
	case errors.As(err, &me):
		return false
	case errors.Is(err, sql.ErrTxDone), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		// database/sql checks the context before sending COMMIT and rolls
		// back instead.
		return false
	case errors.Is(err, driver.ErrBadConn):
		// The MySQL driver returns ErrBadConn only when nothing was sent.
		return false
	default:
		return true
	}
}

// Hooks are test signals: functions the runtime calls at the moments a test
// needs to order actors around, instead of sleeping. They travel in the
// context of one call, so concurrent workers each have their own.
type Hooks struct {
	// BeforeClaimCommit runs right before a claim's or a takeover's COMMIT
	// is sent.
	BeforeClaimCommit func()
	// ClaimsCommitting runs right before BeforeClaimCommit with the claims
	// the COMMIT is about to make: when its reply is lost, these are the
	// jobs whose claim may or may not have landed.
	ClaimsCommitting func([]Claiming)
	// BeforeCommit runs right before a runner's COMMIT (Apply, Run,
	// ApplyBatch, Enqueue) goes through Ent's commit hooks.
	BeforeCommit func()
	// BeforeReRead runs after a COMMIT whose reply was lost, right before
	// the runner's locking re-read.
	BeforeReRead func()
}

// Claiming is a claim or takeover a COMMIT is about to make: the job and
// the attempt it takes. It is not a lease.
type Claiming struct {
	ID      int64
	Attempt int64
}

type hooksKey struct{}

// WithHooks returns ctx carrying h for the fenced layer's calls made with
// it.
func WithHooks(ctx context.Context, h Hooks) context.Context {
	return context.WithValue(ctx, hooksKey{}, h)
}

// HooksOf returns the hooks ctx carries, for the runtime.
func HooksOf(ctx context.Context) Hooks {
	h, _ := ctx.Value(hooksKey{}).(Hooks)
	return h
}

type deferKey struct{}

// WithDeferredRows lets the business writes of an ApplyBatch run with ctx
// hand their rows to the runner (the generated DeferRow), which makes the
// rows of one kind in one statement after every item's callback and before
// the COMMIT. A callback that reads what another callback of the batch wrote
// must not be run with it.
func WithDeferredRows(ctx context.Context) context.Context {
	return context.WithValue(ctx, deferKey{}, true)
}

// DefersRows reports whether ctx carries WithDeferredRows, for the runtime.
func DefersRows(ctx context.Context) bool {
	v, _ := ctx.Value(deferKey{}).(bool)
	return v
}

// RowBatch is a kind of business write that a batch's runner may make for
// several items in one statement: one row each, named by its key. Values of
// the same kind share a statement, so a kind must be comparable.
type RowBatch interface {
	// ExecRows writes rows, one row each, in one statement on exec, and
	// returns how many rows it changed.
	ExecRows(ctx context.Context, exec dialect.ExecQuerier, rows []BatchRow) (int64, error)
}

// BatchRow is one item's row of a RowBatch: its key and its values.
type BatchRow struct {
	Key    string
	Values []any
}

// Applied describes a fenced write applied in the current run (the
// generated AppliedInRun): business writes check it to pair with the job's
// transition (the ledger settles only with its job's completion).
type Applied struct {
	Table   string
	ID      int64
	Key     string // the job's operation key
	Op      string // the transition, e.g. "complete"
	To      string // the state it leaves the job in
	Attempt int64  // the attempt the row is left at
	// Values are the transition's values by argument name (e.g.
	// ValueProviderRefundID).
	Values map[string]any
}

// ValueProviderRefundID names the provider's refund id among Applied.Values.
const ValueProviderRefundID = "provider refund id"
