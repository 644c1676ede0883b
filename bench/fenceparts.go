package main

// The -fence-parts diagnostic (issue 21): what each part of the database
// fence costs, measured side by side in one run. It is not a figure of
// fencekit: every variant but the first is a fence fencekit never ships.
//
// One scratch database holds the migrated schema. Each variant replaces the
// two triggers a job's life runs most (the job table's BEFORE UPDATE and the
// ledger's BEFORE UPDATE) with the migrated body edited by its cuts (a cut
// that no longer matches the migrated body is an error: the diagnostic
// follows the fence it measures), or drops them. On its own slice of ready
// jobs, each variant then runs a job's three writes as three many-row
// UPDATEs (the claim, the completion, the ledger's settlement: µs per row,
// the trigger's per-row cost) and, on a second slice, as single-row
// UPDATEs in one transaction (µs per job: three statements, where the
// per-statement cost of a trigger shows: opening the tables of everything it
// may call).
// The variants alternate, each going first in turn, and each figure is the
// least of the repetitions (on a shared machine, the one least disturbed). After every slice, every job of it must be
// succeeded and its ledger row refunded: a variant that broke the path
// fails the run.

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/fencekit/fencekit/fencedwrite"
	"github.com/fencekit/fencekit/internal/devdb"
	"github.com/fencekit/fencekit/migrations"
)

// fenceTriggers are the triggers the variants replace: the job's fence and
// the ledger's.
var fenceTriggers = []string{"refund_jobs_fence", "refunds_follow_job"}

// cut is one edit of a migrated trigger body: every match of re is replaced
// by with (regexp syntax, $1 allowed). A cut that matches nothing fails.
type cut struct {
	trigger string
	re      string
	with    string
}

// fenceVariant is one fence measured.
type fenceVariant struct {
	Name string `json:"name"`
	// Part names the part this variant leaves out ("" for the references):
	// its share is (migrated − variant) ÷ (migrated − no triggers).
	Part string `json:"part,omitempty"`
	cuts []cut
	// before: the cuts apply to the triggers of a database migrated up to
	// the file before this version (previousFenceBefore: the fence before
	// issue 21; byMoveBefore: the fast paths as one expression), not to the
	// migrated ones ("").
	before string
	// drop drops the triggers instead; replace gives a whole body.
	drop    bool
	replace map[string]string
	// predicates: no triggers, and the statements carry the rules in their
	// WHERE clauses (the definer-procedure design's statements).
	predicates bool
}

// clockRE matches the real clock's expression (fencedwrite.ClockUTC).
var clockRE = regexp.QuoteMeta(fencedwrite.ClockUTC)

// previousFenceBefore is the first migration of the cheaper fence (issue
// 21): the previous fence is the triggers of a database migrated up to the
// file before it.
const previousFenceBefore = "20261204044700"

// skipForAccount opens a trigger body with the hybrid's skip: the rest of
// the body, in a block of its own, runs only for other accounts than the
// session's (sessionUser, filled in by variantBodies).
const skipForAccount = "main: BEGIN\n  IF SUBSTRING_INDEX(USER(), '@', 1) = '" + sessionUser + "' THEN\n    LEAVE main;\n  END IF;\n  BEGIN\n"

// sessionUser stands for the measuring session's account in a cut.
const sessionUser = "%SESSION_USER%"

// references are the variants every run measures.
var references = []string{"migrated", "previous fence", "no triggers", "fast paths as one expression"}

// byMoveBefore is the migration that split the job fence's fast path into
// one expression per move: before it, one expression held every move.
const byMoveBefore = "20261204180231"

// fenceVariants are the variants measured: the fence migrated today, the
// previous one, references without triggers, the migrated fence without
// its fast paths, and the previous fence without each of its parts (the
// per-rule cost of the checks, which the migrated fence still runs for
// every write its fast paths do not accept).
func fenceVariants() []fenceVariant {
	job, led := fenceTriggers[0], fenceTriggers[1]
	old := func(vs []fenceVariant) []fenceVariant {
		for i := range vs {
			vs[i].before = previousFenceBefore
			vs[i].Name = "previous " + vs[i].Name
		}
		return vs
	}
	return append([]fenceVariant{
		{Name: "migrated"},
		{Name: "previous fence", before: previousFenceBefore},
		{Name: "fast paths as one expression", before: byMoveBefore},
		{Name: "no triggers", drop: true},
		{Name: "a trigger with one SET on each table", replace: map[string]string{
			job: "BEGIN\n  SET NEW.`writer_attempt` = NULL;\nEND",
			led: "BEGIN\n  SET NEW.`updated_at` = NEW.`updated_at`;\nEND",
		}},
		{Name: "no triggers, rules as WHERE predicates", predicates: true, drop: true},
		// The hybrid of the privilege design: the statements carry the
		// rules, as a definer procedure's would, and the triggers stay for
		// every account but skip their body for the session's (the one a
		// procedure-only account would be), by one test of USER() per row.
		{Name: "rules as WHERE predicates, triggers skipped for the account", predicates: true, cuts: []cut{
			{job, `^main: BEGIN\n`, skipForAccount}, {job, `\nEND$`, "\n  END;\nEND"},
			{led, `^main: BEGIN\n`, skipForAccount}, {led, `\nEND$`, "\n  END;\nEND"},
		}},
		{Name: "migrated without its fast paths", Part: "fast paths (negative: what they save)", cuts: []cut{
			{job, jobFastPathsRE, ""}, {led, fastPathRE, ""},
		}},
		{Name: "migrated: clock without the time zone test", Part: "fast paths: the time zone test", cuts: []cut{
			{job, `IF\(BINARY @@session\.time_zone = '\+00:00', SYSDATE\(6\), NULL\)`, "SYSDATE(6)"},
			{led, `IF\(BINARY @@session\.time_zone = '\+00:00', SYSDATE\(6\), NULL\)`, "SYSDATE(6)"},
		}},
		{Name: "migrated: refusal by SIGNAL, no CALL", Part: "the refusal procedure's CALL (observe mode)", cuts: []cut{
			{job, "(?s)CALL `refund_jobs_fence_refuse`\\('update'.*?\\)\\);", "SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = msg;"},
		}},
		{Name: "migrated: job's fast path condition TRUE", Part: "job: the fast path's condition", cuts: []cut{
			{job, "(?s)(\\n +IF )NEW\\.`state` .*? THEN\\n", "${1}TRUE THEN\n"},
		}},
		{Name: "migrated: job's fast path without the identity check", Part: "job: the fast path's identity check", cuts: []cut{
			{job, "\\n +AND NEW\\.`id` <=> OLD\\.`id`[^\\n]* THEN\\n", " THEN\n"},
		}},
		{Name: "migrated: job's fast path without interval arithmetic", Part: "job: the fast path's utc + INTERVAL 1 SECOND", cuts: []cut{
			{job, "utc \\+ INTERVAL 1 SECOND", "utc"},
		}},
		{Name: "migrated: ledger's fast path without its read", Part: "ledger: the read of the job", cuts: []cut{
			{led, "(?s)EXISTS \\(SELECT 1 FROM `refund_jobs` j.*?LOCK IN SHARE MODE\\)", "TRUE"},
		}},
	}, old([]fenceVariant{
		{Name: "job: without the time zone check", Part: "time zone check", cuts: []cut{
			{job, `@@session\.time_zone <> 'SYSTEM' AND @@session\.time_zone NOT REGEXP '[^']*'`, "FALSE"},
		}},
		{Name: "job: time zone check, +00:00 first", Part: "time zone check: REGEXP after +00:00", cuts: []cut{
			{job, `(@@session\.time_zone <> 'SYSTEM' AND @@session\.time_zone NOT REGEXP '[^']*')`, "@@session.time_zone <> '+00:00' AND $1"},
		}},
		{Name: "job: clock as UTC_TIMESTAMP(6)", Part: "clock read and conversion", cuts: []cut{
			{job, `DECLARE now DATETIME\(6\) DEFAULT ` + clockRE, "DECLARE now DATETIME(6) DEFAULT UTC_TIMESTAMP(6)"},
		}},
		{Name: "job: without terminal, writer and stale checks", Part: "terminal, writer declared, stale writer", cuts: []cut{
			{job, "ELSEIF OLD\\.`state` IN \\('succeeded', 'failed'\\) THEN", "ELSEIF FALSE THEN"},
			{job, "ELSEIF NEW\\.`writer_attempt` IS NULL THEN", "ELSEIF FALSE THEN"},
			{job, "ELSEIF NEW\\.`writer_attempt` <> OLD\\.`attempt` THEN", "ELSEIF FALSE THEN"},
		}},
		{Name: "job: without the identity check", Part: "identity never changes", cuts: []cut{
			{job, "ELSEIF NOT \\(NEW\\.`id` <=> OLD\\.`id`[^\\n]*\\) THEN", "ELSEIF FALSE THEN"},
		}},
		{Name: "job: without the attempt rule", Part: "attempt stays or grows by one", cuts: []cut{
			{job, "ELSEIF NEW\\.`attempt` <> OLD\\.`attempt` AND NEW\\.`attempt` <> OLD\\.`attempt` \\+ 1 THEN", "ELSEIF FALSE THEN"},
		}},
		{Name: "job: without the state machine", Part: "moves of the state machine", cuts: []cut{
			{job, "(?s)\\n    IF OLD\\.`state` = 'ready' AND NEW\\.`state` = 'running' THEN\\n.*?\\n    END IF;\\n(    IF rule IS NOT NULL THEN)", "\n$1"},
		}},
		{Name: "job: without the key window checks", Part: "key window (key_first_used_at, last_send_at)", cuts: []cut{
			{job, "(?s)ELSEIF NOT \\(NEW\\.`key_first_used_at` <=> OLD\\.`key_first_used_at`\\).*?THEN", "ELSEIF FALSE THEN"},
			{job, "(?s)ELSEIF NOT \\(NEW\\.`last_send_at` <=> OLD\\.`last_send_at`\\).*?THEN", "ELSEIF FALSE THEN"},
		}},
		{Name: "job: refusal by SIGNAL, no CALL", Part: "the refusal procedure's CALL (observe mode)", cuts: []cut{
			{job, "(?s)CALL `refund_jobs_fence_refuse`\\('update'.*?\\)\\);", "SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = msg;"},
		}},
		{Name: "ledger: without its reads of the job", Part: "ledger: reads of refund_jobs", cuts: []cut{
			{led, "(?s)NOT EXISTS \\(SELECT 1 FROM `refund_jobs` j.*?LOCK IN SHARE MODE\\)", "FALSE"},
		}},
		{Name: "ledger: clock as UTC_TIMESTAMP(6)", Part: "ledger: clock read and conversion", cuts: []cut{
			{led, `DECLARE now DATETIME\(6\) DEFAULT ` + clockRE, "DECLARE now DATETIME(6) DEFAULT UTC_TIMESTAMP(6)"},
		}},
	})...)
}

// fastPathRE matches a migrated trigger's fast path: the condition that
// accepts the common moves at once, and its LEAVE.
const fastPathRE = `(?s)\n  IF utc IS NOT NULL AND .*?LEAVE main;\n  END IF;`

// jobFastPathsRE matches the job fence's fast paths, one expression per
// move, chosen by the row's old state.
const jobFastPathsRE = "(?s)\n  IF OLD\\.`state` = .*?\n  END IF;"

// partsResult is one variant's figures.
type partsResult struct {
	fenceVariant
	// Microseconds per row of a many-row UPDATE: the claim, the completion
	// and the ledger's settlement; Job is their sum.
	Claim    float64 `json:"claim_us_per_row"`
	Complete float64 `json:"complete_us_per_row"`
	Ledger   float64 `json:"ledger_us_per_row"`
	Job      float64 `json:"job_us_per_row"`
	// Single is microseconds per job of the three single-row UPDATEs (in
	// one transaction per slice).
	Single float64 `json:"single_us_per_job"`
	// Empty is microseconds per pair of UPDATEs that change no row (one of
	// the job table, one of the ledger): the triggers' cost per statement.
	Empty float64 `json:"empty_us_per_pair"`
	// Share is the part's share of the triggers' per-row cost (many-row),
	// SingleShare its share of their per-job cost in single-row statements.
	Share       float64 `json:"share,omitempty"`
	SingleShare float64 `json:"single_share,omitempty"`
	// Samples are every repetition's figures; the ones above are their
	// least (the repetition least disturbed by the machine's other work).
	Samples map[string][]float64 `json:"samples"`
}

// wallClock is the fallback clock of -fence-parts.
func wallClock() time.Duration { return time.Duration(time.Now().UnixNano()) }

type partsReport struct {
	// Clock is what the figures measure: the server thread's CPU time, or
	// the wall clock.
	Clock    string        `json:"clock"`
	Rows     int           `json:"rows_per_slice"`
	Singles  int           `json:"single_jobs_per_slice"`
	Reps     int           `json:"repetitions"`
	Load     [2]float64    `json:"load_average"`
	Variants []partsResult `json:"variants"`
}

// applyCuts edits body by every cut of trigger; a cut that matches nothing
// is an error naming it.
func applyCuts(trigger, body string, cuts []cut) (string, error) {
	for _, c := range cuts {
		if c.trigger != trigger {
			continue
		}
		re, err := regexp.Compile(c.re)
		if err != nil {
			return "", fmt.Errorf("cut %q of %s: %w", c.re, trigger, err)
		}
		if !re.MatchString(body) {
			return "", fmt.Errorf("cut %q matches nothing in the migrated %s: the diagnostic no longer follows the fence", c.re, trigger)
		}
		body = re.ReplaceAllString(body, c.with)
	}
	return body, nil
}

type triggerDef struct{ name, timing, event, table, body string }

func (t triggerDef) create(body string) string {
	return fmt.Sprintf("CREATE TRIGGER `%s` %s %s ON `%s` FOR EACH ROW %s", t.name, t.timing, t.event, t.table, body)
}

func readTriggers(ctx context.Context, db *sql.DB, schema string) (map[string]triggerDef, error) {
	out := map[string]triggerDef{}
	for _, name := range fenceTriggers {
		t := triggerDef{name: name}
		err := db.QueryRowContext(ctx, "SELECT ACTION_TIMING, EVENT_MANIPULATION, EVENT_OBJECT_TABLE, ACTION_STATEMENT FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = ? AND TRIGGER_NAME = ?",
			schema, name).Scan(&t.timing, &t.event, &t.table, &t.body)
		if err != nil {
			return nil, fmt.Errorf("read trigger %s: %w", name, err)
		}
		out[name] = t
	}
	return out, nil
}

// bodies are a variant's trigger bodies (nil: dropped).
func variantBodies(v fenceVariant, stock map[string]triggerDef, earlier map[string]map[string]triggerDef, user string) (map[string]*string, error) {
	out := map[string]*string{}
	for _, name := range fenceTriggers {
		if v.drop {
			out[name] = nil
			continue
		}
		body := stock[name].body
		if v.before != "" {
			body = earlier[v.before][name].body
		}
		if r, ok := v.replace[name]; ok {
			body = r
		}
		body, err := applyCuts(name, body, v.cuts)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", v.Name, err)
		}
		body = strings.ReplaceAll(body, sessionUser, user)
		out[name] = &body
	}
	return out, nil
}

// install puts a variant's triggers in place and checks that the server
// holds what it was given.
func install(ctx context.Context, db *sql.DB, schema string, stock map[string]triggerDef, bodies map[string]*string) error {
	for _, name := range fenceTriggers {
		if _, err := db.ExecContext(ctx, "DROP TRIGGER IF EXISTS `"+name+"`"); err != nil {
			return err
		}
		if bodies[name] == nil {
			continue
		}
		if _, err := db.ExecContext(ctx, stock[name].create(*bodies[name])); err != nil {
			return fmt.Errorf("create %s: %w", name, err)
		}
		var got string
		if err := db.QueryRowContext(ctx, "SELECT ACTION_STATEMENT FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = ? AND TRIGGER_NAME = ?", schema, name).Scan(&got); err != nil {
			return err
		}
		if got != *bodies[name] {
			return fmt.Errorf("trigger %s: the server holds another body than the variant's", name)
		}
	}
	return nil
}

// partsStatements are a job's three writes over the jobs whose keys lie
// between two bounds.
type partsStatements struct{ claim, complete, ledger string }

func statementsFor(v fenceVariant) partsStatements {
	lease := fencedwrite.ClockUTC + " + INTERVAL 60 SECOND"
	if !v.predicates {
		return partsStatements{
			claim: "UPDATE refund_jobs SET writer_attempt = attempt, state = 'running', attempt = attempt + 1, lease_until = " + lease + //fencelint:allow a diagnostic's many-row write, fenced by the trigger it measures
				", key_first_used_at = " + fencedwrite.ClockUTC + ", last_send_at = " + fencedwrite.ClockUTC +
				" WHERE operation_key BETWEEN ? AND ? AND state = 'ready'", //fencelint:allow a diagnostic's many-row write, fenced by the trigger it measures
			complete: "UPDATE refund_jobs SET writer_attempt = attempt, state = 'succeeded', lease_until = NULL, provider_refund_id = CONCAT('re_', operation_key)" +
				" WHERE operation_key BETWEEN ? AND ? AND state = 'running'",
			ledger: "UPDATE refunds SET status = 'refunded', provider_refund_id = CONCAT('re_', operation_key), settled_at = " + fencedwrite.ClockUTC +
				" WHERE operation_key BETWEEN ? AND ? AND status = 'requested'",
		}
	}
	// The rules a trigger checks on these moves, as predicates of the
	// statement itself (what a definer procedure would run): the claim of a
	// due ready job that sends, the completion of a running job with its
	// refund id, a ledger row settled only with its job succeeded.
	return partsStatements{
		claim: "UPDATE refund_jobs SET state = 'running', attempt = attempt + 1, lease_until = " + lease +
			", key_first_used_at = COALESCE(key_first_used_at, " + fencedwrite.ClockUTC + "), last_send_at = " + fencedwrite.ClockUTC +
			", updated_at = " + fencedwrite.ClockUTC + //fencelint:allow the privilege design's statement, measured without triggers
			" WHERE operation_key BETWEEN ? AND ? AND state = 'ready' AND next_run_at <= " + fencedwrite.ClockUTC + " AND next_action = 'refund'",
		complete: "UPDATE refund_jobs SET state = 'succeeded', lease_until = NULL, provider_refund_id = CONCAT('re_', operation_key), updated_at = " + fencedwrite.ClockUTC +
			" WHERE operation_key BETWEEN ? AND ? AND state = 'running' AND attempt = 1",
		ledger: "UPDATE refunds r JOIN refund_jobs j ON j.operation_key = r.operation_key AND j.state = 'succeeded' AND j.provider_refund_id = CONCAT('re_', r.operation_key)" +
			" SET r.status = 'refunded', r.provider_refund_id = j.provider_refund_id, r.settled_at = " + fencedwrite.ClockUTC + ", r.updated_at = " + fencedwrite.ClockUTC +
			" WHERE r.operation_key BETWEEN ? AND ? AND r.status = 'requested'",
	}
}

// fenceParts runs the diagnostic: rows jobs per many-row slice, singles
// jobs per single-row slice, reps repetitions of every variant.
func fenceParts(ctx context.Context, rows, singles, reps int, only string, out io.Writer) (*partsReport, error) {
	if rows < 1 || singles < 1 || reps < 1 {
		return nil, fmt.Errorf("-parts-rows, -parts-singles and -parts-reps must be positive")
	}
	keep, err := regexp.Compile(only)
	if err != nil {
		return nil, fmt.Errorf("-parts-only: %w", err)
	}
	// The references (the fences and no triggers) are always measured.
	variants := slices.DeleteFunc(fenceVariants(), func(v fenceVariant) bool {
		return !slices.Contains(references, v.Name) && !keep.MatchString(v.Name)
	})
	rep := &partsReport{Rows: rows, Singles: singles, Reps: reps}
	rep.Load[0] = loadAvg()
	m, err := newMariaDB(ctx, "parts", nil)
	if err != nil {
		return nil, err
	}
	defer m.close()
	raw, err := m.raw()
	if err != nil {
		return nil, err
	}
	defer raw.Close()
	stock, err := readTriggers(ctx, raw, m.name)
	if err != nil {
		return nil, err
	}
	earlier, err := earlierTriggers(ctx, variants)
	if err != nil {
		return nil, err
	}
	// The account the measuring session connects as, for the hybrid's skip:
	// a plain name, so that it is safe inside a string literal.
	var user string
	if err := raw.QueryRowContext(ctx, "SELECT SUBSTRING_INDEX(USER(), '@', 1)").Scan(&user); err != nil {
		return nil, err
	}
	if !regexp.MustCompile(`^[A-Za-z0-9_.-]{1,80}$`).MatchString(user) {
		return nil, fmt.Errorf("the session's account %q: the hybrid variant needs a plain name", user)
	}
	bodies := make([]map[string]*string, len(variants))
	for i, v := range variants {
		if bodies[i], err = variantBodies(v, stock, earlier, user); err != nil {
			return nil, err
		}
	}
	perVariant := rows + singles
	total := perVariant * len(variants) * reps
	fmt.Fprintf(os.Stderr, "bench: fence parts: enqueueing %d jobs\n", total)
	if err := enqueue(ctx, raw, 0, total); err != nil {
		return nil, err
	}
	// One session with the fenced layer's settings (time_zone '+00:00').
	fdb, err := m.fenced(nil)
	if err != nil {
		return nil, err
	}
	defer fdb.Close()
	fdb.SetMaxOpenConns(1)
	conn, err := fdb.Conn(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	// The server thread serving the session: its CPU time is what each
	// figure measures when it can be read (a local MariaDB), less disturbed
	// by the machine's other work than the wall clock, which it falls back
	// to.
	clock := wallClock
	var tid string
	if pid := serverPID(); pid != "" && conn.QueryRowContext(ctx, "SELECT TID FROM information_schema.PROCESSLIST WHERE ID = CONNECTION_ID()").Scan(&tid) == nil {
		path := "/proc/" + pid + "/task/" + tid + "/schedstat"
		if _, ok := threadNS(path); ok {
			clock = func() time.Duration { ns, _ := threadNS(path); return time.Duration(ns) }
			rep.Clock = "server thread CPU"
		}
	}
	if rep.Clock == "" {
		rep.Clock = "wall"
	}

	type sample struct{ claim, complete, ledger, single, empty []float64 }
	samples := make([]sample, len(variants))
	next := 0
	slice := func(n int) (lo, hi int) { lo = next; next += n; return lo, next - 1 }
	key := func(i int) string { return request(i).OperationKey }
	for r := range reps {
		for k := range variants {
			i := (r + k) % len(variants)
			v := variants[i]
			if err := install(ctx, raw, m.name, stock, bodies[i]); err != nil {
				return nil, fmt.Errorf("%s: %w", v.Name, err)
			}
			st := statementsFor(v)
			// Warm up: the first statement after the DDL loads the
			// triggers again; it changes no row.
			for _, q := range []string{st.claim, st.complete, st.ledger} {
				if _, err := conn.ExecContext(ctx, q, "~", "~"); err != nil {
					return nil, fmt.Errorf("%s: warm-up: %w", v.Name, err)
				}
			}
			lo, hi := slice(rows)
			for _, p := range []struct {
				q   string
				out *[]float64
			}{{st.claim, &samples[i].claim}, {st.complete, &samples[i].complete}, {st.ledger, &samples[i].ledger}} {
				start := clock()
				res, err := conn.ExecContext(ctx, p.q, key(lo), key(hi))
				if err != nil {
					return nil, fmt.Errorf("%s: %w", v.Name, err)
				}
				el := clock() - start
				if n, _ := res.RowsAffected(); n != int64(rows) {
					return nil, fmt.Errorf("%s: %d of %d rows changed by %s", v.Name, n, rows, p.q)
				}
				*p.out = append(*p.out, float64(el.Microseconds())/float64(rows))
			}
			if err := settled(ctx, conn, key(lo), key(hi), rows); err != nil {
				return nil, fmt.Errorf("%s: %w", v.Name, err)
			}
			// The single-row statements share one transaction, so that
			// what they measure is each statement's own cost, not a
			// durable commit's.
			lo, hi = slice(singles)
			start := clock()
			if _, err := conn.ExecContext(ctx, "BEGIN"); err != nil {
				return nil, err
			}
			for j := lo; j <= hi; j++ {
				for _, q := range []string{st.claim, st.complete, st.ledger} {
					res, err := conn.ExecContext(ctx, q, key(j), key(j))
					if err != nil {
						return nil, fmt.Errorf("%s: %w", v.Name, err)
					}
					if n, _ := res.RowsAffected(); n != 1 {
						return nil, fmt.Errorf("%s: %d rows changed by %s for job %d", v.Name, n, q, j)
					}
				}
			}
			if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
				return nil, err
			}
			samples[i].single = append(samples[i].single, float64((clock()-start).Microseconds())/float64(singles))
			// Statements that change no row: what a statement pays for
			// the triggers whatever its rows (opening and locking every
			// table they, and the routines they call, may touch).
			start = clock()
			for range singles {
				for _, q := range []string{st.claim, st.ledger} {
					if _, err := conn.ExecContext(ctx, q, "~", "~"); err != nil {
						return nil, fmt.Errorf("%s: %w", v.Name, err)
					}
				}
			}
			samples[i].empty = append(samples[i].empty, float64((clock()-start).Microseconds())/float64(singles))
			if err := settled(ctx, conn, key(lo), key(hi), singles); err != nil {
				return nil, fmt.Errorf("%s: %w", v.Name, err)
			}
		}
	}
	if err := install(ctx, raw, m.name, stock, bodies[0]); err != nil {
		return nil, err
	}
	for i, v := range variants {
		s := samples[i]
		pr := partsResult{fenceVariant: v, Claim: slices.Min(s.claim), Complete: slices.Min(s.complete), Ledger: slices.Min(s.ledger), Single: slices.Min(s.single), Empty: slices.Min(s.empty),
			Samples: map[string][]float64{"claim": s.claim, "complete": s.complete, "ledger": s.ledger, "single": s.single, "empty": s.empty}}
		pr.Job = pr.Claim + pr.Complete + pr.Ledger
		rep.Variants = append(rep.Variants, pr)
	}
	setShares(rep.Variants)
	rep.Load[1] = loadAvg()
	fmt.Fprintf(out, "fence parts: %d rows per many-row UPDATE, %d single-row jobs, %d repetitions alternating (least), timed by the %s; load average %.2f → %.2f\n",
		rows, singles, reps, rep.Clock, rep.Load[0], rep.Load[1])
	fmt.Fprintf(out, "%-56s %8s %8s %8s %8s %7s %9s %7s %8s\n", "variant (µs per row; single: µs per job; 0 rows: µs per 2)", "claim", "complete", "ledger", "job", "share", "single", "share", "0 rows")
	for _, p := range rep.Variants {
		share, sshare := "", ""
		if p.Part != "" {
			share, sshare = fmt.Sprintf("%.0f%%", 100*p.Share), fmt.Sprintf("%.0f%%", 100*p.SingleShare)
		}
		fmt.Fprintf(out, "%-56s %8.1f %8.1f %8.1f %8.1f %7s %9.1f %7s %8.1f\n", p.Name, p.Claim, p.Complete, p.Ledger, p.Job, share, p.Single, sshare, p.Empty)
	}
	return rep, nil
}

// setShares sets each part's share of its own fence's trigger cost: the
// migrated fence's or the previous one's, over no triggers (found by name:
// the references' order is not fixed).
func setShares(vs []partsResult) {
	byName := map[string]partsResult{}
	for _, v := range vs {
		byName[v.Name] = v
	}
	mig, prev, none := byName["migrated"], byName["previous fence"], byName["no triggers"]
	for i := range vs {
		v := &vs[i]
		if v.Part == "" {
			continue
		}
		base := mig
		if v.before == previousFenceBefore {
			base = prev
		}
		v.Share = ratio(base.Job-v.Job, base.Job-none.Job)
		v.SingleShare = ratio(base.Single-v.Single, base.Single-none.Single)
	}
}

// earlierTriggers reads, for every version a variant names, the triggers
// of a scratch database migrated up to the file before it.
func earlierTriggers(ctx context.Context, vs []fenceVariant) (map[string]map[string]triggerDef, error) {
	out := map[string]map[string]triggerDef{}
	for _, v := range vs {
		if _, ok := out[v.before]; ok || v.before == "" {
			continue
		}
		t, err := triggersBefore(ctx, v.before)
		if err != nil {
			return nil, err
		}
		out[v.before] = t
	}
	return out, nil
}

// triggersBefore reads the triggers of a scratch database migrated up to
// the file before version.
func triggersBefore(ctx context.Context, version string) (map[string]triggerDef, error) {
	dir, err := migrations.Dir()
	if err != nil {
		return nil, err
	}
	files, err := dir.Files()
	if err != nil {
		return nil, err
	}
	n := 0
	for _, f := range files {
		if f.Version() < version {
			n++
		}
	}
	if n == len(files) {
		return nil, fmt.Errorf("no migration from %s on: that fence is the migrated one", version)
	}
	cfg, err := devdb.ServerConfig()
	if err != nil {
		return nil, err
	}
	name, drop, err := devdb.Create(ctx, cfg, "bench_partsprev")
	if err != nil {
		return nil, err
	}
	defer func() { _ = drop(context.Background()) }()
	m := &mariaDB{cfg: cfg, name: name, drop: drop}
	raw, err := m.raw()
	if err != nil {
		return nil, err
	}
	defer raw.Close()
	if _, err := migrations.ApplyN(ctx, raw, n); err != nil {
		return nil, fmt.Errorf("migrate up to %s: %w", version, err)
	}
	return readTriggers(ctx, raw, name)
}

// settled checks that every job between the keys succeeded with its ledger
// row refunded.
func settled(ctx context.Context, conn *sql.Conn, lo, hi string, n int) error {
	var jobs, ledger int
	if err := conn.QueryRowContext(ctx, "SELECT COUNT(*) FROM refund_jobs WHERE operation_key BETWEEN ? AND ? AND state = 'succeeded' AND attempt = 1", lo, hi).Scan(&jobs); err != nil {
		return err
	}
	if err := conn.QueryRowContext(ctx, "SELECT COUNT(*) FROM refunds WHERE operation_key BETWEEN ? AND ? AND status = 'refunded'", lo, hi).Scan(&ledger); err != nil {
		return err
	}
	if jobs != n || ledger != n {
		return fmt.Errorf("after the slice %s..%s: %d jobs succeeded and %d ledger rows refunded, want %d", lo, hi, jobs, ledger, n)
	}
	return nil
}
