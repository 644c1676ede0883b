package adopt

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"ariga.io/atlas/sql/migrate"
	atlasmysql "ariga.io/atlas/sql/mysql"
	"ariga.io/atlas/sql/schema"
	"github.com/go-sql-driver/mysql"

	"github.com/fencekit/fencekit/internal/term"
	"github.com/fencekit/fencekit/migrations"
)

// Plan is the way from a database's schema to fencekit's, step by step.
type Plan struct {
	// Kind is what the plan does: "adopt", or "adopt rollback".
	Kind     string
	Database string
	Server   string
	// Rows is the number of rows of refund_jobs when the plan was made, and
	// MinID and MaxID the range of its primary key.
	Rows, MinID, MaxID int64
	// Preflight is step 0: what the server and the accounts allow, checked
	// before anything changes.
	Preflight []Check
	Steps     []Step
	// Notes are what the on-call engineer must know before applying.
	Notes []string
	// Baseline is the migration version the adopted database records.
	Baseline, BaselineDesc string

	target *migrations.Target
}

// Step is one step of a plan.
type Step struct {
	Name string
	// What it does, what it locks and for how long, how to roll it back.
	What, Locks, Rollback string
	// Online is false when the step blocks writes to refund_jobs for its
	// whole duration.
	Online bool
	// SQL runs in order, each statement on its own.
	SQL []string
	// Batched, when set, runs after SQL once per primary-key range
	// [lo, hi] (its two placeholders), each batch its own transaction.
	Batched []string
	// From is the first id the batches cover (the table's lowest when 0).
	From int64
	// copy, when set, changes column types online (runOnline): the
	// server's own online ALTER, or a shadow copy.
	copy *onlineCopy
	// baseline marks the step that records the Atlas baseline.
	baseline bool
	// routines marks SQL that creates triggers and procedures (printed
	// between DELIMITER lines).
	routines bool
	// alt, where set, is SQL[i]'s alternative, run when the server answers
	// that SQL[i]'s algorithm is not available for the change (1846).
	alt []string
}

// Empty reports whether the step has nothing to run.
func (s Step) Empty() bool {
	return len(s.SQL) == 0 && len(s.Batched) == 0 && !s.baseline && s.copy == nil
}

// lockTables heads the statement that locks the fenced tables while their
// triggers are created.
const lockTables = "LOCK TABLES "

// epoch is the temporary default of the NOT NULL time columns adopt adds:
// the backfill replaces it, batch by batch.
const epoch = "1970-01-01 00:00:00"

// clock is the database's real clock (fencedwrite.ClockUTC): the fence's
// rules read the same.
const clock = "TIMESTAMPADD(MICROSECOND, CAST(UNIX_TIMESTAMP(SYSDATE(6)) * 1000000 AS SIGNED), TIMESTAMP'1970-01-01 00:00:00')"

// NewPlan inspects the database db is connected to and plans its adoption.
// It changes nothing (it replays the migrations on a scratch database of
// the same server, to know fencekit's schema). A database that cannot be
// adopted as it is gets an error matching ErrRefused that names every
// reason.
func NewPlan(ctx context.Context, db *sql.DB, o Options) (*Plan, error) {
	o = o.withDefaults()
	if err := o.validate(); err != nil {
		return nil, err
	}
	pl, closeFn, err := newPlanner(ctx, db, o)
	if err != nil {
		return nil, err
	}
	defer closeFn()
	if err := pl.plan(); err != nil {
		return nil, err
	}
	if len(pl.refusals) > 0 {
		return nil, fmt.Errorf("%w: %s cannot be adopted as it is (nothing was changed):\n  %s", ErrRefused, pl.p.Database, strings.Join(pl.refusals, "\n  "))
	}
	return pl.p, nil
}

// newPlanner reads what a plan (of apply or of rollback) starts from:
// fencekit's schema (the migrations replayed on a scratch database) and the
// database's, inspected on a connection of its own, which closeFn releases.
func newPlanner(ctx context.Context, db *sql.DB, o Options) (pl *planner, closeFn func(), err error) {
	dir, err := migrations.DirFor(ctx, db)
	if err != nil {
		return nil, nil, err
	}
	target, err := migrations.ReplayTarget(ctx, db, dir)
	if err != nil {
		return nil, nil, fmt.Errorf("adopt: %w", err)
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("adopt: connect: %w", err)
	}
	defer func() {
		if err != nil {
			conn.Close()
		}
	}()
	drv, err := atlasmysql.Open(conn)
	if err != nil {
		return nil, nil, fmt.Errorf("adopt: open atlas driver: %w", err)
	}
	// An id past BIGINT's top (an unsigned BIGINT, or a table whose ids
	// reached the top) fails Atlas's inspection: refused by name first.
	var next sql.NullString
	if err := conn.QueryRowContext(ctx, "SELECT CAST(AUTO_INCREMENT AS CHAR) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?", Table).Scan(&next); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, nil, fmt.Errorf("adopt: %w", err)
	}
	if n, err := strconv.ParseUint(next.String, 10, 64); next.Valid && err == nil && n > math.MaxInt64 {
		return nil, nil, fmt.Errorf("%w: %s.id has reached %d (its next AUTO_INCREMENT value, %d, is past fencekit's id type, bigint, whose top is %d): "+
			"rows with ids that high cannot be kept; renumber them below it first (nothing was changed)", ErrRefused, Table, n-1, n, int64(math.MaxInt64))
	}
	have, err := drv.InspectSchema(ctx, "", &schema.InspectOptions{Exclude: []string{migrations.RevisionTable}})
	if err != nil {
		return nil, nil, fmt.Errorf("adopt: inspect: %w", err)
	}
	// The revision table is told apart by name (Exclude above), but its
	// presence matters to rollback.
	var revs int
	if err := conn.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?", migrations.RevisionTable).Scan(&revs); err != nil {
		return nil, nil, fmt.Errorf("adopt: %w", err)
	}
	if revs > 0 {
		have.AddTables(schema.NewTable(migrations.RevisionTable))
	}
	p := &Plan{Kind: "adopt", Baseline: target.Version, BaselineDesc: target.Description, target: target}
	if err := conn.QueryRowContext(ctx, "SELECT DATABASE(), VERSION()").Scan(&p.Database, &p.Server); err != nil {
		return nil, nil, fmt.Errorf("adopt: %w", err)
	}
	return &planner{ctx: ctx, conn: conn, drv: drv, o: o, p: p, have: have, target: target}, func() { conn.Close() }, nil
}

type planner struct {
	ctx      context.Context
	conn     *sql.Conn
	drv      migrate.Driver
	o        Options
	p        *Plan
	have     *schema.Schema
	target   *migrations.Target
	refusals []string
	// record is the adoption record an earlier apply wrote (nil before the
	// first).
	record *record
	// dropped are the triggers a step of the plan drops.
	dropped map[string]bool

	legacy, want *schema.Table
	added        map[string]bool // fencekit columns adopt adds
	// pending are the added columns and those an earlier, interrupted
	// apply added: they still carry adopt's temporary default.
	pending map[string]bool
	// kept are fencekit columns the team had with a default of its own that
	// fencekit's lacks, kept under -keep-defaults (drop-defaults' note
	// drops them later).
	kept map[string]bool
	// mapped are the rewrites map-values plans, per column (team name ->
	// fencekit name).
	mapped map[string]map[string]string
	// modified are the columns of refund_jobs whose type or collation a
	// step changes (foreign keys on them are refused).
	modified map[string]bool
	// copying names the steps whose change needs a table copy on MariaDB
	// and MySQL alike, done online (a shadow table swapped in by RENAME).
	copying []string
}

func (pl *planner) refuse(format string, args ...any) {
	pl.refusals = append(pl.refusals, term.Inert(fmt.Sprintf(format, args...)))
}

func (pl *planner) plan() error {
	var ok bool
	if pl.legacy, ok = pl.have.Table(Table); !ok {
		pl.refuse("the database has no %s table: nothing to adopt (a new database: run `refundd migrate -create`)", Table)
		return nil
	}
	if pl.want, ok = pl.target.Schema.Table(Table); !ok {
		return errors.New("adopt: the migrations have no refund_jobs table")
	}
	var err error
	if pl.record, err = pl.readRecord(); err != nil {
		return err
	}
	var revs int
	if err := pl.conn.QueryRowContext(pl.ctx, "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?", migrations.RevisionTable).Scan(&revs); err != nil {
		return fmt.Errorf("adopt: %w", err)
	}
	if revs > 0 {
		var n int
		if err := pl.conn.QueryRowContext(pl.ctx, "SELECT COUNT(*) FROM "+quote(migrations.RevisionTable)).Scan(&n); err != nil {
			return fmt.Errorf("adopt: %w", err)
		}
		if n > 0 {
			pl.refuse("the database has Atlas revisions (%s): its migrations are managed already; run `refundd migrate`", migrations.RevisionTable)
			return nil
		}
	}
	if _, ok := pl.legacy.Column("id"); ok {
		if err := pl.conn.QueryRowContext(pl.ctx, "SELECT COUNT(*), COALESCE(MIN(id), 0), COALESCE(MAX(id), 0) FROM "+quote(Table)).Scan(&pl.p.Rows, &pl.p.MinID, &pl.p.MaxID); err != nil {
			return fmt.Errorf("adopt: count rows: %w", err)
		}
	}
	if err := pl.preflight(); err != nil {
		return err
	}
	// Every check runs, whatever an earlier one refused, so that one plan
	// lists everything that stops the adoption; a check that needs a
	// missing column skips it (the missing column is refused already).
	if err := pl.columns(); err != nil {
		return err
	}
	// map-values is planned first (widen-columns makes room for the names
	// it writes) and runs after widen-columns.
	pl.modified = map[string]bool{}
	mapValues, err := pl.mapValues()
	if err != nil {
		return err
	}
	for _, step := range []func() (Step, error){
		pl.recordStep, pl.addColumns, pl.widenColumns, func() (Step, error) { return mapValues, nil }, pl.modifyColumns, pl.mirrorColumns, pl.backfillTimes, pl.dropDefaults, pl.addIndexes,
		pl.createTables, pl.backfillKeys, pl.backfillLedger, pl.observeMode, pl.fence, pl.catchUp, pl.baseline,
	} {
		s, err := step()
		if err != nil {
			return err
		}
		if !s.Empty() {
			pl.p.Steps = append(pl.p.Steps, s)
		}
	}
	if err := pl.foreignKeys(); err != nil {
		return err
	}
	return pl.copyChecks()
}

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

// render is Atlas's SQL for changes to refund_jobs.
func (pl *planner) render(changes ...schema.Change) ([]string, error) {
	plan, err := pl.drv.PlanChanges(pl.ctx, "adopt", changes, func(o *migrate.PlanOptions) { o.SchemaQualifier = new(string) })
	if err != nil {
		return nil, fmt.Errorf("adopt: plan: %w", err)
	}
	var out []string
	for _, c := range plan.Changes {
		out = append(out, c.Cmd)
	}
	return out, nil
}

// tempDefault is the default a NOT NULL column without one gets while it is
// added: existing rows need a value, and ADD COLUMN is instant only with a
// constant default.
func tempDefault(c *schema.Column) schema.Expr {
	if c.Type.Null || c.Default != nil {
		return nil
	}
	switch c.Type.Type.(type) {
	case *schema.IntegerType:
		return &schema.Literal{V: "0"}
	case *schema.TimeType:
		return &schema.Literal{V: "'" + epoch + "'"}
	default:
		return &schema.Literal{V: "''"}
	}
}

func (pl *planner) addColumns() (Step, error) {
	s := Step{
		Name:     "add-columns",
		What:     "adds fencekit's columns that the table lacks; NOT NULL ones get a temporary constant default (0, '', '" + epoch + "') that later steps backfill and drop",
		Locks:    "ALGORITHM=INSTANT: a metadata change; it waits for transactions open on the table (lock_wait_timeout, 5 s, then apply retries) and blocks new statements only while it commits",
		Rollback: "ALTER TABLE refund_jobs DROP COLUMN each added column (INSTANT on MariaDB 10.11 and MySQL 8.0.29+)",
		Online:   true,
	}
	var adds []schema.Change
	var names []string
	for _, c := range pl.want.Columns {
		if !pl.added[c.Name] {
			continue
		}
		cc := *c
		if d := tempDefault(c); d != nil {
			cc.Default = d
		}
		adds = append(adds, &schema.AddColumn{C: &cc})
		names = append(names, c.Name)
	}
	if have, want := collation(nil, pl.legacy.Attrs), collation(nil, pl.want.Attrs); have != want && want != "" {
		// The table's default, so that the columns added here and the
		// archive made LIKE it get fencekit's collation; no column of the
		// team's changes (metadata only).
		cs, _ := charset(pl.want.Attrs)
		s.SQL = append(s.SQL, fmt.Sprintf("ALTER TABLE %s DEFAULT CHARACTER SET %s COLLATE %s", quote(Table), cs, want))
		s.What += "; sets the table's default collation to " + want + " (the team's columns keep theirs)"
	}
	if len(adds) == 0 {
		return s, nil
	}
	stmts, err := pl.render(&schema.ModifyTable{T: pl.legacy, Changes: adds})
	if err != nil {
		return s, err
	}
	for _, st := range stmts {
		s.SQL = append(s.SQL, st+", ALGORITHM=INSTANT")
	}
	s.What += ": " + strings.Join(names, ", ")
	for _, n := range []string{"payment_ref", "amount_minor", "currency"} {
		if _, mapped := pl.o.Columns[n]; pl.pending[n] && !mapped {
			pl.p.Notes = append(pl.p.Notes, "the table has no "+n+": adopted rows get '' or 0 there. fencekit refunds a job with its payment, amount and currency: "+
				"copy them from a column of the team's with -columns "+n+"=<column>, fill them in (UPDATE … SET "+n+" = … by id range) before fencekit's workers take those jobs, or settle them the legacy way")
		}
	}
	return s, nil
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

func (pl *planner) mapValues() (Step, error) {
	s := Step{
		Name:     "map-values",
		What:     "rewrites the team's state and next_action names to fencekit's, by primary-key range",
		Locks:    "row locks on one batch of rows for one short transaction each; a legacy writer of a row in the batch waits for that batch only",
		Rollback: "the reverse mapping, by the same batches (UPDATE refund_jobs SET state = CASE state WHEN 'ready' THEN '<team name>' … END WHERE id BETWEEN ? AND ?); rows written since in fencekit's names cannot be told apart",
		Online:   true,
	}
	states, err := pl.mapping("state", fencekitStates, pl.o.States, "states")
	if err != nil {
		return s, err
	}
	actions, err := pl.mapping("next_action", fencekitActions, pl.o.Actions, "actions")
	if err != nil {
		return s, err
	}
	pl.mapped = map[string]map[string]string{"state": states, "next_action": actions}
	for col, m := range pl.mapped {
		if len(m) == 0 {
			continue
		}
		var cases, from []string
		for _, k := range slices.Sorted(maps.Keys(m)) {
			cases = append(cases, "WHEN "+sqlString(k)+" THEN "+sqlString(m[k]))
			from = append(from, sqlString(k))
		}
		s.Batched = append(s.Batched, fmt.Sprintf("UPDATE %s SET %s = CASE %s %s END%s WHERE id BETWEEN ? AND ? AND %s IN (%s)",
			quote(Table), quote(col), binary(col), strings.Join(cases, " "), pl.keepOnUpdate(), binary(col), strings.Join(from, ", ")))
	}
	return s, nil
}

// widenColumns makes room in state and next_action for the fencekit names
// map-values writes, when the team's column cannot hold them: an ENUM of
// the team's names, or a CHAR or VARCHAR shorter than a name. The column
// becomes a VARCHAR long enough for every team and fencekit name, with its
// collation, nullability and default: every value is kept byte for byte.
// Without it, map-values fails on a strict server and, on one that is not,
// stores an empty string or a truncated name (the row's state lost).
func (pl *planner) widenColumns() (Step, error) {
	s := Step{
		Name: "widen-columns",
		What: "widens the team's state or next_action so that it can hold fencekit's names before map-values writes them (each value kept byte for byte)",
		Locks: "a VARCHAR made longer (within 255 bytes) is a metadata change (INSTANT); an ENUM or CHAR made a VARCHAR is a table copy " +
			"(ALGORITHM=COPY, LOCK=SHARED: reads go on, writes to refund_jobs wait for the copy, as modify-columns)",
		Rollback: "ALTER TABLE refund_jobs MODIFY the column back to its old type, before map-values ran (after it, the rows hold fencekit's names: map-values' rollback first)",
		Online:   true,
	}
	var mods, names []string
	copies := false
	for _, col := range []string{"state", "next_action"} {
		l, ok := pl.legacy.Column(col)
		if !ok || len(pl.mapped[col]) == 0 {
			continue
		}
		longest := 0
		var targets []string
		for _, to := range pl.mapped[col] {
			longest = max(longest, len(to))
			targets = append(targets, to)
		}
		var size int
		switch t := l.Type.Type.(type) {
		case *schema.EnumType:
			missing := false
			for _, to := range targets {
				missing = missing || !slices.Contains(t.Values, to)
			}
			if !missing {
				continue
			}
			for _, v := range t.Values {
				size = max(size, len(v))
			}
			copies = true
		case *schema.StringType:
			if t.Size >= longest {
				continue
			}
			size = t.Size
			copies = copies || t.T != "varchar"
		default:
			continue
		}
		// Written out here, not by Atlas: its COLLATE is left out when it
		// is the table's or the charset's default, and add-columns may
		// have changed the table's default by the time this runs.
		def := fmt.Sprintf("MODIFY COLUMN %s varchar(%d)", quote(col), max(size, longest))
		if co := collation(l.Attrs, pl.legacy.Attrs); co != "" {
			cs, ok := charset(l.Attrs)
			if !ok {
				cs, _ = charset(pl.legacy.Attrs)
			}
			def += " CHARACTER SET " + cs + " COLLATE " + co
		}
		if l.Type.Null {
			def += " NULL"
		} else {
			def += " NOT NULL"
		}
		switch d := l.Default.(type) {
		case *schema.Literal:
			def += " DEFAULT " + sqlString(unquote(d.V))
		case *schema.RawExpr:
			def += " DEFAULT " + sqlString(unquote(d.X))
		}
		mods = append(mods, def)
		names = append(names, fmt.Sprintf("%s to varchar(%d)", col, max(size, longest)))
		pl.modified[col] = true
	}
	if len(mods) == 0 {
		return s, nil
	}
	s.What += ": " + strings.Join(names, ", ")
	if pl.o.BlockingCopy {
		st := "ALTER TABLE " + quote(Table) + " " + strings.Join(mods, ", ")
		if copies {
			st += ", ALGORITHM=COPY, LOCK=SHARED"
		}
		s.SQL = append(s.SQL, st)
		s.Online = !copies
		return s, nil
	}
	s.copy = newOnlineCopy(pl.legacy, pl.want, mods, OldTableWiden)
	s.Locks = onlineLocks
	s.Rollback = "before map-values: RENAME TABLE refund_jobs TO _refund_jobs_widened, " + OldTableWiden + " TO refund_jobs (the old table, as it was at the swap: rows written since are not in it) " +
		"or ALTER TABLE refund_jobs MODIFY the column back; after map-values, the rows hold fencekit's names: map-values' rollback first"
	if copies {
		pl.copying = append(pl.copying, s.Name)
	}
	return s, nil
}

func (pl *planner) modifyColumns() (Step, error) {
	s := Step{
		Name: "modify-columns",
		What: "gives fencekit's columns that the table has fencekit's types (widening only: every value kept; state and next_action become fencekit's enums; NULL becomes NOT NULL where fencekit says so)",
		Locks: "ALGORITHM=COPY, LOCK=SHARED: the table is copied; reads go on, writes to refund_jobs wait for the whole copy (measured in docs/adopting.md). " +
			"Not online on MariaDB 10.11 nor MySQL 8: changing a column's type (INT to BIGINT, VARCHAR to ENUM) needs a copy on both",
		Rollback: "ALTER TABLE refund_jobs MODIFY each column back to its old type (another copy); values written since in fencekit's names stay",
		Online:   false,
	}
	var mods []schema.Change
	var names []string
	copies := false
	for _, c := range pl.want.Columns {
		l, ok := pl.legacy.Column(c.Name)
		if !ok {
			continue
		}
		lt, _ := atlasmysql.FormatType(l.Type.Type)
		wt, _ := atlasmysql.FormatType(c.Type.Type)
		var kind schema.ChangeKind
		if lt != wt {
			kind |= schema.ChangeType
		}
		if l.Type.Null != c.Type.Null {
			kind |= schema.ChangeNull
		}
		to := c
		if !sameDefault(l.Default, c.Default) && !pl.pending[c.Name] {
			switch {
			case pl.o.KeepDefaults && l.Default != nil && c.Default == nil:
				// The team's default stays (legacy INSERTs that omit the
				// column go on working), until drop-defaults' later
				// statement drops it.
				cc := *c
				cc.Default = keptDefault(l.Default, c.Type.Type)
				to = &cc
				pl.kept[c.Name] = true
				if lt == wt && sameDefault(l.Default, cc.Default) && l.Type.Null == c.Type.Null {
					break
				}
				kind |= schema.ChangeDefault
			default:
				kind |= schema.ChangeDefault // adopt's own defaults: drop-defaults
				if l.Default != nil && c.Default == nil {
					pl.p.Notes = append(pl.p.Notes, fmt.Sprintf("%s.%s loses the team's default (%s), as fencekit's has none: a legacy INSERT that omits it fails from modify-columns on "+
						"(apply with -keep-defaults to keep it until every writer sets the column)", Table, c.Name, exprString(l.Default)))
				}
			}
		}
		if text(c) && collation(l.Attrs, pl.legacy.Attrs) != collation(c.Attrs, pl.want.Attrs) {
			// A string column fencekit's triggers compare with its other
			// tables' (utf8mb4_bin): another collation would make those
			// comparisons fail ("Illegal mix of collations").
			kind |= schema.ChangeCollate | schema.ChangeCharset
		}
		if c.Name == "id" && !hasAutoIncrement(l) {
			kind |= schema.ChangeAttr
		}
		if u := onUpdate(l); u != "" && onUpdate(c) == "" {
			// The server would stamp the column on a write of the team's
			// columns alone, which the fence lets through only when it
			// changes none of fencekit's.
			kind |= schema.ChangeAttr
			pl.p.Notes = append(pl.p.Notes, fmt.Sprintf("%s.%s loses its ON UPDATE %s: the fence stamps it whenever a write changes the job, "+
				"and a write of the team's own columns alone leaves it as it is", Table, c.Name, u))
		}
		if kind == schema.NoChange {
			continue
		}
		if l.Type.Null && !c.Type.Null {
			ids, err := pl.ids(quote(c.Name) + " IS NULL")
			if err != nil {
				return s, err
			}
			if ids != "" {
				pl.refuse("%s.%s is NULL in rows with id %s, and fencekit's is NOT NULL: fill them in first", Table, c.Name, ids)
				continue
			}
		}
		mods = append(mods, &schema.ModifyColumn{From: l, To: to, Change: kind})
		names = append(names, c.Name)
		if kind&^schema.ChangeDefault&^schema.ChangeNull != 0 {
			copies = true
		}
		if kind&^schema.ChangeDefault&^schema.ChangeNull != 0 {
			pl.modified[c.Name] = true
		}
	}
	if len(mods) == 0 {
		return s, nil
	}
	stmts, err := pl.render(&schema.ModifyTable{T: pl.legacy, Changes: mods})
	if err != nil {
		return s, err
	}
	s.What += ": " + strings.Join(names, ", ")
	if pl.o.BlockingCopy {
		for _, st := range stmts {
			s.SQL = append(s.SQL, st+", ALGORITHM=COPY, LOCK=SHARED")
		}
		return s, nil
	}
	var clauses []string
	for _, st := range stmts {
		c, ok := strings.CutPrefix(st, "ALTER TABLE "+quote(Table)+" ")
		if !ok {
			return s, fmt.Errorf("adopt: unexpected statement for modify-columns: %s", st)
		}
		clauses = append(clauses, c)
	}
	s.copy = newOnlineCopy(pl.legacy, pl.want, clauses, OldTable)
	s.Online = true
	s.Locks = onlineLocks
	s.Rollback = "RENAME TABLE refund_jobs TO _refund_jobs_modified, " + OldTable + " TO refund_jobs: the old table as it was at the swap (rows written since are not in it; " +
		"copy them back by id first), or ALTER TABLE refund_jobs MODIFY each column back (another copy)"
	if copies {
		pl.copying = append(pl.copying, s.Name)
	}
	return s, nil
}

// onlineLocks is what a type change's step locks without BlockingCopy.
const onlineLocks = "online. First the server's own online path (ALTER … ALGORITHM=INPLACE, LOCK=NONE; INSTANT where the server can): " +
	"when the server accepts it, reads and writes go on, and metadata locks at the start and end wait for open transactions. " +
	"When it refuses (error 1846: a type or collation change needs a copy on MariaDB and MySQL alike), a shadow copy as pt-online-schema-change makes it: " +
	"_refund_jobs_new made LIKE refund_jobs and altered; AFTER INSERT/UPDATE/DELETE triggers on refund_jobs repeat each write on it in the writer's transaction " +
	"(created under LOCK TABLES refund_jobs WRITE where the account may: writes wait for three CREATE TRIGGERs); the rows copied by primary-key range, " +
	"each range one statement holding shared locks on its rows only (a legacy write to a row of the range waits for it); both tables compared in one snapshot (no locks); " +
	"then one RENAME TABLE (an exclusive metadata lock for the swap, waiting for transactions open on the table: lock_wait_timeout 5 s, then apply retries). " +
	"The old table is kept: drop it once the adopted table has been checked. A legacy write of a value the new type cannot hold (a team state name) fails during the copy instead of being stored changed"

// keepOnUpdate is the assignments that keep the table's ON UPDATE columns
// as they are in adopt's own UPDATEs (a column the statement assigns is
// not stamped): rewriting a row's names or backfilling fencekit's columns
// is not a change of the team's row. set are assignments the statement
// makes already.
func (pl *planner) keepOnUpdate(set ...string) string {
	var out string
	for _, c := range pl.legacy.Columns {
		if onUpdate(c) == "" {
			continue
		}
		assigned := false
		for _, a := range set {
			assigned = assigned || strings.HasPrefix(a, quote(c.Name)+" ")
		}
		if !assigned {
			out += ", " + quote(c.Name) + " = " + quote(c.Name)
		}
	}
	return out
}

// onUpdate is c's ON UPDATE expression, "" when it has none.
func onUpdate(c *schema.Column) string {
	for _, a := range c.Attrs {
		if u, ok := a.(*atlasmysql.OnUpdate); ok {
			return u.A
		}
	}
	return ""
}

// text reports whether c holds text (a collation applies to it).
func text(c *schema.Column) bool {
	switch c.Type.Type.(type) {
	case *schema.StringType, *schema.EnumType:
		return true
	}
	return false
}

// keptDefault is the team's default d for a column of fencekit's type to:
// CURRENT_TIMESTAMP gains the type's fractional digits (MySQL refuses a
// DATETIME(6) whose default has another precision).
func keptDefault(d schema.Expr, to schema.Type) schema.Expr {
	t, ok := to.(*schema.TimeType)
	if r, isRaw := d.(*schema.RawExpr); ok && isRaw && strings.HasPrefix(strings.ToLower(r.X), "current_timestamp") && precision(t) > 0 {
		return &schema.RawExpr{X: fmt.Sprintf("CURRENT_TIMESTAMP(%d)", precision(t))}
	}
	return d
}

func exprString(e schema.Expr) string {
	switch e := e.(type) {
	case *schema.Literal:
		return e.V
	case *schema.RawExpr:
		return e.X
	}
	return fmt.Sprint(e)
}

func hasAutoIncrement(c *schema.Column) bool {
	for _, a := range c.Attrs {
		if _, ok := a.(*atlasmysql.AutoIncrement); ok {
			return true
		}
	}
	return false
}

// unquote is a string literal's value as Atlas's inspection shows it
// (quoted, a quote in it doubled or escaped with a backslash).
func unquote(v string) string {
	if len(v) >= 2 && v[0] == '\'' && v[len(v)-1] == '\'' {
		v = strings.NewReplacer(`''`, `'`, `\'`, `'`, `\\`, `\`).Replace(v[1 : len(v)-1])
	}
	return v
}

func sameDefault(a, b schema.Expr) bool {
	str := func(e schema.Expr) string {
		var v string
		switch e := e.(type) {
		case nil:
			return ""
		case *schema.Literal:
			v = strings.Trim(e.V, "'")
		case *schema.RawExpr:
			v = strings.Trim(e.X, "'")
		default:
			v = fmt.Sprint(e)
		}
		// '1970-01-01 00:00:00.000000' is '1970-01-01 00:00:00'.
		if i := strings.LastIndex(v, "."); i > 0 && strings.Count(v, ":") == 2 && strings.Trim(v[i+1:], "0") == "" {
			v = v[:i]
		}
		return v
	}
	return str(a) == str(b)
}

func (pl *planner) backfillTimes() (Step, error) {
	s := Step{
		Name: "backfill-times",
		What: "sets the added time columns of existing rows from the database's clock, by primary-key range; a job claimed before (attempt > 0) may have been sent, " +
			"so its key's first use and last send are marked as long ago: fencekit reconciles it rather than sending it again",
		Locks:    "row locks on one batch for one short transaction each",
		Rollback: "nothing to roll back on its own: dropping the columns (add-columns' rollback) removes the values",
		Online:   true,
	}
	var sets []string
	var marker string
	for _, c := range []string{"next_run_at", "created_at", "updated_at"} {
		if pl.pending[c] {
			sets = append(sets, quote(c)+" = "+clock)
			if marker == "" {
				marker = c
			}
		}
	}
	if marker != "" {
		s.Batched = append(s.Batched, fmt.Sprintf("UPDATE %s SET %s%s WHERE id BETWEEN ? AND ? AND %s = '%s'", quote(Table), strings.Join(sets, ", "), pl.keepOnUpdate(sets...), quote(marker), epoch))
	}
	if len(pl.o.Columns) > 0 {
		var sets, same []string
		for _, k := range slices.Sorted(maps.Keys(pl.o.Columns)) {
			sets = append(sets, quote(k)+" = "+quote(pl.o.Columns[k]))
			same = append(same, quote(k)+" <=> "+quote(pl.o.Columns[k]))
		}
		s.Batched = append(s.Batched, fmt.Sprintf("UPDATE %s SET %s%s WHERE id BETWEEN ? AND ? AND NOT (%s)", quote(Table), strings.Join(sets, ", "), pl.keepOnUpdate(sets...), strings.Join(same, " AND ")))
		s.What += "; copies " + strings.Join(sets, ", ") + " (-columns)"
	}
	if (pl.added["key_first_used_at"] && pl.added["last_send_at"]) || pl.pending["created_at"] || pl.pending["next_run_at"] {
		s.Batched = append(s.Batched, fmt.Sprintf("UPDATE %s SET `key_first_used_at` = '%s', `last_send_at` = '%s'%s WHERE id BETWEEN ? AND ? AND `attempt` > 0 AND `key_first_used_at` IS NULL",
			quote(Table), epoch+".000001", epoch+".000001", pl.keepOnUpdate()))
	}
	return s, nil
}

// MirrorTrigger fills, under -keep-defaults, the fencekit columns that
// -columns copies from the team's in the rows a legacy INSERT makes without
// them: otherwise such a job would carry adopt's temporary default (an
// empty payment, an amount of 0), and fencekit could not refund it.
const MirrorTrigger = "refund_jobs_adopt_mirror"

// mirrorColumns creates MirrorTrigger, after the online copy (a trigger
// on refund_jobs would follow the old table at its swap) and before the
// backfill, which copies the rows inserted until then.
func (pl *planner) mirrorColumns() (Step, error) {
	s := Step{
		Name:     "mirror-columns",
		What:     "creates " + MirrorTrigger + ": a legacy INSERT that does not set fencekit's columns copied by -columns gets them from the team's (a job with an empty payment could not be refunded)",
		Locks:    "CREATE TRIGGER takes a short exclusive metadata lock on refund_jobs (it waits for transactions open on it: lock_wait_timeout 5 s, then apply retries)",
		Rollback: "DROP TRIGGER " + MirrorTrigger,
		Online:   true,
		routines: true,
	}
	if !pl.o.KeepDefaults || len(pl.o.Columns) == 0 {
		return s, nil
	}
	existing, err := pl.routines()
	if err != nil {
		return s, err
	}
	if _, ok := existing["trigger "+MirrorTrigger]; ok {
		return Step{Name: s.Name}, nil
	}
	var sets []string
	for _, k := range slices.Sorted(maps.Keys(pl.o.Columns)) {
		c, ok := pl.want.Column(k)
		if !ok || k == "created_at" || k == "updated_at" {
			continue // the fence stamps the times itself
		}
		d := tempDefault(c)
		if d == nil {
			continue
		}
		v := exprString(d)
		sets = append(sets, fmt.Sprintf("IF NEW.%s <=> %s THEN SET NEW.%s = NEW.%s; END IF;", quote(k), v, quote(k), quote(pl.o.Columns[k])))
	}
	if len(sets) == 0 {
		return Step{Name: s.Name}, nil
	}
	s.SQL = []string{"CREATE TRIGGER " + quote(MirrorTrigger) + " BEFORE INSERT ON " + quote(Table) + " FOR EACH ROW BEGIN " + strings.Join(sets, " ") + " END"}
	pl.p.Notes = append(pl.p.Notes, "-keep-defaults with -columns: "+MirrorTrigger+" copies the team's columns into fencekit's on every legacy INSERT that does not set them; "+
		"drop it with the defaults, once every writer sets fencekit's columns: DROP TRIGGER "+MirrorTrigger+" (a legacy UPDATE of the team's column is not copied: a request never changes)")
	return s, nil
}

func (pl *planner) dropDefaults() (Step, error) {
	s := Step{
		Name:     "drop-defaults",
		What:     "drops the temporary defaults, so that the table is fencekit's exactly. From here on a legacy INSERT must set these columns",
		Locks:    "ALGORITHM=INSTANT: a metadata change (waits for open transactions on the table, as add-columns)",
		Rollback: "ALTER TABLE refund_jobs ALTER COLUMN c SET DEFAULT … (INSTANT)",
		Online:   true,
	}
	var names []string
	for _, c := range pl.want.Columns {
		if pl.pending[c.Name] && tempDefault(c) != nil || pl.kept[c.Name] {
			s.SQL = append(s.SQL, fmt.Sprintf("ALTER TABLE %s ALTER COLUMN %s DROP DEFAULT, ALGORITHM=INSTANT", quote(Table), quote(c.Name)))
			names = append(names, c.Name)
		}
	}
	if len(names) > 0 {
		s.What += ": " + strings.Join(names, ", ")
	}
	if pl.o.KeepDefaults && len(names) > 0 {
		later := append([]string(nil), s.SQL...)
		if _, ok := pl.have.Table("refund_jobs_archive"); !ok || pl.pendingArchive() {
			for _, q := range s.SQL {
				later = append(later, strings.Replace(q, quote(Table), "`refund_jobs_archive`", 1))
			}
		}
		pl.p.Notes = append(pl.p.Notes, "-keep-defaults: "+strings.Join(names, ", ")+" keep adopt's temporary defaults, so that legacy INSERTs go on working; "+
			"once every writer sets them, drop them (metadata only; the schema is fencekit's exactly only then): "+strings.Join(later, "; "))
		return Step{Name: s.Name}, nil
	}
	return s, nil
}

// pendingArchive reports whether the archive (made LIKE refund_jobs by an
// earlier run) still carries adopt's temporary defaults.
func (pl *planner) pendingArchive() bool {
	t, ok := pl.have.Table("refund_jobs_archive")
	if !ok {
		return false
	}
	for _, c := range pl.want.Columns {
		if a, ok := t.Column(c.Name); ok {
			if d := tempDefault(c); d != nil && a.Default != nil && sameDefault(a.Default, d) {
				return true
			}
		}
	}
	return false
}

func (pl *planner) addIndexes() (Step, error) {
	s := Step{
		Name:     "add-indexes",
		What:     "adds fencekit's indexes (the unique operation key, the pending, lease and reconcile scans)",
		Locks:    "ALGORITHM=INPLACE, LOCK=NONE: reads and writes go on while the index builds; a metadata lock at the start and the end waits for open transactions",
		Rollback: "ALTER TABLE refund_jobs DROP INDEX each added index (INPLACE, LOCK=NONE)",
		Online:   true,
	}
	for _, idx := range pl.want.Indexes {
		if _, ok := pl.legacy.Index(idx.Name); ok {
			continue
		}
		if idx.Unique {
			if err := pl.duplicates(idx); err != nil {
				return s, err
			}
		}
		stmts, err := pl.render(&schema.ModifyTable{T: pl.legacy, Changes: []schema.Change{&schema.AddIndex{I: idx}}})
		if err != nil {
			return s, err
		}
		for _, st := range stmts {
			s.SQL = append(s.SQL, st+", ALGORITHM=INPLACE, LOCK=NONE")
		}
	}
	return s, nil
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

func (pl *planner) createTables() (Step, error) {
	s := Step{
		Name: "create-tables",
		What: "creates fencekit's companion tables: the key registry, the ledger (refunds), the observation log, the attempts log, the provider budgets, the fence's mode, " +
			"changes and violations, and the archive (LIKE refund_jobs, so it has the team's columns too)",
		Locks:    "none on refund_jobs (CREATE TABLE … LIKE reads its definition under a short metadata lock)",
		Rollback: "DROP TABLE each created table (they are new and hold only what the backfills wrote)",
		Online:   true,
	}
	for _, t := range pl.target.Schema.Tables {
		if t.Name == Table {
			continue
		}
		if _, ok := pl.have.Table(t.Name); ok {
			continue
		}
		if t.Name == "refund_jobs_archive" {
			// The archival procedure copies rows with SELECT *: the archive
			// has every column of the job table, the team's too. fencekit's
			// archive lacks the job table's later indexes.
			s.SQL = append(s.SQL, "CREATE TABLE IF NOT EXISTS `refund_jobs_archive` LIKE `refund_jobs`")
			for _, idx := range pl.want.Indexes {
				if _, ok := t.Index(idx.Name); !ok {
					s.SQL = append(s.SQL, "ALTER TABLE `refund_jobs_archive` DROP INDEX "+quote(idx.Name))
				}
			}
			continue
		}
		stmts, err := pl.render(&schema.AddTable{T: t})
		if err != nil {
			return s, err
		}
		s.SQL = append(s.SQL, stmts...)
	}
	return s, nil
}

func (pl *planner) backfillKeys() (Step, error) {
	return Step{
		Name:     "backfill-keys",
		What:     "registers every job's operation key in refund_jobs_keys, by primary-key range (a key already registered is left alone)",
		Locks:    "shared row locks on one batch of refund_jobs rows for one short transaction each (INSERT … SELECT reads them locked); a legacy write to a row of the batch waits for it",
		Rollback: "DROP TABLE refund_jobs_keys (create-tables' rollback)",
		Online:   true,
		Batched: []string{"INSERT INTO `refund_jobs_keys` (`operation_key`, `payment_ref`, `amount_minor`, `currency`, `registered_at`, `job_created_at`) " +
			"SELECT j.`operation_key`, j.`payment_ref`, j.`amount_minor`, j.`currency`, j.`created_at`, j.`created_at` FROM `refund_jobs` j " +
			"WHERE j.id BETWEEN ? AND ? AND NOT EXISTS (SELECT 1 FROM `refund_jobs_keys` k WHERE k.`operation_key` = j.`operation_key`)"},
	}, nil
}

func (pl *planner) backfillLedger() (Step, error) {
	return Step{
		Name:     "backfill-ledger",
		What:     "opens the ledger row (refunds) of every job, by primary-key range: refunded for a succeeded job, failed for a failed one, requested otherwise",
		Locks:    "shared row locks on one batch of refund_jobs rows for one short transaction each",
		Rollback: "DROP TABLE refunds (create-tables' rollback)",
		Online:   true,
		Batched: []string{"INSERT INTO `refunds` (`operation_key`, `payment_ref`, `amount_minor`, `currency`, `status`, `provider_refund_id`, `settled_at`, `created_at`, `updated_at`) " +
			"SELECT j.`operation_key`, j.`payment_ref`, j.`amount_minor`, j.`currency`, CASE j.`state` WHEN 'succeeded' THEN 'refunded' WHEN 'failed' THEN 'failed' ELSE 'requested' END, " +
			"j.`provider_refund_id`, IF(j.`state` IN ('succeeded', 'failed'), j.`updated_at`, NULL), j.`created_at`, j.`updated_at` FROM `refund_jobs` j " +
			"WHERE j.id BETWEEN ? AND ? AND NOT EXISTS (SELECT 1 FROM `refunds` r WHERE r.`operation_key` = j.`operation_key`)"},
	}, nil
}

func (pl *planner) catchUp() (Step, error) {
	keys, _ := pl.backfillKeys()
	ledger, _ := pl.backfillLedger()
	return Step{
		Name: "catch-up",
		What: "registers the keys and opens the ledger rows of the jobs legacy writers inserted while the backfills ran (the fence's trigger registers every later job's key; " +
			"a job a legacy writer inserts from here on has no ledger row until fencekit's Enqueue writes it)",
		Locks:    keys.Locks,
		Rollback: "with backfill-keys and backfill-ledger",
		Online:   true,
		Batched:  append(keys.Batched, ledger.Batched...),
		From:     pl.p.MaxID + 1,
	}, nil
}

func (pl *planner) observeMode() (Step, error) {
	return Step{
		Name:     "observe-mode",
		What:     "sets the fence's mode to observe before any trigger exists: enforce would at once refuse every legacy writer that does not declare its attempt",
		Locks:    "none on refund_jobs",
		Rollback: "nothing on its own (drop-the-fence's rollback removes the table)",
		Online:   true,
		SQL: []string{"INSERT IGNORE INTO `refund_jobs_fence_mode` (`id`, `mode`, `reason`, `changed_at`) VALUES (1, 'observe', " +
			"'adopted by refundd adopt: observe until every legacy writer declares its attempt', " + clock + ")"},
	}, nil
}

func (pl *planner) fence() (Step, error) {
	s := Step{
		Name: "fence",
		What: "installs the fence of today (the newest generated job fence and the companion fences: its procedures, then its triggers) in observe mode. " +
			"Next: watch `refundd fence report`, fix the legacy writers it names, then `refundd fence mode enforce -reason …`",
		Locks: "each CREATE TRIGGER takes a short exclusive metadata lock on its table: it waits for transactions open on it (lock_wait_timeout 5 s, then apply retries), " +
			"and statements arriving meanwhile queue behind it",
		Rollback: "DROP TRIGGER and DROP PROCEDURE each of them (the table is then unfenced, as before)",
		Online:   true,
		routines: true,
	}
	existing, err := pl.routines()
	if err != nil {
		return s, err
	}
	// One of fencekit's names that is not fencekit's routine: taking it for
	// the fence would leave the table unfenced (or fenced by the team's
	// rules), so it is refused; an interrupted apply's own are kept.
	for _, r := range pl.target.Routines {
		def, ok := existing[r.Kind+" "+r.Name]
		if !ok {
			continue
		}
		same := def == r.Create
		if r.Kind == "procedure" {
			if strings.TrimSpace(def) == "" {
				// information_schema hides the body from an account that is
				// not the procedure's definer and lacks the privilege.
				pl.refuse("the database has a procedure %s whose definition this account cannot read: run adopt as its definer, "+
					"or grant the account SHOW CREATE ROUTINE (MariaDB) / SELECT on mysql.proc, so that adopt can tell whether it is fencekit's", r.Name)
				continue
			}
			same = strings.Contains(r.Create, strings.TrimSpace(def))
		}
		if !same {
			pl.refuse("the database has a %s %s that is not fencekit's (its definition differs): fencekit's fence needs that name; rename the team's %s first (it would otherwise stand in for the fence)",
				r.Kind, r.Name, r.Kind)
		}
	}
	names := map[string]bool{}
	var tables []string
	var triggers []string
	for _, r := range pl.target.Routines {
		names[r.Kind+" "+r.Name] = true
		if _, ok := existing[r.Kind+" "+r.Name]; ok {
			continue
		}
		if r.Kind != "trigger" {
			s.SQL = append(s.SQL, r.Create)
			continue
		}
		triggers = append(triggers, r.Create)
		if !contains(tables, r.Table) {
			tables = append(tables, r.Table)
		}
	}
	if len(triggers) > 0 {
		// Created under LOCK TABLES: a legacy write waits for all of them
		// (a few hundred ms) instead of racing them. Without the lock, on
		// MariaDB 10.11 a write that opens the table while its triggers
		// are being created may fail with error 1305 (the procedure the
		// new trigger calls "does not exist"); adoptbench saw 2 to 4 of
		// ~300 writes fail that way, and none with the lock. The lock
		// needs the LOCK TABLES privilege: without it apply goes on
		// unlocked (lockTables).
		var list []string
		for _, t := range tables {
			list = append(list, quote(t)+" WRITE")
		}
		s.SQL = append(s.SQL, lockTables+strings.Join(list, ", "))
		s.SQL = append(s.SQL, triggers...)
		s.SQL = append(s.SQL, "UNLOCK TABLES")
		s.Locks = "the triggers are created under LOCK TABLES … WRITE on the tables they fence: reads and writes of those tables wait until the last trigger exists " +
			"(measured: under 0.5 s); the lock waits for transactions open on them (lock_wait_timeout 5 s, then apply retries). " +
			"Without the LOCK TABLES privilege, each CREATE TRIGGER takes only a short exclusive metadata lock, and a legacy write racing it may fail once (error 1305 on MariaDB)"
	}
	for _, k := range slices.Sorted(maps.Keys(existing)) {
		if !names[k] && !contains(copyTriggers, strings.TrimPrefix(k, "trigger ")) {
			pl.p.Notes = append(pl.p.Notes, "the database has "+k+", which is not fencekit's: it stays, and runs beside the fence "+
				"(a team trigger on refund_jobs runs before fencekit's of the same timing and event, which were created after it: what it sets, the fence checks; "+
				"a write it makes to refund_jobs or the ledger is checked by the fence like any legacy writer's)")
		}
	}
	return s, nil
}

// routines returns the triggers and procedures the database has ("trigger
// name", "procedure name"), each with what shows it is fencekit's: a
// trigger's CREATE as the target's is written (from information_schema), a
// procedure's body.
func (pl *planner) routines() (map[string]string, error) {
	existing := map[string]string{}
	rows, err := pl.conn.QueryContext(pl.ctx, "SELECT CONCAT('trigger ', TRIGGER_NAME), "+
		"CONCAT('CREATE TRIGGER `', REPLACE(TRIGGER_NAME, '`', '``'), '` ', ACTION_TIMING, ' ', EVENT_MANIPULATION, ' ON `', REPLACE(EVENT_OBJECT_TABLE, '`', '``'), '` FOR EACH ROW ', ACTION_STATEMENT) "+
		"FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = DATABASE() "+
		"UNION ALL SELECT CONCAT('procedure ', ROUTINE_NAME), COALESCE(ROUTINE_DEFINITION, '') FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = DATABASE()")
	if err != nil {
		return nil, fmt.Errorf("adopt: read triggers and procedures: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var k, def string
		if err := rows.Scan(&k, &def); err != nil {
			return nil, err
		}
		existing[k] = def
	}
	return existing, rows.Err()
}

func (pl *planner) baseline() (Step, error) {
	return Step{
		Name: "baseline",
		What: fmt.Sprintf("records the Atlas baseline %s (%s) in %s, in the CLI's format: `refundd migrate` and `atlas migrate apply` then apply only later files",
			pl.target.Version, pl.target.Description, migrations.RevisionTable),
		Locks:    "none on refund_jobs",
		Rollback: "DROP TABLE " + migrations.RevisionTable,
		Online:   true,
		baseline: true,
	}, nil
}

// Format prints the plan as SQL, each step headed by a comment: what it
// does, what it locks and for how long, how to roll it back.
func (p *Plan) Format(w io.Writer, batch int) error {
	var b strings.Builder
	// Every comment goes through inert: what it says may carry names the
	// team chose, and a newline in one would end the comment.
	fmt.Fprintf(&b, "-- refundd %s: the plan for %s on %s\n", p.Kind, term.Inert(p.Database), term.Inert(p.Server))
	fmt.Fprintf(&b, "-- refund_jobs: %d rows, id %d to %d; backfills in batches of %d ids, each its own transaction\n", p.Rows, p.MinID, p.MaxID, batch)
	if len(p.Preflight) > 0 {
		b.WriteString("\n-- Step 0: pre-flight (checked by plan itself; fix what it marks before apply)\n")
		for _, c := range p.Preflight {
			fmt.Fprintf(&b, "--   [%s] %s: %s\n", c.Status, term.Inert(c.Name), term.Inert(c.Found))
			if c.Fix != "" {
				fmt.Fprintf(&b, "--        do: %s\n", term.Inert(c.Fix))
			}
		}
		b.WriteString("\n")
	}
	for _, n := range p.Notes {
		fmt.Fprintf(&b, "-- NOTE: %s\n", term.Inert(n))
	}
	if len(p.Steps) == 0 {
		b.WriteString("-- nothing to do: the database is adopted\n")
	}
	for i, s := range p.Steps {
		online := "online"
		if !s.Online {
			online = "NOT ONLINE: writes to refund_jobs wait for this step"
		}
		fmt.Fprintf(&b, "\n-- Step %d/%d: %s (%s)\n--   What: %s\n--   Locks: %s\n", i+1, len(p.Steps), s.Name, online, term.Inert(s.What), term.Inert(s.Locks))
		if e := expected(s, p.Rows, batch); e != "" {
			fmt.Fprintf(&b, "--   Expected: %s\n", e)
		}
		fmt.Fprintf(&b, "--   Roll back: %s\n", term.Inert(s.Rollback))
		for i, q := range s.SQL {
			if s.routines && strings.HasPrefix(q, "CREATE") {
				fmt.Fprintf(&b, "DELIMITER //\n%s//\nDELIMITER ;\n", q)
				continue
			}
			fmt.Fprintf(&b, "%s;\n", q)
			if i < len(s.alt) && s.alt[i] != "" {
				fmt.Fprintf(&b, "-- if the server refuses that algorithm (error 1846):\n%s;\n", s.alt[i])
			}
		}
		if c := s.copy; c != nil {
			fmt.Fprintf(&b, "-- the server's own online path first:\n%s;\n", c.online())
			fmt.Fprintf(&b, "-- if the server refuses it (error 1846), a shadow copy instead (an interrupted copy's triggers and %s are dropped first):\n", ShadowTable)
			for _, q := range c.prepare() {
				fmt.Fprintf(&b, "%s;\n", q)
			}
			fmt.Fprintf(&b, "LOCK TABLES %s WRITE, %s WRITE;\n", quote(Table), quote(ShadowTable))
			for _, q := range c.triggers() {
				fmt.Fprintf(&b, "DELIMITER //\n%s//\nDELIMITER ;\n", q)
			}
			b.WriteString("UNLOCK TABLES;\n")
			lo := p.MinID
			fmt.Fprintf(&b, "-- for each range of %d ids, each starting at the next existing id (the first shown):\n%s;\n", batch,
				strings.Replace(strings.Replace(c.chunk(), "?", fmt.Sprint(lo), 1), "?", fmt.Sprint(lo+int64(batch)-1), 1))
			fmt.Fprintf(&b, "-- then, in one consistent snapshot, the row counts of both tables must agree and this must find no row:\n%s;\n", c.differ())
			fmt.Fprintf(&b, "-- ALTER TABLE %s AUTO_INCREMENT = <refund_jobs' next value>;\n%s;\n", quote(ShadowTable), c.swap())
			for _, q := range dropCopyTriggers() {
				fmt.Fprintf(&b, "%s;\n", q)
			}
			fmt.Fprintf(&b, "-- %s is kept: DROP TABLE %s once the adopted table has been checked\n", c.old, quote(c.old))
		}
		for _, q := range s.Batched {
			from := p.MinID
			if s.From != 0 {
				from = max(from, s.From)
			}
			lo, hi := from, from+int64(batch)-1
			fmt.Fprintf(&b, "-- for each range of %d ids from %d to the highest id when the range starts, each range starting at the next existing id (the first shown):\n%s;\n", batch, from,
				strings.Replace(strings.Replace(q, "?", fmt.Sprint(lo), 1), "?", fmt.Sprint(hi), 1))
		}
		if s.baseline {
			fmt.Fprintf(&b, "-- INSERT INTO %s (version %s, type baseline) as the Atlas CLI writes it\n", migrations.RevisionTable, p.Baseline)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// measured is what adoptbench measured per step for 1M rows on a 2-core
// machine running MariaDB 10.11 under 4 legacy writers (docs/adopting.md):
// the step's duration, and the longest a legacy write waited during it.
var measured = map[string]struct{ took, wait time.Duration }{
	"add-columns":    {85 * time.Millisecond, 88 * time.Millisecond},
	"map-values":     {47 * time.Second, 1960 * time.Millisecond},
	"modify-columns": {46 * time.Second, 680 * time.Millisecond}, // the online copy
	// -blocking-copy: ALGORITHM=COPY, LOCK=SHARED, every write waiting for it.
	"modify-columns-blocking": {11 * time.Second, 11 * time.Second},
	"backfill-times":          {33 * time.Second, 430 * time.Millisecond},
	"drop-defaults":           {140 * time.Millisecond, 112 * time.Millisecond},
	"add-indexes":             {20 * time.Second, 190 * time.Millisecond},
	"backfill-keys":           {11 * time.Second, 260 * time.Millisecond},
	"backfill-ledger":         {23 * time.Second, 1150 * time.Millisecond},
}

// expected scales the measurement to rows: the steps whose work grows
// with the table (copies, index builds, batches) linearly, the waits of a
// batch with the batch size, the copy's wait with the table.
func expected(s Step, rows int64, batch int) string {
	name := s.Name
	if !s.Online && s.Name == "modify-columns" {
		name += "-blocking"
	}
	m, ok := measured[name]
	if !ok {
		return ""
	}
	scale := func(d time.Duration, n int64) time.Duration {
		return time.Duration(float64(d) * float64(n) / 1e6)
	}
	took, wait := scale(m.took, rows), m.wait
	switch {
	case s.Name == "add-columns" || s.Name == "drop-defaults":
		took = m.took // metadata only, whatever the rows
	case !s.Online:
		wait = took
	case len(s.Batched) > 0:
		// A write waits for one batch at most: measured with 5000 ids.
		wait = scale(m.wait, min(int64(batch), max(rows, 1))*200)
	}
	return fmt.Sprintf("about %s for %d rows, a legacy write waiting up to about %s (scaled from adoptbench's 1M rows, docs/adopting.md)",
		roundDuration(took), rows, roundDuration(wait))
}

func roundDuration(d time.Duration) time.Duration {
	switch {
	case d >= time.Second:
		return d.Round(100 * time.Millisecond)
	case d >= time.Millisecond:
		return d.Round(time.Millisecond)
	}
	return d.Round(time.Microsecond)
}

// collation is a column's collation (attrs), or its table's (table) when
// the column names none.
func collation(attrs, table []schema.Attr) string {
	for _, list := range [][]schema.Attr{attrs, table} {
		for _, a := range list {
			if c, ok := a.(*schema.Collation); ok {
				return c.V
			}
		}
	}
	return ""
}

func charset(attrs []schema.Attr) (string, bool) {
	for _, a := range attrs {
		if c, ok := a.(*schema.Charset); ok {
			return c.V, true
		}
	}
	return "utf8mb4", false
}
