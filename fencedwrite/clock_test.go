package fencedwrite_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	_ "time/tzdata" // the driver loads loc by name

	"github.com/fencekit/fencekit/ent"
	"github.com/fencekit/fencekit/ent/refundjob"
	"github.com/fencekit/fencekit/fencedwrite"
	"github.com/fencekit/fencekit/fencedwrite/fencedrt"
	"github.com/fencekit/fencekit/internal/dbtest"
	"github.com/fencekit/fencekit/ledger"
)

// clientWith opens a client the way a careless service might, bypassing
// fencedwrite.DSN: with its own driver loc and session variables.
func (e *env) clientWith(loc *time.Location, params map[string]string) *ent.Client {
	e.t.Helper()
	cfg := e.db.Config()
	cfg.ParseTime, cfg.ClientFoundRows, cfg.Loc = true, true, loc
	cfg.Params = params
	return dbtest.ClientOn(e.t, dbtest.OpenDSN(e.t, cfg.FormatDSN()))
}

// sessionSkew is the session clock of a `SET timestamp` by d, as a DSN
// parameter.
func sessionSkew(d time.Duration) map[string]string {
	return map[string]string{"timestamp": fmt.Sprintf("UNIX_TIMESTAMP(SYSDATE(6))%+d", int64(d/time.Second))}
}

// skew is how far c's session clock (UTC_TIMESTAMP) is from the server's
// real one, in seconds.
func (e *env) skew(c *ent.Client) int64 {
	e.t.Helper()
	rows, err := c.QueryContext(e.t.Context(), "SELECT TIMESTAMPDIFF(SECOND, "+fencedwrite.ClockUTC+", UTC_TIMESTAMP(6))")
	if err != nil {
		e.t.Fatal(err)
	}
	defer rows.Close()
	var skew int64
	if !rows.Next() || rows.Scan(&skew) != nil {
		e.t.Fatal("no skew read")
	}
	return skew
}

// Leases and key windows are measured on the server's real clock: a client
// whose session clock is moved can neither take over a live lease nor claim
// a stale key as a send, and a client whose driver loc is not UTC still
// gets the lease's true expiry.
func TestLeasesUseTheClockNoSessionCanMove(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()

	t.Run("a session an hour ahead cannot take over a live lease", func(t *testing.T) {
		job, _ := e.claim("ahead")
		ahead := e.clientWith(time.UTC, sessionSkew(time.Hour))
		if skew := e.skew(ahead); skew < 3590 || skew > 3610 {
			t.Fatalf("the session clock is %ds ahead, want an hour: the test would prove nothing", skew)
		}
		_, err := ahead.RefundJob.Takeover(ctx, job.ID, opts)
		wantOutcome(t, err, fencedwrite.ErrNotClaimable)
		e.wantJob(job.ID, refundjob.StateRunning, 1)
	})
	t.Run("a session 47 hours behind cannot send with a key outside its window", func(t *testing.T) {
		job, l := e.claim("behind")
		if err := e.c.RefundJob.Apply(ctx, l.Reschedule(refundjob.NextActionRefund, 0, "", "rate limited"), nil); err != nil {
			t.Fatal(err)
		}
		// A provider that keeps keys a microsecond past the timeout and the
		// skew margin: the key's window closed right after its first use.
		shortMemory := fencedwrite.ClaimOptions{KeyRetention: fencedwrite.DefaultProviderTimeout + fencedwrite.DefaultSkewMargin + time.Microsecond}
		behind := e.clientWith(time.UTC, sessionSkew(-47*time.Hour))
		if skew := e.skew(behind); skew > -47*3600+10 {
			t.Fatalf("the session clock is %ds off, want 47h behind", skew)
		}
		l2, err := behind.RefundJob.Claim(ctx, job.ID, shortMemory)
		if err != nil {
			t.Fatal(err)
		}
		if l2.NextAction() != refundjob.NextActionReconcile {
			t.Fatalf("a claim by a session 47h behind: %s, want reconcile", l2.NextAction())
		}
	})
	t.Run("a driver loc other than UTC does not shift the lease", func(t *testing.T) {
		tokyo, err := time.LoadLocation("Asia/Tokyo")
		if err != nil {
			t.Fatal(err)
		}
		job := e.enqueue("tokyo")
		l, err := e.clientWith(tokyo, nil).RefundJob.Claim(ctx, job.ID, opts)
		if err != nil {
			t.Fatal(err)
		}
		var micros int64
		if err := e.raw.QueryRow("SELECT "+fencedwrite.Micros("lease_until")+" FROM refund_jobs WHERE id = ?", job.ID).Scan(&micros); err != nil {
			t.Fatal(err)
		}
		if want := time.UnixMicro(micros); !l.LeaseUntil().Equal(want) {
			t.Fatalf("lease until %v, the row says %v", l.LeaseUntil(), want.UTC())
		}
		// And the lease the row holds is the lease asked for, on the
		// database clock.
		if got := l.LeaseUntil().Sub(l.ClaimedAt()); got != fencedwrite.DefaultLease {
			t.Fatalf("lease of %v, want %v", got, fencedwrite.DefaultLease)
		}
	})
	t.Run("a session time zone other than UTC changes nothing", func(t *testing.T) {
		job := e.enqueue("zone")
		zoned := e.clientWith(time.UTC, map[string]string{"time_zone": "'-07:00'"})
		l, err := zoned.RefundJob.Claim(ctx, job.ID, opts)
		if err != nil {
			t.Fatal(err)
		}
		if err := zoned.RefundJob.Apply(ctx, l.Complete("re_1"), ledger.Refunded("zone", "re_1")); err != nil {
			t.Fatal(err)
		}
		var drift int64
		if err := e.raw.QueryRow("SELECT ABS(TIMESTAMPDIFF(SECOND, updated_at, "+fencedwrite.ClockUTC+")) FROM refund_jobs WHERE id = ?", job.ID).Scan(&drift); err != nil || drift > 5 {
			t.Fatalf("updated_at is %ds off the server's UTC clock (%v)", drift, err)
		}
	})
}

// fencedwrite.DSN refuses what would move the fence's footing, naming each
// parameter and the session variable the server would set, however the
// parameter is spelled: the driver sends any parameter it does not know as
// `SET key = value`, so the key is read as the server would read it.
func TestDSNRefusesSettingsTheFenceReliesOn(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ dsn, want string }{
		{"app@tcp(db:3306)/p?timestamp=1700000000", `dsn parameter "timestamp": refused: it sets the session variable timestamp: it moves the session clock`},
		{"app@tcp(db:3306)/p?@@local.timestamp=1700000000", "session variable timestamp: it moves the session clock"},
		{"app@tcp(db:3306)/p?time_zone=%27%2B09:00%27", `dsn parameter "time_zone": refused`},
		{"app@tcp(db:3306)/p?autocommit=0", "session variable autocommit: the fenced layer owns its transactions"},
		{"app@tcp(db:3306)/p?@@SESSION.autocommit=0", `dsn parameter "@@SESSION.autocommit": refused: it sets the session variable autocommit`},
		{"app@tcp(db:3306)/p?@@session.`autocommit`=0", "session variable autocommit"},
		{"app@tcp(db:3306)/p?AUTOCOMMIT=0", "session variable autocommit"},
		{"app@tcp(db:3306)/p?@@GLOBAL.autocommit=0", "session variable autocommit"},
		{"app@tcp(db:3306)/p?SESSION innodb_lock_wait_timeout=3600", "session variable innodb_lock_wait_timeout: set DSNOptions.LockWaitTimeout instead"},
		{"app@tcp(db:3306)/p?innodb_lock_wait_timeout=3600", "set DSNOptions.LockWaitTimeout instead"},
		{"app@tcp(db:3306)/p?unique_checks=0", `dsn parameter "unique_checks": refused`},
		{"app@tcp(db:3306)/p?sql_mode=NO_BACKSLASH_ESCAPES", "session variable sql_mode"},
		{"app@tcp(db:3306)/p?max_execution_time=1%2C%20autocommit%3D0", "session variable max_execution_time: the fenced layer accepts no session variables"},
		{"app@tcp(db:3306)/p?@@SESSION.transaction_isolation=%27READ-UNCOMMITTED%27", "session variable transaction_isolation: the fenced layer's reads must not see uncommitted rows"},
		{"app@tcp(db:3306)/p?multiStatements=true", `dsn parameter "multiStatements": refused`},
		{"app@tcp(db:4000)/p?tidb_sysdate_is_now=1", `dsn parameter "tidb_sysdate_is_now": refused`},
		{"app@tcp(db:3306)/p?strict=true", `dsn parameter "strict": refused: removed from the driver, which panics on it`},
		{"app@tcp(db:3306)/p?allowAllFiles=true", `dsn parameter "allowAllFiles": refused`},
		{"app@tcp(db:3306)/p?columnsWithAlias=true", `dsn parameter "columnsWithAlias": refused`},
		// Settings the fence would otherwise override are refused, never
		// changed behind the caller's back.
		{"app@tcp(db:3306)/p?loc=Europe%2FParis", `dsn parameter "loc": refused: times are UTC`},
		{"app@tcp(db:3306)/p?loc=Local", `dsn parameter "loc": refused`},
		{"app@tcp(db:3306)/p?parseTime=false", `dsn parameter "parseTime": refused`},
		{"app@tcp(db:3306)/p?clientFoundRows=false", `dsn parameter "clientFoundRows": refused`},
		{"app@tcp(db:3306)/p?timeTruncate=1ms", `dsn parameter "timeTruncate": refused`},
		{"app@tcp(db:3306)/p?readTimeout=2s", "DSNOptions.ReadTimeout: must exceed LockWaitTimeout"},
		// What the driver would answer only at the first query, in its
		// own words ("default addr for network 'bogus' unknown", "dial
		// foo: unknown network foo", "missing port in address").
		{"app@bogus/p", `fenced dsn: dsn: cannot be read (want user:password@tcp(host:port)/database?params): default addr for network 'bogus' unknown`},
		{"app@foo(db:3306)/p", `fenced dsn: dsn network: must be tcp or unix, not "foo"`},
		{"app@udp(db:3306)/p", `fenced dsn: dsn network: must be tcp or unix, not "udp"`},
		{"app@tcp(db:)/p", `fenced dsn: dsn address: must be host:port, not "db:"`},
		{"nonsense", `fenced dsn: dsn: cannot be read`},
	} {
		_, err := fencedwrite.DSN(tc.dsn, fencedwrite.DSNOptions{})
		if !errors.Is(err, fencedwrite.ErrInvalid) || err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("DSN(%s) = %v, want ErrInvalid naming %q", tc.dsn, err, tc.want)
		}
		if _, err := fencedwrite.OpenDB(tc.dsn, fencedwrite.DSNOptions{}); err == nil {
			t.Errorf("OpenDB(%s) opened a pool", tc.dsn)
		}
	}
	// A timeout may come from the DSN or from the options, not from both
	// with different values.
	if _, err := fencedwrite.DSN("app@tcp(db:3306)/p?readTimeout=40s", fencedwrite.DSNOptions{ReadTimeout: time.Minute}); err == nil || !strings.Contains(err.Error(), `dsn parameter "readTimeout": refused`) {
		t.Errorf("a DSN and options that disagree on readTimeout: %v, want it refused", err)
	}
}

// Every fenced statement locks by primary key only, so that claims and
// wake-ups on small tables do not lock ranges of a secondary index (and
// deadlock each other).
func TestFencedStatementsLockByPrimaryKeyOnly(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for i := 0; i < 20; i++ {
		e.enqueue(fmt.Sprintf("x-%d", i))
	}
	table, ok := fencedrt.Registered(ent.RefundJobFencedTable)
	if !ok {
		t.Fatal("no generated table")
	}
	sample := fencedrt.Values{
		fencedrt.ParamID: int64(3), fencedrt.ParamIDs: []int64{3, 4}, fencedrt.Each(fencedrt.ParamProviderRef): []any{"re_3", "re_4"}, fencedrt.ParamAttempt: int64(0), fencedrt.ParamWriter: int64(0), fencedrt.ParamNewAttempt: int64(1),
		fencedrt.ParamLeaseUntil: "2030-01-01 00:00:00", fencedrt.ParamNow: "2030-01-01 00:00:00", fencedrt.ParamProviderRef: "re",
		fencedrt.ParamNextAction: "refund", fencedrt.ParamDelay: int64(0), fencedrt.ParamLastError: "x", fencedrt.ParamReason: "x",
		fencedrt.ParamEvidence: "x",
	}
	var checked int
	for op, s := range table.Spec().Stmts {
		if !strings.HasPrefix(s.SQL, "UPDATE") && op != fencedrt.OpClaimLock && op != fencedrt.OpRead && op != fencedrt.OpReadLocked {
			continue
		}
		query, args, err := table.Bind(op, sample)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range dbtest.Explain(t, e.raw, query, args...) {
			if a.Key != "PRIMARY" || (strings.HasPrefix(s.SQL, "UPDATE") && a.PossibleKeys != "PRIMARY") {
				t.Errorf("%s uses key %q of %q, want PRIMARY only: %s", op, a.Key, a.PossibleKeys, query)
			}
		}
		checked++
	}
	if checked < len(fencedrt.Transitions)+3 {
		t.Fatalf("checked %d statements, want every transition and the three reads", checked)
	}
}
