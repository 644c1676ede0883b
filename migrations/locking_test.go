//go:build !tidb

// The database's checks read committed, locked truth: MySQL and MariaDB only
// (TiDB has no triggers; the TiDB run, -tags tidb, leaves this file out).

package migrations_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/fencekit/fencekit/ent"
	"github.com/fencekit/fencekit/ent/refund"
	"github.com/fencekit/fencekit/ent/refundjob"
	"github.com/fencekit/fencekit/fencedwrite"
	"github.com/fencekit/fencekit/internal/dbtest"
	"github.com/fencekit/fencekit/ledger"
)

// A trigger that reads another row (the ledger's job, the archive's copy of
// a job) must not decide on a write that is not committed: under READ
// UNCOMMITTED a plain read sees it, and the write may still roll back. Each
// test below holds one session's write uncommitted and runs another
// session's statement against it, at each isolation level a session can
// choose, with no lock wait allowed: the check must need the uncommitted
// row's lock, so the statement ends with a lock wait timeout (1205) instead
// of deciding. Once the first session's transaction has ended, the same
// statement must decide on what was committed.

var isolationLevels = []string{"READ UNCOMMITTED", "READ COMMITTED", "REPEATABLE READ", "SERIALIZABLE"}

// session returns a connection of db whose transactions run at level and
// whose statements never wait for a lock: innodb_lock_wait_timeout = 0
// makes MariaDB give up at once (MySQL's minimum is a second, which only
// makes the test slower).
func session(t *testing.T, db *sql.DB, level string) *sql.Conn {
	t.Helper()
	conn, err := db.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = conn.Raw(func(any) error { return driver.ErrBadConn }) // do not hand these settings back to the pool
		_ = conn.Close()
	})
	mustExec(t, conn, "SET SESSION TRANSACTION ISOLATION LEVEL "+level)
	mustExec(t, conn, "SET SESSION innodb_lock_wait_timeout = 0")
	return conn
}

// decidedAfter runs query on conn while another session's write is held
// uncommitted and wants it to need that write's lock (a lock wait timeout,
// since conn waits for none); then it calls end, which ends the other
// session's transaction, runs query again and returns its error.
func decidedAfter(t *testing.T, conn *sql.Conn, end func(), query string, args ...any) error {
	t.Helper()
	_, err := conn.ExecContext(t.Context(), query, args...)
	end()
	var me *mysql.MySQLError
	if !errors.As(err, &me) || me.Number != 1205 {
		t.Errorf("while the other session's write was uncommitted, the check decided without its lock: %v (want a lock wait timeout, 1205)", err)
		return err
	}
	_, err = conn.ExecContext(t.Context(), query, args...)
	return err
}

// errBusinessWrite is the holder's own business write failing, which rolls
// its transaction back.
var errBusinessWrite = errors.New("the business write failed")

// The ledger's check reads its job under a lock: a ledger row settles only
// on a job whose settlement committed, never on one a session can see while
// it is still uncommitted (and about to roll back), at every isolation level
// the settling session chooses. The settling session is the application's
// own account, writing raw SQL; the holder is a worker completing (or
// failing) the job through the fenced layer, its transaction held open by
// its callback.
func TestFenceLedgerReadsItsJobLockedAndCommitted(t *testing.T) {
	d := dbtest.New(t)
	app, c := appAccount(t, d)
	ctx := t.Context()
	moves := []struct {
		name   string
		settle func(l *ent.RefundJobLease) *ent.RefundJobTransition
		status refund.Status
		query  string
		job    refundjob.State
		rule   string
	}{
		{"completion", func(l *ent.RefundJobLease) *ent.RefundJobTransition { return l.Complete("re_1") }, refund.StatusRefunded,
			"UPDATE refunds SET status = 'refunded', provider_refund_id = 're_1' WHERE operation_key = ?", refundjob.StateSucceeded,
			"refunded only with its job succeeded"},
		{"failure", func(l *ent.RefundJobLease) *ent.RefundJobTransition { return l.Fail("declined", "") }, refund.StatusFailed,
			"UPDATE refunds SET status = 'failed' WHERE operation_key = ?", refundjob.StateFailed,
			"failed only with its job failed"},
	}
	n := 0
	for _, m := range moves {
		for _, level := range isolationLevels {
			for _, commits := range []bool{false, true} {
				name := fmt.Sprintf("under %s, a %s that rolls back never settles the ledger", level, m.name)
				if commits {
					name = fmt.Sprintf("under %s, the ledger settles once its job's %s commits", level, m.name)
				}
				n++
				key := fmt.Sprintf("ledger-%d", n)
				t.Run(name, func(t *testing.T) {
					req := ent.RefundJobEnqueue{OperationKey: key, PaymentRef: "pay-" + key, AmountMinor: 1250, Currency: "EUR"}
					job, _, err := c.RefundJob.Enqueue(ctx, req, ledger.Open(req))
					if err != nil {
						t.Fatal(err)
					}
					l, err := c.RefundJob.Claim(ctx, job.ID, fencedwrite.ClaimOptions{})
					if err != nil {
						t.Fatal(err)
					}
					// The holder writes the job's settlement and holds its
					// transaction open in the callback, before COMMIT.
					held, release, applied := make(chan struct{}), make(chan struct{}), make(chan error, 1)
					go func() {
						applied <- c.RefundJob.Apply(ctx, m.settle(l), func(context.Context, *ent.Tx) error {
							close(held)
							<-release
							if !commits {
								return errBusinessWrite
							}
							return nil
						})
					}()
					<-held
					var holderErr error
					err = decidedAfter(t, session(t, app, level), func() { close(release); holderErr = <-applied }, m.query, key)
					got, gerr := c.RefundJob.Get(ctx, job.ID)
					if gerr != nil {
						t.Fatal(gerr)
					}
					row, rerr := c.Refund.Query().Where(refund.OperationKey(key)).Only(ctx)
					if rerr != nil {
						t.Fatal(rerr)
					}
					if !commits {
						if !errors.Is(holderErr, fencedwrite.ErrRolledBack) {
							t.Fatalf("the holder's Apply: %v, want ErrRolledBack", holderErr)
						}
						if !dbtest.IsTriggerRefusal(err, m.rule) {
							t.Errorf("settling the ledger on a %s that rolled back: %v, want the refusal %q", m.name, err, m.rule)
						}
						if got.State != refundjob.StateRunning || got.Attempt != l.Attempt() || row.Status != refund.StatusRequested {
							t.Fatalf("job is %s at attempt %d and its ledger row %s; want running at %d and requested", got.State, got.Attempt, row.Status, l.Attempt())
						}
						return
					}
					if holderErr != nil {
						t.Fatalf("the holder's Apply: %v", holderErr)
					}
					if err != nil {
						t.Errorf("settling the ledger once its job's %s committed: %v", m.name, err)
					}
					if got.State != m.job || row.Status != m.status {
						t.Fatalf("job is %s and its ledger row %s; want %s and %s", got.State, row.Status, m.job, m.status)
					}
				})
			}
		}
	}
}

// A ledger row is opened only with a committed job: an enqueue whose
// transaction is still open (and rolls back) does not let another session
// open the ledger row of its key, with a plain INSERT or with an
// INSERT … SELECT (whose reads InnoDB does not lock under READ UNCOMMITTED
// and READ COMMITTED unless the trigger asks).
func TestFenceLedgerOpensOnlyWithACommittedJob(t *testing.T) {
	d := dbtest.New(t)
	app, c := appAccount(t, d)
	ctx := t.Context()
	forms := map[string]string{
		"INSERT":          "INSERT INTO refunds (operation_key, payment_ref, amount_minor, currency, created_at, updated_at) VALUES (?, ?, 1250, 'EUR', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))",
		"INSERT … SELECT": "INSERT INTO refunds (operation_key, payment_ref, amount_minor, currency, created_at, updated_at) SELECT ?, ?, 1250, 'EUR', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) FROM DUAL",
	}
	n := 0
	for _, form := range []string{"INSERT", "INSERT … SELECT"} {
		for _, level := range isolationLevels {
			for _, commits := range []bool{false, true} {
				name := "under " + level + ", an enqueue that rolls back lets no ledger row be opened (" + form + ")"
				if commits {
					name = "under " + level + ", the ledger row opens once its job's enqueue commits (" + form + ")"
				}
				n++
				key := fmt.Sprintf("open-%d", n)
				t.Run(name, func(t *testing.T) {
					req := ent.RefundJobEnqueue{OperationKey: key, PaymentRef: "pay-" + key, AmountMinor: 1250, Currency: "EUR"}
					held, release, enqueued := make(chan struct{}), make(chan struct{}), make(chan error, 1)
					go func() {
						_, _, err := c.RefundJob.Enqueue(ctx, req, func(context.Context, *ent.Tx) error {
							close(held)
							<-release
							if !commits {
								return errBusinessWrite
							}
							return nil
						})
						enqueued <- err
					}()
					<-held
					var holderErr error
					err := decidedAfter(t, session(t, app, level), func() { close(release); holderErr = <-enqueued }, forms[form], key, req.PaymentRef)
					jobs, jerr := c.RefundJob.Query().Where(refundjob.OperationKey(key)).Count(ctx)
					rows, rerr := c.Refund.Query().Where(refund.OperationKey(key)).Count(ctx)
					if jerr != nil || rerr != nil {
						t.Fatal(jerr, rerr)
					}
					if !commits {
						if !errors.Is(holderErr, fencedwrite.ErrRolledBack) {
							t.Fatalf("the holder's Enqueue: %v, want ErrRolledBack", holderErr)
						}
						if !dbtest.IsTriggerRefusal(err, "opened with its job") {
							t.Errorf("opening the ledger row of an enqueue that rolled back: %v, want the fence's refusal", err)
						}
						if jobs != 0 || rows != 0 {
							t.Fatalf("%d jobs and %d ledger rows for %s after the enqueue rolled back, want none", jobs, rows, key)
						}
						return
					}
					if holderErr != nil || err != nil {
						t.Fatalf("enqueue: %v; opening its ledger row once it committed: %v", holderErr, err)
					}
					if jobs != 1 || rows != 1 {
						t.Fatalf("%d jobs and %d ledger rows for %s, want one each", jobs, rows, key)
					}
				})
			}
		}
	}
}

// A job is deleted only once its archived copy is committed. A session that
// may DELETE (the migration account; root here) replaces an old settled job
// by a new one with REPLACE … SELECT, whose reads InnoDB does not lock under
// READ UNCOMMITTED and READ COMMITTED unless the trigger asks, while another
// session's copy of the job into the archive is uncommitted (and rolls
// back). The copier reads the job without locking it (READ COMMITTED), so
// that only the fence's own reads can make the replacement wait. Two of them
// do, each enough on its own (checked by removing either): the archive's
// trigger reads the job it copies under a shared lock, which the replacement
// must wait for to delete the job, and the delete's trigger reads the copy
// under a shared lock, which waits for the copier's commit.
func TestFenceDeleteWaitsForACommittedArchiveCopy(t *testing.T) {
	var keys []string
	for i := range 2 * len(isolationLevels) {
		keys = append(keys, fmt.Sprintf("old-%d", i))
	}
	d := dbtest.NewWithHistory(t, 1, func(db *sql.DB) {
		for _, key := range keys {
			mustExec(t, db, "INSERT INTO refund_jobs (operation_key, payment_ref, amount_minor, currency, state, attempt, provider_refund_id, next_run_at, created_at, updated_at) "+
				"VALUES (?, 'pay-1', 500, 'EUR', 'succeeded', 1, 're_1', UTC_TIMESTAMP(6) - INTERVAL 40 DAY, UTC_TIMESTAMP(6) - INTERVAL 40 DAY, UTC_TIMESTAMP(6) - INTERVAL 40 DAY)", key)
		}
	})
	root := d.RawDB()
	ctx := t.Context()
	count := func(table, key string) int {
		var n int
		if err := root.QueryRow("SELECT COUNT(*) FROM "+table+" WHERE operation_key = ?", key).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	const replace = "REPLACE INTO refund_jobs (id, operation_key, payment_ref, amount_minor, currency, next_run_at, created_at, updated_at) " +
		"SELECT ?, CONCAT('new-', ?), 'pay-2', 100, 'EUR', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) FROM DUAL"
	i := 0
	for _, level := range isolationLevels {
		for _, commits := range []bool{false, true} {
			name := "under " + level + ", a copy that rolls back lets no job be replaced"
			if commits {
				name = "under " + level + ", a job is replaced once its copy commits"
			}
			key := keys[i]
			i++
			t.Run(name, func(t *testing.T) {
				var id int64
				if err := root.QueryRow("SELECT id FROM refund_jobs WHERE operation_key = ?", key).Scan(&id); err != nil {
					t.Fatal(err)
				}
				// Before this fence a new job's key had to be registered
				// first; now a key is registered only with its job, and
				// this is refused.
				_, _ = root.Exec("INSERT INTO refund_jobs_keys (operation_key, payment_ref, amount_minor, currency, registered_at) "+
					"VALUES (CONCAT('new-', ?), 'pay-2', 100, 'EUR', UTC_TIMESTAMP(6))", key)
				tx, err := root.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
				if err != nil {
					t.Fatal(err)
				}
				mustExec(t, tx, "INSERT INTO refund_jobs_archive SELECT * FROM refund_jobs WHERE operation_key = ?", key)
				end := func() {
					end := tx.Rollback
					if commits {
						end = tx.Commit
					}
					if err := end(); err != nil {
						t.Error(err)
					}
				}
				//fencelint:allow the attack: REPLACE resets a settled job's row (it needs DELETE, which only the migration account holds)
				err = decidedAfter(t, session(t, root, level), end, replace, id, key)
				live, archived := count("refund_jobs", key), count("refund_jobs_archive", key)
				if !commits {
					if !dbtest.IsTriggerRefusal(err, "only archived terminal jobs 30 days old are deleted") {
						t.Errorf("replacing a job whose archive copy rolled back: %v, want the fence's refusal", err)
					}
					if live != 1 || archived != 0 {
						t.Fatalf("job %s: %d live, %d archived; want it still live and not archived", key, live, archived)
					}
					return
				}
				if err != nil {
					t.Errorf("replacing a job once its archive copy committed: %v", err)
				}
				if live != 0 || archived != 1 {
					t.Fatalf("job %s: %d live, %d archived; want it archived", key, live, archived)
				}
			})
		}
	}
}
