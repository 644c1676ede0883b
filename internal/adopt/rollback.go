package adopt

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	atlasmysql "ariga.io/atlas/sql/mysql"
	"ariga.io/atlas/sql/schema"

	"github.com/fencekit/fencekit/ent"
	"github.com/fencekit/fencekit/migrations"
)

// The way back (`refundd adopt rollback plan|apply`): the adoption undone
// step by step in reverse, planned from the adoption record (what the
// database was before), the database as it is, and fencekit's schema (the
// migrations replayed). The fence goes first, so that the legacy writers
// are as free as before; fencekit's tables that hold rows are set aside
// under a prefix, never dropped; the archived jobs go back into refund_jobs;
// the columns adopt added are saved beside the table, then dropped; the
// team's columns get back their nullability, defaults and ON UPDATE. A
// column adopt widened stays widened (every value fits both types), and the
// plan says so. Each step is planned from what is left, so running apply
// again after a failure continues.

// SetAsidePrefix starts the names of fencekit's tables that rollback keeps
// because they hold rows (the ledger, the evidence, the audit, the fence's
// record of violations), and of the table that keeps the values of the
// columns it drops.
const SetAsidePrefix = "_fencekit_rolled_back_"

// OldTableRollback is where rollback's online copy, when the server cannot
// give a column back its nullability in place, leaves the table it replaces.
const OldTableRollback = "_refund_jobs_old_rollback"

// ErrNotAdopted means the database has no adoption record: refundd migrate
// created it, or it was adopted before adopt kept one. Nothing was changed.
var ErrNotAdopted = fmt.Errorf("%w: no adoption record (%s)", ErrRefused, RecordTable)

// NewRollbackPlan plans undoing the adoption of the database db is
// connected to. It changes nothing.
func NewRollbackPlan(ctx context.Context, db *sql.DB, o Options) (*Plan, error) {
	o = o.withDefaults()
	pl, closeFn, err := newPlanner(ctx, db, o)
	if err != nil {
		return nil, err
	}
	defer closeFn()
	pl.p.Kind = "adopt rollback"
	if err := pl.planRollback(); err != nil {
		return nil, err
	}
	if len(pl.refusals) > 0 {
		return nil, fmt.Errorf("%w: %s cannot be rolled back as it is (nothing was changed):\n  %s", ErrRefused, pl.p.Database, strings.Join(pl.refusals, "\n  "))
	}
	return pl.p, nil
}

// Rollback plans the rollback (NewRollbackPlan) and runs it, step by step.
// When a step fails it stops with a *StepError: the steps before it are
// done, and running Rollback again continues.
func Rollback(ctx context.Context, db *sql.DB, o Options) (*Result, error) {
	o = o.withDefaults()
	p, err := NewRollbackPlan(ctx, db, o)
	if err != nil {
		return nil, err
	}
	return run(ctx, db, p, o)
}

func (pl *planner) planRollback() error {
	var ok bool
	if pl.legacy, ok = pl.have.Table(Table); !ok {
		pl.refuse("the database has no %s table: nothing to roll back", Table)
		return nil
	}
	pl.want, _ = pl.target.Schema.Table(Table)
	var err error
	if pl.record, err = pl.readRecord(); err != nil {
		return err
	}
	if pl.record == nil {
		return fmt.Errorf("%w: %s was not adopted by refundd adopt (refundd migrate created it, or an adopt before the record existed): rollback cannot tell the team's "+
			"columns from fencekit's; docs/adopting.md, \"Rolling back by hand\" (nothing was changed)", ErrNotAdopted, pl.p.Database)
	}
	if err := pl.conn.QueryRowContext(pl.ctx, "SELECT COUNT(*), COALESCE(MIN(id), 0), COALESCE(MAX(id), 0) FROM "+quote(Table)).Scan(&pl.p.Rows, &pl.p.MinID, &pl.p.MaxID); err != nil {
		return fmt.Errorf("adopt: count rows: %w", err)
	}
	return pl.steps(pl.dropFence, pl.dropBaseline, pl.unarchive, pl.setAsideTables, pl.dropIndexes, pl.saveColumns, pl.restoreColumns, pl.dropColumns,
		pl.tableDefault, pl.dropRecord)
}

// added are fencekit's columns of refund_jobs that the table did not have
// before the adoption.
func (pl *planner) addedColumns() []string {
	var out []string
	for _, c := range pl.legacy.Columns {
		if _, fencekit := pl.want.Column(c.Name); fencekit {
			if _, before := pl.record.column(c.Name); !before {
				out = append(out, c.Name)
			}
		}
	}
	return out
}

func (pl *planner) dropFence() (Step, error) {
	s := Step{
		Name:     "drop-fence",
		What:     "drops the fence's triggers and procedures: from here on, legacy writers write refund_jobs as they did before adoption, unchecked and unrecorded",
		Locks:    "each DROP TRIGGER takes a short exclusive metadata lock on its table (it waits for transactions open on it: lock_wait_timeout 5 s, then rollback retries)",
		Rollback: "refundd adopt apply again (it installs the fence of today, in observe mode)",
		Online:   true,
	}
	existing, err := pl.routines()
	if err != nil {
		return s, err
	}
	pl.dropped = map[string]bool{}
	// Triggers first: a procedure a trigger still calls is not dropped
	// under it.
	for _, kind := range []string{"trigger", "procedure"} {
		for _, r := range pl.target.Routines {
			k := r.Kind + " " + r.Name
			if r.Kind != kind || contains(pl.record.Routines, k) {
				continue
			}
			if _, ok := existing[k]; ok {
				s.SQL = append(s.SQL, "DROP "+strings.ToUpper(r.Kind)+" IF EXISTS "+quote(r.Name))
				if r.Kind == "trigger" {
					pl.dropped[r.Name] = true
				}
			}
		}
	}
	// The online copy's, if an apply was killed between its swap and
	// their drop (on the old table) or before the swap; the -columns
	// mirror.
	for _, t := range append(slices.Clone(copyTriggers), MirrorTrigger) {
		if _, ok := existing["trigger "+t]; ok {
			s.SQL = append(s.SQL, "DROP TRIGGER IF EXISTS "+quote(t))
			pl.dropped[t] = true
		}
	}
	return s, nil
}

func (pl *planner) dropBaseline() (Step, error) {
	s := Step{
		Name:     "drop-baseline",
		What:     "drops Atlas's revision table, which adopt created: the database is no longer managed by fencekit's migrations",
		Locks:    "none on refund_jobs",
		Rollback: "refundd adopt apply again (it records the baseline)",
		Online:   true,
	}
	if _, ok := pl.have.Table(migrations.RevisionTable); ok && !pl.record.hasTable(migrations.RevisionTable) {
		s.SQL = append(s.SQL, "DROP TABLE IF EXISTS "+quote(migrations.RevisionTable))
	}
	return s, nil
}

// unarchive puts the jobs archived since the adoption back into
// refund_jobs: they are the team's rows.
func (pl *planner) unarchive() (Step, error) {
	const archive = "refund_jobs_archive"
	s := Step{
		Name:     "unarchive",
		What:     "moves the jobs fencekit archived back into refund_jobs (they are the team's rows): rows whose id refund_jobs lacks, by primary-key range of the archive",
		Locks:    "shared locks on one batch of the archive's rows for one short transaction each",
		Rollback: "nothing to roll back: the rows are the team's",
		Online:   true,
	}
	t, ok := pl.have.Table(archive)
	if !ok || pl.record.hasTable(archive) {
		return s, nil
	}
	var n int64
	if err := pl.conn.QueryRowContext(pl.ctx, "SELECT COUNT(*) FROM "+quote(archive)).Scan(&n); err != nil {
		return s, fmt.Errorf("adopt: count the archive: %w", err)
	}
	if n == 0 {
		return s, nil
	}
	var cols []string
	for _, c := range t.Columns {
		if _, ok := pl.legacy.Column(c.Name); ok && !generated(c) {
			cols = append(cols, quote(c.Name))
		}
	}
	list := strings.Join(cols, ", ")
	s.SQL = append(s.SQL, fmt.Sprintf("INSERT INTO %s (%s) SELECT %s FROM %s a WHERE NOT EXISTS (SELECT 1 FROM %s j WHERE j.`id` = a.`id`)",
		quote(Table), list, list, quote(archive), quote(Table)))
	s.What += fmt.Sprintf(" (%d rows)", n)
	s.Locks = "one INSERT … SELECT of the archive's rows (shared locks on them; the archive is written only by the archival procedure, which the fence's drop removed)"
	return s, nil
}

// setAsideTables drops fencekit's tables that hold no row, and renames the
// others under SetAsidePrefix: the ledger, the evidence, the audit and the
// fence's record are kept.
func (pl *planner) setAsideTables() (Step, error) {
	s := Step{
		Name: "set-aside-tables",
		What: "drops fencekit's companion tables that hold no row, and renames those that do under " + SetAsidePrefix + " (the ledger, the evidence, the audit and " +
			"the fence's record of violations are kept, never dropped: drop them once nobody needs them)",
		Locks:    "none on refund_jobs; each DROP or RENAME takes a short exclusive metadata lock on its own table",
		Rollback: "RENAME TABLE each set-aside table back, then refundd adopt apply again",
		Online:   true,
	}
	var kept []string
	for _, t := range pl.target.Schema.Tables {
		if t.Name == Table || pl.record.hasTable(t.Name) {
			continue
		}
		if _, ok := pl.have.Table(t.Name); !ok {
			continue
		}
		var any int
		if err := pl.conn.QueryRowContext(pl.ctx, "SELECT COUNT(*) FROM (SELECT 1 FROM "+quote(t.Name)+" LIMIT 1) x").Scan(&any); err != nil {
			return s, fmt.Errorf("adopt: read %s: %w", t.Name, err)
		}
		if any == 0 || t.Name == ent.RefundJobFenceModeTable {
			// Empty, or the fence's mode: one row of settings, whose
			// changes are kept with the rest.
			s.SQL = append(s.SQL, "DROP TABLE IF EXISTS "+quote(t.Name))
			continue
		}
		aside := SetAsidePrefix + t.Name
		if _, taken := pl.have.Table(aside); taken {
			pl.refuse("the database has a table %s already (an earlier rollback's?): rollback keeps %s under that name; rename or drop it first", aside, t.Name)
			continue
		}
		s.SQL = append(s.SQL, "RENAME TABLE "+quote(t.Name)+" TO "+quote(aside))
		kept = append(kept, t.Name)
	}
	if len(kept) > 0 {
		pl.p.Notes = append(pl.p.Notes, "kept under "+SetAsidePrefix+"…, because they hold rows: "+strings.Join(kept, ", ")+
			". They are fencekit's record of what happened to the money while it ran (the ledger, evidence, audit): drop them only once nobody needs them")
	}
	return s, nil
}

func (pl *planner) dropIndexes() (Step, error) {
	s := Step{
		Name:     "drop-indexes",
		What:     "drops the indexes adopt added to refund_jobs",
		Locks:    "metadata only (INPLACE, LOCK=NONE): reads and writes go on; a metadata lock at the start and the end waits for open transactions",
		Rollback: "refundd adopt apply again (it adds them online)",
		Online:   true,
	}
	var drops []string
	for _, idx := range pl.legacy.Indexes {
		if _, fencekit := pl.want.Index(idx.Name); fencekit && !contains(pl.record.Indexes, idx.Name) {
			drops = append(drops, "DROP INDEX "+quote(idx.Name))
		}
	}
	if len(drops) > 0 {
		s.SQL = append(s.SQL, "ALTER TABLE "+quote(Table)+" "+strings.Join(drops, ", ")+", ALGORITHM=INPLACE, LOCK=NONE")
	}
	return s, nil
}

// savedColumns is the table that keeps the values of the columns rollback
// drops, by job id: one per adoption rolled back, named after the time its
// record was written, so that a second adoption's rollback does not write
// over the first's values.
func (pl *planner) savedColumns() string {
	return SetAsidePrefix + "refund_jobs_columns_" + strings.Replace(pl.record.at.Format("20060102150405.000000"), ".", "", 1)
}

func (pl *planner) saveColumns() (Step, error) {
	s := Step{
		Name: "save-columns",
		What: "copies the values of the columns adopt added (fencekit's: the attempt a writer declared, the key's window, the review's reason and evidence, …) into " +
			pl.savedColumns() + ", by job id, before they are dropped",
		Locks:    "shared row locks on one batch of refund_jobs rows for one short transaction each",
		Rollback: "nothing to roll back: " + pl.savedColumns() + " is kept for the operator to drop",
		Online:   true,
	}
	added := pl.addedColumns()
	if len(added) == 0 {
		return s, nil
	}
	defs := []string{"`id` bigint NOT NULL"}
	var cols, sets []string
	for _, name := range added {
		c, _ := pl.legacy.Column(name)
		t, err := atlasmysql.FormatType(c.Type.Type)
		if err != nil {
			return s, fmt.Errorf("adopt: %s's type: %w", name, err)
		}
		defs = append(defs, quote(name)+" "+t+" NULL")
		cols = append(cols, quote(name))
		sets = append(sets, quote(name)+" = VALUES("+quote(name)+")")
	}
	s.SQL = append(s.SQL, "CREATE TABLE IF NOT EXISTS "+quote(pl.savedColumns())+" ("+strings.Join(defs, ", ")+", PRIMARY KEY (`id`)) CHARSET utf8mb4 COLLATE utf8mb4_bin")
	list := strings.Join(cols, ", ")
	s.Batched = append(s.Batched, "INSERT INTO "+quote(pl.savedColumns())+" (`id`, "+list+") SELECT `id`, "+list+" FROM "+quote(Table)+
		" WHERE `id` BETWEEN ? AND ? ON DUPLICATE KEY UPDATE "+strings.Join(sets, ", "))
	s.What += ": " + strings.Join(added, ", ")
	return s, nil
}

func (pl *planner) dropColumns() (Step, error) {
	s := Step{
		Name: "drop-columns",
		What: "drops the columns adopt added (their values are in " + pl.savedColumns() + "): a legacy INSERT that does not name them works again",
		Locks: "ALGORITHM=INSTANT where the server can (MariaDB 10.4+, MySQL 8.0.29+: metadata only); else INPLACE, LOCK=NONE (the table is rebuilt while reads and " +
			"writes go on; metadata locks at the start and end wait for open transactions)",
		Rollback: "refundd adopt apply again (it adds them and backfills them; the saved values can be copied back by id)",
		Online:   true,
	}
	added := pl.addedColumns()
	if len(added) == 0 {
		return s, nil
	}
	var drops []string
	for _, c := range added {
		drops = append(drops, "DROP COLUMN "+quote(c))
	}
	q := "ALTER TABLE " + quote(Table) + " " + strings.Join(drops, ", ")
	s.SQL = append(s.SQL, q+", ALGORITHM=INSTANT")
	s.alt = []string{q + ", ALGORITHM=INPLACE, LOCK=NONE"}
	s.What += ": " + strings.Join(added, ", ")
	return s, nil
}

// restoreColumns gives the team's columns that adopt changed back their
// nullability, default and ON UPDATE; their types stay (adopt only widened
// them: every value fits both).
func (pl *planner) restoreColumns() (Step, error) {
	s := Step{
		Name:     "restore-columns",
		What:     "gives the team's columns that adopt changed back their defaults, nullability and ON UPDATE, keeping the widened types",
		Locks:    "a default alone: metadata only (INSTANT)",
		Rollback: "refundd adopt apply again",
		Online:   true,
	}
	now, err := pl.takeRecord()
	if err != nil {
		return s, err
	}
	var widened, collated, clauses, names []string
	for _, was := range pl.record.Columns {
		cur, ok := now.column(was.Name)
		if !ok {
			continue
		}
		if !strings.EqualFold(cur.Type, was.Type) {
			widened = append(widened, fmt.Sprintf("%s stays %s (was %s)", was.Name, cur.Type, was.Type))
		}
		if !strings.EqualFold(cur.Collation, was.Collation) && was.Collation != "" {
			collated = append(collated, fmt.Sprintf("%s stays %s (was %s)", was.Name, cur.Collation, was.Collation))
		}
		if cur.Null && !was.Null {
			// Made NOT NULL again, a column whose rows hold NULL would fail
			// the copy's ALTER (strict) or turn each into '' or 0 (not).
			ids, err := pl.ids(quote(was.Name) + " IS NULL")
			if err != nil {
				return s, err
			}
			if ids != "" {
				pl.refuse("%s.%s was NOT NULL before the adoption and is NULL in rows with id %s (written since): fill them in first, the team's way", Table, was.Name, ids)
				continue
			}
		}
		// ALTER COLUMN … SET DEFAULT takes a literal only on MySQL (an
		// expression needs parentheses, and CURRENT_TIMESTAMP is neither):
		// such a default is restored by MODIFY, with the column's whole
		// definition.
		simple := !strings.HasPrefix(strings.ToLower(was.Default), "current_timestamp") && cur.Comment == was.Comment
		if cur.Null == was.Null && cur.OnUpdate == was.OnUpdate && simple {
			if cur.Default != was.Default {
				if was.Default == "" {
					s.SQL = append(s.SQL, "ALTER TABLE "+quote(Table)+" ALTER COLUMN "+quote(was.Name)+" DROP DEFAULT")
				} else {
					s.SQL = append(s.SQL, "ALTER TABLE "+quote(Table)+" ALTER COLUMN "+quote(was.Name)+" SET DEFAULT "+atPrecision(was.Default, cur.Type))
				}
				names = append(names, was.Name)
			}
			continue
		}
		def := "MODIFY COLUMN " + quote(was.Name) + " " + cur.Type
		if cur.Charset != "" && cur.Collation != "" {
			def += " CHARACTER SET " + cur.Charset + " COLLATE " + cur.Collation
		}
		if was.Null {
			def += " NULL"
		} else {
			def += " NOT NULL"
		}
		if was.Default != "" {
			def += " DEFAULT " + atPrecision(was.Default, cur.Type)
		}
		if was.OnUpdate != "" {
			def += " ON UPDATE " + atPrecision(was.OnUpdate, cur.Type)
		}
		if hasAutoIncrement(mustColumn(pl.legacy, was.Name)) {
			def += " AUTO_INCREMENT"
		}
		if was.Comment != "" {
			def += " COMMENT " + sqlString(was.Comment)
		}
		if cur.Null == was.Null && cur.OnUpdate == was.OnUpdate {
			// A CURRENT_TIMESTAMP default or a comment: the same
			// definition with another default or comment, metadata only on
			// both servers.
			q := "ALTER TABLE " + quote(Table) + " " + def
			s.SQL = append(s.SQL, q+", ALGORITHM=INSTANT")
			for len(s.alt) < len(s.SQL)-1 {
				s.alt = append(s.alt, "")
			}
			s.alt = append(s.alt, q+", ALGORITHM=INPLACE, LOCK=NONE")
			names = append(names, was.Name)
			continue
		}
		clauses = append(clauses, def)
		names = append(names, was.Name)
	}
	if len(widened) > 0 {
		pl.p.Notes = append(pl.p.Notes, "the columns adopt widened keep their wider types (narrowing one back is the team's call, by its own ALTER, once every value "+
			"fits the old type: state and next_action hold fencekit's names, which the team's ENUM or shorter type may not): "+strings.Join(widened, "; "))
	}
	if len(collated) > 0 {
		pl.p.Notes = append(pl.p.Notes, "the columns adopt gave fencekit's collation keep it (a legacy query that compared them case-insensitively now compares bytes): "+
			strings.Join(collated, "; "))
	}
	if m := mappedNames(pl.record); m != "" {
		pl.p.Notes = append(pl.p.Notes, "the rows keep fencekit's state and action names ("+m+"); a legacy writer that reads the team's names needs the reverse mapping, "+
			"which cannot tell the rows the team wrote from those fencekit's workers wrote: decide it per row")
	}
	switch {
	case len(clauses) == 0:
	case pl.o.BlockingCopy:
		s.SQL = append(s.SQL, "ALTER TABLE "+quote(Table)+" "+strings.Join(clauses, ", ")+", ALGORITHM=COPY, LOCK=SHARED")
		s.Locks = "a table copy (ALGORITHM=COPY, LOCK=SHARED): reads go on, writes to refund_jobs wait for the copy"
		s.Online = false
	default:
		s.copy = newOnlineCopy(pl.legacy, pl.legacy, clauses, OldTableRollback)
		s.Locks = onlineLocks
		pl.copying = append(pl.copying, s.Name)
	}
	if len(names) > 0 {
		s.What += ": " + strings.Join(names, ", ")
	}
	return s, nil
}

// atPrecision writes a CURRENT_TIMESTAMP default or ON UPDATE at the
// fractional digits of the column's type now (datetime(6): MySQL refuses
// another precision).
func atPrecision(expr, typ string) string {
	if !strings.HasPrefix(strings.ToLower(expr), "current_timestamp") {
		return expr
	}
	if i := strings.Index(typ, "("); i > 0 && strings.HasSuffix(typ, ")") {
		return "CURRENT_TIMESTAMP" + typ[i:]
	}
	return "CURRENT_TIMESTAMP"
}

// comment is the column's COMMENT clause ("" without one): a MODIFY that
// leaves it out drops it.
func comment(c *schema.Column) string {
	for _, a := range c.Attrs {
		if cm, ok := a.(*schema.Comment); ok && cm.Text != "" {
			return " COMMENT " + sqlString(cm.Text)
		}
	}
	return ""
}

func mustColumn(t *schema.Table, name string) *schema.Column {
	c, _ := t.Column(name)
	if c == nil {
		return &schema.Column{Name: name}
	}
	return c
}

func mappedNames(r *record) string {
	var out []string
	for _, m := range []map[string]string{r.States, r.Actions} {
		for _, k := range slices.Sorted(maps.Keys(m)) {
			out = append(out, k+" -> "+m[k])
		}
	}
	return strings.Join(out, ", ")
}

func (pl *planner) tableDefault() (Step, error) {
	s := Step{
		Name:     "table-default",
		What:     "gives refund_jobs back its default character set and collation (the team's columns kept theirs)",
		Locks:    "metadata only",
		Rollback: "refundd adopt apply again",
		Online:   true,
	}
	if have := collation(nil, pl.legacy.Attrs); pl.record.Collation != "" && have != pl.record.Collation {
		cs := pl.record.Charset
		if cs == "" {
			cs = "utf8mb4"
		}
		s.SQL = append(s.SQL, fmt.Sprintf("ALTER TABLE %s DEFAULT CHARACTER SET %s COLLATE %s", quote(Table), cs, pl.record.Collation))
	}
	return s, nil
}

func (pl *planner) dropRecord() (Step, error) {
	return Step{
		Name:     "drop-record",
		What:     "drops the adoption record: the database is as it was before adoption, but for the widened columns and the set-aside tables",
		Locks:    "none on refund_jobs",
		Rollback: "nothing: a new adoption records the database anew",
		Online:   true,
		SQL:      []string{"DROP TABLE IF EXISTS " + quote(RecordTable)},
	}, nil
}

// run runs a plan's steps in order on one connection of db.
func run(ctx context.Context, db *sql.DB, p *Plan, o Options) (*Result, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("adopt: connect: %w", err)
	}
	defer conn.Close()
	if err := setSession(ctx, conn); err != nil {
		return nil, err
	}
	var got sql.NullInt64
	if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, 0)", runLock(p.Database)).Scan(&got); err != nil {
		return nil, fmt.Errorf("adopt: take the run's lock: %w", err)
	}
	if got.Int64 != 1 {
		return nil, fmt.Errorf("%w: another `refundd %s apply` (or apply and rollback) runs on %s now: one at a time (nothing was changed)", ErrRefused, p.Kind, p.Database)
	}
	defer func() {
		_, _ = conn.ExecContext(context.WithoutCancel(ctx), "SELECT RELEASE_LOCK(?)", runLock(p.Database))
	}()
	res := &Result{Plan: p, Durations: map[string]time.Duration{}}
	for _, s := range p.Steps {
		if o.Hooks.BeforeStep != nil {
			o.Hooks.BeforeStep(s.Name)
		}
		start := time.Now()
		if err := runStep(ctx, db, conn, p, s, o); err != nil {
			var se *StepError
			if errors.As(err, &se) {
				se.Kind = p.Kind
			}
			return res, err
		}
		res.Durations[s.Name] = time.Since(start)
		if o.Hooks.AfterStep != nil {
			o.Hooks.AfterStep(s.Name)
		}
	}
	return res, nil
}
