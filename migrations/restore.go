package migrations

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strings"

	"ariga.io/atlas/sql/migrate"
	"ariga.io/atlas/sql/schema"
)

// snapshot is a database's schema as a run of Apply found it: its tables
// as Atlas inspects them (columns, indexes, checks) and, because
// open-source Atlas does not inspect them, its triggers and procedures as
// the server prints them. The revision table is not part of it.
type snapshot struct {
	schema   *schema.Schema
	routines map[string]routine // "trigger name" or "procedure name"
}

// routine is one trigger or procedure: the statement that creates it, and
// the sql_mode it was created under.
type routine struct {
	kind, name, create, sqlMode string
	body                        string // what decides whether two are the same
	order                       int    // a trigger's place among its table's triggers of one event
	table                       string // a trigger's table
}

func (r routine) key() string { return r.kind + " " + r.name }

// inspectOptions leaves the revision table out of every inspection: it is
// Atlas's bookkeeping, not the schema.
func inspectOptions() *schema.InspectOptions {
	return &schema.InspectOptions{Exclude: []string{RevisionTable}}
}

// takeSnapshot inspects the database conn is connected to.
func takeSnapshot(ctx context.Context, drv migrate.Driver, conn *sql.Conn) (*snapshot, error) {
	s, err := drv.InspectSchema(ctx, "", inspectOptions())
	if err != nil {
		return nil, fmt.Errorf("inspect schema: %w", err)
	}
	rs, err := inspectRoutines(ctx, conn)
	if err != nil {
		return nil, err
	}
	return &snapshot{schema: s, routines: rs}, nil
}

// inspectRoutines reads the triggers and procedures of the connected
// database, with the statements that recreate them. A trigger is rebuilt
// from information_schema.TRIGGERS (one query); it is recreated with the
// running account as its definer, as the migration file that created it
// would have.
func inspectRoutines(ctx context.Context, conn *sql.Conn) (map[string]routine, error) {
	out := map[string]routine{}
	var version string
	if err := conn.QueryRowContext(ctx, "SELECT VERSION()").Scan(&version); err != nil {
		return nil, fmt.Errorf("inspect triggers: read server version: %w", err)
	}
	if strings.Contains(version, "TiDB") {
		return out, nil // no triggers, no procedures
	}
	rows, err := conn.QueryContext(ctx, "SELECT TRIGGER_NAME, ACTION_TIMING, EVENT_MANIPULATION, EVENT_OBJECT_TABLE, ACTION_STATEMENT, ACTION_ORDER, SQL_MODE "+
		"FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = DATABASE()")
	if err != nil {
		return nil, fmt.Errorf("inspect triggers: %w", err)
	}
	for rows.Next() {
		r := routine{kind: "trigger"}
		var timing, event, table, body string
		if err := rows.Scan(&r.name, &timing, &event, &table, &body, &r.order, &r.sqlMode); err != nil {
			rows.Close()
			return nil, fmt.Errorf("inspect triggers: %w", err)
		}
		r.body, r.table = normalizeBody(body), table
		r.create = "CREATE TRIGGER " + quoteIdent(r.name) + " " + timing + " " + event + " ON " + quoteIdent(table) + " FOR EACH ROW " + body
		out[r.key()] = r
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("inspect triggers: %w", err)
	}
	var procs []routine
	rows, err = conn.QueryContext(ctx, "SELECT ROUTINE_NAME, ROUTINE_DEFINITION FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = DATABASE() AND ROUTINE_TYPE = 'PROCEDURE'")
	if err != nil {
		return nil, fmt.Errorf("inspect procedures: %w", err)
	}
	for rows.Next() {
		r := routine{kind: "procedure"}
		var body sql.NullString
		if err := rows.Scan(&r.name, &body); err != nil {
			rows.Close()
			return nil, fmt.Errorf("inspect procedures: %w", err)
		}
		r.body = normalizeBody(body.String)
		procs = append(procs, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("inspect procedures: %w", err)
	}
	for _, r := range procs {
		// SHOW CREATE PROCEDURE: Procedure, sql_mode, Create Procedure, ….
		rows, err := conn.QueryContext(ctx, "SHOW CREATE PROCEDURE "+quoteIdent(r.name))
		if err != nil {
			return nil, fmt.Errorf("inspect procedure %s: %w", r.name, err)
		}
		cols, _ := rows.Columns()
		vals := make([]sql.NullString, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if rows.Next() {
			if err := rows.Scan(ptrs...); err != nil {
				rows.Close()
				return nil, fmt.Errorf("inspect procedure %s: %w", r.name, err)
			}
		}
		rows.Close()
		if len(vals) >= 3 {
			// Without its DEFINER clause: recreated by the running account,
			// as the migration file that created it would have.
			r.sqlMode, r.create = vals[1].String, definer.ReplaceAllString(vals[2].String, "CREATE ")
		}
		if r.create == "" {
			return nil, fmt.Errorf("inspect procedure %s: the server does not show its definition (the account must own it)", r.name)
		}
		out[r.key()] = r
	}
	return out, nil
}

var definer = regexp.MustCompile("^CREATE\\s+DEFINER\\s*=\\s*(`[^`]*`|'[^']*'|[^@\\s]+)@(`[^`]*`|'[^']*'|[^\\s]+)\\s+")

func quoteIdent(s string) string { return "`" + strings.ReplaceAll(s, "`", "``") + "`" }

// restore brings the database back to snap: it drops the triggers and
// procedures that snap does not hold (or holds differently), lets Atlas
// plan and apply the difference between the tables now and in snap (tables
// and columns the run created are dropped; what it dropped comes back
// empty), then recreates snap's triggers and procedures that are missing.
// Rows a run wrote into tables that existed before it stay.
func restore(ctx context.Context, drv migrate.Driver, conn *sql.Conn, snap *snapshot) error {
	now, err := inspectRoutines(ctx, conn)
	if err != nil {
		return err
	}
	for _, k := range slices.Sorted(maps.Keys(now)) {
		r := now[k]
		if was, ok := snap.routines[k]; ok && was.body == r.body {
			continue
		}
		if _, err := conn.ExecContext(ctx, "DROP "+strings.ToUpper(r.kind)+" IF EXISTS "+quoteIdent(r.name)); err != nil {
			return fmt.Errorf("restore: drop %s %s: %w", r.kind, r.name, err)
		}
		delete(now, k)
	}
	current, err := drv.InspectSchema(ctx, "", inspectOptions())
	if err != nil {
		return fmt.Errorf("restore: inspect schema: %w", err)
	}
	changes, err := drv.SchemaDiff(current, snap.schema)
	if err != nil {
		return fmt.Errorf("restore: diff schema: %w", err)
	}
	if len(changes) > 0 {
		if err := drv.ApplyChanges(ctx, changes); err != nil {
			return fmt.Errorf("restore: apply schema: %w", err)
		}
	}
	var mode string
	if err := conn.QueryRowContext(ctx, "SELECT @@SESSION.sql_mode").Scan(&mode); err != nil {
		return fmt.Errorf("restore: read sql_mode: %w", err)
	}
	defer func() { _, _ = conn.ExecContext(context.WithoutCancel(ctx), "SET SESSION sql_mode = ?", mode) }()
	// Procedures first (a trigger may call one), then triggers in the order
	// they ran in.
	keys := slices.Sorted(maps.Keys(snap.routines))
	sort.SliceStable(keys, func(i, j int) bool {
		a, b := snap.routines[keys[i]], snap.routines[keys[j]]
		if (a.kind == "procedure") != (b.kind == "procedure") {
			return a.kind == "procedure"
		}
		return a.order < b.order
	})
	for _, k := range keys {
		if _, ok := now[k]; ok {
			continue
		}
		r := snap.routines[k]
		if _, err := conn.ExecContext(ctx, "SET SESSION sql_mode = ?", r.sqlMode); err != nil {
			return fmt.Errorf("restore: set sql_mode for %s %s: %w", r.kind, r.name, err)
		}
		if _, err := conn.ExecContext(ctx, r.create); err != nil {
			return fmt.Errorf("restore: recreate %s %s: %w", r.kind, r.name, err)
		}
	}
	return nil
}

// normalizeBody is a trigger's or procedure's body without its comments and
// with its white space collapsed: the mysql and mariadb clients strip
// comments that the server keeps when the same statement comes through the
// driver, and neither changes what the body does.
func normalizeBody(s string) string {
	var b strings.Builder
	space := false
	emit := func(c byte) {
		if c == ' ' || c == '\t' || c == '\n' || c == '\r' {
			space = true
			return
		}
		if space && b.Len() > 0 {
			b.WriteByte(' ')
		}
		space = false
		b.WriteByte(c)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\'' || c == '"' || c == '`':
			// A quoted string or name, with doubled quotes and (for
			// strings) backslash escapes, copied as it is.
			emit(c)
			for i++; i < len(s); i++ {
				b.WriteByte(s[i])
				if s[i] == '\\' && c != '`' && i+1 < len(s) {
					i++
					b.WriteByte(s[i])
					continue
				}
				if s[i] == c {
					if i+1 < len(s) && s[i+1] == c {
						i++
						b.WriteByte(s[i])
						continue
					}
					break
				}
			}
		case c == '-' && i+2 < len(s) && s[i+1] == '-' && (s[i+2] == ' ' || s[i+2] == '\t' || s[i+2] == '\n'), c == '#':
			for i < len(s) && s[i] != '\n' {
				i++
			}
			space = true
		case c == '/' && i+1 < len(s) && s[i+1] == '*':
			end := strings.Index(s[i+2:], "*/")
			if end < 0 {
				i = len(s)
			} else {
				i += end + 3
			}
			space = true
		default:
			emit(c)
		}
	}
	return b.String()
}
