package adopt

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"ariga.io/atlas/sql/migrate"
	atlasmysql "ariga.io/atlas/sql/mysql"
	"ariga.io/atlas/sql/schema"

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
	return pl.steps(pl.recordStep, pl.addColumns, pl.widenColumns, func() (Step, error) { return mapValues, nil }, pl.modifyColumns, pl.mirrorColumns, pl.backfillTimes,
		pl.dropDefaults, pl.addIndexes, pl.createTables, pl.backfillKeys, pl.backfillLedger, pl.observeMode, pl.fence, pl.catchUp, pl.baseline)
}

// steps builds the plan's steps in order (an empty one is left out), then
// runs the checks that read what the steps change: the foreign keys on
// changed columns, and what the online copy cannot carry over.
func (pl *planner) steps(builders ...func() (Step, error)) error {
	for _, build := range builders {
		s, err := build()
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
