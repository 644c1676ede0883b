package adopt

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	atlasmysql "ariga.io/atlas/sql/mysql"
	"ariga.io/atlas/sql/schema"

	"github.com/fencekit/fencekit/migrations"
)

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
		mods = append(mods, def+comment(l))
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
