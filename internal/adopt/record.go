package adopt

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
)

// The adoption record: what the database was before adopt changed anything,
// written by apply's first step (once: an apply run again keeps the first
// run's record), read by rollback, which undoes exactly what adopt added and
// gives back what it changed. It also tells an interrupted copy's shadow
// table from a table of the team's: a shadow that did not exist before the
// adoption began is adopt's.

// RecordTable holds the adoption record.
const RecordTable = "refund_jobs_adoption"

// record is what the database was before the adoption.
type record struct {
	// id and at are the record's row and when it was written (not kept
	// in it).
	id int64
	at time.Time
	// Columns are refund_jobs' columns, in order.
	Columns []columnRecord `json:"columns"`
	// Indexes are refund_jobs' index names.
	Indexes []string `json:"indexes"`
	// Charset and Collation are refund_jobs' defaults.
	Charset   string `json:"charset"`
	Collation string `json:"collation"`
	// Tables are the database's tables, Routines its triggers and
	// procedures ("trigger name", "procedure name").
	Tables   []string `json:"tables"`
	Routines []string `json:"routines"`
	// States and Actions are the mappings apply was given.
	States  map[string]string `json:"states,omitempty"`
	Actions map[string]string `json:"actions,omitempty"`
}

// columnRecord is one column as information_schema describes it, with its
// default and ON UPDATE written as SQL ("" when it has none).
type columnRecord struct {
	Name      string `json:"name"`
	Type      string `json:"type"`
	Null      bool   `json:"null"`
	Default   string `json:"default,omitempty"`
	OnUpdate  string `json:"on_update,omitempty"`
	Charset   string `json:"charset,omitempty"`
	Collation string `json:"collation,omitempty"`
	Comment   string `json:"comment,omitempty"`
}

func (r *record) column(name string) (columnRecord, bool) {
	for _, c := range r.Columns {
		if c.Name == name {
			return c, true
		}
	}
	return columnRecord{}, false
}

func (r *record) hasTable(name string) bool { return contains(r.Tables, name) }

// readRecord returns the record, or nil when the database has none.
func (pl *planner) readRecord() (*record, error) {
	if _, ok := pl.have.Table(RecordTable); !ok {
		return nil, nil
	}
	var detail string
	var id int64
	var at string
	err := pl.conn.QueryRowContext(pl.ctx, "SELECT `id`, `detail`, DATE_FORMAT(`at`, '%Y%m%d%H%i%s%f') FROM "+quote(RecordTable)+" WHERE `event` = 'started' ORDER BY `id` LIMIT 1").Scan(&id, &detail, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("adopt: read the adoption record: %w", err)
	}
	var r record
	if err := json.Unmarshal([]byte(detail), &r); err != nil {
		return nil, fmt.Errorf("adopt: read the adoption record (%s): %w", RecordTable, err)
	}
	r.id = id
	if r.at, err = time.Parse("20060102150405.000000", at[:min(len(at), 14)]+"."+at[min(len(at), 14):]); err != nil {
		return nil, fmt.Errorf("adopt: read the adoption record (%s): its time %q: %w", RecordTable, at, err)
	}
	if err := r.valid(); err != nil {
		return nil, fmt.Errorf("%w: the adoption record (%s) holds %v: it is not what adopt wrote; roll back by hand (docs/adopting.md), nothing was changed", ErrRefused, RecordTable, err)
	}
	return &r, nil
}

// The record is read back into DDL (defaults, character sets), so what it
// holds is checked against what information_schema can have written: a
// name of letters, digits and underscores, a default that is a string
// literal, a number, NULL or CURRENT_TIMESTAMP. Its table's triggers refuse
// any account but the one that wrote it; this is the second fence.
var (
	charsetName = regexp.MustCompile(`^[A-Za-z0-9_]{1,64}$`)
	literalSQL  = regexp.MustCompile(`(?i)^(NULL|-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?|'([^'\\]|''|\\.)*'|b'[01]*'|x'[0-9a-f]*'|current_timestamp(\([0-6]?\))?)$`)
)

func (r *record) valid() error {
	for _, n := range []string{r.Charset, r.Collation} {
		if n != "" && !charsetName.MatchString(n) {
			return fmt.Errorf("a character set or collation %q", n)
		}
	}
	for _, c := range r.Columns {
		for _, n := range []string{c.Charset, c.Collation} {
			if n != "" && !charsetName.MatchString(n) {
				return fmt.Errorf("column %s's character set or collation %q", c.Name, n)
			}
		}
		for _, e := range []string{c.Default, c.OnUpdate} {
			if e != "" && !literalSQL.MatchString(e) {
				return fmt.Errorf("column %s's default or ON UPDATE %q (not a literal)", c.Name, e)
			}
		}
	}
	return nil
}

// takeRecord reads what the database is now.
func (pl *planner) takeRecord() (*record, error) {
	r := &record{States: pl.o.States, Actions: pl.o.Actions}
	mariadb := strings.Contains(strings.ToLower(pl.p.Server), "mariadb")
	rows, err := pl.conn.QueryContext(pl.ctx, "SELECT COLUMN_NAME, COLUMN_TYPE, IS_NULLABLE, COLUMN_DEFAULT, EXTRA, CHARACTER_SET_NAME, COLLATION_NAME, COLUMN_COMMENT "+
		"FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION", Table)
	if err != nil {
		return nil, fmt.Errorf("adopt: read the columns: %w", err)
	}
	for rows.Next() {
		var c columnRecord
		var null, extra string
		var def, cs, co sql.NullString
		if err := rows.Scan(&c.Name, &c.Type, &null, &def, &extra, &cs, &co, &c.Comment); err != nil {
			rows.Close()
			return nil, err
		}
		c.Null, c.Charset, c.Collation = null == "YES", cs.String, co.String
		c.Default = defaultSQL(def, extra, mariadb)
		if i := strings.Index(strings.ToLower(extra), "on update "); i >= 0 {
			c.OnUpdate = extra[i+len("on update "):]
		}
		r.Columns = append(r.Columns, c)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for _, idx := range pl.legacy.Indexes {
		r.Indexes = append(r.Indexes, idx.Name)
	}
	r.Collation = collation(nil, pl.legacy.Attrs)
	r.Charset, _ = charset(pl.legacy.Attrs)
	for _, t := range pl.have.Tables {
		r.Tables = append(r.Tables, t.Name)
	}
	routines, err := pl.routines()
	if err != nil {
		return nil, err
	}
	for k := range routines {
		r.Routines = append(r.Routines, k)
	}
	return r, nil
}

// defaultSQL writes a column's default as SQL from information_schema's
// COLUMN_DEFAULT and EXTRA, which MariaDB and MySQL spell differently:
// MariaDB (10.2.7+) shows it as SQL already (a string quoted, NULL as the
// word NULL); MySQL shows a literal's bare value, and marks an expression
// DEFAULT_GENERATED (CURRENT_TIMESTAMP shows bare). "" is no default.
func defaultSQL(def sql.NullString, extra string, mariadb bool) string {
	if !def.Valid {
		return ""
	}
	v := def.String
	switch {
	case mariadb && strings.EqualFold(v, "NULL"):
		return "NULL"
	case mariadb:
		return v
	case strings.Contains(strings.ToUpper(extra), "DEFAULT_GENERATED"):
		if strings.HasPrefix(strings.ToUpper(v), "CURRENT_TIMESTAMP") {
			return v
		}
		return "(" + v + ")"
	case strings.HasPrefix(strings.ToUpper(v), "CURRENT_TIMESTAMP"):
		return v
	}
	return sqlString(v)
}

// recordStep writes the record, once.
func (pl *planner) recordStep() (Step, error) {
	s := Step{
		Name:     "record",
		What:     "records what refund_jobs and the database are before adopt changes anything (its columns, indexes, tables, triggers and the mappings), in " + RecordTable + ": `refundd adopt rollback` reads it",
		Locks:    "none on refund_jobs",
		Rollback: "DROP TABLE " + RecordTable + " (rollback's last step)",
		Online:   true,
	}
	if pl.record != nil {
		return Step{Name: s.Name}, nil // an earlier apply's record stays
	}
	r, err := pl.takeRecord()
	if err != nil {
		return s, err
	}
	detail, err := json.Marshal(r)
	if err != nil {
		return s, fmt.Errorf("adopt: write the adoption record: %w", err)
	}
	// Only the account that writes the record (its triggers' definer, the
	// migration account) may add to it, and nobody changes or removes a
	// row: rollback reads it back into DDL.
	owned := "IF BINARY SUBSTRING_INDEX(USER(), '@', 1) <> BINARY SUBSTRING_INDEX(CURRENT_USER(), '@', 1) THEN " +
		"SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '" + RecordTable + ": only the migration account writes the adoption record'; END IF;"
	triggers := []struct{ name, when, body string }{
		{RecordTable + "_owned", "BEFORE INSERT", owned},
		{RecordTable + "_append_only", "BEFORE UPDATE", "SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '" + RecordTable + ": the adoption record never changes';"},
		{RecordTable + "_no_delete", "BEFORE DELETE", "SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '" + RecordTable + ": the adoption record is never deleted (rollback drops the table)';"},
	}
	// An apply that failed after this step's first statements left some
	// of them: only the missing ones are created (a plan has no DROP).
	have := map[string]bool{}
	rows, err := pl.conn.QueryContext(pl.ctx, "SELECT TRIGGER_NAME FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = DATABASE() AND EVENT_OBJECT_TABLE = ?", RecordTable)
	if err != nil {
		return s, fmt.Errorf("adopt: read the adoption record's triggers: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return s, fmt.Errorf("adopt: read the adoption record's triggers: %w", err)
		}
		have[n] = true
	}
	if err := rows.Err(); err != nil {
		return s, fmt.Errorf("adopt: read the adoption record's triggers: %w", err)
	}
	s.SQL = []string{
		"CREATE TABLE IF NOT EXISTS " + quote(RecordTable) + " (`id` bigint NOT NULL AUTO_INCREMENT, `event` varchar(32) NOT NULL, `detail` longtext NOT NULL, " +
			"`at` datetime(6) NOT NULL, PRIMARY KEY (`id`)) CHARSET utf8mb4 COLLATE utf8mb4_bin",
	}
	for _, t := range triggers {
		if !have[t.name] {
			s.SQL = append(s.SQL, "CREATE TRIGGER "+quote(t.name)+" "+t.when+" ON "+quote(RecordTable)+" FOR EACH ROW BEGIN "+t.body+" END")
		}
	}
	s.SQL = append(s.SQL, "INSERT INTO "+quote(RecordTable)+" (`event`, `detail`, `at`) SELECT 'started', "+sqlString(string(detail))+", "+clock+
		" FROM DUAL WHERE NOT EXISTS (SELECT 1 FROM "+quote(RecordTable)+" WHERE `event` = 'started')")
	s.routines = true
	return s, nil
}
