package fencedwrite_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"entgo.io/ent/dialect"
	entsql "entgo.io/ent/dialect/sql"

	"github.com/fencekit/fencekit/ent"
	"github.com/fencekit/fencekit/ent/refundjob"
	"github.com/fencekit/fencekit/fencedwrite"
	"github.com/fencekit/fencekit/fencedwrite/fencedrt"
	"github.com/fencekit/fencekit/internal/dbtest"
	"github.com/fencekit/fencekit/ledger"
)

// multiByteCharsets returns every character set the server ships whose
// characters take more than one byte, by name, with its default collation.
func multiByteCharsets(t *testing.T, raw *sql.DB) map[string]string {
	t.Helper()
	rows, err := raw.QueryContext(t.Context(), "SELECT CHARACTER_SET_NAME, DEFAULT_COLLATE_NAME FROM information_schema.CHARACTER_SETS WHERE MAXLEN > 1")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var name, collation string
		if err := rows.Scan(&name, &collation); err != nil {
			t.Fatal(err)
		}
		out[name] = collation
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(out) < 2 || out["utf8mb4"] == "" {
		t.Fatalf("the server lists %d multi-byte character sets: %v", len(out), out)
	}
	return out
}

// injection is a provider refund id that, escaped as utf8mb4 but read in a
// multi-byte character set whose second byte may be a backslash, closes
// the string and rewrites the rest of a completion to settle job victim.
// lead is a byte that starts a two-byte character in that set.
func injection(lead byte, victim int64) string {
	return string([]byte{lead}) + fmt.Sprintf("', `writer_attempt` = `attempt`, `lease_until` = NULL WHERE `id` = %d -- ", victim)
}

// leads are bytes that start a two-byte character in gbk, big5, sjis,
// cp932 or gb18030, whose second byte may be 0x5c (a backslash).
var leads = []byte{0xbf, 0x81, 0x95, 0xa4, 0xe0}

// A DSN that names a session character set, a character set or a collation
// other than utf8mb4 is refused, however it is spelled, before any
// connection is made: with interpolated arguments, a multi-byte character
// set whose second byte may be a backslash would let an argument close its
// string.
func TestDSNRefusesEveryOtherCharacterSet(t *testing.T) {
	t.Parallel()
	raw := dbtest.New(t).RawDB()
	for cs, collation := range multiByteCharsets(t, raw) {
		if cs == "utf8mb4" {
			continue
		}
		for _, p := range []string{
			"character_set_client=" + cs,
			"@@SESSION.character_set_client=" + cs,
			"@@session.character_set_connection=" + cs,
			"character_set_results=" + cs,
			"@@local.collation_connection=" + collation,
			"names=" + cs,
			"charset=" + cs,
			"charset=utf8mb4," + cs,
			"collation=" + collation,
		} {
			dsn := "app@tcp(db:3306)/p?" + p
			if _, err := fencedwrite.DSN(dsn, fencedwrite.DSNOptions{}); !errors.Is(err, fencedwrite.ErrInvalid) || !strings.Contains(err.Error(), "dsn parameter") {
				t.Errorf("DSN(%s) = %v, want ErrInvalid naming the parameter", dsn, err)
			}
		}
	}
	for _, ok := range []string{"charset=utf8mb4", "collation=utf8mb4_bin", "collation=utf8mb4_general_ci"} {
		if _, err := fencedwrite.DSN("app@tcp(db:3306)/p?"+ok, fencedwrite.DSNOptions{}); err != nil {
			t.Errorf("DSN with %s: %v, want it accepted", ok, err)
		}
	}
}

// The core attack: a provider's refund id crafted for a multi-byte session
// character set. Whatever pool the client was built on (one that fencekit
// did not open, set up by a careless DSN), the completion of job 2 can
// never settle job 1: the fenced client verifies the session before its
// first statement and refuses one it cannot trust, and nothing moves.
func TestAProviderAnswerCannotRewriteAFencedWrite(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for cs := range multiByteCharsets(t, e.raw) {
		if cs == "utf8mb4" {
			continue
		}
		t.Run(cs, func(t *testing.T) {
			cfg := e.db.Config()
			cfg.ParseTime, cfg.ClientFoundRows, cfg.InterpolateParams, cfg.Loc = true, true, true, time.UTC
			cfg.Params = map[string]string{"character_set_client": cs, "time_zone": "'+00:00'"}
			pool := dbtest.OpenDSN(t, cfg.FormatDSN())
			if err := pool.PingContext(t.Context()); err != nil {
				t.Logf("the server refuses %s as the client's character set: %v", cs, err)
				return
			}
			foreign := dbtest.ClientOn(t, pool)
			victim, _ := e.claim("victim-" + cs)
			for i := range 2 * len(leads) {
				lead, withLedger := leads[i/2], i%2 == 1
				job, lease := e.claim(fmt.Sprintf("attacker-%s-%x-%v", cs, lead, withLedger))
				var business func(context.Context, *ent.Tx) error
				if withLedger {
					business = ledger.Refunded(lease.Request().OperationKey, injection(lead, victim.ID))
				}
				err := foreign.RefundJob.Apply(t.Context(), lease.Complete(injection(lead, victim.ID)), business)
				if err == nil {
					if got := e.job(job.ID).ProviderRefundID; got == nil || *got != injection(lead, victim.ID) {
						t.Errorf("lead %#x: the completion reported success but did not store the provider's refund id as it was (%v)", lead, got != nil)
					}
				} else if !errors.Is(err, fencedwrite.ErrInvalid) {
					t.Errorf("lead %#x: the completion failed with %v, want a refusal (ErrInvalid) or the id stored as it is", lead, err)
				}
				if j := e.job(victim.ID); j.State != refundjob.StateRunning || j.Attempt != 1 {
					t.Fatalf("lead %#x: job 2's completion moved job 1 to %s at attempt %d", lead, j.State, j.Attempt)
				}
			}
		})
	}
}

// A fenced pool (OpenDB) verifies each connection and refuses, before it
// is sent, every statement that would change the session its fence relies
// on, however it is spelled; after a statement that may change the session
// behind its text (CALL), it verifies the session again and discards a
// connection that fails.
func TestFencedPoolKeepsItsSession(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	db := e.db.FencedDB(fencedwrite.DSNOptions{})
	db.SetMaxOpenConns(1)
	for _, q := range []string{
		"SET NAMES gbk", "set character set big5", "SET @@SESSION.autocommit = 0", "SET SESSION autocommit = 0",
		"SET @@local.timestamp = 1", "SET SESSION TRANSACTION ISOLATION LEVEL READ UNCOMMITTED",
		"/*!40101 SET NAMES sjis */", "/* note */ SET time_zone = 'SYSTEM'", "USE mysql", "SET @x = 1, autocommit = 0",
		"SET STATEMENT max_statement_time = 1 FOR SELECT 1",
	} {
		if _, err := db.ExecContext(ctx, q); !errors.Is(err, fencedwrite.ErrUntrustedSession) {
			t.Errorf("%q on a fenced pool: %v, want ErrUntrustedSession", q, err)
		}
	}
	if _, err := db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadUncommitted}); !errors.Is(err, fencedwrite.ErrUntrustedSession) {
		t.Errorf("a READ UNCOMMITTED transaction on a fenced pool: %v, want ErrUntrustedSession", err)
	}

	// A procedure that turns autocommit off (the migration account made
	// it; the application account may call it). TiDB has no procedures.
	if e.db.Engine().Procedures {
		if _, err := e.raw.ExecContext(ctx, "CREATE PROCEDURE sneaky() BEGIN SET autocommit = 0; END"); err != nil {
			t.Fatal(err)
		}
		if _, err := db.ExecContext(ctx, "CALL sneaky()"); !errors.Is(err, fencedwrite.ErrUntrustedSession) || !strings.Contains(err.Error(), "autocommit") {
			t.Errorf("CALL of a procedure that turns autocommit off: %v, want ErrUntrustedSession naming autocommit", err)
		}
		// The connection is gone: the next statement runs on a fresh,
		// verified one, and what it writes is seen by everyone.
		var ac int
		if err := db.QueryRowContext(ctx, "SELECT @@session.autocommit").Scan(&ac); err != nil || ac != 1 {
			t.Errorf("after the discarded connection, autocommit = %d (%v), want 1", ac, err)
		}
	}

	// The fenced layer still writes through the pool.
	c := dbtest.ClientOn(t, db)
	job, lease := e.claim("still-fenced")
	if err := c.RefundJob.Apply(ctx, lease.Complete("re_1"), ledger.Refunded(lease.Request().OperationKey, "re_1")); err != nil {
		t.Fatal(err)
	}
	e.wantJob(job.ID, refundjob.StateSucceeded, 1)
}

// A pool that fencekit did not open is verified in every fenced
// transaction before its first statement: a session that would let an
// argument turn into SQL, leave a statement uncommitted, read uncommitted
// rows or send several statements per call is refused, and nothing moves.
func TestForeignPoolIsVerifiedBeforeTheFirstFencedStatement(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	for _, tc := range []struct {
		name   string
		params map[string]string
		multi  bool
		want   string
	}{
		{"autocommit off", map[string]string{"autocommit": "0"}, false, "autocommit"},
		{"dirty reads", map[string]string{"tx_isolation": "'READ-UNCOMMITTED'"}, false, "transaction isolation"},
		{"no backslash escapes", map[string]string{"sql_mode": "'NO_BACKSLASH_ESCAPES'"}, false, "sql_mode"},
		{"ANSI quotes", map[string]string{"sql_mode": "'ANSI'"}, false, "sql_mode"},
		{"big5 connection", map[string]string{"character_set_connection": "big5"}, false, "character_set_connection"},
		{"several statements per call", nil, true, "multiStatements"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := e.db.Config()
			cfg.ParseTime, cfg.ClientFoundRows, cfg.InterpolateParams, cfg.Loc, cfg.MultiStatements = true, true, true, time.UTC, tc.multi
			cfg.Params = tc.params
			pool := dbtest.OpenDSN(t, cfg.FormatDSN())
			if err := pool.PingContext(ctx); err != nil {
				// TiDB refuses READ UNCOMMITTED and big5 outright.
				t.Logf("the server refuses the setting itself: %v", err)
				return
			}
			foreign := dbtest.ClientOn(t, pool)
			job, lease := e.claim("foreign-" + strings.ReplaceAll(tc.name, " ", "-"))
			err := foreign.RefundJob.Apply(ctx, lease.Complete("re_1"), ledger.Refunded(lease.Request().OperationKey, "re_1"))
			if !errors.Is(err, fencedwrite.ErrUntrustedSession) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Apply on the pool: %v, want ErrUntrustedSession naming %s", err, tc.want)
			}
			e.wantJob(job.ID, refundjob.StateRunning, 1)
			if errs := foreign.RefundJob.ApplyBatch(ctx, []ent.RefundJobBatchItem{{Transition: lease.Complete("re_1")}}); !errors.Is(errs[0], fencedwrite.ErrUntrustedSession) {
				t.Errorf("ApplyBatch on the pool: %v, want ErrUntrustedSession", errs[0])
			}
			if _, err := foreign.RefundJob.ClaimDue(ctx, 10, opts); !errors.Is(err, fencedwrite.ErrUntrustedSession) {
				t.Errorf("ClaimDue on the pool: %v, want ErrUntrustedSession", err)
			}
			p := request("foreign-new-" + strings.ReplaceAll(tc.name, " ", "-"))
			if _, _, err := foreign.RefundJob.Enqueue(ctx, p, ledger.Open(p)); !errors.Is(err, fencedwrite.ErrUntrustedSession) {
				t.Errorf("Enqueue on the pool: %v, want ErrUntrustedSession", err)
			}
			e.wantJob(job.ID, refundjob.StateRunning, 1)
		})
	}

	t.Run("a careful foreign pool writes", func(t *testing.T) {
		cfg := e.db.Config()
		cfg.ParseTime, cfg.ClientFoundRows, cfg.InterpolateParams, cfg.Loc = true, true, true, time.UTC
		cfg.Params = map[string]string{"time_zone": "'+02:00'"}
		foreign := dbtest.ClientOn(t, dbtest.OpenDSN(t, cfg.FormatDSN()))
		job, lease := e.claim("foreign-careful")
		if err := foreign.RefundJob.Apply(ctx, lease.Complete("re_1"), ledger.Refunded(lease.Request().OperationKey, "re_1")); err != nil {
			t.Fatal(err)
		}
		e.wantJob(job.ID, refundjob.StateSucceeded, 1)
	})
}

// The runner judges every statement of a packet a callback sends, not only
// the first word: a COMMIT after a harmless statement never reaches the
// server, so the runner's outcome stays true.
func TestRunnerJudgesEveryStatementOfAPacket(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	for i, q := range []string{"DO 0; COMMIT", "SELECT 1 /*! ; COMMIT */", "DO 0; /*!40101 COMMIT */", "SELECT ';'; ROLLBACK"} {
		job, lease := e.claim(fmt.Sprint("packet-", i))
		err := e.c.RefundJob.Apply(ctx, lease.Complete("re_1"), func(ctx context.Context, tx *ent.Tx) error {
			if _, err := tx.ExecContext(ctx, q); err != nil {
				return err
			}
			return errors.New("the callback fails after its statement")
		})
		if !errors.Is(err, fencedwrite.ErrInvalid) {
			t.Errorf("%q: %v, want ErrInvalid (refused before it was sent)", q, err)
		}
		e.wantJob(job.ID, refundjob.StateRunning, 1)
		if l := e.ledger(lease.Request().OperationKey); l.Status != "requested" {
			t.Errorf("%q: ledger row is %s, want requested", q, l.Status)
		}
	}
}

// Ent's sql.WithVar sets session variables before every statement of a
// context; a fenced transaction ignores them, so its session stays the one
// it verified (on a fenced pool, the SET would be refused and the write
// would fail).
func TestSessionVariablesOfTheContextDoNotReachTheRunner(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := entsql.WithVar(t.Context(), "character_set_client", "gbk")
	ctx = entsql.WithVar(ctx, "autocommit", "0")
	job, lease := e.claim("ctx-vars")
	const payload = "re_', `state` = 'ready' -- "
	if err := e.c.RefundJob.Apply(ctx, lease.Complete(payload), ledger.Refunded(lease.Request().OperationKey, payload)); err != nil {
		t.Fatal(err)
	}
	if got := e.wantJob(job.ID, refundjob.StateSucceeded, 1).ProviderRefundID; got == nil || *got != payload {
		t.Errorf("the provider's refund id was not stored as it was")
	}
	if _, err := e.c.RefundJob.ClaimDue(ctx, 1, opts); err != nil {
		t.Errorf("ClaimDue with session variables in its context: %v", err)
	}
}

// Write rights come from a committed claim only. The runtime builds a
// running job's transition from a lease its claims minted, never from an
// attempt read off the row: a caller that reaches for the runtime itself
// (which fencelint reports outside generated code) still cannot complete
// another worker's job.
func TestOnlyAClaimMintsAWriteRight(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	job, lease := e.claim("somebody-elses")
	table, ok := fencedrt.Registered(ent.RefundJobFencedTable)
	if !ok {
		t.Fatal("refund_jobs is not registered")
	}
	read := e.job(job.ID)
	vals := fencedrt.Values{fencedrt.ParamKey: read.OperationKey, fencedrt.ParamProviderRef: "re_forged"}
	forged := map[string]*fencedrt.Write{
		"a completion built from the attempt read off the row": fencedrt.ReadWrite(table, fencedrt.OpComplete, job.ID, read.Attempt, vals),
		"a reschedule built from the attempt read off the row": fencedrt.ReadWrite(table, fencedrt.OpReschedule, job.ID, read.Attempt, vals),
		"a completion built from a zero lease":                 fencedrt.LeaseWrite(fencedrt.Lease{}, fencedrt.OpComplete, vals),
		"a completion built from a claim made up by hand": fencedrt.LeaseWrite(fencedrt.Claimed{ID: job.ID, Attempt: read.Attempt}.Lease,
			fencedrt.OpComplete, vals),
	}
	drv := entsql.OpenDB(dialect.MySQL, e.db.FencedDB(fencedwrite.DSNOptions{}))
	for name, w := range forged {
		guard := fencedrt.Guard(drv)
		begin := func(ctx context.Context) (fencedrt.Begun[*ent.Tx], error) {
			tx, err := ent.NewClient(ent.Driver(guard)).Tx(ctx)
			return fencedrt.Begun[*ent.Tx]{Tx: tx, Exec: guard.Started(), Raw: guard.Started()}, err
		}
		err := fencedrt.Run(ctx, drv, begin, func(ctx context.Context, _ *ent.Tx) error {
			return fencedrt.Fence(ctx, guard.Started(), w)
		})
		if !errors.Is(err, fencedwrite.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
		e.wantJob(job.ID, refundjob.StateRunning, 1)
	}
	// The holder's own lease still writes.
	if err := e.c.RefundJob.Apply(ctx, lease.Complete("re_1"), ledger.Refunded(read.OperationKey, "re_1")); err != nil {
		t.Fatal(err)
	}
	e.wantJob(job.ID, refundjob.StateSucceeded, 1)
}
