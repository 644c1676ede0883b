// Command adoptbench measures `refundd adopt apply` on a live legacy table:
// it creates a legacy refund_jobs with -rows rows on the local server
// (FENCEKIT_TEST_DSN, default root@tcp(127.0.0.1:3306)/), keeps -writers
// legacy writers updating random rows throughout (autocommit UPDATEs that
// declare no attempt, as a legacy service does), runs adopt apply, and
// prints per step its duration and how long the legacy writes that started
// during it took: p50, p99 and max (the time a write waited for adopt's
// locks, plus its own few hundred microseconds).
//
//	go run ./internal/cmd/adoptbench -rows 1000000
//
// It is a measurement, not a test: the figures go in docs/adopting.md.
package main

import (
	"context"
	"database/sql"
	"flag"
	"fmt"
	"log"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	_ "github.com/go-sql-driver/mysql"

	"github.com/fencekit/fencekit/internal/adopt"
	"github.com/fencekit/fencekit/internal/devdb"
)

const legacyTable = "CREATE TABLE refund_jobs (" +
	"id INT NOT NULL AUTO_INCREMENT, operation_key VARCHAR(64) NOT NULL, payment_ref VARCHAR(128) NOT NULL, " +
	"amount_minor BIGINT NOT NULL, currency CHAR(3) NOT NULL, attempt INT NOT NULL DEFAULT 0, " +
	"state VARCHAR(32) NOT NULL DEFAULT 'pending', lease_until DATETIME NULL, next_action VARCHAR(16) NOT NULL DEFAULT 'refund', " +
	"provider_refund_id VARCHAR(255) NULL, merchant_note TEXT NULL, legacy_flag INT NOT NULL DEFAULT 0, " +
	"PRIMARY KEY (id), KEY team_state (state)) CHARSET utf8mb4 COLLATE utf8mb4_bin"

var teamStates = []string{"pending", "processing", "done", "error", "review"}

type write struct {
	start time.Time
	took  time.Duration
	err   error
}

func main() {
	rows := flag.Int("rows", 1000000, "rows in the legacy table")
	writers := flag.Int("writers", 4, "legacy writers updating random rows throughout")
	batch := flag.Int("batch", adopt.DefaultBatchSize, "adopt's batch size")
	keep := flag.Bool("keep", false, "keep the database afterwards")
	blocking := flag.Bool("blocking-copy", false, "adopt's -blocking-copy: type changes with ALGORITHM=COPY, LOCK=SHARED (the figures before the online copy)")
	flag.Parse()
	log.SetFlags(0)
	ctx := context.Background()
	cfg, err := devdb.ServerConfig()
	if err != nil {
		log.Fatal(err)
	}
	name, drop, err := devdb.Create(ctx, cfg, "adoptbench")
	if err != nil {
		log.Fatal(err)
	}
	if !*keep {
		defer func() { _ = drop(context.Background()) }()
	}
	c := cfg.Clone()
	c.DBName, c.ParseTime = name, true
	db, err := sql.Open("mysql", c.FormatDSN())
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	var version string
	_ = db.QueryRow("SELECT VERSION()").Scan(&version)
	if _, err := db.Exec(legacyTable); err != nil {
		log.Fatal(err)
	}
	start := time.Now()
	if err := fill(db, *rows); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("adoptbench: %s on %s: %d legacy rows written in %s; %d legacy writers; batches of %d ids\n",
		name, version, *rows, time.Since(start).Round(time.Millisecond), *writers, *batch)

	var (
		stop    atomic.Bool
		wg      sync.WaitGroup
		mu      sync.Mutex
		history []write
	)
	for w := range *writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := db.Conn(ctx)
			if err != nil {
				log.Fatal(err)
			}
			defer conn.Close()
			r := rand.New(rand.NewPCG(uint64(w), 1))
			var mine []write
			for n := 0; !stop.Load(); n++ {
				id := 1 + r.IntN(*rows)
				t0 := time.Now()
				//fencelint:allow a legacy writer's unfenced write, the load adopt runs under
				_, err := conn.ExecContext(ctx, "UPDATE refund_jobs SET legacy_flag = legacy_flag + 1, merchant_note = ? WHERE id = ?", fmt.Sprintf("writer %d write %d", w, n), id)
				mine = append(mine, write{start: t0, took: time.Since(t0), err: err})
			}
			mu.Lock()
			history = append(history, mine...)
			mu.Unlock()
		}()
	}

	type span struct {
		name       string
		start, end time.Time
	}
	var spans []span
	o := adopt.Options{
		States:       map[string]string{"pending": "ready", "processing": "running", "done": "succeeded", "error": "failed", "review": "manual_review"},
		Actions:      map[string]string{"check": "reconcile"},
		BatchSize:    *batch,
		BlockingCopy: *blocking,
		Hooks: adopt.Hooks{
			ShadowCopy: func(s string, err error) {
				fmt.Printf("adoptbench: %s: the server refused the online ALTER (%v): shadow copy\n", s, err)
			},
			BeforeStep: func(s string) { spans = append(spans, span{name: s, start: time.Now()}) },
			AfterStep:  func(string) { spans[len(spans)-1].end = time.Now() },
		},
	}
	time.Sleep(time.Second) // a baseline of legacy writes before adopt starts
	applyStart := time.Now()
	_, err = adopt.Apply(ctx, db, o)
	applyEnd := time.Now()
	time.Sleep(time.Second)
	stop.Store(true)
	wg.Wait()
	if err != nil {
		log.Fatalf("adopt apply: %v", err)
	}
	spans = append([]span{{name: "(before adopt)", start: applyStart.Add(-time.Second), end: applyStart},
		{name: "(plan: inspect, replay)", start: applyStart, end: spans[0].start}}, spans...)
	spans = append(spans, span{name: "(after adopt)", start: applyEnd, end: applyEnd.Add(time.Second)})

	var errs []string
	tw := tabwriter.NewWriter(os.Stdout, 0, 2, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "step\tduration\twrites\tfailed\tp50\tp99\tmax\t")
	for _, s := range spans {
		var took []time.Duration
		failed := 0
		for _, w := range history {
			if !w.start.Before(s.start) && w.start.Before(s.end) {
				took = append(took, w.took)
				if w.err != nil {
					if failed == 0 {
						errs = append(errs, fmt.Sprintf("%s: %v", s.name, w.err))
					}
					failed++
				}
			}
		}
		slices.Sort(took)
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\t%s\t\n", s.name, s.end.Sub(s.start).Round(time.Millisecond), len(took), failed,
			pct(took, 0.50), pct(took, 0.99), pct(took, 1))
	}
	_ = tw.Flush()
	fmt.Printf("adoptbench: adopt apply took %s in all\n", applyEnd.Sub(applyStart).Round(time.Millisecond))
	for _, e := range errs {
		fmt.Println("adoptbench: a failed legacy write:", e)
	}
	// Every write that succeeded added 1 to a row's legacy_flag (0 when
	// the rows were written): none was lost, by the copy nor the swap.
	ok := 0
	for _, w := range history {
		if w.err == nil {
			ok++
		}
	}
	var sum int64
	if err := db.QueryRow("SELECT COALESCE(SUM(legacy_flag), 0) FROM refund_jobs").Scan(&sum); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("adoptbench: %d legacy writes succeeded; the rows' legacy_flag adds up to %d (lost: %d)\n", ok, sum, int64(ok)-sum)
}

func pct(d []time.Duration, p float64) string {
	if len(d) == 0 {
		return "-"
	}
	i := int(float64(len(d)-1) * p)
	return d[i].Round(10 * time.Microsecond).String()
}

// fill writes n legacy rows, every team state and both actions, 5000 per
// statement.
func fill(db *sql.DB, n int) error {
	const per = 5000
	for lo := 1; lo <= n; lo += per {
		var b strings.Builder
		b.WriteString("INSERT INTO refund_jobs (operation_key, payment_ref, amount_minor, currency, attempt, state, next_action, merchant_note) VALUES ")
		for i := lo; i < lo+per && i <= n; i++ {
			if i > lo {
				b.WriteString(", ")
			}
			action := "refund"
			if i%7 == 0 {
				action = "check"
			}
			fmt.Fprintf(&b, "('key-%d', 'pay-%d', %d, 'EUR', %d, '%s', '%s', 'note %d')", i, i, 100+i%1000, i%3, teamStates[i%len(teamStates)], action, i)
		}
		if _, err := db.Exec(b.String()); err != nil {
			return fmt.Errorf("fill: %w", err)
		}
	}
	return nil
}
