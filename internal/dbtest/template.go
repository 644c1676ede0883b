package dbtest

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"

	"ariga.io/atlas/sql/migrate"
	"github.com/go-sql-driver/mysql"

	"github.com/fencekit/fencekit/internal/devdb"
	"github.com/fencekit/fencekit/migrations"
)

// A test's database is a copy of a template: a database on the same server
// with every migration of its source (fencekit's, or an example's) applied
// once, by migrations.ApplyDir, as River pools
// its test schemas. Applying the directory for each test costs more than
// copying its result, and Apply holds a server-wide advisory lock, so tests
// that each migrated their own database waited for one another. The
// template's name carries a hash of the migration directory, so a changed
// file makes a new template; it is kept between runs, built under an
// advisory lock of its own, and rebuilt when its revisions are incomplete.
// TestTemplateCopyIsTheMigratedSchema checks that a copy and a migrated
// database are the same: tables, rows, triggers and procedures.

// templatePrefix starts every template's name; devdb.Name never makes one.
const templatePrefix = "fk_template_"

var templates sync.Map // server address and source name -> *template

type template struct {
	once sync.Once
	name string
	err  error
}

// templateFor returns the name of the template of src's migrations on
// cfg's server, building it once per process and source (and once per
// migration directory on the server).
func templateFor(ctx context.Context, cfg *mysql.Config, src migrations.Source) (string, error) {
	v, _ := templates.LoadOrStore(cfg.Addr+"\x00"+src.Name, &template{})
	tpl := v.(*template)
	tpl.once.Do(func() { tpl.name, tpl.err = buildTemplate(ctx, cfg, src) })
	return tpl.name, tpl.err
}

func buildTemplate(ctx context.Context, cfg *mysql.Config, src migrations.Source) (string, error) {
	root, err := sql.Open("mysql", devdb.DSN(cfg, ""))
	if err != nil {
		return "", err
	}
	defer root.Close()
	dir, err := src.DirFor(ctx, root)
	if err != nil {
		return "", fmt.Errorf("template: %w", err)
	}
	name, files, err := templateName(dir)
	if err != nil {
		return "", err
	}
	conn, err := root.Conn(ctx)
	if err != nil {
		return "", fmt.Errorf("template: connect: %w", err)
	}
	defer conn.Close()
	var got sql.NullInt64
	if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, 120)", name).Scan(&got); err != nil || got.Int64 != 1 {
		return "", fmt.Errorf("template: lock %s: %v (got %v)", name, err, got)
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), "DO RELEASE_LOCK(?)", name) //nolint:errcheck
	if complete(ctx, conn, name, files) {
		return name, nil
	}
	if _, err := conn.ExecContext(ctx, "DROP DATABASE IF EXISTS `"+name+"`"); err != nil {
		return "", fmt.Errorf("template: drop incomplete %s: %w", name, err)
	}
	if _, err := conn.ExecContext(ctx, "CREATE DATABASE `"+name+"` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"); err != nil {
		return "", fmt.Errorf("template: create %s: %w", name, err)
	}
	db, err := sql.Open("mysql", devdb.DSN(cfg, name))
	if err != nil {
		return "", err
	}
	defer db.Close()
	if _, err := migrations.ApplyDir(ctx, db, dir); err != nil {
		return "", fmt.Errorf("template: apply migrations to %s: %w", name, err)
	}
	if !complete(ctx, conn, name, files) {
		return "", fmt.Errorf("template: %s has not every revision after migrating", name)
	}
	return name, nil
}

// templateName names the template after a hash of dir's files.
func templateName(dir migrate.Dir) (string, int, error) {
	fs, err := dir.Files()
	if err != nil {
		return "", 0, fmt.Errorf("template: read migrations: %w", err)
	}
	h := sha256.New()
	for _, f := range fs {
		fmt.Fprintf(h, "%s\x00%d\x00", f.Name(), len(f.Bytes()))
		h.Write(f.Bytes())
	}
	return templatePrefix + hex.EncodeToString(h.Sum(nil))[:16], len(fs), nil
}

// complete reports whether the template holds every file's revision, fully
// applied.
func complete(ctx context.Context, conn *sql.Conn, name string, files int) bool {
	var n int
	err := conn.QueryRowContext(ctx, "SELECT COUNT(*) FROM `"+name+"`.`"+migrations.RevisionTable+"` WHERE applied = total AND (error IS NULL OR error = '')").Scan(&n)
	return err == nil && n == files
}

// copyTemplate creates database dst as a copy of the template src: its
// tables with their rows, then its procedures, then its triggers (created
// after the rows, so no trigger fires on the copy).
func copyTemplate(ctx context.Context, cfg *mysql.Config, src, dst string) error {
	root, err := sql.Open("mysql", devdb.DSN(cfg, ""))
	if err != nil {
		return err
	}
	defer root.Close()
	conn, err := root.Conn(ctx)
	if err != nil {
		return fmt.Errorf("copy template: connect: %w", err)
	}
	defer conn.Close()
	exec := func(q string, args ...any) error {
		if _, err := conn.ExecContext(ctx, q, args...); err != nil {
			return fmt.Errorf("copy template %s to %s: %s: %w", src, dst, firstLine(q), err)
		}
		return nil
	}
	if err := exec("USE `" + dst + "`"); err != nil {
		return err
	}
	if err := exec("SET SESSION foreign_key_checks = 0"); err != nil {
		return err
	}
	tables, err := strings1(ctx, conn, "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_TYPE = 'BASE TABLE' ORDER BY TABLE_NAME", src)
	if err != nil {
		return err
	}
	for _, t := range tables {
		var name, create string
		if err := conn.QueryRowContext(ctx, "SHOW CREATE TABLE `"+src+"`.`"+t+"`").Scan(&name, &create); err != nil {
			return fmt.Errorf("copy template: show create table %s: %w", t, err)
		}
		if err := exec(create); err != nil {
			return err
		}
		cols, err := strings1(ctx, conn, "SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND EXTRA NOT LIKE '%GENERATED%' ORDER BY ORDINAL_POSITION", src, t)
		if err != nil {
			return err
		}
		list := "`" + strings.Join(cols, "`, `") + "`"
		if err := exec("INSERT INTO `" + t + "` (" + list + ") SELECT " + list + " FROM `" + src + "`.`" + t + "`"); err != nil {
			return err
		}
	}
	if err := exec("SET SESSION foreign_key_checks = 1"); err != nil {
		return err
	}
	routines, err := strings1(ctx, conn, "SELECT CONCAT(ROUTINE_TYPE, ' ', ROUTINE_NAME) FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = ? ORDER BY ROUTINE_NAME", src)
	if err != nil {
		return err
	}
	for _, r := range routines {
		kind, name, _ := strings.Cut(r, " ")
		if err := recreate(ctx, conn, "SHOW CREATE "+kind+" `"+src+"`.`"+name+"`", 3, exec); err != nil {
			return err
		}
	}
	// ACTION_ORDER keeps triggers of one table and event in their order.
	triggers, err := strings1(ctx, conn, "SELECT TRIGGER_NAME FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = ? ORDER BY EVENT_OBJECT_TABLE, EVENT_MANIPULATION, ACTION_TIMING, ACTION_ORDER", src)
	if err != nil {
		return err
	}
	for _, name := range triggers {
		if err := recreate(ctx, conn, "SHOW CREATE TRIGGER `"+src+"`.`"+name+"`", 3, exec); err != nil {
			return err
		}
	}
	return nil
}

// recreate runs the statement that a SHOW CREATE (procedure, function or
// trigger) returns in its column stmt, under the sql_mode it was created
// with (column 2), which the server records with the object.
func recreate(ctx context.Context, conn *sql.Conn, show string, stmt int, exec func(string, ...any) error) error {
	rows, err := conn.QueryContext(ctx, show)
	if err != nil {
		return fmt.Errorf("copy template: %s: %w", show, err)
	}
	cols, err := rows.Columns()
	if err != nil {
		rows.Close()
		return err
	}
	vals := make([]sql.NullString, len(cols))
	ptrs := make([]any, len(cols))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	if !rows.Next() {
		rows.Close()
		return fmt.Errorf("copy template: %s: no row", show)
	}
	if err := rows.Scan(ptrs...); err != nil {
		rows.Close()
		return fmt.Errorf("copy template: %s: %w", show, err)
	}
	rows.Close()
	if !vals[stmt-1].Valid {
		return fmt.Errorf("copy template: %s: no statement (missing privileges?)", show)
	}
	if err := exec("SET SESSION sql_mode = ?", vals[1].String); err != nil {
		return err
	}
	return exec(vals[stmt-1].String)
}

func strings1(ctx context.Context, conn *sql.Conn, q string, args ...any) ([]string, error) {
	rows, err := conn.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("copy template: %s: %w", firstLine(q), err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, errors.Join(rows.Err())
}

func firstLine(q string) string {
	q, _, _ = strings.Cut(q, "\n")
	if len(q) > 80 {
		q = q[:80] + "…"
	}
	return q
}
