package adopt

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"strings"

	"ariga.io/atlas/sql/schema"
	"github.com/go-sql-driver/mysql"
)

// The online copy: a step that changes column types (widen-columns,
// modify-columns) first asks the server for its own online path (the
// ALTER with ALGORITHM=INPLACE, LOCK=NONE, which MariaDB and MySQL also
// run INSTANT where they can) and, when the server answers that the
// change is not online (error 1846, or 1845), copies the table the way
// pt-online-schema-change does: an empty shadow table made LIKE
// refund_jobs and altered, triggers on refund_jobs that repeat every
// write on the shadow in the writer's own transaction, a copy by
// primary-key range (each range one short statement holding shared row
// locks on its rows only), a check that both tables hold the same rows in
// one consistent snapshot, then one atomic RENAME TABLE. The old table is
// kept for the operator to drop.

const (
	// ShadowTable is the table the online copy fills.
	ShadowTable = "_refund_jobs_new"
	// OldTable is where modify-columns' online copy leaves the table it
	// replaces, and OldTableWiden widen-columns'.
	OldTable      = "_refund_jobs_old"
	OldTableWiden = "_refund_jobs_old_widen"
)

// copyTriggers are the names of the online copy's triggers on refund_jobs
// (after insert, update, delete).
var copyTriggers = []string{"_refund_jobs_copy_ins", "_refund_jobs_copy_upd", "_refund_jobs_copy_del"}

// onlineCopy is what a step's online copy needs, planned from the table.
type onlineCopy struct {
	// clauses are the ALTER TABLE clauses (MODIFY COLUMN …).
	clauses []string
	// old is the name the replaced table keeps.
	old string
	// cols are the columns copied (every stored column), and text marks
	// those compared as text (converted to utf8mb4, byte for byte).
	cols []string
	text map[string]bool
	// utc marks the TIMESTAMP columns that become DATETIMEs: copied as
	// the instant in UTC whatever the writer's session time zone (the
	// server would convert a TIMESTAMP to the session's zone; the copy's
	// triggers run in every legacy writer's session).
	utc map[string]bool
}

// newOnlineCopy plans the copy of legacy into a shadow altered by clauses;
// want is fencekit's table (the types the columns become).
func newOnlineCopy(legacy, want *schema.Table, clauses []string, old string) *onlineCopy {
	c := &onlineCopy{clauses: clauses, old: old, text: map[string]bool{}, utc: map[string]bool{}}
	for _, col := range legacy.Columns {
		if generated(col) {
			continue
		}
		c.cols = append(c.cols, col.Name)
		switch col.Type.Type.(type) {
		case *schema.StringType, *schema.EnumType, *schema.JSONType:
			c.text[col.Name] = true
		}
		if w, ok := want.Column(col.Name); ok && isTimestamp(col) && !isTimestamp(w) {
			c.utc[col.Name] = true
		}
	}
	return c
}

// value is col's value to copy, read through prefix (NEW. in a trigger).
func (c *onlineCopy) value(prefix, col string) string {
	v := prefix + quote(col)
	if c.utc[col] {
		// UNIX_TIMESTAMP of a TIMESTAMP is its stored instant, whatever
		// the session's zone; rebuilt as a UTC datetime (fencedwrite's
		// clock does the same).
		v = "TIMESTAMPADD(MICROSECOND, CAST(UNIX_TIMESTAMP(" + v + ") * 1000000 AS SIGNED), TIMESTAMP'1970-01-01 00:00:00')"
	}
	return v
}

// values lists every copied column's value, read through prefix.
func (c *onlineCopy) values(prefix string) string {
	var out []string
	for _, col := range c.cols {
		out = append(out, c.value(prefix, col))
	}
	return strings.Join(out, ", ")
}

func generated(c *schema.Column) bool {
	for _, a := range c.Attrs {
		if _, ok := a.(*schema.GeneratedExpr); ok {
			return true
		}
	}
	return false
}

func (c *onlineCopy) list(prefix string) string {
	var out []string
	for _, col := range c.cols {
		out = append(out, prefix+quote(col))
	}
	return strings.Join(out, ", ")
}

// online is the engine's own online path.
func (c *onlineCopy) online() string {
	return "ALTER TABLE " + quote(Table) + " " + strings.Join(c.clauses, ", ") + ", ALGORITHM=INPLACE, LOCK=NONE"
}

// prepare creates the shadow table, altered.
func (c *onlineCopy) prepare() []string {
	return []string{
		"CREATE TABLE " + quote(ShadowTable) + " LIKE " + quote(Table),
		"ALTER TABLE " + quote(ShadowTable) + " " + strings.Join(c.clauses, ", "),
	}
}

// triggers repeat each write to refund_jobs on the shadow, in the
// writer's transaction: REPLACE keeps the shadow's row the source's
// newest, whether or not the copy has reached it.
func (c *onlineCopy) triggers() []string {
	replace := "REPLACE INTO " + quote(ShadowTable) + " (" + c.list("") + ") VALUES (" + c.values("NEW.") + ")"
	// A zero TIMESTAMP has no instant: the DATETIME it becomes would read
	// 1970-01-01 (or NULL: UNIX_TIMESTAMP of one is 0, or NULL under the
	// strict mode a trigger keeps from its creation). A legacy write of one fails while the copy runs, as a
	// value the new type cannot hold does (the plan refused the rows that
	// held one before).
	guard := ""
	for _, col := range c.cols {
		if c.utc[col] {
			guard += "IF NEW." + quote(col) + " IS NOT NULL AND IFNULL(UNIX_TIMESTAMP(NEW." + quote(col) + "), 0) = 0 THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = " +
				sqlString(messageText(Table+": a zero timestamp in "+col+" has no instant")) + "; END IF; "
		}
	}
	return []string{
		"CREATE TRIGGER " + quote(copyTriggers[0]) + " AFTER INSERT ON " + quote(Table) + " FOR EACH ROW BEGIN " + guard + replace + "; END",
		"CREATE TRIGGER " + quote(copyTriggers[1]) + " AFTER UPDATE ON " + quote(Table) + " FOR EACH ROW BEGIN " + guard +
			"DELETE FROM " + quote(ShadowTable) + " WHERE `id` = OLD.`id` AND NOT (OLD.`id` <=> NEW.`id`); " + replace + "; END",
		"CREATE TRIGGER " + quote(copyTriggers[2]) + " AFTER DELETE ON " + quote(Table) + " FOR EACH ROW DELETE FROM " + quote(ShadowTable) + " WHERE `id` = OLD.`id`",
	}
}

// chunk copies one primary-key range. Not INSERT IGNORE: a value the new
// type cannot hold fails the statement (apply's session is strict) instead
// of being stored changed; a row the triggers wrote first is newer and
// is kept (ON DUPLICATE KEY UPDATE changes nothing).
func (c *onlineCopy) chunk() string {
	return "INSERT INTO " + quote(ShadowTable) + " (" + c.list("") + ") SELECT " + c.values("") + " FROM " + quote(Table) +
		" WHERE `id` BETWEEN ? AND ? ORDER BY `id` LOCK IN SHARE MODE ON DUPLICATE KEY UPDATE " + quote(ShadowTable) + ".`id` = " + quote(ShadowTable) + ".`id`"
}

// differ finds rows that are not the same in both tables.
func (c *onlineCopy) differ() string {
	var same, zero []string
	for _, col := range c.cols {
		if c.utc[col] {
			// Converted alike on both sides, a zero TIMESTAMP would compare
			// equal to the 1970 it became.
			zero = append(zero, "(o."+quote(col)+" IS NOT NULL AND IFNULL(UNIX_TIMESTAMP(o."+quote(col)+"), 0) = 0)")
		}
		o, n := c.value("o.", col), "n."+quote(col)
		if c.text[col] {
			o, n = "CAST(CONVERT("+o+" USING utf8mb4) AS BINARY)", "CAST(CONVERT("+n+" USING utf8mb4) AS BINARY)"
		}
		same = append(same, o+" <=> "+n)
	}
	orZero := ""
	if len(zero) > 0 {
		orZero = " OR " + strings.Join(zero, " OR ")
	}
	return "SELECT o.`id` FROM " + quote(Table) + " o LEFT JOIN " + quote(ShadowTable) + " n ON n.`id` = o.`id` WHERE n.`id` IS NULL OR NOT (" +
		strings.Join(same, " AND ") + ")" + orZero + " ORDER BY o.`id` LIMIT 10"
}

func (c *onlineCopy) swap() string {
	return "RENAME TABLE " + quote(Table) + " TO " + quote(c.old) + ", " + quote(ShadowTable) + " TO " + quote(Table)
}

func dropCopyTriggers() []string {
	var out []string
	for _, t := range copyTriggers {
		out = append(out, "DROP TRIGGER IF EXISTS "+quote(t))
	}
	return out
}

// notOnline reports whether the server refused an ALTER's ALGORITHM or
// LOCK clause for the change (1846 ER_ALTER_OPERATION_NOT_SUPPORTED_REASON,
// 1845 ER_ALTER_OPERATION_NOT_SUPPORTED).
func notOnline(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && (me.Number == 1846 || me.Number == 1845)
}

// runOnline runs a step's type changes online: the server's own path when
// it accepts it, a shadow copy otherwise.
func runOnline(ctx context.Context, conn *sql.Conn, s Step, o Options) error {
	c := s.copy
	q := c.online()
	err := execRetrying(ctx, conn, q)
	if err == nil {
		return nil
	}
	if !notOnline(err) {
		return &StepError{Step: s.Name, SQL: q, Err: err}
	}
	if o.Hooks.ShadowCopy != nil {
		o.Hooks.ShadowCopy(s.Name, err)
	}
	if err := shadowCopy(ctx, conn, s, o); err != nil {
		// Nothing swapped: drop the triggers (a legacy write must not fail
		// on the shadow) and the shadow. When the connection itself is
		// gone, they stay; apply again removes them and starts over.
		for _, q := range append(dropCopyTriggers(), "DROP TABLE IF EXISTS "+quote(ShadowTable)) {
			_, _ = conn.ExecContext(context.WithoutCancel(ctx), q)
		}
		return err
	}
	return nil
}

func shadowCopy(ctx context.Context, conn *sql.Conn, s Step, o Options) (err error) {
	c := s.copy
	fail := func(q string, err error) error { return &StepError{Step: s.Name, SQL: q, Err: err} }
	// An id of 0 is copied as 0, not given the next AUTO_INCREMENT value
	// (TestApplyKeepsIdsAtTheEdges): for the copy's statements and its
	// triggers, which keep the sql_mode they were created in.
	var mode string
	if err := conn.QueryRowContext(ctx, "SELECT @@SESSION.sql_mode").Scan(&mode); err != nil {
		return fail("SELECT @@SESSION.sql_mode", err)
	}
	if _, err := conn.ExecContext(ctx, "SET SESSION sql_mode = CONCAT(@@SESSION.sql_mode, ',NO_AUTO_VALUE_ON_ZERO')"); err != nil {
		return fail("SET SESSION sql_mode", err)
	}
	defer func() {
		if _, rerr := conn.ExecContext(context.WithoutCancel(ctx), "SET SESSION sql_mode = ?", mode); err == nil && rerr != nil {
			err = fail("SET SESSION sql_mode", rerr)
		}
	}()
	// An interrupted copy's leftovers (the plan refused a shadow table
	// without the copy's triggers: not adopt's): start the copy over.
	for _, q := range append(dropCopyTriggers(), "DROP TABLE IF EXISTS "+quote(ShadowTable)) {
		if err := execRetrying(ctx, conn, q); err != nil {
			return fail(q, err)
		}
	}
	for _, q := range c.prepare() {
		if err := execRetrying(ctx, conn, q); err != nil {
			return fail(q, err)
		}
	}
	// The triggers are created under LOCK TABLES when the account may
	// (as the fence's): a write waits for all three instead of racing them.
	locked := true
	lock := lockTables + quote(Table) + " WRITE, " + quote(ShadowTable) + " WRITE"
	if err := execRetrying(ctx, conn, lock); err != nil {
		if !accessDenied(err) {
			return fail(lock, err)
		}
		locked = false
	}
	for _, q := range c.triggers() {
		if err := execRetrying(ctx, conn, q); err != nil {
			if locked {
				_, _ = conn.ExecContext(context.WithoutCancel(ctx), "UNLOCK TABLES")
			}
			return fail(q, err)
		}
	}
	if locked {
		if _, err := conn.ExecContext(ctx, "UNLOCK TABLES"); err != nil {
			return fail("UNLOCK TABLES", err)
		}
	}
	// The copy ends at the highest id when the triggers exist: the
	// triggers copy every row inserted later.
	var top sql.NullInt64
	if err := conn.QueryRowContext(ctx, "SELECT MAX(`id`) FROM "+quote(Table)).Scan(&top); err != nil {
		return fail("SELECT MAX(id)", err)
	}
	if !top.Valid {
		top.Int64 = math.MinInt64
	}
	q := c.chunk()
	if err := walk(ctx, conn, math.MinInt64, top.Int64, o.BatchSize, func(lo, hi int64) error {
		var err error
		for range 10 {
			if err = copyChunk(ctx, conn, q, lo, hi); err == nil || !retryable(err) {
				break
			}
		}
		if err != nil {
			return fail(q, fmt.Errorf("copy id %d to %d: %w", lo, hi, err))
		}
		if o.Hooks.AfterBatch != nil {
			o.Hooks.AfterBatch(s.Name, lo, hi)
		}
		return nil
	}); err != nil {
		var se *StepError
		if errors.As(err, &se) {
			return err
		}
		return fail(q, err)
	}
	if err := check(ctx, conn, c); err != nil {
		return fail(c.differ(), err)
	}
	if o.Hooks.BeforeSwap != nil {
		o.Hooks.BeforeSwap(s.Name)
	}
	// The next AUTO_INCREMENT value carries over (LIKE starts the shadow's
	// at the highest id copied): an id deleted at the top is not reused.
	var next sql.NullInt64
	if err := conn.QueryRowContext(ctx, "SELECT AUTO_INCREMENT FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?", Table).Scan(&next); err != nil {
		return fail("read AUTO_INCREMENT", err)
	}
	if next.Valid {
		q := fmt.Sprintf("ALTER TABLE %s AUTO_INCREMENT = %d", quote(ShadowTable), next.Int64)
		if err := execRetrying(ctx, conn, q); err != nil {
			return fail(q, err)
		}
	}
	if err := execRetrying(ctx, conn, c.swap()); err != nil {
		return fail(c.swap(), err)
	}
	// The triggers moved with the old table: nobody writes it.
	for _, q := range dropCopyTriggers() {
		if err := execRetrying(ctx, conn, q); err != nil {
			return fail(q, err)
		}
	}
	return nil
}

// copyChunk copies one range in one transaction: first it takes the
// shared locks on the range's rows of refund_jobs, in id order, holding
// no lock on the shadow yet; then it copies them. A legacy write to a row
// of the range waits at refund_jobs, before its trigger touches the
// shadow; one outside the range waits, at most, for the copy's locks on
// the shadow. Copying and locking in one statement, adoptbench saw 6 of
// 10,248 legacy writes die as deadlock victims (error 1213): the copy
// held gap locks on the shadow's unique operation_key index, which a
// writer's trigger waited for while holding the row the copy waited for.
func copyChunk(ctx context.Context, conn *sql.Conn, q string, lo, hi int64) error {
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	rows, err := tx.QueryContext(ctx, "SELECT `id` FROM "+quote(Table)+" WHERE `id` BETWEEN ? AND ? ORDER BY `id` LOCK IN SHARE MODE", lo, hi)
	if err != nil {
		return err
	}
	for rows.Next() {
		// Each row is locked as it is read.
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, q, lo, hi); err != nil {
		return err
	}
	return tx.Commit()
}

// retryable: the copy's range was a deadlock's victim or waited too long
// for a legacy transaction's row; it copies the range again.
func retryable(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && (me.Number == 1213 || me.Number == 1205)
}

// check compares both tables in one consistent snapshot: the triggers
// write the shadow in the writer's transaction, so any snapshot sees the
// same rows in both.
func check(ctx context.Context, conn *sql.Conn, c *onlineCopy) (err error) {
	if _, err := conn.ExecContext(ctx, "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ"); err != nil {
		return err
	}
	if _, err := conn.ExecContext(ctx, "START TRANSACTION WITH CONSISTENT SNAPSHOT"); err != nil {
		return err
	}
	defer func() {
		if _, cerr := conn.ExecContext(context.WithoutCancel(ctx), "COMMIT"); err == nil {
			err = cerr
		}
	}()
	var have, copied int64
	if err := conn.QueryRowContext(ctx, "SELECT (SELECT COUNT(*) FROM "+quote(Table)+"), (SELECT COUNT(*) FROM "+quote(ShadowTable)+")").Scan(&have, &copied); err != nil {
		return err
	}
	if have != copied {
		return fmt.Errorf("the copy has %d rows, %s %d: nothing was swapped", copied, Table, have)
	}
	rows, err := conn.QueryContext(ctx, c.differ())
	if err != nil {
		return err
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return err
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if len(ids) > 0 {
		return fmt.Errorf("the copy differs from %s in rows with id %s: nothing was swapped", Table, strings.Join(ids, ", "))
	}
	return nil
}

// messageText shortens a message to MySQL's 128-character MESSAGE_TEXT limit
// (with room), on a rune boundary.
func messageText(s string) string {
	if len([]rune(s)) <= 120 {
		return s
	}
	return string([]rune(s)[:120])
}
