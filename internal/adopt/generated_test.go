//go:build !tidb

package adopt_test

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/fencekit/fencekit/fencedwrite"
	"github.com/fencekit/fencekit/internal/adopt"
	"github.com/fencekit/fencekit/internal/dbtest"
	"github.com/fencekit/fencekit/internal/devdb"
	"github.com/fencekit/fencekit/ledger"
)

// Generated legacy tables, not hand-picked ones: TestAdoptionOfGeneratedLegacyTables
// generates a team's refund_jobs (the article's columns in the types teams
// use, fencekit's other columns or not, the team's own columns, character
// sets and collations, ENUMs, NULL-ability and defaults, indexes, foreign
// keys in and out, triggers, the team's state and action names, rows) and
// checks that adopt either adopts it, every row and every column of the
// team's as before and its ready jobs settled by a fenced worker, or refuses
// it before anything changes, with every reason the table carries.
//
// The README's test command runs a few cases; the documented command runs
// 500 or more (docs/adopting.md, "Generated tables"):
//
//	go test ./internal/adopt -run TestAdoptionOfGeneratedLegacyTables -rapid.checks=500 -adopt.rows=10000 -timeout 3h

var maxRows = flag.Int("adopt.rows", 40, "the most rows a generated legacy table holds (TestAdoptionOfGeneratedLegacyTables)")

// defaultChecks is how many tables the test command generates (rapid's
// default is 100, which takes this package past its time budget).
const defaultChecks = "6"

func TestMain(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "rapid.checks" })
	if !set {
		_ = flag.Set("rapid.checks", defaultChecks)
	}
	os.Exit(m.Run())
}

// legacySpec is one generated legacy table.
type legacySpec struct {
	Charset, Collation string // the table's defaults
	ID                 string // id's type
	KeySize            int    // operation_key VARCHAR(n)
	Attempt            string
	State, Action      string // VARCHAR(n), CHAR(n) or ENUM(…)
	Lease              string
	ProviderRefSize    int
	Optional           []column // fencekit's other columns the team has
	Extra              []column // the team's own
	TeamIndex          bool
	FKIn, FKOut        bool
	TeamTrigger        bool // on refund_jobs
	OtherTrigger       bool // on a table of the team's
	Mapping            map[string]string
	Unmapped           string // a team state the mapping leaves out, present in the rows
	Rows               []legacyRow
	// Blocking adopts with -blocking-copy (team triggers and foreign keys
	// on unchanged columns kept).
	Blocking bool
	// StateNull makes state NULL-able; NullState puts a NULL in a row.
	StateNull, NullState bool
	DuplicateKey         bool
	NullIn               string // a NOT NULL column of fencekit's the team has nullable, NULL in a row
}

// column is one generated column: its definition, and whether adopt must
// refuse it (why: a word the refusal must carry).
type column struct {
	Name, Def string
	Refuse    string
	// Value writes the row's value of the column (SQL).
	Value func(i int) string
}

type legacyRow struct {
	State, Action string
	Attempt       int
	Leased        bool
}

var teamStates = []string{"pending", "processing", "done", "error", "review", "retry_wait", "Queued"}

var teamToFencekit = map[string]string{"pending": "ready", "processing": "running", "done": "succeeded", "error": "failed", "review": "manual_review",
	"retry_wait": "ready", "Queued": "ready"}

func genSpec(t *rapid.T) legacySpec {
	var s legacySpec
	charsets := [][2]string{{"utf8mb4", "utf8mb4_general_ci"}, {"utf8mb4", "utf8mb4_bin"}, {"utf8mb4", "utf8mb4_unicode_ci"}, {"latin1", "latin1_swedish_ci"}, {"utf8mb3", "utf8mb3_general_ci"}}
	cs := rapid.SampledFrom(charsets).Draw(t, "charset")
	s.Charset, s.Collation = cs[0], cs[1]
	// rare picks what adopt must refuse about one time in twelve, so that
	// about half the tables are adopted.
	rare := func(label string) bool { return rapid.IntRange(0, 11).Draw(t, label) == 5 }
	s.ID = rapid.SampledFrom([]string{"INT", "INT UNSIGNED", "BIGINT"}).Draw(t, "id")
	if rare("id unsigned bigint") {
		s.ID = "BIGINT UNSIGNED"
	}
	s.KeySize = rapid.SampledFrom([]int{32, 64, 100, 128}).Draw(t, "key size")
	if rare("key too long") {
		s.KeySize = rapid.SampledFrom([]int{191, 255}).Draw(t, "long key size")
	}
	s.Attempt = rapid.SampledFrom([]string{"INT", "TINYINT", "SMALLINT", "INT UNSIGNED"}).Draw(t, "attempt")
	if rare("attempt unsigned bigint") {
		s.Attempt = "BIGINT UNSIGNED"
	}
	s.Lease = rapid.SampledFrom([]string{"DATETIME", "DATETIME(3)", "DATETIME(6)", "TIMESTAMP NULL DEFAULT NULL"}).Draw(t, "lease")
	if rare("lease a date") {
		s.Lease = "DATE"
	}
	s.ProviderRefSize = rapid.SampledFrom([]int{64, 128, 255}).Draw(t, "provider ref size")
	if rare("provider ref too long") {
		s.ProviderRefSize = 512
	}

	// The team's state names, or fencekit's.
	teamNames := rapid.Bool().Draw(t, "team names")
	pool := []string{"ready", "running", "succeeded", "failed", "manual_review"}
	if teamNames {
		pool = rapid.SliceOfNDistinct(rapid.SampledFrom(teamStates), 2, 5, rapid.ID[string]).Draw(t, "states")
	}
	s.Mapping = map[string]string{}
	for _, st := range pool {
		if to, ok := teamToFencekit[st]; ok {
			s.Mapping[st] = to
		}
	}
	if teamNames && rare("leave one unmapped") {
		s.Unmapped = pool[0]
		delete(s.Mapping, s.Unmapped)
	}
	longest := 0
	for _, st := range pool {
		longest = max(longest, len(st))
	}
	switch rapid.IntRange(0, 2).Draw(t, "state type") {
	case 0:
		s.State = fmt.Sprintf("VARCHAR(%d)", longest+rapid.IntRange(0, 20).Draw(t, "state room"))
	case 1:
		s.State = fmt.Sprintf("CHAR(%d)", longest+rapid.IntRange(0, 5).Draw(t, "state room"))
	default:
		s.State = "ENUM(" + quoteList(pool) + ")"
	}
	actions := []string{"refund", "reconcile"}
	if rapid.Bool().Draw(t, "team actions") {
		actions = []string{"refund", "check"}
		s.Mapping["check"] = "reconcile"
	}
	if rapid.Bool().Draw(t, "action enum") {
		s.Action = "ENUM(" + quoteList(actions) + ")"
	} else {
		s.Action = "VARCHAR(16)"
	}

	// fencekit's other columns, in the types teams use.
	// opt adds one of fencekit's other columns, or not, in one of the
	// types given; the last choice is one adopt must refuse, picked rarely.
	opt := func(label string, choices ...column) {
		if !rapid.Bool().Draw(t, label) {
			return
		}
		c := rapid.SampledFrom(choices[:len(choices)-1]).Draw(t, label+" type")
		if rare(label + " refused type") {
			c = choices[len(choices)-1]
		}
		s.Optional = append(s.Optional, c)
	}
	// Text the table's character set can hold, beyond ASCII.
	fancy := map[string]string{"latin1": "é«»", "utf8mb3": "é✓", "utf8mb4": "é✓🙂"}[s.Charset]
	str := func(i int) string { return fmt.Sprintf("'pay-%d-%s'", i, fancy) }
	opt("payment_ref",
		column{Name: "payment_ref", Def: "VARCHAR(64) NOT NULL", Value: str},
		column{Name: "payment_ref", Def: "VARCHAR(128) NULL", Value: str},
		column{Name: "payment_ref", Def: "CHAR(40) NOT NULL", Value: str},
		column{Name: "payment_ref", Def: "VARCHAR(300) NOT NULL", Refuse: "payment_ref is varchar(300)", Value: str})
	amount := func(i int) string { return strconv.Itoa(100 + i) }
	opt("amount_minor",
		column{Name: "amount_minor", Def: "INT NOT NULL", Value: amount},
		column{Name: "amount_minor", Def: "BIGINT NOT NULL", Value: amount},
		column{Name: "amount_minor", Def: "INT UNSIGNED NOT NULL DEFAULT 0", Value: amount},
		column{Name: "amount_minor", Def: "DECIMAL(12,2) NOT NULL", Refuse: "amount_minor is decimal", Value: amount})
	cur := func(int) string { return "'EUR'" }
	opt("currency",
		column{Name: "currency", Def: "CHAR(3) NOT NULL DEFAULT 'EUR'", Value: cur},
		column{Name: "currency", Def: "VARCHAR(3) NOT NULL", Value: cur},
		column{Name: "currency", Def: "ENUM('EUR','USD') NOT NULL", Value: cur},
		column{Name: "currency", Def: "VARCHAR(8) NOT NULL", Refuse: "currency is varchar(8)", Value: cur})
	at := func(i int) string { return fmt.Sprintf("'2026-05-%02d 08:%02d:%02d'", 1+i%28, i%60, (7*i)%60) }
	for _, name := range []string{"next_run_at", "created_at", "updated_at"} {
		opt(name,
			column{Name: name, Def: "DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP", Value: at},
			column{Name: name, Def: "DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP", Value: at},
			column{Name: name, Def: "TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP", Value: at},
			column{Name: name, Def: "DATETIME(6) NULL", Value: at},
			column{Name: name, Def: "DATE NULL", Refuse: name + " is date", Value: func(i int) string { return "'2026-05-01'" }})
	}
	text := func(i int) string { return fmt.Sprintf("'error %d %s'", i, fancy) }
	opt("last_error",
		column{Name: "last_error", Def: "TEXT NULL", Value: text},
		column{Name: "last_error", Def: "VARCHAR(500) NULL", Value: text},
		column{Name: "last_error", Def: "INT NULL", Refuse: "last_error is int", Value: amount})

	// The team's own columns.
	extras := []column{
		{Name: "merchant_note", Def: "TEXT NULL", Value: func(i int) string { return fmt.Sprintf("'note %d: %s'", i, fancy) }},
		{Name: "legacy_flag", Def: "TINYINT(1) NOT NULL DEFAULT 0", Value: func(i int) string { return strconv.Itoa(i % 2) }},
		{Name: "priority", Def: "ENUM('low','HIGH') NULL", Value: func(i int) string { return []string{"'low'", "'HIGH'", "NULL"}[i%3] }},
		{Name: "fee", Def: "DECIMAL(10,2) NOT NULL DEFAULT 0.00", Value: func(i int) string { return fmt.Sprintf("%d.%02d", i, i%100) }},
		{Name: "modified", Def: "TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP", Value: at},
		{Name: "customer_ref", Def: "VARCHAR(40) CHARACTER SET latin1 COLLATE latin1_general_cs NOT NULL", Value: func(i int) string { return fmt.Sprintf("'cust-%d'", i) }},
		{Name: "Payload", Def: "LONGTEXT NULL", Value: func(i int) string { return fmt.Sprintf(`'{"n": %d}'`, i) }},
	}
	for _, e := range extras {
		if rapid.Bool().Draw(t, "extra "+e.Name) {
			s.Extra = append(s.Extra, e)
		}
	}
	s.TeamIndex = rapid.Bool().Draw(t, "team index")
	s.Blocking = rapid.IntRange(0, 3).Draw(t, "blocking copy") == 2
	s.StateNull = rapid.Bool().Draw(t, "state null-able")
	s.FKIn = rare("fk in")
	s.FKOut = rare("fk out")
	s.TeamTrigger = rare("team trigger")
	s.OtherTrigger = rapid.IntRange(0, 3).Draw(t, "other trigger") == 2

	n := rapid.IntRange(0, *maxRows).Draw(t, "rows")
	actionPool := actions
	for i := 0; i < n; i++ {
		r := legacyRow{State: rapid.SampledFrom(pool).Draw(t, "state"), Action: rapid.SampledFrom(actionPool).Draw(t, "action"), Attempt: rapid.IntRange(0, 5).Draw(t, "attempt")}
		r.Leased = rapid.IntRange(0, 3).Draw(t, "leased") == 2
		s.Rows = append(s.Rows, r)
	}
	if s.Unmapped != "" {
		found := false
		for _, r := range s.Rows {
			found = found || r.State == s.Unmapped
		}
		if !found {
			s.Unmapped = "" // no row holds it: nothing to refuse
			s.Mapping[pool[0]] = teamToFencekit[pool[0]]
		}
	}
	s.DuplicateKey = n > 1 && rare("duplicate key")
	s.NullState = s.StateNull && n > 0 && rare("a NULL state")
	var nullable []string
	for _, c := range s.Optional {
		if strings.Contains(c.Def, " NULL") && !strings.Contains(c.Def, "NOT NULL") && c.Refuse == "" && c.Name != "last_error" {
			nullable = append(nullable, c.Name)
		}
	}
	if len(nullable) > 0 && n > 0 && rare("null in not null") {
		s.NullIn = rapid.SampledFrom(nullable).Draw(t, "null column")
	}
	return s
}

func quoteList(vs []string) string {
	var q []string
	for _, v := range vs {
		q = append(q, "'"+v+"'")
	}
	return strings.Join(q, ",")
}

// refusals are the words each reason the spec's table cannot be adopted
// must be named by.
func (s legacySpec) refusals() []string {
	var out []string
	if s.KeySize > 128 {
		out = append(out, fmt.Sprintf("operation_key is varchar(%d)", s.KeySize))
	}
	if s.ProviderRefSize > 255 {
		out = append(out, fmt.Sprintf("provider_refund_id is varchar(%d)", s.ProviderRefSize))
	}
	if s.ID == "BIGINT UNSIGNED" {
		out = append(out, "id is bigint unsigned")
	}
	if s.Attempt == "BIGINT UNSIGNED" {
		out = append(out, "attempt is bigint unsigned")
	}
	if s.Lease == "DATE" {
		out = append(out, "lease_until is date")
	}
	for _, c := range s.Optional {
		if c.Refuse != "" {
			out = append(out, c.Refuse)
		}
	}
	if s.Unmapped != "" {
		out = append(out, fmt.Sprintf("have state %q", s.Unmapped))
	}
	if s.DuplicateKey {
		out = append(out, "rows share operation_key")
	}
	if s.NullIn != "" {
		out = append(out, s.NullIn+" is NULL in rows with id")
	}
	if s.NullState {
		out = append(out, `have state "NULL"`)
	}
	// attempt is never fencekit's bigint here: every table's types change.
	// The online copy refuses foreign keys to or from the table and
	// triggers on it; -blocking-copy keeps them, but for a key on a column
	// it changes (an id that is not a BIGINT already).
	switch {
	case !s.Blocking && (s.FKIn || s.FKOut):
		out = append(out, "foreign key")
	case s.Blocking && s.FKIn && s.ID != "BIGINT" && s.ID != "BIGINT UNSIGNED":
		out = append(out, "foreign key fk_notes_job")
	}
	if s.TeamTrigger && !s.Blocking {
		out = append(out, "trigger team_touch")
	}
	return out
}

// create makes the spec's table (and the team's other tables) and rows.
func (s legacySpec) create(t *testing.T, db *sql.DB) {
	t.Helper()
	cols := []string{
		"id " + s.ID + " NOT NULL AUTO_INCREMENT",
		fmt.Sprintf("operation_key VARCHAR(%d) NOT NULL", s.KeySize),
		"attempt " + s.Attempt + " NOT NULL DEFAULT 0",
		"state " + s.State + map[bool]string{true: " NULL", false: " NOT NULL"}[s.StateNull],
		"lease_until " + s.Lease,
		"next_action " + s.Action + " NOT NULL DEFAULT 'refund'",
		fmt.Sprintf("provider_refund_id VARCHAR(%d) NULL", s.ProviderRefSize),
	}
	for _, c := range append(slices.Clone(s.Optional), s.Extra...) {
		cols = append(cols, "`"+c.Name+"` "+c.Def)
	}
	cols = append(cols, "PRIMARY KEY (id)")
	if s.TeamIndex {
		cols = append(cols, "KEY team_state (state, attempt)")
	}
	exec(t, db, fmt.Sprintf("CREATE TABLE refund_jobs (%s) DEFAULT CHARSET=%s COLLATE=%s", strings.Join(cols, ", "), s.Charset, s.Collation))
	if s.FKIn {
		exec(t, db, "CREATE TABLE refund_notes (id INT NOT NULL AUTO_INCREMENT PRIMARY KEY, job_id "+s.ID+" NOT NULL, "+
			"CONSTRAINT fk_notes_job FOREIGN KEY (job_id) REFERENCES refund_jobs (id))")
	}
	if s.FKOut {
		exec(t, db, "CREATE TABLE refund_batches (id INT NOT NULL PRIMARY KEY)")
		exec(t, db, "INSERT INTO refund_batches VALUES (1)")
		exec(t, db, "ALTER TABLE refund_jobs ADD COLUMN batch_id INT NULL, ADD CONSTRAINT fk_job_batch FOREIGN KEY (batch_id) REFERENCES refund_batches (id)")
	}
	if s.TeamTrigger {
		exec(t, db, "CREATE TRIGGER team_touch BEFORE UPDATE ON refund_jobs FOR EACH ROW SET NEW.attempt = NEW.attempt")
	}
	if s.OtherTrigger {
		exec(t, db, "CREATE TABLE team_audit (id INT NOT NULL AUTO_INCREMENT PRIMARY KEY, what VARCHAR(64) NOT NULL)")
		exec(t, db, "CREATE TRIGGER team_audit_stamp BEFORE INSERT ON team_audit FOR EACH ROW SET NEW.what = LOWER(NEW.what)")
	}
	if len(s.Rows) == 0 {
		return
	}
	names := []string{"operation_key", "attempt", "state", "lease_until", "next_action", "provider_refund_id"}
	for _, c := range append(slices.Clone(s.Optional), s.Extra...) {
		names = append(names, "`"+c.Name+"`")
	}
	insertRows(t, db, strings.Join(names, ", "), len(s.Rows), func(i int) string {
		r := s.Rows[i-1]
		key := fmt.Sprintf("'k-%d'", i)
		if s.DuplicateKey && i == len(s.Rows) {
			key = "'k-1'"
		}
		lease, ref := "NULL", "NULL"
		if r.Leased {
			lease = "'2026-01-02 03:04:05'"
			if s.Lease == "DATE" {
				lease = "'2026-01-02'"
			}
		}
		if r.State == "done" || r.State == "succeeded" {
			ref = fmt.Sprintf("'re_%d'", i)
		}
		state := "'" + r.State + "'"
		if s.NullState && i == 1 {
			state = "NULL"
		}
		vals := []string{key, strconv.Itoa(r.Attempt), state, lease, "'" + r.Action + "'", ref}
		for _, c := range append(slices.Clone(s.Optional), s.Extra...) {
			v := c.Value(i)
			if c.Name == s.NullIn && i == 1 {
				v = "NULL"
			}
			vals = append(vals, v)
		}
		return "(" + strings.Join(vals, ", ") + ")"
	})
}

// teamColumns are the spec's columns whose values the team wrote and
// adoption keeps: every column but the state and action (mapped) and
// those fencekit backfills.
func (s legacySpec) keptColumns() []string {
	cols := []string{"id", "operation_key", "attempt", "lease_until", "provider_refund_id"}
	for _, c := range append(slices.Clone(s.Optional), s.Extra...) {
		cols = append(cols, c.Name)
	}
	if s.FKOut {
		cols = append(cols, "batch_id")
	}
	return cols
}

// canonical reads each row's value of cols, by id, in a form that the
// widenings keep: text as the bytes of its utf8mb4 form, times as instants
// in UTC at microseconds, numbers as decimal text.
func canonical(t testing.TB, db *sql.DB, cols []string) map[string]string {
	t.Helper()
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "SET time_zone = '+00:00'"); err != nil {
		t.Fatal(err)
	}
	types := map[string]string{}
	rows, err := conn.QueryContext(ctx, "SELECT COLUMN_NAME, DATA_TYPE FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'refund_jobs'")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var n, dt string
		if err := rows.Scan(&n, &dt); err != nil {
			t.Fatal(err)
		}
		types[n] = dt
	}
	rows.Close()
	var exprs []string
	for _, c := range cols {
		q := "`" + c + "`"
		switch types[c] {
		case "datetime", "timestamp":
			exprs = append(exprs, "COALESCE(DATE_FORMAT("+q+", '%Y-%m-%d %H:%i:%s.%f'), 'NULL')")
		case "varchar", "char", "text", "tinytext", "mediumtext", "longtext", "enum":
			exprs = append(exprs, "COALESCE(HEX(CONVERT("+q+" USING utf8mb4)), 'NULL')")
		default:
			exprs = append(exprs, "COALESCE(CAST("+q+" AS CHAR), 'NULL')")
		}
	}
	out := map[string]string{}
	rows, err = conn.QueryContext(ctx, "SELECT CAST(id AS CHAR), CONCAT_WS('|', "+strings.Join(exprs, ", ")+") FROM refund_jobs")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, v string
		if err := rows.Scan(&id, &v); err != nil {
			t.Fatal(err)
		}
		out[id] = v
	}
	return out
}

// checkAdoption adopts the spec's table on a fresh database and checks
// the property; t serves the set-up (a failure there is the test's own),
// the returned error is the property's.
func checkAdoption(t *testing.T, s legacySpec) error {
	t.Helper()
	ctx := context.Background()
	cfg, err := devdb.ServerConfig()
	if err != nil {
		t.Fatal(err)
	}
	name, drop, err := devdb.Create(ctx, cfg, "adoptgen")
	if err != nil {
		t.Fatalf("no usable server (%s): %v", devdb.EnvDSN, err)
	}
	defer func() { _ = drop(context.Background()) }()
	c := cfg.Clone()
	c.DBName = name
	c.ParseTime = true
	db, err := sql.Open("mysql", c.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	s.create(t, db)
	want := s.refusals()
	o := adopt.Options{States: map[string]string{}, Actions: map[string]string{}, KeepDefaults: true, BatchSize: 17, BlockingCopy: s.Blocking}
	for k, v := range s.Mapping {
		if v == "refund" || v == "reconcile" {
			o.Actions[k] = v
		} else {
			o.States[k] = v
		}
	}
	before := dbtest.Fingerprint(t, db)
	kept := canonical(t, db, s.keptColumns())
	states := stateOf(t, db)
	_, err = adopt.Apply(ctx, db, o)
	if len(want) > 0 {
		if !errors.Is(err, adopt.ErrRefused) {
			return fmt.Errorf("apply: %v, want a refusal naming %q", err, want)
		}
		var missing []string
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				missing = append(missing, w)
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("the refusal does not say %q:\n%v", missing, err)
		}
		if diff := dbtest.FingerprintDiff(before, dbtest.Fingerprint(t, db)); len(diff) > 0 {
			return fmt.Errorf("a refused apply changed the database: %v", diff)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("apply: %w", err)
	}
	after := canonical(t, db, s.keptColumns())
	if len(after) != len(kept) {
		return fmt.Errorf("%d rows after adoption, %d before", len(after), len(kept))
	}
	for id, v := range kept {
		if after[id] != v {
			return fmt.Errorf("row %s after adoption (%s):\n%s\nwant\n%s", id, strings.Join(s.keptColumns(), "|"), after[id], v)
		}
	}
	for id, st := range stateOf(t, db) {
		wantState := states[id]
		if to, ok := s.Mapping[wantState]; ok {
			wantState = to
		}
		if st != wantState {
			return fmt.Errorf("row %s: state %q, want %q", id, st, wantState)
		}
	}
	// A fenced worker settles the ready jobs (a few, for time).
	fenced, err := fencedwrite.OpenDB(devdb.DSN(cfg, name), fencedwrite.DSNOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer fenced.Close()
	client := dbtest.ClientOn(t, fenced)
	rows, err := db.Query("SELECT id, operation_key FROM refund_jobs WHERE state = 'ready' ORDER BY id LIMIT 5")
	if err != nil {
		t.Fatal(err)
	}
	type job struct {
		id  int64
		key string
	}
	var ready []job
	for rows.Next() {
		var j job
		if err := rows.Scan(&j.id, &j.key); err != nil {
			t.Fatal(err)
		}
		ready = append(ready, j)
	}
	rows.Close()
	for _, j := range ready {
		lease, err := client.RefundJob.Claim(ctx, j.id, fencedwrite.ClaimOptions{Lease: 30 * time.Second})
		if err != nil {
			return fmt.Errorf("claim adopted job %d: %w", j.id, err)
		}
		if err := client.RefundJob.Apply(ctx, lease.Complete("re_fenced_"+j.key), ledger.Refunded(j.key, "re_fenced_"+j.key)); err != nil {
			return fmt.Errorf("settle adopted job %d: %w", j.id, err)
		}
		var state, status string
		if err := db.QueryRow("SELECT j.state, r.status FROM refund_jobs j JOIN refunds r USING (operation_key) WHERE j.id = ?", j.id).Scan(&state, &status); err != nil ||
			state != "succeeded" || status != "refunded" {
			return fmt.Errorf("adopted job %d after settling: %s, ledger %s (%v)", j.id, state, status, err)
		}
	}
	return nil
}

func stateOf(t testing.TB, db *sql.DB) map[string]string {
	t.Helper()
	rows, err := db.Query("SELECT CAST(id AS CHAR), COALESCE(CAST(state AS CHAR), 'NULL') FROM refund_jobs")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var id, st string
		if err := rows.Scan(&id, &st); err != nil {
			t.Fatal(err)
		}
		out[id] = st
	}
	return out
}

func TestAdoptionOfGeneratedLegacyTables(t *testing.T) {
	t.Parallel()
	var adopted, refused int
	rapid.Check(t, func(rt *rapid.T) {
		s := genSpec(rt)
		if err := checkAdoption(t, s); err != nil {
			rt.Fatalf("%v\n%s", err, s)
		}
		if len(s.refusals()) == 0 {
			adopted++
		} else {
			refused++
		}
	})
	t.Logf("%d generated tables adopted, %d refused with every reason named", adopted, refused)
}

// String shows a spec as the statements that make its table, for a
// failure's report.
func (s legacySpec) String() string {
	return fmt.Sprintf("charset %s %s, id %s, key varchar(%d), attempt %s, state %s, action %s, lease %s, provider ref varchar(%d), optional %v, extra %v, "+
		"index %v, fk in %v out %v, team trigger %v, other trigger %v, mapping %v, unmapped %q, %d rows, duplicate key %v, null in %q, blocking %v, state null %v/%v",
		s.Charset, s.Collation, s.ID, s.KeySize, s.Attempt, s.State, s.Action, s.Lease, s.ProviderRefSize, names(s.Optional), names(s.Extra),
		s.TeamIndex, s.FKIn, s.FKOut, s.TeamTrigger, s.OtherTrigger, s.Mapping, s.Unmapped, len(s.Rows), s.DuplicateKey, s.NullIn, s.Blocking, s.StateNull, s.NullState)
}

func names(cols []column) []string {
	var out []string
	for _, c := range cols {
		out = append(out, c.Name+" "+c.Def)
	}
	return out
}

// Shapes found by hand or by the generator, kept as named cases: each one
// is a legacySpec run through the same property.
func TestAdoptionRegressions(t *testing.T) {
	t.Parallel()
	at := func(i int) string { return fmt.Sprintf("'2026-05-%02d 08:%02d:%02d'", 1+i%28, i%60, (7*i)%60) }
	pay := func(i int) string { return fmt.Sprintf("'pay-%d'", i) }
	rows := func(n int, states ...string) []legacyRow {
		var out []legacyRow
		for i := range n {
			out = append(out, legacyRow{State: states[i%len(states)], Action: "refund", Attempt: i % 3})
		}
		return out
	}
	for _, c := range []struct {
		name string
		spec legacySpec
	}{
		{"the tester's table: VARCHAR(64), DATETIMEs with the team's defaults and an ON UPDATE, a state of its own", legacySpec{
			Charset: "utf8mb4", Collation: "utf8mb4_general_ci", ID: "BIGINT", KeySize: 64, Attempt: "INT", State: "VARCHAR(32)", Action: "VARCHAR(16)",
			Lease: "DATETIME", ProviderRefSize: 128,
			Optional: []column{
				{Name: "payment_ref", Def: "VARCHAR(64) NOT NULL", Value: pay},
				{Name: "next_run_at", Def: "DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP", Value: at},
				{Name: "created_at", Def: "DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP", Value: at},
				{Name: "updated_at", Def: "DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP", Value: at},
			},
			Extra:   []column{{Name: "merchant_note", Def: "VARCHAR(255) NULL", Value: func(i int) string { return fmt.Sprintf("'note %d'", i) }}},
			Mapping: map[string]string{"retry_wait": "ready"},
			Rows:    rows(30, "ready", "retry_wait", "succeeded"),
		}},
		{"a foreign key to a BIGINT id of a utf8mb4_general_ci table is kept by -blocking-copy (it was refused as changing the id's collation)", legacySpec{
			Charset: "utf8mb4", Collation: "utf8mb4_general_ci", ID: "BIGINT", KeySize: 128, Attempt: "INT", State: "VARCHAR(32)", Action: "VARCHAR(16)",
			Lease: "DATETIME", ProviderRefSize: 255, FKIn: true, Blocking: true, Mapping: map[string]string{},
			Rows: rows(10, "ready", "failed"),
		}},
		{"a team trigger and a foreign key from the table are kept by -blocking-copy", legacySpec{
			Charset: "latin1", Collation: "latin1_swedish_ci", ID: "INT UNSIGNED", KeySize: 100, Attempt: "TINYINT", State: "ENUM('pending','done')", Action: "ENUM('refund','check')",
			Lease: "TIMESTAMP NULL DEFAULT NULL", ProviderRefSize: 64, FKOut: true, TeamTrigger: true, Blocking: true,
			Mapping: map[string]string{"pending": "ready", "done": "succeeded", "check": "reconcile"},
			Rows:    rows(12, "pending", "done"),
		}},
		{"a NULL state in a NULL-able column is refused by id", legacySpec{
			Charset: "utf8mb4", Collation: "utf8mb4_bin", ID: "INT", KeySize: 128, Attempt: "INT", State: "VARCHAR(32)", Action: "VARCHAR(16)",
			Lease: "DATETIME(6)", ProviderRefSize: 255, StateNull: true, NullState: true, Mapping: map[string]string{},
			Rows: rows(3, "ready"),
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if err := checkAdoption(t, c.spec); err != nil {
				t.Fatalf("%v\n%s", err, c.spec)
			}
		})
	}
}
