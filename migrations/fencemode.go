package migrations

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/fencekit/fencekit/ent"
	"github.com/fencekit/fencekit/fencedwrite"
)

// FenceMode is the rollout mode of the database's fence of refund_jobs
// (docs/adopting.md): in FenceEnforce (the default, and the only mode of a
// new database) a write that breaks a rule of the job table is refused; in
// FenceObserve it goes through and is recorded, with its writer, in
// refund_jobs_fence_violations. Fenced writers are fenced by their WHERE
// clause in both modes.
type FenceMode string

// The modes of the database's fence.
const (
	FenceEnforce FenceMode = "enforce"
	FenceObserve FenceMode = "observe"
)

// ParseFenceMode reads a mode by name.
func ParseFenceMode(s string) (FenceMode, error) {
	switch m := FenceMode(s); m {
	case FenceEnforce, FenceObserve:
		return m, nil
	}
	return "", &fencedwrite.FieldError{Field: "mode", Problem: fmt.Sprintf("must be %s or %s, got %q", FenceEnforce, FenceObserve, s)}
}

// ErrNoFenceMode means the database has no fence mode: it is TiDB, which has
// no triggers (the fence is the fenced layer's WHERE clause there), or its
// migrations are older than the mode.
var ErrNoFenceMode = errors.New("the database has no fence mode")

// CurrentFenceMode returns the mode of the database's fence.
func CurrentFenceMode(ctx context.Context, db *sql.DB) (FenceMode, error) {
	var m FenceMode
	err := db.QueryRowContext(ctx, "SELECT `mode` FROM `"+ent.RefundJobFenceModeTable+"` WHERE `id` = 1").Scan(&m)
	if err != nil {
		return "", modeErr(err)
	}
	return m, nil
}

func modeErr(err error) error {
	var me *mysql.MySQLError
	if errors.As(err, &me) && me.Number == 1146 || errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%w (on TiDB there are no triggers; elsewhere apply the migrations first): %w", ErrNoFenceMode, err)
	}
	return err
}

// SetFenceMode switches the database's fence to mode, with a reason, and
// returns the mode it left. Run it with the migration account: the
// application's account may not change the mode. The database records every
// change (from, to, the reason, the account and its connection) in
// refund_jobs_fence_mode_changes, append-only, whoever makes it. Switching
// to the mode already in force changes nothing and records nothing.
func SetFenceMode(ctx context.Context, db *sql.DB, mode FenceMode, reason string) (from FenceMode, err error) {
	if _, err := ParseFenceMode(string(mode)); err != nil {
		return "", err
	}
	if strings.TrimSpace(reason) == "" {
		return "", &fencedwrite.FieldError{Field: "reason", Problem: "must not be empty: say why the fence changes mode (it is recorded)"}
	}
	if len(reason) > 255 {
		return "", &fencedwrite.FieldError{Field: "reason", Problem: fmt.Sprintf("must be at most 255 bytes, got %d", len(reason))}
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return "", fmt.Errorf("set fence mode: begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	if err := tx.QueryRowContext(ctx, "SELECT `mode` FROM `"+ent.RefundJobFenceModeTable+"` WHERE `id` = 1 FOR UPDATE").Scan(&from); err != nil {
		return "", fmt.Errorf("set fence mode: %w", modeErr(err))
	}
	if from == mode {
		return from, nil
	}
	if _, err := tx.ExecContext(ctx, "UPDATE `"+ent.RefundJobFenceModeTable+"` SET `mode` = ?, `reason` = ? WHERE `id` = 1", string(mode), reason); err != nil {
		return "", fmt.Errorf("set fence mode: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return "", fmt.Errorf("set fence mode: commit (the mode may or may not have changed; read it with CurrentFenceMode): %w", err)
	}
	return from, nil
}

// ModeChange is one recorded change of the fence's mode.
type ModeChange struct {
	At           time.Time `json:"at"`
	From         FenceMode `json:"from"`
	To           FenceMode `json:"to"`
	Reason       string    `json:"reason"`
	Account      string    `json:"account"`
	ConnectionID int64     `json:"connection_id"`
}

// FenceModeChanges returns every change of the fence's mode, oldest first.
func FenceModeChanges(ctx context.Context, db *sql.DB) ([]ModeChange, error) {
	rows, err := db.QueryContext(ctx, "SELECT `changed_at`, `from_mode`, `to_mode`, `reason`, `account`, `connection_id` FROM `"+
		ent.RefundJobFenceModeChangesTable+"` ORDER BY `id`")
	if err != nil {
		return nil, modeErr(err)
	}
	defer rows.Close()
	var out []ModeChange
	for rows.Next() {
		var c ModeChange
		var at mysqlTime
		if err := rows.Scan(&at, &c.From, &c.To, &c.Reason, &c.Account, &c.ConnectionID); err != nil {
			return nil, err
		}
		c.At = at.t
		out = append(out, c)
	}
	return out, rows.Err()
}

// ViolationGroup is the writes the fence let through in observe mode from
// one writer (its account as it connected, user@host, and the program name
// it sent, when the server records connection attributes), breaking one
// rule, with one statement shape.
type ViolationGroup struct {
	Account string `json:"account"`
	Program string `json:"program_name,omitempty"`
	// Rule is the rule it broke, with the job ids and attempts taken out.
	Rule string `json:"rule"`
	// Operation is insert, update or delete.
	Operation string `json:"operation"`
	// Shape is the statement with its literals taken out; where the server
	// does not record statements (performance_schema off), the operation
	// and the columns the write changed ("update changing last_error").
	Shape string    `json:"statement_shape"`
	Count int       `json:"count"`
	First time.Time `json:"first_seen"`
	Last  time.Time `json:"last_seen"`
	// Columns are the fence's columns the writes changed (every one any
	// write of the group changed), in the order first seen.
	Columns []string `json:"changed_columns,omitempty"`
	// Rows are up to five of the rows it wrote.
	Rows []int64 `json:"rows"`
	// Connections are up to five of the connections it wrote through.
	Connections []int64 `json:"connections"`
}

// FenceReport groups every write the fence let through in observe mode by
// writer, rule and statement shape, the most frequent first: the legacy
// writers to fix (other languages, scripts, consoles) before the fence
// enforces.
func FenceReport(ctx context.Context, db *sql.DB) ([]ViolationGroup, error) {
	rows, err := db.QueryContext(ctx, "SELECT `observed_at`, `operation`, COALESCE(`row_id`, 0), `rule`, `account`, `connection_id`, COALESCE(`program_name`, ''), COALESCE(`statement`, ''), COALESCE(`changed_columns`, '') FROM `"+
		ent.RefundJobFenceViolationsTable+"` ORDER BY `id`")
	if err != nil {
		return nil, fmt.Errorf("fence report: %w", modeErr(err))
	}
	defer rows.Close()
	type key struct{ account, program, rule, op, shape string }
	groups := map[key]*ViolationGroup{}
	for rows.Next() {
		var (
			at                         mysqlTime
			op, rule, account, program string
			statement, changed         string
			row, conn                  int64
		)
		if err := rows.Scan(&at, &op, &row, &rule, &account, &conn, &program, &statement, &changed); err != nil {
			return nil, fmt.Errorf("fence report: %w", err)
		}
		shape := StatementShape(statement)
		if shape == "" {
			// Without performance_schema the server does not say which
			// statement ran: the columns the write changed stand for it.
			shape = op
			if changed != "" {
				shape += " changing " + changed
			}
		}
		k := key{account, program, RuleShape(rule), op, shape}
		g := groups[k]
		if g == nil {
			g = &ViolationGroup{Account: account, Program: program, Rule: k.rule, Operation: op, Shape: k.shape, First: at.t}
			groups[k] = g
		}
		g.Count++
		g.Last = at.t
		for _, c := range strings.Split(changed, ",") {
			if c != "" && !slices.Contains(g.Columns, c) {
				g.Columns = append(g.Columns, c)
			}
		}
		if len(g.Rows) < 5 && row != 0 && !contains(g.Rows, row) {
			g.Rows = append(g.Rows, row)
		}
		if len(g.Connections) < 5 && !contains(g.Connections, conn) {
			g.Connections = append(g.Connections, conn)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("fence report: %w", err)
	}
	out := make([]ViolationGroup, 0, len(groups))
	for _, g := range groups {
		out = append(out, *g)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Count != b.Count {
			return a.Count > b.Count
		}
		if a.Account != b.Account {
			return a.Account < b.Account
		}
		if a.Rule != b.Rule {
			return a.Rule < b.Rule
		}
		return a.Shape < b.Shape
	})
	return out, nil
}

// Readiness is what the fence recorded lately, read before it enforces:
// every writer whose writes it let through within a window would start
// failing.
type Readiness struct {
	// Now is the database's clock when it was read.
	Now time.Time `json:"now"`
	// Last is the latest violation recorded, if any: its time and writer.
	Last *ViolationGroup `json:"last,omitempty"`
	// Recent are the groups with a violation within the window, the most
	// recent first.
	Recent []ViolationGroup `json:"recent"`
}

// EnforceReadiness reads the violations recorded within window before the
// database's clock (the real clock, which no session moves).
func EnforceReadiness(ctx context.Context, db *sql.DB, window time.Duration) (Readiness, error) {
	var r Readiness
	var now mysqlTime
	if err := db.QueryRowContext(ctx, "SELECT "+fencedwrite.ClockUTC).Scan(&now); err != nil {
		return r, fmt.Errorf("read the database clock: %w", err)
	}
	r.Now = now.t
	groups, err := FenceReport(ctx, db)
	if err != nil {
		return r, err
	}
	sort.SliceStable(groups, func(i, j int) bool { return groups[i].Last.After(groups[j].Last) })
	if len(groups) > 0 {
		last := groups[0]
		r.Last = &last
	}
	for _, g := range groups {
		if !g.Last.Before(r.Now.Add(-window)) {
			r.Recent = append(r.Recent, g)
		}
	}
	return r, nil
}

func contains(s []int64, v int64) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

var (
	ruleNumbers = regexp.MustCompile(`#\d+|-?\b\d+\b`)
	// A string literal (single or double quotes, with backslash escapes
	// and doubled quotes), a hexadecimal or binary literal, or a number.
	literals = regexp.MustCompile(`'(?:[^'\\]|\\.|'')*'|"(?:[^"\\]|\\.|"")*"|\b[xXbB]'[0-9a-fA-F]*'|\b0x[0-9a-fA-F]+\b|-?\b\d+(?:\.\d+)?(?:[eE][-+]?\d+)?\b`)
	lists    = regexp.MustCompile(`\(\s*\?(?:\s*,\s*\?)+\s*\)`)
	spaces   = regexp.MustCompile(`\s+`)
)

// RuleShape is a rule the fence reported, with job ids and numbers taken
// out, so that one rule broken on many rows groups as one.
func RuleShape(rule string) string {
	return ruleNumbers.ReplaceAllStringFunc(rule, func(s string) string {
		if strings.HasPrefix(s, "#") {
			return "#N"
		}
		return "N"
	})
}

// StatementShape is a statement with its literals replaced by ?, lists of
// them by (?, …), and its white space collapsed: the writes of one piece of
// code, whatever rows and values they wrote.
func StatementShape(stmt string) string {
	s := literals.ReplaceAllString(stmt, "?")
	s = lists.ReplaceAllString(s, "(?, …)")
	return strings.TrimSpace(spaces.ReplaceAllString(s, " "))
}

// mysqlTime scans a DATETIME whether the pool parses times or not.
type mysqlTime struct{ t time.Time }

func (m *mysqlTime) Scan(v any) error {
	switch v := v.(type) {
	case time.Time:
		m.t = v.UTC()
	case []byte:
		t, err := time.Parse("2006-01-02 15:04:05.999999", string(v))
		if err != nil {
			return err
		}
		m.t = t
	case string:
		t, err := time.Parse("2006-01-02 15:04:05.999999", v)
		if err != nil {
			return err
		}
		m.t = t
	case nil:
	default:
		return fmt.Errorf("scan a time: %T", v)
	}
	return nil
}
