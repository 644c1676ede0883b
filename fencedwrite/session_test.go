package fencedwrite_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fencekit/fencekit/ent"
	"github.com/fencekit/fencekit/ent/refundjob"
	"github.com/fencekit/fencekit/fencedwrite"
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
	if len(out) < 5 {
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
