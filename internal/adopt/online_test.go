//go:build !tidb

package adopt_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/fencekit/fencekit/internal/adopt"
	"github.com/fencekit/fencekit/internal/dbtest"
	"github.com/fencekit/fencekit/migrations"
)

// fullRows is every row of refund_jobs with every column of the team's
// and the article's (times to the microsecond, text as bytes), by id.
func fullRows(t *testing.T, q dbtest.Querier) []string {
	t.Helper()
	return dbtest.Column(t, q, "SELECT CONCAT_WS('|', id, HEX(operation_key), HEX(payment_ref), amount_minor, HEX(currency), attempt, HEX(state), "+
		"COALESCE(DATE_FORMAT(lease_until, '%Y-%m-%d %H:%i:%s.%f'), 'NULL'), HEX(next_action), COALESCE(HEX(provider_refund_id), 'NULL'), "+
		"COALESCE(HEX(merchant_note), 'NULL'), legacy_flag) FROM refund_jobs ORDER BY id")
}

// Legacy writers keep writing while modify-columns copies the table
// online: inserts, updates and deletes between the copy's ranges, a
// transaction held open across a range (the range waits for it, then
// copies what it committed), and two writers running free throughout the
// step. None fails (a deadlock victim, possible where
// innodb_autoinc_lock_mode is not 2, is retried), none is lost: after the swap the rows are those the
// old table held at the swap, every column, and the fence installed
// afterwards records a legacy write.
func TestOnlineCopyLosesNoLegacyWrite(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := legacyDB(t, nil)
	writer := dbtest.OpenDSN(t, dsnOf(t, db))
	held, err := writer.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	watcher := dbtest.OpenDSN(t, dsnOf(t, db))
	var name string
	if err := db.QueryRow("SELECT DATABASE()").Scan(&name); err != nil {
		t.Fatal(err)
	}

	var (
		shadow      []string
		atSwap      []string
		stop        atomic.Bool
		wg          sync.WaitGroup
		updates     atomic.Int64
		deadlocks   atomic.Int64
		inserts     atomic.Int64
		freeErrs    = make(chan error, 2)
		batches     int
		heldTx      *sql.Tx
		heldWaitErr = make(chan error, 1)
	)
	run := func(q string, args ...any) {
		if _, err := writer.Exec(q, args...); err != nil {
			t.Errorf("legacy write during the copy: %s: %v", q, err)
		}
	}
	o := options()
	o.Hooks = adopt.Hooks{
		BeforeStep: func(step string) {
			if step != "modify-columns" {
				return
			}
			// Two legacy writers run free during the whole step: one
			// updates a row, one inserts rows.
			// The update's WHERE has no index: it scans and locks the
			// whole table, the shape that can deadlock with an insert on
			// the shadow's AUTO-INC lock where innodb_autoinc_lock_mode
			// is not 2 (the plan's note): a victim (1213) is retried, as
			// InnoDB's clients do, and counted; any other error fails.
			wg.Add(2)
			go func() {
				defer wg.Done()
				for !stop.Load() {
					// legacy_flag is a TINYINT: it counts modulo 100 (a loaded
					// machine runs more than 127 updates during the step).
					//fencelint:allow a legacy writer's unfenced write during the online copy: the test's subject
					_, err := writer.Exec("UPDATE refund_jobs SET legacy_flag = (legacy_flag + 1) MOD 100 WHERE operation_key = 'k-retry'")
					if isDeadlock(err) {
						deadlocks.Add(1)
						continue
					}
					if err != nil {
						freeErrs <- fmt.Errorf("free update: %w", err)
						return
					}
					updates.Add(1)
				}
			}()
			go func() {
				defer wg.Done()
				for n := 0; !stop.Load(); {
					_, err := writer.Exec("INSERT INTO refund_jobs (operation_key, payment_ref, amount_minor, currency, state, next_action, merchant_note) VALUES (?, 'pay-f', 1, 'EUR', 'ready', 'refund', 'free')",
						fmt.Sprintf("k-free-%d", n))
					if isDeadlock(err) {
						deadlocks.Add(1)
						continue
					}
					if err != nil {
						freeErrs <- fmt.Errorf("free insert: %w", err)
						return
					}
					inserts.Add(1)
					n++
				}
			}()
		},
		ShadowCopy: func(step string, err error) {
			shadow = append(shadow, step)
			if !strings.Contains(err.Error(), "1846") {
				t.Errorf("the server's refusal of the online ALTER: %v, want error 1846", err)
			}
		},
		AfterBatch: func(step string, lo, hi int64) {
			if step != "modify-columns" {
				return
			}
			batches++
			switch batches {
			case 1:
				// Rows 1-2 are copied, 3 and up not yet.
				//fencelint:allow a legacy writer's unfenced write during the online copy: the test's subject
				run("UPDATE refund_jobs SET merchant_note = 'after its copy', attempt = attempt + 1 WHERE id = 1")
				//fencelint:allow a legacy writer's unfenced write during the online copy: the test's subject
				run("UPDATE refund_jobs SET merchant_note = 'before its copy', lease_until = '2026-02-03 04:05:06' WHERE id = 5")
				run("DELETE FROM refund_jobs WHERE id = 2")
				run("DELETE FROM refund_jobs WHERE id = 4")
				run("INSERT INTO refund_jobs (operation_key, payment_ref, amount_minor, currency, state, next_action, merchant_note, legacy_flag) VALUES ('k-during', 'pay-d', 9, 'USD', 'ready', 'reconcile', 'inserted during the copy', 7)")
				//fencelint:allow a legacy writer's unfenced write during the online copy: the test's subject
				run("UPDATE refund_jobs SET id = 1000 WHERE id = 1") // a moved primary key
				// A legacy transaction holds row 3, which the next range
				// reads locked: the range waits for it.
				tx, err := held.BeginTx(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				heldTx = tx
				//fencelint:allow a legacy writer's unfenced write during the online copy: the test's subject
				if _, err := tx.Exec("UPDATE refund_jobs SET merchant_note = 'held across a range' WHERE id = 3"); err != nil {
					t.Fatal(err)
				}
				go func() {
					// The barrier: the copy's range is waiting for the row
					// lock (the server says so), then the writer commits.
					// Not INNODB_TRX: InnoDB refreshes it only when nobody
					// read it for 100 ms, and a tight poll saw the same
					// stale rows for minutes while the range waited (CI:
					// the free update's lock wait timed out).
					stop := make(chan struct{})
					timer := time.AfterFunc(2*time.Minute, func() { close(stop) })
					defer timer.Stop()
					if !dbtest.AwaitLockWaitIn(watcher, name, "SELECT `id` FROM `refund_jobs` WHERE `id` BETWEEN", stop) {
						_ = heldTx.Rollback()
						heldWaitErr <- errors.New("the copy's next range never waited for the held row (2 minutes)")
						return
					}
					heldWaitErr <- heldTx.Commit()
				}()
			}
		},
		BeforeSwap: func(step string) {
			if step == "modify-columns" {
				// The writers stop here, so that the rows at the swap are
				// known; they ran during every range.
				stop.Store(true)
				wg.Wait()
				atSwap = fullRows(t, db)
			}
		},
	}
	if _, err := adopt.Apply(ctx, db, o); err != nil {
		t.Fatal(err)
	}
	stop.Store(true)
	wg.Wait()
	close(freeErrs)
	for err := range freeErrs {
		t.Error(err)
	}
	if err := <-heldWaitErr; err != nil {
		t.Fatalf("the transaction held across a range: %v", err)
	}
	if !slices.Contains(shadow, "modify-columns") {
		t.Fatalf("modify-columns did not take the shadow copy: %v", shadow)
	}
	if updates.Load() == 0 || inserts.Load() == 0 {
		t.Fatalf("the free writers wrote %d updates, %d inserts during the copy", updates.Load(), inserts.Load())
	}
	var autoinc int
	if err := db.QueryRow("SELECT @@innodb_autoinc_lock_mode").Scan(&autoinc); err != nil {
		t.Fatal(err)
	}
	t.Logf("free writers: %d updates, %d inserts, %d deadlock victims retried (innodb_autoinc_lock_mode %d)", updates.Load(), inserts.Load(), deadlocks.Load(), autoinc)
	if autoinc == 2 && deadlocks.Load() > 0 {
		t.Fatalf("%d legacy writes were deadlock victims with innodb_autoinc_lock_mode 2, where the shadow takes no AUTO-INC lock", deadlocks.Load())
	}
	// The free writers wrote during the copy's ranges, not only before or
	// after: the step saw them (batches counts the ranges).
	if batches < 3 {
		t.Fatalf("%d ranges copied", batches)
	}

	// The rows after the swap are the rows at the swap, every column.
	after := fullRows(t, db)
	if !slices.Equal(after, atSwap) {
		t.Fatalf("rows after the swap differ from the rows at the swap:\n%s\nwant\n%s", strings.Join(after, "\n"), strings.Join(atSwap, "\n"))
	}
	var flag, moved, gone, during, free int64
	var note3, note5 string
	if err := db.QueryRow("SELECT (SELECT legacy_flag FROM refund_jobs WHERE operation_key = 'k-retry'), (SELECT COUNT(*) FROM refund_jobs WHERE id = 1000 AND merchant_note = 'after its copy'), "+
		"(SELECT COUNT(*) FROM refund_jobs WHERE id IN (1, 2, 4)), (SELECT COUNT(*) FROM refund_jobs WHERE operation_key = 'k-during' AND legacy_flag = 7 AND next_action = 'reconcile'), "+
		"(SELECT COUNT(*) FROM refund_jobs WHERE merchant_note = 'free'), (SELECT merchant_note FROM refund_jobs WHERE id = 3), (SELECT merchant_note FROM refund_jobs WHERE id = 5)").
		Scan(&flag, &moved, &gone, &during, &free, &note3, &note5); err != nil {
		t.Fatal(err)
	}
	if flag != updates.Load()%100 || moved != 1 || gone != 0 || during != 1 || free != inserts.Load() || note3 != "held across a range" || note5 != "before its copy" {
		t.Fatalf("after the copy: k-retry's flag %d (want %d updates, modulo 100), moved row %d, deleted rows left %d, row inserted between ranges %d, free inserts %d (want %d), row 3 %q, row 5 %q",
			flag, updates.Load(), moved, gone, during, free, inserts.Load(), note3, note5)
	}
	// The old table is kept, the copy's triggers are gone, and the schema
	// is fencekit's.
	var old, triggers int
	if err := db.QueryRow("SELECT (SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?), "+
		"(SELECT COUNT(*) FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = DATABASE() AND TRIGGER_NAME LIKE '\\_refund\\_jobs\\_copy\\_%')", adopt.OldTable).Scan(&old, &triggers); err != nil {
		t.Fatal(err)
	}
	if old != 1 || triggers != 0 {
		t.Fatalf("after apply: %d old tables (want 1, kept), %d copy triggers (want 0)", old, triggers)
	}
	if extra := schemaDiff(t, db); len(extra) > 0 {
		t.Fatalf("the schema after the online copy differs from fencekit's: %v", extra)
	}
	// The fence installed on the swapped-in table observes a legacy write.
	//fencelint:allow a legacy writer's unfenced write, which the adopted fence records in observe mode: the test's subject
	exec(t, db, "UPDATE refund_jobs SET state = 'ready' WHERE operation_key = 'k-review'")
	var recorded int
	if err := db.QueryRow("SELECT COUNT(*) FROM refund_jobs_fence_violations WHERE `operation` = 'update'").Scan(&recorded); err != nil || recorded == 0 {
		t.Fatalf("the fence did not record the legacy write after the swap: %d (%v)", recorded, err)
	}
	if m, err := migrations.CurrentFenceMode(ctx, db); err != nil || m != migrations.FenceObserve {
		t.Fatalf("fence mode: %s, %v", m, err)
	}
}

// Apply's connection is cut in the middle of the copy: the shadow table
// and the copy's triggers stay behind (as after a crash), legacy writes
// go on through the triggers, and apply again drops them, copies from the
// start and finishes with every row.
func TestOnlineCopyInterruptedThenAppliedAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := legacyDB(t, nil)
	killer := dbtest.OpenDSN(t, dsnOf(t, db))
	var name string
	if err := db.QueryRow("SELECT DATABASE()").Scan(&name); err != nil {
		t.Fatal(err)
	}
	o := options()
	o.Hooks.AfterBatch = func(step string, lo, hi int64) {
		if step != "modify-columns" || lo == 1 {
			return
		}
		// The second range: kill every other connection to the database,
		// apply's among them.
		conn, err := killer.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		rows, err := conn.QueryContext(ctx, "SELECT ID FROM information_schema.PROCESSLIST WHERE DB = ? AND ID <> CONNECTION_ID()", name)
		if err != nil {
			t.Fatal(err)
		}
		var ids []int64
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		rows.Close()
		for _, id := range ids {
			_, _ = conn.ExecContext(ctx, fmt.Sprintf("KILL CONNECTION %d", id))
		}
	}
	_, err := adopt.Apply(ctx, db, o)
	var se *adopt.StepError
	if !errors.As(err, &se) || se.Step != "modify-columns" {
		t.Fatalf("apply with its connection cut mid-copy: %v", err)
	}
	var shadowRows, triggers int
	if err := db.QueryRow("SELECT (SELECT COUNT(*) FROM `_refund_jobs_new`), (SELECT COUNT(*) FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = DATABASE() AND TRIGGER_NAME LIKE '\\_refund\\_jobs\\_copy\\_%')").Scan(&shadowRows, &triggers); err != nil {
		t.Fatalf("the interrupted copy's leftovers: %v", err)
	}
	if shadowRows == 0 || triggers != 3 {
		t.Fatalf("after the cut: %d rows in the shadow, %d copy triggers: not an interrupted copy", shadowRows, triggers)
	}
	// Legacy writers go on meanwhile, through the copy's triggers.
	//fencelint:allow a legacy writer's unfenced write between two applies: the test's subject
	exec(t, db, "UPDATE refund_jobs SET merchant_note = 'between the applies' WHERE id = 6")
	exec(t, db, "INSERT INTO refund_jobs (operation_key, payment_ref, amount_minor, currency, state, next_action) VALUES ('k-between', 'pay-b', 1, 'EUR', 'ready', 'refund')")
	before := fullRows(t, db)
	p, err := adopt.NewPlan(ctx, db, options())
	if err != nil {
		t.Fatalf("plan after the cut: %v", err)
	}
	if notes := strings.Join(p.Notes, "\n"); strings.Contains(notes, "_refund_jobs_copy_") {
		t.Errorf("the plan takes the copy's triggers for the team's:\n%s", notes)
	}
	if _, err := adopt.Apply(ctx, db, options()); err != nil {
		t.Fatalf("apply again: %v", err)
	}
	if after := fullRows(t, db); !slices.Equal(after, before) {
		t.Fatalf("rows after apply again:\n%s\nwant\n%s", strings.Join(after, "\n"), strings.Join(before, "\n"))
	}
	if extra := schemaDiff(t, db); len(extra) > 0 {
		t.Fatalf("the schema after apply again differs: %v", extra)
	}
}

// What the online copy cannot carry over is refused by name: a table
// with the shadow's name that no interrupted copy left, and the old
// table's name taken.
func TestOnlineCopyRefusesTakenNames(t *testing.T) {
	t.Parallel()
	t.Run("shadow", func(t *testing.T) {
		t.Parallel()
		db := legacyDB(t, func(db *sql.DB) {
			exec(t, db, "CREATE TABLE `_refund_jobs_new` (id INT PRIMARY KEY)")
		})
		refused(t, db, options(), "a table _refund_jobs_new", "not an interrupted copy's")
	})
	t.Run("old", func(t *testing.T) {
		t.Parallel()
		db := legacyDB(t, func(db *sql.DB) {
			exec(t, db, "CREATE TABLE `_refund_jobs_old` (id INT PRIMARY KEY)")
		})
		refused(t, db, options(), "a table _refund_jobs_old", "modify-columns keeps the table it replaces under that name")
	})
}

// A change the server makes online (a VARCHAR made longer within its
// length bytes: widen-columns) takes the server's path, not a copy.
func TestOnlineAlterTakesTheServersPathWhenItCan(t *testing.T) {
	t.Parallel()
	db := legacyDB(t, func(db *sql.DB) {
		exec(t, db, "ALTER TABLE refund_jobs MODIFY state VARCHAR(10) NOT NULL DEFAULT 'pending'")
	})
	var shadow []string
	o := options()
	o.Hooks.ShadowCopy = func(step string, err error) { shadow = append(shadow, step) }
	if _, err := adopt.Apply(context.Background(), db, o); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(shadow, "widen-columns") || !slices.Contains(shadow, "modify-columns") {
		t.Fatalf("steps that took the shadow copy: %v (want modify-columns only: widen-columns is in place)", shadow)
	}
	var old int
	if err := db.QueryRow("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?", adopt.OldTableWiden).Scan(&old); err != nil || old != 0 {
		t.Fatalf("widen-columns left an old table: %d (%v)", old, err)
	}
}

// isDeadlock: err is InnoDB's deadlock (1213): the statement was rolled back
// and nothing of it was written.
func isDeadlock(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == 1213
}

// The plan warns of the deadlock the copy's triggers can add where
// innodb_autoinc_lock_mode is not 2, and says nothing where it is.
func TestPlanNotesTheAutoIncLockMode(t *testing.T) {
	t.Parallel()
	db := legacyDB(t, nil)
	p, err := adopt.NewPlan(context.Background(), db, options())
	if err != nil {
		t.Fatal(err)
	}
	var mode int
	if err := db.QueryRow("SELECT @@innodb_autoinc_lock_mode").Scan(&mode); err != nil {
		t.Fatal(err)
	}
	notes := strings.Join(p.Notes, "\n")
	warned := strings.Contains(notes, fmt.Sprintf("innodb_autoinc_lock_mode is %d, not 2", mode)) && strings.Contains(notes, "error 1213")
	if warned != (mode != 2) {
		t.Fatalf("innodb_autoinc_lock_mode %d: the plan's notes warn %v:\n%s", mode, warned, notes)
	}
}

// Apply killed while its online copy waits for a legacy transaction, after
// it made the shadow table and before the copy's triggers exist, leaves
// _refund_jobs_new alone. The adoption record (written before the shadow)
// tells it from a table of the team's: apply again drops it and finishes,
// instead of refusing it as "not an interrupted copy's".
func TestOnlineCopyKilledBeforeItsTriggersThenAppliedAgain(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := legacyDB(t, nil)
	var name string
	if err := db.QueryRow("SELECT DATABASE()").Scan(&name); err != nil {
		t.Fatal(err)
	}
	watcher := dbtest.OpenDSN(t, dsnOf(t, db))
	legacy := dbtest.OpenDSN(t, dsnOf(t, db))
	o := options()
	var tx *sql.Tx
	o.Hooks.ShadowCopy = func(step string, _ error) {
		if step != "modify-columns" || tx != nil {
			return
		}
		// A legacy transaction holds refund_jobs: the copy's LOCK TABLES
		// waits for it, and apply is killed there.
		var err error
		if tx, err = legacy.BeginTx(ctx, nil); err != nil {
			t.Error(err)
			return
		}
		//fencelint:allow a legacy writer's unfenced write, held open: the test's subject
		if _, err := tx.Exec("UPDATE refund_jobs SET merchant_note = 'held' WHERE id = 6"); err != nil {
			t.Error(err)
		}
		go func() {
			stop := make(chan struct{})
			timer := time.AfterFunc(time.Minute, func() { close(stop) })
			defer timer.Stop()
			if dbtest.AwaitLockWaitIn(watcher, name, "LOCK TABLES", stop) {
				var id int64
				if err := watcher.QueryRow("SELECT ID FROM information_schema.PROCESSLIST WHERE DB = ? AND INFO LIKE 'LOCK TABLES%'", name).Scan(&id); err == nil {
					_, _ = watcher.Exec(fmt.Sprintf("KILL CONNECTION %d", id))
				}
			}
		}()
	}
	_, err := adopt.Apply(ctx, db, o)
	var se *adopt.StepError
	if !errors.As(err, &se) || se.Step != "modify-columns" {
		t.Fatalf("apply killed while the copy waits: %v", err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	var shadows, triggers int
	if err := db.QueryRow("SELECT (SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = '_refund_jobs_new'), "+
		"(SELECT COUNT(*) FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = DATABASE() AND TRIGGER_NAME LIKE '\\_refund\\_jobs\\_copy\\_%')").Scan(&shadows, &triggers); err != nil {
		t.Fatal(err)
	}
	if shadows != 1 || triggers != 0 {
		t.Fatalf("after the kill: %d shadow tables, %d copy triggers; want the shadow alone", shadows, triggers)
	}
	before := fullRows(t, db)
	if _, err := adopt.Apply(ctx, db, options()); err != nil {
		t.Fatalf("apply again: %v", err)
	}
	if after := fullRows(t, db); !slices.Equal(after, before) {
		t.Fatalf("rows after apply again:\n%s\nwant\n%s", strings.Join(after, "\n"), strings.Join(before, "\n"))
	}
}
