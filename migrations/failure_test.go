//go:build !tidb

// A failed Apply leaves the database as it found it, and a database whose
// files were applied by the plain client is recognised (issue 18 point 5).

package migrations_test

import (
	"context"
	"database/sql"
	"errors"
	"iter"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"ariga.io/atlas/sql/migrate"
	"github.com/go-sql-driver/mysql"

	"github.com/fencekit/fencekit/internal/dbtest"
	"github.com/fencekit/fencekit/migrations"
)

// migrationFiles are the files of the migration directory, in order.
func migrationFiles(t *testing.T) []migrate.File {
	t.Helper()
	dir, err := migrations.Dir()
	if err != nil {
		t.Fatal(err)
	}
	files, err := dir.Files()
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// longest is the index of the newest file with at least three statements
// (a fence: it drops triggers and recreates them), which the failure tests
// break halfway; later files (a table or two) are too short to break in
// the middle.
func longest(t *testing.T) int {
	t.Helper()
	files := migrationFiles(t)
	for n := len(files) - 1; n >= 0; n-- {
		if stmts, err := files[n].StmtDecls(); err == nil && len(stmts) >= 3 {
			return n
		}
	}
	t.Fatal("no migration file has three statements")
	return 0
}

// middle returns the version of the n-th file (from 0; -1 the last) and
// the number of a statement halfway through it.
func middle(t *testing.T, n int) (string, int) {
	t.Helper()
	files := migrationFiles(t)
	if n < 0 {
		n = len(files) + n
	}
	stmts, err := files[n].StmtDecls()
	if err != nil {
		t.Fatal(err)
	}
	if len(stmts) < 3 {
		t.Fatalf("%s has %d statements: pick a longer file", files[n].Name(), len(stmts))
	}
	return files[n].Version(), len(stmts)/2 + 1
}

func hasRevisionTable(t *testing.T, db *sql.DB) bool {
	t.Helper()
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?", migrations.RevisionTable).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n > 0
}

func TestFailedApplyLeavesTheDatabaseAsFound(t *testing.T) {
	t.Parallel()
	t.Run("a fresh database stays empty: no tables, no triggers, no revision table", func(t *testing.T) {
		t.Parallel()
		_, _, db := emptyDB(t, "failfresh")
		version, stmt := middle(t, longest(t))
		_, err := migrations.Apply(migrations.WithFailAt(context.Background(), version, stmt), db)
		var ae *migrations.ApplyError
		if !errors.As(err, &ae) || !errors.Is(err, migrations.ErrInjected) || !ae.Restored || ae.Stmt != stmt || !strings.HasPrefix(ae.File, version) {
			t.Fatalf("Apply with statement %d of %s failing: %v", stmt, version, err)
		}
		for _, want := range []string{version, "statement " + itoa(stmt), "the database is as this run found it", "run `refundd migrate` again"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("the error does not say %q: %v", want, err)
			}
		}
		if got := dbtest.Fingerprint(t, db); len(got) != 0 {
			t.Fatalf("the failed run left %v behind", slices.Sorted(mapsKeys(got)))
		}
		// Once the cause is gone, the same command goes on.
		if _, err := migrations.Apply(context.Background(), db); err != nil {
			t.Fatalf("apply after the failure: %v", err)
		}
	})
	t.Run("a migrated database keeps its triggers, tables, rows and revisions when the next file fails midway", func(t *testing.T) {
		t.Parallel()
		_, _, db := emptyDB(t, "failmid")
		ctx := context.Background()
		n := longest(t)
		if _, err := migrations.ApplyN(ctx, db, n); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec("INSERT INTO refund_jobs (operation_key, payment_ref, amount_minor, currency, next_run_at, created_at, updated_at) VALUES ('k1', 'pay', 100, 'EUR', NOW(6), NOW(6), NOW(6))"); err != nil {
			t.Fatal(err)
		}
		before := dbtest.Fingerprint(t, db)
		// The newest fence file drops every trigger of the job table first
		// and recreates them later: failing halfway leaves the table
		// unfenced unless the run is undone.
		version, stmt := middle(t, n)
		_, err := migrations.Apply(migrations.WithFailAt(ctx, version, stmt), db)
		var ae *migrations.ApplyError
		if !errors.As(err, &ae) || !ae.Restored {
			t.Fatalf("Apply with statement %d of %s failing: %v", stmt, version, err)
		}
		if diff := dbtest.FingerprintDiff(before, dbtest.Fingerprint(t, db)); len(diff) > 0 {
			t.Fatalf("the failed run changed the database: %v", diff)
		}
		applied, err := migrations.Apply(ctx, db)
		if files := versions(t, migrations.Dir); err != nil || !slices.Equal(applied, files[n:]) {
			t.Fatalf("apply after the failure: %v, %v", applied, err)
		}
	})
}

func itoa(n int) string { return strconv.Itoa(n) }

func mapsKeys(m map[string]string) iter.Seq[string] { return maps.Keys(m) }

// plainClient applies files to database name with the mariadb (or mysql)
// client, as a team without Atlas does: `cat migrations/*.sql | mariadb db`.
func plainClient(t *testing.T, cfg *mysql.Config, name string, files []string) {
	t.Helper()
	client := ""
	for _, c := range []string{"mariadb", "mysql"} {
		if p, err := exec.LookPath(c); err == nil {
			client = p
			break
		}
	}
	if client == "" {
		t.Fatal("neither the mariadb nor the mysql client is installed (scripts/ensure-db.sh installs mariadb-client)")
	}
	host, port, _ := strings.Cut(cfg.Addr, ":")
	args := []string{"--protocol=tcp", "-h" + host, "-P" + port, "-u" + cfg.User}
	if cfg.Passwd != "" {
		args = append(args, "-p"+cfg.Passwd)
	}
	var in strings.Builder
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		in.Write(b)
		in.WriteString("\n")
	}
	cmd := exec.Command(client, append(args, name)...)
	cmd.Stdin = strings.NewReader(in.String())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", client, name, err, out)
	}
}

func TestPlainClientDatabaseIsBaselined(t *testing.T) {
	t.Parallel()
	all, err := filepath.Glob("*.sql")
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(all)
	files := versions(t, migrations.Dir)
	for _, n := range []int{len(files) - 2, len(files)} {
		t.Run("applied up to file "+itoa(n)+": revisions up to it, then the rest applied", func(t *testing.T) {
			t.Parallel()
			cfg, name, db := emptyDB(t, "plain")
			plainClient(t, cfg, name, all[:n])
			applied, err := migrations.Apply(context.Background(), db)
			if err != nil {
				t.Fatalf("apply on a plain-client database: %v", err)
			}
			if !slices.Equal(applied, files[n:]) {
				t.Fatalf("applied %v, want %v", applied, files[n:])
			}
			revs := revisions(t, db)
			if r, ok := revs[files[n-1]]; !ok || r[0] != int64(migrate.RevisionTypeBaseline) {
				t.Fatalf("revisions %v: want %s as the baseline", revs, files[n-1])
			}
			if again, err := migrations.Apply(context.Background(), db); err != nil || len(again) != 0 {
				t.Fatalf("second apply: %v, %v", again, err)
			}
		})
	}
}

// A database the plain client migrated with the directory as it was
// shipped, the transcoding example's files included (testdata/retired), is
// recognised too: the example's tables, triggers and procedures are no
// state of the directory any more, and stay as they are; the rest is the
// state after the last file (after the file before when the shipped files
// stopped earlier), recorded as the baseline, and what follows is applied.
func TestPlainClientDatabaseWithTheRetiredExampleIsBaselined(t *testing.T) {
	t.Parallel()
	core, err := filepath.Glob("*.sql")
	if err != nil {
		t.Fatal(err)
	}
	old, err := filepath.Glob(filepath.Join("testdata", "retired", "*.sql"))
	if err != nil || len(old) == 0 {
		t.Fatalf("retired files: %v %v", old, err)
	}
	shipped := append(slices.Clone(core), old...)
	slices.SortFunc(shipped, func(a, b string) int { return strings.Compare(filepath.Base(a), filepath.Base(b)) })
	files := versions(t, migrations.Dir)
	// The example's last retired file, and the core file before it: a
	// database whose files stopped short of that retired file is baselined
	// at the core file before it, and the core files after are applied.
	lastRetired := slices.IndexFunc(shipped, func(f string) bool { return f == old[len(old)-1] })
	retiredVersion := strings.SplitN(filepath.Base(old[len(old)-1]), "_", 2)[0]
	before := ""
	for _, v := range files {
		if v < retiredVersion {
			before = v
		}
	}
	for _, c := range []struct {
		name     string
		upTo     int // shipped files applied
		baseline string
	}{
		{"every shipped file: the last core file is the baseline", len(shipped), files[len(files)-1]},
		{"up to the example's fence: the core file before it is the baseline, the later ones applied", lastRetired, before},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			cfg, name, db := emptyDB(t, "plainretired")
			plainClient(t, cfg, name, shipped[:c.upTo])
			example := tablesLike(t, db, "transcode_jobs")
			applied, err := migrations.Apply(context.Background(), db)
			if err != nil {
				t.Fatalf("apply on a plain-client database with the example's tables: %v", err)
			}
			want := files[slices.Index(files, c.baseline)+1:]
			if !slices.Equal(applied, want) {
				t.Fatalf("applied %v, want %v", applied, want)
			}
			if r, ok := revisions(t, db)[c.baseline]; !ok || r[0] != int64(migrate.RevisionTypeBaseline) {
				t.Fatalf("revisions %v: want %s as the baseline", revisions(t, db), c.baseline)
			}
			if got := tablesLike(t, db, "transcode_jobs"); len(example) == 0 || !slices.Equal(got, example) {
				t.Fatalf("the example's tables were %v, now %v", example, got)
			}
		})
	}
}

func TestUnknownSchemaIsRefusedAndNothingChanges(t *testing.T) {
	t.Parallel()
	t.Run("the article's table of a team: refused, adopt named, nothing created", func(t *testing.T) {
		t.Parallel()
		_, _, db := emptyDB(t, "legacy")
		if _, err := db.Exec("CREATE TABLE refund_jobs (id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, operation_key VARCHAR(128) NOT NULL UNIQUE, attempt INT NOT NULL DEFAULT 0, " +
			"state VARCHAR(32) NOT NULL, lease_until DATETIME(6) NULL, next_action VARCHAR(32) NOT NULL, provider_refund_id VARCHAR(255) NULL, merchant_note TEXT NULL)"); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec("INSERT INTO refund_jobs (operation_key, state, next_action) VALUES ('k1', 'pending', 'refund')"); err != nil {
			t.Fatal(err)
		}
		before := dbtest.Fingerprint(t, db)
		_, err := migrations.Apply(context.Background(), db)
		if !errors.Is(err, migrations.ErrUnknownSchema) || !strings.Contains(err.Error(), "refundd adopt plan") || !strings.Contains(err.Error(), "merchant_note") {
			t.Fatalf("apply on a legacy table: %v", err)
		}
		if diff := dbtest.FingerprintDiff(before, dbtest.Fingerprint(t, db)); len(diff) > 0 || hasRevisionTable(t, db) {
			t.Fatalf("the refused run changed the database: %v", diff)
		}
	})
	t.Run("a plain-client database with one column of its own: refused, the column named", func(t *testing.T) {
		t.Parallel()
		cfg, name, db := emptyDB(t, "drifted")
		all, _ := filepath.Glob("*.sql")
		slices.Sort(all)
		plainClient(t, cfg, name, all)
		if _, err := db.Exec("ALTER TABLE refund_jobs ADD COLUMN legacy_flag TINYINT NULL"); err != nil {
			t.Fatal(err)
		}
		before := dbtest.Fingerprint(t, db)
		_, err := migrations.Apply(context.Background(), db)
		if !errors.Is(err, migrations.ErrUnknownSchema) || !strings.Contains(err.Error(), "legacy_flag") {
			t.Fatalf("apply on a drifted database: %v", err)
		}
		if diff := dbtest.FingerprintDiff(before, dbtest.Fingerprint(t, db)); len(diff) > 0 || hasRevisionTable(t, db) {
			t.Fatalf("the refused run changed the database: %v", diff)
		}
	})
}

// A replay that fails (a file the server refuses) still drops its scratch
// database: the probe table its first file creates is in no scratch
// database afterwards. The probe's random name tells this test's scratch
// database from those of tests running beside it.
func TestFailedReplayDropsItsScratchDatabase(t *testing.T) {
	t.Parallel()
	_, _, db := emptyDB(t, "replayfail")
	probe := "probe_" + strconv.FormatInt(time.Now().UnixNano(), 36)
	dir := &migrate.MemDir{}
	for name, body := range map[string]string{
		"20260101000000_probe.sql":  "CREATE TABLE `" + probe + "` (x int);\n",
		"20260101000001_broken.sql": "CREATE TABLE broken (;\n",
	} {
		if err := dir.WriteFile(name, []byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	_, err := migrations.ReplayTarget(context.Background(), db, dir)
	if err == nil || !strings.Contains(err.Error(), "20260101000001_broken.sql") {
		t.Fatalf("replay of a broken file: got %v, want an error naming the file", err)
	}
	var left []string
	rows, err := db.Query("SELECT TABLE_SCHEMA FROM information_schema.TABLES WHERE TABLE_NAME = ? AND TABLE_SCHEMA LIKE ?",
		probe, strings.ReplaceAll(migrations.ScratchPrefix, "_", `\_`)+"%")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		left = append(left, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(left) > 0 {
		t.Errorf("the failed replay left its scratch database behind: %v", left)
	}
}
