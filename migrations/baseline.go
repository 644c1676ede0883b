package migrations

import (
	"context"
	"crypto/rand"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"
	"strings"

	"ariga.io/atlas/sql/migrate"
	atlasmysql "ariga.io/atlas/sql/mysql"
)

// replay applies dir's files one after another to a scratch database on the
// server db is connected to, and calls each with the file just applied and
// the database's schema after it; it stops when each returns false. The
// scratch database is dropped afterwards. The account needs CREATE and DROP
// on the scratch database (fencekit_scratch_…).
func replay(ctx context.Context, db *sql.DB, dir migrate.Dir, each func(file string, drv migrate.Driver, snap *snapshot) (bool, error)) (err error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("replay migrations: connect: %w", err)
	}
	// The connection leaves its database for the scratch one: never give it
	// back to the pool.
	defer func() {
		_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		_ = conn.Close()
	}()
	var charset, collation string
	if err := conn.QueryRowContext(ctx, "SELECT DEFAULT_CHARACTER_SET_NAME, DEFAULT_COLLATION_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = DATABASE()").Scan(&charset, &collation); err != nil {
		return fmt.Errorf("replay migrations: read the database's character set: %w", err)
	}
	if err := dropStaleScratch(ctx, conn); err != nil {
		return err
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := ScratchPrefix + hex.EncodeToString(b[:])
	// The scratch database's lock (of the same name) is held by this
	// connection for as long as the database is in use: a process killed
	// while it replays leaves the database with its lock free, and the next
	// replay on the server drops it (dropStaleScratch).
	var got sql.NullInt64
	if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, 0)", name).Scan(&got); err != nil || got.Int64 != 1 {
		return fmt.Errorf("replay migrations: take the scratch database's lock %s: %v", name, err)
	}
	if _, err := conn.ExecContext(ctx, "CREATE DATABASE "+quoteIdent(name)+" CHARACTER SET "+charset+" COLLATE "+collation); err != nil {
		return fmt.Errorf("replay migrations: create the scratch database %s (the account needs CREATE and DROP on it): %w", name, err)
	}
	defer func() {
		if _, derr := conn.ExecContext(context.WithoutCancel(ctx), "DROP DATABASE IF EXISTS "+quoteIdent(name)); derr != nil && err == nil {
			err = fmt.Errorf("replay migrations: drop the scratch database %s: %w", name, derr)
		}
	}()
	if _, err := conn.ExecContext(ctx, "USE "+quoteIdent(name)); err != nil {
		return fmt.Errorf("replay migrations: switch to the scratch database (a fenced pool refuses to; pass a plain one): %w", err)
	}
	drv, err := atlasmysql.Open(conn)
	if err != nil {
		return fmt.Errorf("replay migrations: open atlas driver: %w", err)
	}
	files, err := dir.Files()
	if err != nil {
		return fmt.Errorf("replay migrations: %w", err)
	}
	for _, f := range files {
		stmts, err := f.StmtDecls()
		if err != nil {
			return fmt.Errorf("replay migrations: read %s: %w", f.Name(), err)
		}
		for _, s := range stmts {
			if _, err := conn.ExecContext(ctx, s.Text); err != nil {
				return fmt.Errorf("replay migrations: %s: %w", f.Name(), err)
			}
		}
		snap, err := takeSnapshot(ctx, drv, conn)
		if err != nil {
			return fmt.Errorf("replay migrations: after %s: %w", f.Name(), err)
		}
		more, err := each(f.Name(), drv, snap)
		if err != nil || !more {
			return err
		}
	}
	return nil
}

// dropStaleScratch drops the scratch databases whose replay is gone: a
// database is in use only while the connection that made it holds the lock
// of its name, which the server releases when that connection ends (a
// killed plan, a cut connection).
func dropStaleScratch(ctx context.Context, conn *sql.Conn) error {
	rows, err := conn.QueryContext(ctx, "SELECT SCHEMA_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME LIKE ?", strings.ReplaceAll(ScratchPrefix, "_", `\_`)+"%")
	if err != nil {
		return fmt.Errorf("replay migrations: list scratch databases: %w", err)
	}
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			rows.Close()
			return err
		}
		names = append(names, n)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for _, n := range names {
		var free sql.NullInt64
		if err := conn.QueryRowContext(ctx, "SELECT IS_FREE_LOCK(?)", n).Scan(&free); err != nil {
			return fmt.Errorf("replay migrations: %w", err)
		}
		if free.Valid && free.Int64 == 1 {
			// Housekeeping: a database the server cannot drop (MariaDB
			// 10.11 leaves a trigger file's backup behind now and then
			// under parallel DDL: error 1010) is left for the operator,
			// and the replay goes on.
			_, _ = conn.ExecContext(ctx, "DROP DATABASE IF EXISTS "+quoteIdent(n))
		}
	}
	return nil
}

// differences lists what would have to change for the database of snap to
// hold exactly the state want: Atlas's plan, as SQL, and the triggers and
// procedures that are missing, extra or different. None means equal.
func differences(ctx context.Context, drv migrate.Driver, have, want *snapshot) ([]string, error) {
	// Compare the tables, not the databases' names or default character
	// sets.
	from, to := *have.schema, *want.schema
	from.Name, to.Name = "", ""
	from.Attrs, to.Attrs = nil, nil
	changes, err := drv.SchemaDiff(&from, &to)
	if err != nil {
		return nil, fmt.Errorf("diff schemas: %w", err)
	}
	var out []string
	if len(changes) > 0 {
		plan, err := drv.PlanChanges(ctx, "baseline", changes)
		if err != nil {
			return nil, fmt.Errorf("describe the differences: %w", err)
		}
		for _, c := range plan.Changes {
			out = append(out, c.Cmd)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(want.routines)) {
		r, ok := have.routines[k]
		switch {
		case !ok:
			out = append(out, k+" is missing")
		case r.body != want.routines[k].body:
			out = append(out, k+" differs")
		}
	}
	for _, k := range slices.Sorted(maps.Keys(have.routines)) {
		if _, ok := want.routines[k]; !ok {
			out = append(out, k+" is not in the migrations")
		}
	}
	return out, nil
}

// without returns the snapshot without the objects retired names (all of
// them when retired is nil): its tables, and its triggers and procedures.
// The tables it keeps are s's own.
func (s *snapshot) without(retired func(name string) bool) *snapshot {
	if retired == nil {
		return s
	}
	sch := *s.schema
	sch.Tables = nil
	for _, t := range s.schema.Tables {
		if !retired(t.Name) {
			sch.Tables = append(sch.Tables, t)
		}
	}
	out := &snapshot{schema: &sch, routines: map[string]routine{}}
	for k, r := range s.routines {
		if !retired(r.name) && !retired(r.table) {
			out.routines[k] = r
		}
	}
	return out
}

// matchBaseline returns the version of the file of dir after which the
// schema is exactly the database's (snap), or ErrUnknownSchema with the
// differences from the closest state.
func matchBaseline(ctx context.Context, db *sql.DB, conn *sql.Conn, drv migrate.Driver, dir migrate.Dir, snap *snapshot) (string, error) {
	var (
		match       string
		closest     []string
		closestFile string
	)
	err := replay(ctx, db, dir, func(file string, sdrv migrate.Driver, state *snapshot) (bool, error) {
		diff, err := differences(ctx, drv, snap, state)
		if err != nil {
			return false, err
		}
		if len(diff) == 0 {
			// The first state that matches: a later file that changes
			// nothing the inspection sees (rows only) is applied again,
			// and the files are written to be re-run (IF NOT EXISTS,
			// INSERT IGNORE).
			match = file
			return false, nil
		}
		if closest == nil || len(diff) <= len(closest) {
			closest, closestFile = diff, file
		}
		return true, nil
	})
	if err != nil {
		return "", fmt.Errorf("migrate: recognise the database's schema: %w", err)
	}
	if match != "" {
		return migrate.NewLocalFile(match, nil).Version(), nil
	}
	const most = 12
	more := ""
	if len(closest) > most {
		more = fmt.Sprintf("\n  … and %d more", len(closest)-most)
		closest = closest[:most]
	}
	return "", fmt.Errorf("migrate: %w: the database has tables but no revisions (%s), and the closest state, after %s, differs:\n  %s%s\n"+
		"nothing was changed; to adopt an existing table, run `refundd adopt plan`", ErrUnknownSchema, RevisionTable, closestFile, strings.Join(closest, "\n  "), more)
}
