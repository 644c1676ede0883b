package fencedrt

import (
	"context"
	stdsql "database/sql"
	"errors"
	"fmt"
	"reflect"
	"sync"

	"entgo.io/ent/dialect"
	"entgo.io/ent/dialect/sql"
	"github.com/go-sql-driver/mysql"

	"github.com/fencekit/fencekit/fencedwrite"
)

// A fenced pool (fencedwrite.OpenDB, NewConnector) verifies every session
// it opens and refuses statements that would change it, so the runtime
// trusts it. On any other pool, the runtime verifies the session of every
// transaction it starts before the first statement that writes or reads
// the fence, and refuses it (fencedwrite.ErrUntrustedSession, which matches
// ErrInvalid) when the session would let an argument turn into SQL, leave a
// statement uncommitted or read uncommitted rows; see Session.Check. That
// costs one query per transaction; a fenced pool costs nothing more.

// poolInfo is what the runtime learnt about one pool.
type poolInfo struct {
	trusted bool

	mu     sync.Mutex
	iso    string         // the server's isolation variable, once read
	single map[int64]bool // connections seen to refuse several statements per call
}

// maxSingle bounds poolInfo.single; past it the set starts over.
const maxSingle = 4096

var pools sync.Map // the *sql.DB (or the driver, when it has none) → *poolInfo

// infoOf returns what is known of drv's pool.
func infoOf(drv dialect.Driver) *poolInfo {
	db := sqlDB(drv)
	var key any = db
	if db == nil {
		if !reflect.TypeOf(drv).Comparable() {
			return &poolInfo{}
		}
		key = drv
	}
	if pi, ok := pools.Load(key); ok {
		return pi.(*poolInfo)
	}
	pi, _ := pools.LoadOrStore(key, &poolInfo{trusted: db != nil && fencedwrite.IsFencedPool(db)})
	return pi.(*poolInfo)
}

// sqlDB returns the *sql.DB behind an Ent driver, or nil.
func sqlDB(drv dialect.Driver) *stdsql.DB {
	for range 8 {
		switch d := drv.(type) {
		case *sql.Driver:
			db, _ := d.ExecQuerier.(*stdsql.DB)
			return db
		case *dialect.DebugDriver:
			drv = d.Driver
		case *GuardedDriver:
			drv = d.Driver
		default:
			return nil
		}
	}
	return nil
}

// verifySession checks the session of tx, a transaction just started on
// pool, unless pool is a fenced pool. Its error matches
// fencedwrite.ErrUntrustedSession when the session cannot be trusted, and
// is a plain error when it could not be read.
func verifySession(ctx context.Context, pool dialect.Driver, tx dialect.ExecQuerier) error {
	pi := infoOf(pool)
	if pi.trusted {
		return nil
	}
	pi.mu.Lock()
	iso := pi.iso
	pi.mu.Unlock()
	if iso == "" {
		var version string
		if err := queryOne(ctx, tx, "SELECT VERSION()", &version); err != nil {
			return fmt.Errorf("verify session: read the server's version: %w", err)
		}
		iso = fencedwrite.IsolationVariable(version)
		pi.mu.Lock()
		pi.iso = iso
		pi.mu.Unlock()
	}
	var s fencedwrite.Session
	if err := queryOne(ctx, tx, fencedwrite.SessionQuery(iso), s.Dest()...); err != nil {
		return fmt.Errorf("verify session: %w", err)
	}
	if err := s.Check(fencedwrite.SessionRules{}); err != nil {
		return err
	}
	pi.mu.Lock()
	single := pi.single[s.ConnectionID]
	pi.mu.Unlock()
	if single {
		return nil
	}
	// The client's capability to send several statements per call is
	// negotiated when it connects; no variable shows it. Two harmless
	// statements in one call tell: a session without it refuses them, and
	// nothing runs (MySQL and MariaDB: a syntax error, 1064; TiDB: 8130).
	var res stdsql.Result
	err := tx.Exec(ctx, "DO 0; DO 0", []any{}, &res)
	var me *mysql.MySQLError
	switch {
	case err == nil:
		return fmt.Errorf("verify session: %w", &fencedwrite.SessionError{Variable: "multiStatements (the client's capability)", Value: "on",
			Want: "it off: a packet of several statements can end the runner's transaction behind its back"})
	case errors.As(err, &me) && (me.Number == 1064 || me.Number == 8130):
		pi.mu.Lock()
		if pi.single == nil || len(pi.single) >= maxSingle {
			pi.single = map[int64]bool{}
		}
		pi.single[s.ConnectionID] = true
		pi.mu.Unlock()
		return nil
	default:
		return fmt.Errorf("verify session: %w", err)
	}
}

// queryOne runs query on q and scans its one row into dest.
func queryOne(ctx context.Context, q dialect.ExecQuerier, query string, dest ...any) error {
	var rows sql.Rows
	if err := q.Query(ctx, query, []any{}, &rows); err != nil {
		return err
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return err
		}
		return errors.New("no row")
	}
	if err := rows.Scan(dest...); err != nil {
		return err
	}
	return rows.Close()
}

// sessionOutcome makes a verification error match one outcome: a session
// that cannot be trusted is ErrInvalid (ErrUntrustedSession), one that could
// not be read is ErrRolledBack.
func sessionOutcome(err error) error {
	if errors.Is(err, fencedwrite.ErrUntrustedSession) {
		return err
	}
	return fmt.Errorf("%w: %w", fencedwrite.ErrRolledBack, err)
}

// noSessionVars hides the session variables that Ent's sql.WithVar puts in
// a context: Ent would SET them on the connection before each statement,
// beside the runner's guard, and a fenced transaction's session is the one
// the runtime verified.
type noSessionVars struct{ context.Context }

func (c noSessionVars) Value(key any) any {
	if t := reflect.TypeOf(key); t != nil && t.PkgPath() == "entgo.io/ent/dialect/sql" && t.Name() == "ctxVarsKey" {
		return nil
	}
	return c.Context.Value(key)
}

// withoutSessionVars returns ctx without Ent's session variables.
func withoutSessionVars(ctx context.Context) context.Context {
	if _, ok := ctx.(noSessionVars); ok {
		return ctx
	}
	return noSessionVars{ctx}
}

// beginVerified starts a transaction on pool and verifies its session
// (verifySession). Its error matches fencedwrite.ErrUntrustedSession (and
// ErrInvalid) for a session that cannot be trusted, and no outcome
// otherwise; either way no transaction is left open.
func beginVerified(ctx context.Context, pool dialect.Driver) (dialect.Tx, error) {
	tx, err := pool.Tx(ctx)
	if err != nil {
		return nil, err
	}
	if err := verifySession(ctx, pool, tx); err != nil {
		_ = tx.Rollback()
		return nil, err
	}
	return tx, nil
}
