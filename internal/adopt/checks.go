package adopt

import (
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	atlasmysql "ariga.io/atlas/sql/mysql"
	"ariga.io/atlas/sql/schema"
	"github.com/go-sql-driver/mysql"
)

// autoincNote warns of the deadlock the online copy's triggers add on a
// server whose innodb_autoinc_lock_mode is not 2 (interleaved; MySQL 8's
// default, MariaDB's is 1). The triggers write the shadow, whose id is
// AUTO_INCREMENT: an insert there inside a legacy UPDATE or DELETE, or an
// INSERT … SELECT, takes the shadow's table-level AUTO-INC lock until that
// statement ends, and a legacy INSERT's trigger waits for it. A legacy
// statement that goes on locking rows after its trigger fired (an UPDATE
// of many rows, or of a column with no index, which scans the table) and
// reaches the row that INSERT holds closes a cycle: InnoDB rolls one of
// the two back (error 1213), as it does any deadlock, and nothing else.
// TestOnlineCopyLosesNoLegacyWrite sees it on MariaDB 10.11 (mode 1).
func (pl *planner) autoincNote(steps string) error {
	var mode sql.NullInt64
	if err := pl.conn.QueryRowContext(pl.ctx, "SELECT @@innodb_autoinc_lock_mode").Scan(&mode); err != nil {
		var me *mysql.MySQLError
		if errors.As(err, &me) && me.Number == 1193 { // unknown system variable: not InnoDB's AUTO-INC locking
			return nil
		}
		return fmt.Errorf("adopt: read innodb_autoinc_lock_mode: %w", err)
	}
	if mode.Valid && mode.Int64 != 2 {
		pl.p.Notes = append(pl.p.Notes, fmt.Sprintf("this server's innodb_autoinc_lock_mode is %d, not 2: while %s copies the table online, "+
			"a legacy UPDATE or DELETE that locks many rows (or scans the table: a WHERE on a column with no index) and a legacy INSERT "+
			"may deadlock on the shadow table's AUTO-INC lock, which the copy's triggers take; InnoDB then rolls one of the two back "+
			"(error 1213: retry it, as after any deadlock; nothing is lost). innodb_autoinc_lock_mode = 2 (MySQL 8's default, "+
			"a restart on MariaDB) has no such lock; -blocking-copy has no triggers", mode.Int64, steps))
	}
	return nil
}

// copyChecks refuses, by name, what the online copy cannot carry over to
// the table it swaps in: triggers of the team's on refund_jobs (they would
// follow the old table at the RENAME, and a trigger's name is unique in
// the schema, so no copy of one can wait on the new table), and a table
// with the shadow's or the old table's name that an interrupted copy did
// not leave.
func (pl *planner) copyChecks() error {
	if len(pl.copying) == 0 {
		return nil
	}
	steps := strings.Join(pl.copying, " and ")
	if err := pl.autoincNote(steps); err != nil {
		return err
	}
	rows, err := pl.conn.QueryContext(pl.ctx, "SELECT TRIGGER_NAME, ACTION_TIMING, EVENT_MANIPULATION FROM information_schema.TRIGGERS "+
		"WHERE TRIGGER_SCHEMA = DATABASE() AND EVENT_OBJECT_TABLE = ? ORDER BY TRIGGER_NAME", Table)
	if err != nil {
		return fmt.Errorf("adopt: read triggers: %w", err)
	}
	ours := false
	for rows.Next() {
		var name, timing, event string
		if err := rows.Scan(&name, &timing, &event); err != nil {
			rows.Close()
			return err
		}
		if contains(copyTriggers, name) {
			ours = true
			continue
		}
		if pl.dropped[name] {
			continue // an earlier step drops it (rollback's drop-fence)
		}
		pl.refuse("trigger %s (%s %s on %s): %s changes column types by an online copy, swapped in by RENAME TABLE, and a trigger follows the old table. "+
			"Drop it and create it again after apply, or apply with -blocking-copy (ALGORITHM=COPY, LOCK=SHARED: writes to refund_jobs wait for the whole copy)",
			name, timing, event, Table, steps)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	// A shadow the adoption record does not know was made after apply
	// began: an interrupted copy's, killed before its triggers existed.
	leftover := pl.record != nil && !pl.record.hasTable(ShadowTable)
	if _, ok := pl.have.Table(ShadowTable); ok && !ours && !leftover {
		pl.refuse("the database has a table %s, and refund_jobs has none of the online copy's triggers (%s): it is not an interrupted copy's that adopt may drop. "+
			"Drop it (if adopt left it, it holds a partial copy) or rename it first", ShadowTable, strings.Join(copyTriggers, ", "))
	}
	for _, s := range pl.p.Steps {
		if s.copy != nil && contains(pl.copying, s.Name) {
			if _, ok := pl.have.Table(s.copy.old); ok {
				pl.refuse("the database has a table %s: %s keeps the table it replaces under that name; drop it (an earlier adoption's old table, once checked) or rename it first",
					s.copy.old, s.Name)
			}
		}
	}
	return nil
}

// foreignKeys refuses a foreign key to or from refund_jobs on a column
// whose type or collation a step changes (the server refuses the change,
// error 1832/1833, or the key would join columns of different types), and
// names the others in the plan: they stay.
func (pl *planner) foreignKeys() error {
	rows, err := pl.conn.QueryContext(pl.ctx, "SELECT CONSTRAINT_NAME, TABLE_SCHEMA, TABLE_NAME, COLUMN_NAME, REFERENCED_TABLE_SCHEMA, REFERENCED_TABLE_NAME, REFERENCED_COLUMN_NAME "+
		"FROM information_schema.KEY_COLUMN_USAGE WHERE REFERENCED_TABLE_NAME IS NOT NULL AND "+
		"((TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?) OR (REFERENCED_TABLE_SCHEMA = DATABASE() AND REFERENCED_TABLE_NAME = ?)) "+
		"ORDER BY TABLE_SCHEMA, TABLE_NAME, CONSTRAINT_NAME, ORDINAL_POSITION", Table, Table)
	if err != nil {
		return fmt.Errorf("adopt: read foreign keys: %w", err)
	}
	defer rows.Close()
	type fk struct {
		name, from, to string
		changed        []string
		incoming       bool
	}
	var keys []*fk
	byName := map[string]*fk{}
	for rows.Next() {
		var name, schemaName, table, col, refSchema, refTable, refCol string
		if err := rows.Scan(&name, &schemaName, &table, &col, &refSchema, &refTable, &refCol); err != nil {
			return fmt.Errorf("adopt: read foreign keys: %w", err)
		}
		id := schemaName + "." + table + "." + name
		k := byName[id]
		if k == nil {
			k = &fk{name: name}
			byName[id] = k
			keys = append(keys, k)
		}
		qualify := func(s, t string) string {
			if s == pl.p.Database {
				return t
			}
			return s + "." + t
		}
		k.from += sep(k.from) + qualify(schemaName, table) + "." + col
		k.to += sep(k.to) + qualify(refSchema, refTable) + "." + refCol
		mine := ""
		if schemaName == pl.p.Database && table == Table {
			mine = col
		}
		if refSchema == pl.p.Database && refTable == Table {
			k.incoming = true
			if mine == "" || pl.modified[refCol] {
				mine = refCol
			}
		}
		if pl.modified[mine] {
			k.changed = append(k.changed, Table+"."+mine)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("adopt: read foreign keys: %w", err)
	}
	for _, k := range keys {
		if len(k.changed) == 0 && len(pl.copying) > 0 {
			why := "a key referencing refund_jobs would follow the old table"
			if !k.incoming {
				why = "CREATE TABLE … LIKE copies no foreign key, and its name is taken in the schema"
			}
			pl.refuse("foreign key %s (%s -> %s): %s changes column types by an online copy, swapped in by RENAME TABLE, and %s. "+
				"Drop it and add it again after apply, or apply with -blocking-copy (ALGORITHM=COPY, LOCK=SHARED: writes to refund_jobs wait for the whole copy)",
				k.name, k.from, k.to, strings.Join(pl.copying, " and "), why)
			continue
		}
		if len(k.changed) > 0 {
			pl.refuse("foreign key %s (%s -> %s) covers %s, whose type or collation adopt changes (a table copy): the server refuses that. "+
				"Drop the foreign key first and add it again after apply, with the referencing column of the new type (refund_jobs.id is bigint)",
				k.name, k.from, k.to, strings.Join(k.changed, ", "))
			continue
		}
		note := fmt.Sprintf("the foreign key %s (%s -> %s) stays as it is; adopt changes none of its columns", k.name, k.from, k.to)
		if k.incoming {
			note += ". refund_jobs_archive(cutoff) deletes archived jobs from refund_jobs: a row referencing one makes the archival fail (RESTRICT) " +
				"or is deleted with it (CASCADE); the archive has no foreign key (CREATE TABLE … LIKE copies none)"
		}
		pl.p.Notes = append(pl.p.Notes, note)
	}
	return nil
}

func sep(s string) string {
	if s == "" {
		return ""
	}
	return ", "
}

// columns checks every fencekit column against the team's table.
func (pl *planner) columns() error {
	pl.added, pl.pending, pl.kept = map[string]bool{}, map[string]bool{}, map[string]bool{}
	shapes := map[string][]string{} // how values change shape -> the columns
	for _, c := range pl.want.Columns {
		l, ok := pl.legacy.Column(c.Name)
		article := contains(ArticleColumns, c.Name)
		switch {
		case !ok && article:
			pl.refuse("%s has no column %s (the article's columns %s are required)", Table, c.Name, strings.Join(ArticleColumns, ", "))
		case !ok:
			pl.added[c.Name], pl.pending[c.Name] = true, true
		case generated(l):
			// fencekit writes its columns itself; a value the server
			// computes would change under the fence, unchecked, and the
			// online copy cannot write it.
			pl.refuse("%s.%s is a generated column, and fencekit writes its own %s: make it a plain column the team's way, or rename it if it is not fencekit's", Table, c.Name, c.Name)
		default:
			if d := tempDefault(c); d != nil && l.Default != nil && sameDefault(l.Default, d) {
				pl.pending[c.Name] = true
			}
			lt, _ := atlasmysql.FormatType(l.Type.Type)
			wt, _ := atlasmysql.FormatType(c.Type.Type)
			if lt == wt {
				continue
			}
			why, shape := widening(l.Type.Type, c.Type.Type)
			if why != "" {
				pl.refuse("%s.%s is %s and fencekit's is %s: %s. adopt widens a column only when fencekit's type keeps every value (it never narrows one nor reads it as another): "+
					"change the column the team's way first, or rename it if it is not fencekit's %s", Table, c.Name, lt, wt, why, c.Name)
				continue
			}
			if err := pl.valuesKept(l, c); err != nil {
				return err
			}
			if shape != "" {
				shapes[shape] = append(shapes[shape], fmt.Sprintf("%s (%s to %s)", c.Name, lt, wt))
			}
		}
	}
	for _, shape := range slices.Sorted(maps.Keys(shapes)) {
		pl.p.Notes = append(pl.p.Notes, fmt.Sprintf("legacy readers: %s: %s", strings.Join(shapes[shape], ", "), shape))
	}
	for _, k := range slices.Sorted(maps.Keys(pl.o.Columns)) {
		v := pl.o.Columns[k]
		want, ok := pl.want.Column(k)
		team, teamOK := pl.legacy.Column(v)
		_, fencekitName := pl.want.Column(v)
		switch {
		case !ok:
			pl.refuse("-columns %s=%s: %s is not a column of fencekit's %s", k, v, k, Table)
		case !pl.pending[k]:
			pl.refuse("-columns %s=%s: %s has %s already", k, v, Table, k)
		case !teamOK:
			pl.refuse("-columns %s=%s: %s has no column %s", k, v, Table, v)
		case fencekitName:
			pl.refuse("-columns %s=%s: %s is a fencekit column, not one of the team's", k, v, v)
		default:
			tt, _ := atlasmysql.FormatType(team.Type.Type)
			wt, _ := atlasmysql.FormatType(want.Type.Type)
			if why, _ := widening(team.Type.Type, want.Type.Type); why != "" {
				pl.refuse("-columns %s=%s: %s.%s is %s and fencekit's %s is %s: %s (adopt never narrows a type nor reads a value as another)", k, v, Table, v, tt, k, wt, why)
				continue
			}
			if !want.Type.Null {
				ids, err := pl.ids(quote(v) + " IS NULL")
				if err != nil {
					return err
				}
				if ids != "" {
					pl.refuse("-columns %s=%s: %s.%s is NULL in rows with id %s, and fencekit's %s is NOT NULL: fill them in first", k, v, Table, v, ids, k)
				}
			}
		}
	}
	for _, l := range pl.legacy.Columns {
		if _, ok := pl.want.Column(l.Name); ok || l.Type.Null || l.Default != nil || hasAutoIncrement(l) {
			continue
		}
		pl.p.Notes = append(pl.p.Notes, fmt.Sprintf("the team's column %s is NOT NULL without a default: fencekit's Enqueue sets only fencekit's columns, so it fails "+
			"until the team gives %s a default (ALTER TABLE %s ALTER COLUMN %s SET DEFAULT …, metadata only) or lets it be NULL; adopt leaves the team's columns as they are",
			l.Name, l.Name, Table, l.Name))
	}
	if pk := pl.legacy.PrimaryKey; pk == nil || len(pk.Parts) != 1 || pk.Parts[0].C == nil || pk.Parts[0].C.Name != "id" {
		pl.refuse("%s's primary key must be (id): adopt batches by it", Table)
	}
	for _, idx := range pl.want.Indexes {
		if l, ok := pl.legacy.Index(idx.Name); ok && !sameIndex(l, idx) {
			pl.refuse("%s has an index %s of its own that is not fencekit's %s: rename it first", Table, idx.Name, describeIndex(idx))
		}
	}
	// Tables of fencekit's that the database already has must be fencekit's.
	for _, t := range pl.target.Schema.Tables {
		if t.Name == Table || t.Name == "refund_jobs_archive" {
			continue
		}
		have, ok := pl.have.Table(t.Name)
		if !ok {
			continue
		}
		changes, err := pl.drv.TableDiff(have, t)
		if err != nil {
			return fmt.Errorf("adopt: diff %s: %w", t.Name, err)
		}
		if len(changes) > 0 {
			pl.refuse("the database has a table %s that is not fencekit's: rename it first", t.Name)
		}
	}
	return nil
}

// valuesKept refuses, by id, the rows whose value of l would not survive
// its widening to fencekit's c: a trailing space a CHAR would drop, a zero
// TIMESTAMP (no instant: it would read as 1970).
func (pl *planner) valuesKept(l, c *schema.Column) error {
	if dropsTrailingSpaces(l.Type.Type, c.Type.Type) {
		ids, err := pl.ids(binary(l.Name) + " <> CAST(TRIM(TRAILING ' ' FROM " + quote(l.Name) + ") AS BINARY)")
		if err != nil {
			return err
		}
		if ids != "" {
			pl.refuse("%s.%s ends in a space in rows with id %s, and fencekit's %s is a char, which drops trailing spaces: trim them first", Table, l.Name, ids, c.Name)
		}
	}
	if isTimestamp(l) {
		ids, err := pl.ids("UNIX_TIMESTAMP(" + quote(l.Name) + ") = 0")
		if err != nil {
			return err
		}
		if ids != "" {
			pl.refuse("%s.%s holds the zero timestamp (0000-00-00 00:00:00, no instant) in rows with id %s: set a time or NULL first", Table, l.Name, ids)
		}
	}
	return nil
}

func sameIndex(a, b *schema.Index) bool {
	return describeIndex(a) == describeIndex(b)
}

func describeIndex(i *schema.Index) string {
	var cols []string
	for _, p := range i.Parts {
		if p.C != nil {
			cols = append(cols, p.C.Name)
		}
	}
	u := ""
	if i.Unique {
		u = "unique "
	}
	return u + "(" + strings.Join(cols, ", ") + ")"
}

// mapping returns, for column col, the values to rewrite (legacy ->
// fencekit), refusing the values it cannot map.
func (pl *planner) mapping(col string, valid []string, m map[string]string, flag string) (map[string]string, error) {
	if _, ok := pl.legacy.Column(col); !ok {
		return map[string]string{}, nil // refused as missing
	}
	// Byte for byte: under a case-insensitive or PAD SPACE collation the
	// server would group 'Pending' and 'pending ' with 'pending', and the
	// rewrite would map them all through the one name declared.
	rows, err := pl.conn.QueryContext(pl.ctx, "SELECT "+binary(col)+", COUNT(*) FROM "+quote(Table)+" GROUP BY "+binary(col))
	if err != nil {
		return nil, fmt.Errorf("adopt: read %s values: %w", col, err)
	}
	type value struct {
		v     sql.NullString
		count int64
	}
	var values []value
	for rows.Next() {
		var v value
		if err := rows.Scan(&v.v, &v.count); err != nil {
			rows.Close()
			return nil, err
		}
		values = append(values, v)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, v := range values {
		if v.v.Valid && contains(valid, v.v.String) {
			continue
		}
		if to, ok := m[v.v.String]; ok && v.v.Valid {
			out[v.v.String] = to
			continue
		}
		where, shown := binary(col)+" = ?", v.v.String
		args := []any{v.v.String}
		if !v.v.Valid {
			where, shown, args = quote(col)+" IS NULL", "NULL", nil
		}
		ids, err := pl.ids(where, args...)
		if err != nil {
			return nil, err
		}
		pl.refuse("%d row(s) have %s %q, which -%s does not map to a fencekit name (%s): id %s", v.count, col, shown, flag, strings.Join(valid, ", "), ids)
	}
	return out, nil
}

// ids names up to Listed ids of the rows matching where.
func (pl *planner) ids(where string, args ...any) (string, error) {
	rows, err := pl.conn.QueryContext(pl.ctx, fmt.Sprintf("SELECT id FROM %s WHERE %s ORDER BY id LIMIT %d", quote(Table), where, pl.o.Listed+1), args...)
	if err != nil {
		return "", fmt.Errorf("adopt: %w", err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return "", err
		}
		ids = append(ids, id)
	}
	if len(ids) > pl.o.Listed {
		ids = append(ids[:pl.o.Listed], "…")
	}
	return strings.Join(ids, ", "), rows.Err()
}

// duplicates refuses the rows a unique index of fencekit's would refuse.
func (pl *planner) duplicates(idx *schema.Index) error {
	var cols []string
	for _, p := range idx.Parts {
		if p.C == nil {
			continue
		}
		if _, ok := pl.legacy.Column(p.C.Name); !ok {
			return nil // added by adopt: one value per row
		}
		cols = append(cols, quote(p.C.Name))
	}
	list := strings.Join(cols, ", ")
	rows, err := pl.conn.QueryContext(pl.ctx, fmt.Sprintf("SELECT CONCAT_WS(',', %s), COUNT(*), SUBSTRING_INDEX(GROUP_CONCAT(id ORDER BY id), ',', %d) FROM %s GROUP BY %s HAVING COUNT(*) > 1 LIMIT %d",
		list, pl.o.Listed, quote(Table), list, pl.o.Listed))
	if err != nil {
		return fmt.Errorf("adopt: look for duplicate %s: %w", list, err)
	}
	defer rows.Close()
	for rows.Next() {
		var key, ids string
		var n int
		if err := rows.Scan(&key, &n, &ids); err != nil {
			return err
		}
		pl.refuse("%d rows share %s %q (id %s): an operation key takes one job; settle or merge them first", n, strings.Trim(list, "`"), key, ids)
	}
	return rows.Err()
}
