//go:build !tidb

package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/fencekit/fencekit/ent"
	"github.com/fencekit/fencekit/fencedwrite"
	"github.com/fencekit/fencekit/internal/dbtest"
	"github.com/fencekit/fencekit/internal/devdb"
	"github.com/fencekit/fencekit/ledger"
	"github.com/fencekit/fencekit/migrations"
	"github.com/fencekit/fencekit/provider/fakeprovider"
	"github.com/fencekit/fencekit/testdata/legacy/legacyworker"
	"github.com/fencekit/fencekit/worker"
)

// TestCutoverOfALiveQueue walks docs/adopting.md on the legacy application
// of testdata/legacy while its workers keep running: adopt the table, observe
// (the legacy writes go through and are recorded, none is lost), roll the
// fleet over to fencekit's worker one process at a time, enforce. The test
// is the scheduler: it steps each legacy process itself and holds the
// provider's answer to freeze one, so every interleaving it claims happens.
//
// At the end every job is settled once, no operation key was paid twice,
// no row or column of the team's own was lost, and the fence report names
// the legacy writer. On the way it shows what observe mode does not
// protect: a legacy zombie's catch block still sets a refund that a fenced
// worker settled back to ready (the provider's idempotency key is what keeps
// the customer from being paid twice then), and what enforce does: the same
// write is refused.
func TestCutoverOfALiveQueue(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	c := newCutover(t)

	// The team's queue: 40 approved refunds, two legacy processes.
	const legacyJobs, zombie = 40, "legacy-40"
	for i := 1; i <= legacyJobs; i++ {
		c.legacyEnqueue(i)
	}
	// legacy-03's first send is refused by the provider: the legacy catch
	// block puts it back to ready and a later step sends it again.
	c.srv.Script("legacy-03", fakeprovider.Fault{Refuse: 503})
	// The zombie's send executes, and its answer is held, then cut.
	hold := make(chan struct{})
	c.srv.Script(zombie, fakeprovider.Fault{Hold: hold, After: fakeprovider.Cut})
	l1, l2 := c.legacyProcess(time.Hour), c.legacyProcess(time.Hour)

	for c.nextReady() <= 12 {
		c.step(l1)
		c.step(l2)
	}
	before := c.teamColumns()

	// 1. Adopt the table while a legacy process keeps settling refunds and
	// the admin panel keeps editing the team's notes.
	adopted := make(chan error, 1)
	go func() {
		adopted <- c.refundd("adopt", "apply", "-dsn", c.rootDSN, "-columns", "payment_ref=payment_id,amount_minor=amount_cents,created_at=created")
	}()
	notes := map[int64]string{}
	writes := 0
	for done := false; !done; {
		select {
		case err := <-adopted:
			if err != nil {
				t.Fatalf("adopt apply: %v\n%s", err, c.out.String())
			}
			done = true
		default:
			if c.nextReady() < 30 {
				c.step(l2)
			}
			id := int64(writes%legacyJobs + 1)
			note := fmt.Sprintf("edited during adopt #%d <script>alert(1)</script>", writes)
			//fencelint:allow the legacy admin panel edits a column of the team's own: no fence applies to it
			if _, err := c.legacyDB().ExecContext(ctx, "UPDATE refund_jobs SET merchant_note = ? WHERE id = ?", note, id); err != nil {
				t.Fatalf("the admin panel's edit during adopt: %v", err)
			}
			notes[id] = note
			writes++
		}
	}
	t.Logf("%d admin edits and the legacy steps ran while adopt applied", writes)
	if got := c.refunddOut("fence", "mode", "-dsn", c.rootDSN); got != "fence mode: observe\n" {
		t.Fatalf("after adopt the fence must observe, not refuse the legacy fleet: %q", got)
	}

	// 2. Observe: the legacy process keeps working; its writes go through.
	for c.nextReady() < legacyJobs {
		c.step(l2)
	}
	// Baseline the linter: the legacy worker's unfenced writes are today's
	// debt, accepted by the team's committed baseline; a new one fails CI.
	c.lintLegacy()

	// l1 claims the zombie's job with a short lease and hangs in the call.
	zombieLease := c.legacyProcess(50 * time.Millisecond)
	zombieDone := make(chan error, 1)
	executed := c.srv.Executed(zombie, 1)
	go func() {
		_, err := zombieLease.Step(ctx)
		zombieDone <- err
	}()
	<-executed

	// 3. Roll the fleet over, one process at a time: l2 stops, f1 starts.
	f1 := c.fencedWorker("f1")
	w := c.await(zombie)
	if w.err != nil || w.job.Attempt != 2 || w.job.To != "succeeded" {
		t.Fatalf("f1's takeover of the zombie's job: %+v, %v", w.job, w.err)
	}
	// The zombie comes back from its cut call: its catch block writes over
	// the fenced worker's decision. Observe mode lets it through.
	close(hold)
	if err := <-zombieDone; err == nil || strings.Contains(err.Error(), "1644") {
		t.Fatalf("the zombie's step: %v; want its call's error and its catch block's write let through", err)
	}
	// f1 keeps scanning: it may claim the job the zombie put back (due at
	// once) before this read, and even settle it again (the provider answers
	// at once), so the job shows ready, or f1's next attempt running or
	// succeeded; the record of violations shows the zombie's write either
	// way. Succeeded at f1's takeover attempt (2) would mean the write never
	// landed.
	zombieID := c.id(zombie)
	var reverted int
	if err := c.root.QueryRow("SELECT COUNT(*) FROM refund_jobs_fence_violations WHERE row_id = ? AND old_state = 'succeeded' AND new_state = 'ready'",
		zombieID).Scan(&reverted); err != nil {
		t.Fatal(err)
	}
	var state string
	var attempt int64
	if err := c.root.QueryRow("SELECT state, attempt FROM refund_jobs WHERE id = ?", zombieID).Scan(&state, &attempt); err != nil {
		t.Fatal(err)
	}
	if reverted != 1 || !(state == "ready" || attempt > 2 && (state == "running" || state == "succeeded")) {
		t.Fatalf("in observe mode the zombie's catch block sets the settled job back to ready (recorded %d times); state %s at attempt %d", reverted, state, attempt)
	}
	// A fenced worker sends it again with the same key: the provider answers
	// with the refund it executed, and nothing moves twice.
	f1.Wake()
	if w := c.await(zombie); w.err != nil || w.job.To != "succeeded" {
		t.Fatalf("f1 settles the zombie's job again: %+v, %v", w.job, w.err)
	}

	// l1 stops, f2 starts; new refunds go through fencekit's Enqueue, which
	// sets fencekit's columns only: the team gives its own NOT NULL columns
	// a default first, as docs/adopting.md says (metadata only).
	for _, col := range []string{"payment_id SET DEFAULT ''", "amount_cents SET DEFAULT 0"} {
		if _, err := c.root.ExecContext(ctx, "ALTER TABLE refund_jobs ALTER COLUMN "+col); err != nil {
			t.Fatal(err)
		}
	}
	f2 := c.fencedWorker("f2")
	var fresh []string
	for i := 1; i <= 10; i++ {
		fresh = append(fresh, c.fencedEnqueue(i))
	}
	f1.Wake()
	f2.Wake()
	c.awaitSettled(fresh)

	// 4. Enforce: refused at first, naming the legacy account its writes
	// came from a moment ago; the legacy account may not switch the mode
	// itself, whatever its grants; the migration account forces the switch
	// (the last legacy process is stopped); the same catch block is refused
	// now.
	if err := c.refundd("fence", "mode", "enforce", "-dsn", c.rootDSN, "-reason", "every process runs fencekit's worker"); err == nil ||
		!strings.Contains(err.Error(), c.legacyUser+"@") || !strings.Contains(err.Error(), "would start failing") {
		t.Fatalf("enforce right after the legacy writes: %v, want a refusal naming %s", err, c.legacyUser)
	}
	legacyDSN := c.legacyCfg.FormatDSN()
	if err := c.refundd("fence", "mode", "enforce", "-dsn", legacyDSN, "-reason", "the legacy account tries", "-force"); err == nil ||
		!strings.Contains(err.Error(), "only the migration account") {
		t.Fatalf("the legacy account switches the mode: %v, want the database's refusal", err)
	}
	if err := c.refundd("fence", "mode", "enforce", "-dsn", c.rootDSN, "-reason", "every process runs fencekit's worker", "-force"); err != nil {
		t.Fatal(err)
	}
	if err := c.refundd("fence", "mode", "observe", "-dsn", legacyDSN, "-reason", "the legacy account switches the fence off"); err == nil ||
		!strings.Contains(err.Error(), "only the migration account") {
		t.Fatalf("the legacy account switches the fence off: %v, want the database's refusal", err)
	}
	//fencelint:allow the legacy worker's catch block, replayed by a forgotten process after enforce: the fence must refuse it
	_, err := c.legacyDB().ExecContext(ctx, legacyworker.Requeue, c.id(zombie))
	if !dbtest.IsTriggerRefusal(err, "") {
		t.Fatalf("the legacy catch block in enforce mode: %v, want the fence's refusal", err)
	}

	// What the cutover kept.
	for key := range c.keys {
		if n := c.srv.Executions(key); n != 1 {
			t.Errorf("%s: the provider moved money %d times", key, n)
		}
		if state := c.state(key); state != "succeeded" {
			t.Errorf("%s: %s, want succeeded", key, state)
		}
	}
	after := c.teamColumns()
	for id, row := range before {
		if note, ok := notes[id]; ok {
			row.note = sql.NullString{String: note, Valid: true}
		}
		if after[id] != row {
			t.Errorf("job %d's own columns: %+v, want %+v", id, after[id], row)
		}
	}
	if len(after) != legacyJobs+10 {
		t.Errorf("%d rows after the cutover, want %d", len(after), legacyJobs+10)
	}

	// The report names the legacy writer, and only it.
	var report struct {
		Mode   migrations.FenceMode
		Groups []migrations.ViolationGroup
	}
	if err := json.Unmarshal([]byte(c.refunddOut("fence", "report", "-dsn", c.rootDSN, "-json")), &report); err != nil {
		t.Fatal(err)
	}
	if len(report.Groups) == 0 {
		t.Fatal("the report names no writer")
	}
	for _, g := range report.Groups {
		if !strings.HasPrefix(g.Account, c.legacyUser+"@") {
			t.Errorf("the report blames %s (%s), not the legacy account %s", g.Account, g.Rule, c.legacyUser)
		}
	}
}

// lintLegacy runs fencelint over testdata/legacy with its committed
// baseline (testdata/legacy/fencelint.baseline, written by `fencelint
// -write-baseline`): silent on the accepted findings, loud on a new
// unfenced write added beside them.
func (c *cutover) lintLegacy() {
	t := c.t
	dir := t.TempDir()
	bin := filepath.Join(dir, "fencelint")
	// fencelint-sql beside it: its SQL checker.
	build := exec.Command("go", "build", "-o", dir+string(filepath.Separator), "./cmd/fencelint", "./cmd/fencelint-sql")
	build.Dir = "../.."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build fencelint: %v\n%s", err, out)
	}
	lint := func() (string, error) {
		cmd := exec.Command(bin, "-baseline=testdata/legacy/fencelint.baseline", "./testdata/legacy/...")
		cmd.Dir = "../.."
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := lint(); err != nil {
		t.Fatalf("fencelint with the legacy baseline: %v\n%s", err, out)
	}
	added := "../../testdata/legacy/legacyworker/zz_added_after_the_baseline.go"
	src := "package legacyworker\n\nimport \"context\"\n\n// Cancel is a write somebody adds after the baseline.\n" +
		"func (w *Worker) Cancel(ctx context.Context, id int64) error {\n" +
		"\t_, err := w.DB.ExecContext(ctx, \"UPDATE refund_jobs SET state = 'failed' WHERE id = ?\", id)\n\treturn err\n}\n"
	if err := os.WriteFile(added, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(added)
	out, err := lint()
	if err == nil || !strings.Contains(out, "zz_added_after_the_baseline.go:7") || !strings.Contains(out, "unfenced UPDATE of refund_jobs") {
		t.Fatalf("fencelint on a new unfenced write beside the baseline: %v\n%s", err, out)
	}
	if strings.Contains(out, "worker.go") {
		t.Fatalf("fencelint reported the accepted findings again:\n%s", out)
	}
}

// cutover is the team's database, its accounts, the provider and the
// processes of the test above.
type cutover struct {
	t          *testing.T
	cfg        *mysql.Config
	name       string
	rootDSN    string
	root       *sql.DB
	legacyUser string
	legacyCfg  *mysql.Config
	legacy     *sql.DB
	srv        *fakeprovider.Server
	keys       map[string]bool
	out        bytes.Buffer
	wrote      chan wroteBack // every fenced worker's write-backs
}

func newCutover(t *testing.T) *cutover {
	t.Helper()
	cfg, err := devdb.ServerConfig()
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	name, drop, err := devdb.Create(ctx, cfg, "cutover")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = drop(context.Background()) })
	c := &cutover{t: t, cfg: cfg, name: name, rootDSN: devdb.DSN(cfg, name), keys: map[string]bool{}, wrote: make(chan wroteBack, 1000)}
	c.root = openRaw(t, c.rootDSN)
	schema, err := os.ReadFile("../../testdata/legacy/schema.sql")
	if err != nil {
		t.Fatal(err)
	}
	for _, stmt := range strings.Split(string(schema), ";") {
		if strings.TrimSpace(stripComments(stmt)) == "" {
			continue
		}
		if _, err := c.root.ExecContext(ctx, stmt); err != nil {
			t.Fatalf("testdata/legacy/schema.sql: %v", err)
		}
	}
	// The legacy application's own account, as it has one in production.
	c.legacyCfg = dbtest.Account(t, c.root, name, func(db, account string) []string {
		return []string{fmt.Sprintf("GRANT SELECT, INSERT, UPDATE, DELETE ON `%s`.* TO %s", db, account)}
	})
	c.legacyUser = c.legacyCfg.User
	lc := c.legacyCfg.Clone()
	lc.ParseTime = true
	c.legacy = dbtest.OpenDSN(t, lc.FormatDSN())
	c.srv = fakeprovider.StartWith(fakeprovider.Config{})
	t.Cleanup(c.srv.Close)
	return c
}

func stripComments(s string) string {
	var b strings.Builder
	for _, line := range strings.Split(s, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "--") {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

func (c *cutover) legacyDB() *sql.DB { return c.legacy }

// legacyProcess is one legacy worker process, with a pool of its own.
func (c *cutover) legacyProcess(lease time.Duration) *legacyworker.Worker {
	lc := c.legacyCfg.Clone()
	lc.ParseTime = true
	return &legacyworker.Worker{DB: dbtest.OpenDSN(c.t, lc.FormatDSN()), Provider: c.srv.Client(), Lease: lease}
}

// legacyEnqueue is the legacy application's enqueue of refund i.
func (c *cutover) legacyEnqueue(i int) {
	key, pay := fmt.Sprintf("legacy-%02d", i), fmt.Sprintf("pay-legacy-%02d", i)
	c.srv.AddPayment(pay, 100_000, "EUR")
	if _, err := c.legacy.ExecContext(c.t.Context(),
		"INSERT INTO refund_jobs (operation_key, payment_id, amount_cents, currency, merchant_note, legacy_flag) VALUES (?, ?, ?, 'EUR', ?, ?)",
		key, pay, 1000+i, fmt.Sprintf("customer %d asked by phone", i), i%2); err != nil {
		c.t.Fatal(err)
	}
	c.keys[key] = true
}

// fencedEnqueue is fencekit's enqueue of refund i, with its ledger row.
func (c *cutover) fencedEnqueue(i int) string {
	p := ent.RefundJobEnqueue{OperationKey: fmt.Sprintf("fenced-%02d", i), PaymentRef: fmt.Sprintf("pay-fenced-%02d", i), AmountMinor: int64(2000 + i), Currency: "EUR"}
	c.srv.AddPayment(p.PaymentRef, 100_000, "EUR")
	client := dbtest.ClientOn(c.t, c.appDB())
	if _, _, err := client.RefundJob.Enqueue(c.t.Context(), p, ledger.Open(p)); err != nil {
		c.t.Fatal(err)
	}
	c.keys[p.OperationKey] = true
	return p.OperationKey
}

// appDB is a fenced pool of fencekit's application account.
func (c *cutover) appDB() *sql.DB {
	cfg := dbtest.Account(c.t, c.root, c.name, migrations.AppGrants)
	db, err := fencedwrite.OpenDB(cfg.FormatDSN(), fencedwrite.DSNOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { _ = db.Close() })
	return db
}

// step runs one step of a legacy process; a provider's refusal is its catch
// block's business, anything else fails the test.
func (c *cutover) step(w *legacyworker.Worker) {
	if _, err := w.Step(c.t.Context()); err != nil && !errors.Is(err, legacyworker.ErrNothingToDo) && !strings.Contains(err.Error(), "503") {
		c.t.Fatalf("legacy step: %v", err)
	}
}

// nextReady is the lowest id of a ready job, or a number past every id.
func (c *cutover) nextReady() int64 {
	var id sql.NullInt64
	if err := c.root.QueryRow("SELECT MIN(id) FROM refund_jobs WHERE state = 'ready'").Scan(&id); err != nil {
		c.t.Fatal(err)
	}
	if !id.Valid {
		return 1 << 62
	}
	return id.Int64
}

func (c *cutover) state(key string) string {
	var s string
	if err := c.root.QueryRow("SELECT state FROM refund_jobs WHERE operation_key = ?", key).Scan(&s); err != nil {
		c.t.Fatal(err)
	}
	return s
}

func (c *cutover) id(key string) int64 {
	var id int64
	if err := c.root.QueryRow("SELECT id FROM refund_jobs WHERE operation_key = ?", key).Scan(&id); err != nil {
		c.t.Fatal(err)
	}
	return id
}

type teamRow struct {
	payment, currency string
	amount            int64
	note              sql.NullString
	flag              int
	created           time.Time
}

// teamColumns reads the team's own columns of every row.
func (c *cutover) teamColumns() map[int64]teamRow {
	rows, err := c.root.Query("SELECT id, payment_id, currency, amount_cents, merchant_note, legacy_flag, created FROM refund_jobs")
	if err != nil {
		c.t.Fatal(err)
	}
	defer rows.Close()
	out := map[int64]teamRow{}
	for rows.Next() {
		var id int64
		var r teamRow
		var payment, currency sql.NullString
		var amount sql.NullInt64
		var created sql.NullTime
		if err := rows.Scan(&id, &payment, &currency, &amount, &r.note, &r.flag, &created); err != nil {
			c.t.Fatal(err)
		}
		r.payment, r.currency, r.amount, r.created = payment.String, currency.String, amount.Int64, created.Time
		out[id] = r
	}
	return out
}

func (c *cutover) refundd(args ...string) error {
	c.out.Reset()
	return run(context.Background(), args, &c.out)
}

func (c *cutover) refunddOut(args ...string) string {
	c.t.Helper()
	if err := c.refundd(args...); err != nil {
		c.t.Fatalf("refundd %s: %v\n%s", strings.Join(args, " "), err, c.out.String())
	}
	return c.out.String()
}

type wroteBack struct {
	job worker.Job
	err error
}

// fencedWorker starts one of fencekit's worker processes, with a pool of
// its own on the application's account.
func (c *cutover) fencedWorker(name string) *worker.Client {
	w, err := worker.New(worker.Config{
		DB:              c.appDB(),
		Provider:        c.srv.Client(),
		Workers:         4,
		Lease:           30 * time.Second,
		ScanInterval:    10 * time.Millisecond,
		ProviderTimeout: 5 * time.Second,
		RetryDelay:      time.Microsecond,
		LagPoll:         time.Microsecond,
		PendingDelay:    time.Microsecond,
		BudgetRate:      10_000,
		BudgetBurst:     10_000,
		WebhookSecret:   []byte("whsec_cutover"),
		Logger:          slog.New(slog.NewTextHandler(io.Discard, nil)).With("worker", name),
		Hooks: worker.Hooks{
			WroteBack: func(j worker.Job, err error) { c.wrote <- wroteBack{j, err} },
		},
	})
	if err != nil {
		c.t.Fatal(err)
	}
	if err := w.Start(c.t.Context()); err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = w.StopAndCancel(ctx)
	})
	return w
}

// await returns the fenced workers' next write-back of key.
func (c *cutover) await(key string) wroteBack {
	c.t.Helper()
	timeout := time.After(time.Minute)
	for {
		select {
		case w := <-c.wrote:
			if w.job.OperationKey == key {
				return w
			}
		case <-timeout:
			c.t.Fatalf("no write-back of %s within a minute", key)
		}
	}
}

// awaitSettled waits for a successful write-back of each of keys.
func (c *cutover) awaitSettled(keys []string) {
	c.t.Helper()
	want := map[string]bool{}
	for _, k := range keys {
		want[k] = true
	}
	timeout := time.After(time.Minute)
	for len(want) > 0 {
		select {
		case w := <-c.wrote:
			if w.err == nil && w.job.To == "succeeded" {
				delete(want, w.job.OperationKey)
			}
		case <-timeout:
			c.t.Fatalf("no successful write-back of %v within a minute", want)
		}
	}
}
