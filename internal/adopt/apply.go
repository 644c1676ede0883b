package adopt

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/fencekit/fencekit/migrations"
)

// StepError is a step of Apply that failed. The steps before it are done;
// the database is usable as it is (legacy writers go on), and running apply
// again plans from where it stopped and continues.
type StepError struct {
	Step string
	SQL  string
	Err  error
	// Kind is the plan's ("adopt", or "adopt rollback"): what to run again.
	Kind string
}

func (e *StepError) Error() string {
	kind := e.Kind
	if kind == "" {
		kind = "adopt"
	}
	return fmt.Sprintf("%s: step %s failed (%s): %v; the steps before it are done and each is safe to run again: "+
		"fix the cause, then run `refundd %s apply` again with the same flags, which plans from where it stopped", kind, e.Step, abbreviate(e.SQL, 200), e.Err, kind)
}

func (e *StepError) Unwrap() error { return e.Err }

func abbreviate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// Result is what Apply did: the plan it ran and how long each step took.
type Result struct {
	Plan      *Plan
	Durations map[string]time.Duration
}

// Apply plans the adoption of the database db is connected to (NewPlan)
// and runs it, step by step. DDL runs with a 5 s lock_wait_timeout, retried,
// so that a metadata lock never queues writers behind a long transaction
// for longer; every batch is its own transaction. Run it with the migration
// account. When a step fails, Apply stops with a *StepError: the steps
// before it are done, and running Apply again continues.
func Apply(ctx context.Context, db *sql.DB, o Options) (*Result, error) {
	o = o.withDefaults()
	p, err := NewPlan(ctx, db, o)
	if err != nil {
		return nil, err
	}
	return run(ctx, db, p, o)
}

// setSession prepares the session a plan runs in: DDL waits 5 s for a
// metadata lock, then is retried (execRetrying); the session is on UTC, so
// that a TIMESTAMP that becomes a DATETIME keeps its instant (the server
// converts it in the session's zone), as fencekit reads it; and its
// sql_mode is strict (sessionMode).
func setSession(ctx context.Context, conn *sql.Conn) error {
	for _, q := range []string{"SET SESSION lock_wait_timeout = 5", "SET SESSION time_zone = '+00:00'"} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("adopt: %s: %w", q, err)
		}
	}
	// MySQL 8 caches information_schema.TABLES.AUTO_INCREMENT, which the
	// online copy carries over; MariaDB has no such cache (no variable).
	if _, err := conn.ExecContext(ctx, "SET SESSION information_schema_stats_expiry = 0"); err != nil && !unknownVariable(err) {
		return fmt.Errorf("adopt: set information_schema_stats_expiry: %w", err)
	}
	return sessionMode(ctx, conn)
}

func unknownVariable(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == 1193
}

// runLock is the advisory lock one apply or rollback holds on its database
// for its whole run: a second run at the same moment would take the first
// one's live shadow table for a leftover and drop it under the copy.
func runLock(db string) string { return "fencekit_adopt:" + db }

func runStep(ctx context.Context, db *sql.DB, conn *sql.Conn, p *Plan, s Step, o Options) error {
	for i, q := range s.SQL {
		err := execRetrying(ctx, conn, q)
		if err != nil && notOnline(err) && i < len(s.alt) && s.alt[i] != "" {
			// The server has no such online path for this change: the
			// step's next best (INPLACE instead of INSTANT).
			q = s.alt[i]
			err = execRetrying(ctx, conn, q)
		}
		if err != nil && strings.HasPrefix(q, lockTables) && accessDenied(err) {
			// The account may not LOCK TABLES: create the triggers
			// unlocked (the plan's Locks say what that means).
			continue
		}
		if err != nil {
			return &StepError{Step: s.Name, SQL: q, Err: err}
		}
	}
	if s.copy != nil {
		if err := runOnline(ctx, conn, s, o); err != nil {
			return err
		}
	}
	for _, q := range s.Batched {
		lo := int64(math.MinInt64)
		if s.From != 0 {
			lo = s.From
		}
		err := walk(ctx, conn, lo, math.MaxInt64, o.BatchSize, func(lo, hi int64) error {
			if _, err := conn.ExecContext(ctx, q, lo, hi); err != nil {
				return fmt.Errorf("batch id %d to %d: %w", lo, hi, err)
			}
			if o.Hooks.AfterBatch != nil {
				o.Hooks.AfterBatch(s.Name, lo, hi)
			}
			return nil
		})
		if err != nil {
			return &StepError{Step: s.Name, SQL: q, Err: err}
		}
	}
	if s.baseline {
		if err := migrations.RecordBaseline(ctx, db, p.Baseline, p.BaselineDesc); err != nil {
			return &StepError{Step: s.Name, SQL: "record the baseline", Err: err}
		}
	}
	return nil
}

// walk calls batch for each range of size ids of refund_jobs from lo (the
// table's lowest id when lo is math.MinInt64) up to top. Each range starts at the
// next id the table has, so that a gap of billions of ids costs one
// query, and ends at most at the top of BIGINT; ids of 0 and below are
// covered too. Rows the legacy writers insert meanwhile are covered when
// their id is ahead.
func walk(ctx context.Context, conn *sql.Conn, lo, top int64, size int, batch func(lo, hi int64) error) error {
	for {
		// Not MIN(id): MariaDB 10.11 answers SELECT MIN(id) WHERE id >= c
		// with the column's top value when c is past its type's range
		// (INT UNSIGNED, c = 2^32+1 gives 2^32-1), and the walk would
		// never end (TestApplyKeepsTheTopOfAnUnsignedInt).
		var next int64
		err := conn.QueryRowContext(ctx, "SELECT id FROM "+quote(Table)+" WHERE id >= ? ORDER BY id LIMIT 1", lo).Scan(&next)
		if errors.Is(err, sql.ErrNoRows) || err == nil && (next < lo || next > top) {
			return nil
		}
		if err != nil {
			return err
		}
		lo = next
		hi := lo + int64(size) - 1
		if hi < lo || hi > top {
			hi = top
		}
		if err := batch(lo, hi); err != nil {
			return err
		}
		if hi == top {
			return nil
		}
		lo = hi + 1
	}
}

// sessionMode makes apply's session strict, whatever the server's default
// (a value that does not fit fails the statement, apply stops and nothing
// is lost, instead of being stored truncated or empty), and drops
// NO_BACKSLASH_ESCAPES, so that the string literals of the plan's
// statements (sqlString) mean what they say.
func sessionMode(ctx context.Context, conn *sql.Conn) error {
	var mode string
	if err := conn.QueryRowContext(ctx, "SELECT @@SESSION.sql_mode").Scan(&mode); err != nil {
		return fmt.Errorf("adopt: read sql_mode: %w", err)
	}
	var modes []string
	strict := false
	for _, m := range strings.Split(mode, ",") {
		switch m {
		case "", "NO_BACKSLASH_ESCAPES", "PAD_CHAR_TO_FULL_LENGTH":
			// PAD_CHAR_TO_FULL_LENGTH would copy a CHAR's value with its
			// padding into a VARCHAR: 'abc     ', another idempotency key.
			continue
		case "NO_AUTO_VALUE_ON_ZERO":
			continue // added below, once
		case "STRICT_TRANS_TABLES", "STRICT_ALL_TABLES":
			strict = true
		}
		modes = append(modes, m)
	}
	if !strict {
		modes = append(modes, "STRICT_TRANS_TABLES")
	}
	// An id of 0 is kept as 0 wherever adopt copies a row (the online copy,
	// rollback's archived jobs back), not given the next AUTO_INCREMENT.
	modes = append(modes, "NO_AUTO_VALUE_ON_ZERO")
	if _, err := conn.ExecContext(ctx, "SET SESSION sql_mode = ?", strings.Join(modes, ",")); err != nil {
		return fmt.Errorf("adopt: set sql_mode: %w", err)
	}
	return nil
}

// execRetrying runs a DDL statement, again after a lock wait timeout (a
// long transaction held the table's metadata lock), up to 10 times.
func execRetrying(ctx context.Context, conn *sql.Conn, q string) error {
	var err error
	for range 10 {
		if _, err = conn.ExecContext(ctx, q); err == nil || !lockWaitTimeout(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return err
}

func accessDenied(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && (me.Number == 1044 || me.Number == 1142 || me.Number == 1227)
}

func lockWaitTimeout(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == 1205
}
