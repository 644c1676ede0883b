package fencedrt

import (
	"context"
	stdsql "database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"sync"

	"entgo.io/ent/dialect"
	"github.com/go-sql-driver/mysql"

	"github.com/fencekit/fencekit/fencedwrite"
	"github.com/fencekit/fencekit/fencedwrite/internal/sqltext"
)

// Guard wraps the pool a runner starts its transaction from. The
// transaction it starts (a *GuardedTx) refuses every statement that would
// end or change the transaction behind the runner's back, refuses Commit and
// Rollback until the runner allows them, and stops sending statements once
// the server has ended the transaction by itself (a deadlock, a lock wait
// timeout, a broken connection): statements sent after that would run in
// autocommit mode and outlive the rollback.
func Guard(drv dialect.Driver) *GuardedDriver { return &GuardedDriver{Driver: drv} }

// GuardedDriver is the driver Guard returns. It starts one transaction.
type GuardedDriver struct {
	dialect.Driver
	tx *GuardedTx
}

// Tx starts the guarded transaction.
func (g *GuardedDriver) Tx(ctx context.Context) (dialect.Tx, error) {
	tx, err := g.Driver.Tx(ctx)
	if err != nil {
		return nil, err
	}
	g.tx = &GuardedTx{tx: tx}
	return g.tx, nil
}

// Started returns the transaction Tx started, nil before.
func (g *GuardedDriver) Started() *GuardedTx { return g.tx }

// GuardedTx is a transaction that only its runner ends.
type GuardedTx struct {
	tx dialect.Tx

	mu         sync.Mutex
	ended      bool  // Commit or Rollback went through
	endAllowed bool  // the runner is ending it
	commitSent bool  // the runner's Commit reached the driver
	broken     error // the server ended the transaction by itself
}

// Exec checks query and runs it in the transaction.
func (g *GuardedTx) Exec(ctx context.Context, query string, args, v any) error {
	if err := g.before(query); err != nil {
		return err
	}
	return g.after(g.tx.Exec(ctx, query, args, v))
}

// Query checks query and runs it in the transaction.
func (g *GuardedTx) Query(ctx context.Context, query string, args, v any) error {
	if err := g.before(query); err != nil {
		return err
	}
	return g.after(g.tx.Query(ctx, query, args, v))
}

// ExecContext checks query and runs it in the transaction, for Ent's
// sql/execquery feature (tx.ExecContext).
func (g *GuardedTx) ExecContext(ctx context.Context, query string, args ...any) (stdsql.Result, error) {
	ex, ok := g.tx.(interface {
		ExecContext(context.Context, string, ...any) (stdsql.Result, error)
	})
	if !ok {
		return nil, fmt.Errorf("exec: the driver's transaction has no ExecContext")
	}
	if err := g.before(query); err != nil {
		return nil, err
	}
	res, err := ex.ExecContext(ctx, query, args...)
	return res, g.after(err)
}

// QueryContext checks query and runs it in the transaction, for Ent's
// sql/execquery feature (tx.QueryContext).
func (g *GuardedTx) QueryContext(ctx context.Context, query string, args ...any) (*stdsql.Rows, error) {
	q, ok := g.tx.(interface {
		QueryContext(context.Context, string, ...any) (*stdsql.Rows, error)
	})
	if !ok {
		return nil, fmt.Errorf("query: the driver's transaction has no QueryContext")
	}
	if err := g.before(query); err != nil {
		return nil, err
	}
	rows, err := q.QueryContext(ctx, query, args...)
	return rows, g.after(err)
}

func (g *GuardedTx) before(query string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.broken != nil {
		return fmt.Errorf("the server already rolled back this transaction, so nothing more is sent in it: %w", g.broken)
	}
	return CheckStatement(query)
}

func (g *GuardedTx) after(err error) error {
	if err != nil && endsTransaction(err) {
		g.mu.Lock()
		if g.broken == nil {
			g.broken = err
		}
		g.mu.Unlock()
	}
	return err
}

// Broken returns the error with which the server ended the transaction by
// itself, or nil.
func (g *GuardedTx) Broken() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.broken
}

// Commit commits, when the runner allows it.
func (g *GuardedTx) Commit() error {
	g.mu.Lock()
	if !g.endAllowed {
		g.mu.Unlock()
		return fencedwrite.ErrRunnerOwnsCommit
	}
	if g.broken != nil {
		err := g.broken
		g.mu.Unlock()
		return fmt.Errorf("commit: the server already rolled back this transaction: %w", err)
	}
	g.commitSent, g.ended = true, true
	g.mu.Unlock()
	return g.tx.Commit()
}

// Rollback rolls back, when the runner allows it.
func (g *GuardedTx) Rollback() error {
	g.mu.Lock()
	if !g.endAllowed {
		g.mu.Unlock()
		return fencedwrite.ErrRunnerOwnsCommit
	}
	g.mu.Unlock()
	return g.rollback()
}

// allowEnd lets the runner's own Commit or Rollback through.
func (g *GuardedTx) allowEnd() {
	g.mu.Lock()
	g.endAllowed = true
	g.mu.Unlock()
}

// rollback rolls back, bypassing Ent's rollback hooks, unless the
// transaction already ended.
func (g *GuardedTx) rollback() error {
	g.mu.Lock()
	if g.ended {
		g.mu.Unlock()
		return nil
	}
	g.ended, g.endAllowed = true, true
	g.mu.Unlock()
	return g.tx.Rollback()
}

// sentCommit reports whether the runner's Commit reached the driver.
func (g *GuardedTx) sentCommit() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.commitSent
}

// endsTransaction reports whether err means the server rolled back the whole
// transaction (a deadlock; a lock wait timeout, which does so under
// innodb_rollback_on_timeout) or the connection is gone.
func endsTransaction(err error) bool {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number == 1213 || me.Number == 1205
	}
	return errors.Is(err, mysql.ErrInvalidConn) || errors.Is(err, driver.ErrBadConn)
}

// allowed are the statements a callback may run inside the runner's
// transaction. Everything else either ends the transaction (COMMIT, ROLLBACK,
// BEGIN, and every statement with an implicit commit: DDL, LOCK TABLES,
// SET autocommit, CALL of a procedure that commits, ...) or changes what the
// fence relies on (SET timestamp), so it is refused before it is sent.
var allowed = map[string]bool{
	"SELECT": true, "INSERT": true, "UPDATE": true, "DELETE": true, "REPLACE": true, "WITH": true,
	"VALUES": true, "TABLE": true, "DO": true, "SHOW": true, "EXPLAIN": true, "DESCRIBE": true, "DESC": true,
}

// CheckStatement refuses a packet that a callback of the runner must not
// send in the runner's transaction: it judges every statement of the
// packet (a pool with multiStatements=true runs them all), and refuses any
// statement not in allowed, and any executable comment (/*! … */), whose
// text the server runs though it reads as a comment. The error matches
// fencedwrite.ErrInvalid.
func CheckStatement(query string) error {
	stmts := sqltext.Split(query)
	if len(stmts) == 0 {
		return fmt.Errorf("%w: an empty statement: %.60q", fencedwrite.ErrInvalid, query)
	}
	for _, s := range stmts {
		if s.Executable {
			return fmt.Errorf("%w: statement holds an executable comment (/*! … */), which the fenced runner cannot check: %.60q", fencedwrite.ErrInvalid, s.Text)
		}
		if !allowed[s.Keyword] {
			return fmt.Errorf("%w: %s statements may end or change the fenced runner's transaction; the runner owns BEGIN, COMMIT and ROLLBACK: %.60q",
				fencedwrite.ErrInvalid, s.Keyword, s.Text)
		}
	}
	return nil
}
