package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fencekit/fencekit/fencedwrite"
	"github.com/fencekit/fencekit/internal/devdb"
	"github.com/fencekit/fencekit/worker/metrics"
	"github.com/go-sql-driver/mysql"
	"github.com/prometheus/client_golang/prometheus"
)

// asRefundd, in the environment, makes the test binary run refundd's main
// with the test binary's arguments: the tests run refundd as a user would,
// without building it.
const asRefundd = "FENCEKIT_TEST_AS_REFUNDD"

func TestMain(m *testing.M) {
	if os.Getenv(asRefundd) == "1" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// refundd runs refundd's main with args, and returns what it printed on
// stdout and stderr, and its error.
func refundd(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), asRefundd+"=1")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// Production commands carry no chaos flag: the chaos harness runs its fleet
// through its own hidden command (chaos.AgentCommand), which refundd's usage
// does not list.
func TestRunCarriesNoChaosFlag(t *testing.T) {
	t.Parallel()
	help, _ := refundd(t, "run", "-h")
	if !strings.Contains(help, "-provider-url") {
		t.Fatalf("refundd run -h does not list run's flags:\n%s", help)
	}
	if strings.Contains(strings.ToLower(help), "chaos") {
		t.Errorf("refundd run -h lists a chaos flag:\n%s", help)
	}
	usage, _ := refundd(t, "help")
	if !strings.Contains(usage, "refundd chaos") || strings.Contains(usage, "chaos-agent") {
		t.Errorf("refundd's usage should list chaos and not its hidden agent command:\n%s", usage)
	}
	agent, _ := refundd(t, "chaos-agent", "-h")
	for _, want := range []string{"-chaos-history", "-chaos-control", "-chaos-proc", "-provider-url"} {
		if !strings.Contains(agent, want) {
			t.Errorf("refundd chaos-agent -h lacks %s:\n%s", want, agent)
		}
	}
}

// refundd run's /metrics shows every metric of the worker before any job
// ran, the labelled counters at 0 with snake_case label values.
func TestRunExportsEveryMetricBeforeAnyJob(t *testing.T) {
	t.Parallel()
	r := startRun(t, migratedDSN(t), "-no-webhooks", "-provider-url", "http://127.0.0.1:9/v1")
	code, body := get(t, r.operator, "/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d %s", code, body)
	}
	fams, err := func() ([]string, error) {
		reg := prometheus.NewRegistry()
		metrics.New(reg)
		got, err := reg.Gather()
		names := make([]string, len(got))
		for i, f := range got {
			names[i] = f.GetName()
		}
		return names, err
	}()
	if err != nil || len(fams) < 13 {
		t.Fatalf("metrics.New registers %d metrics (%v): %v", len(fams), fams, err)
	}
	for _, name := range fams {
		if !strings.Contains(body, "\n"+name+" 0\n") && !strings.Contains(body, "\n"+name+"{") {
			t.Errorf("/metrics lacks %s before any job", name)
		}
	}
	for _, want := range []string{
		`fencekit_stale_writes_rejected_total{transition="manual_review"} 0`,
		`fencekit_provider_calls_total{kind="reconcile"} 0`,
		`fencekit_takeovers_total 0`,
		`fencekit_claims_total{action="refund"} 0`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// refundd run's log lines write durations as people read them ("30s"), not
// as nanoseconds.
func TestRunLogsDurationsReadably(t *testing.T) {
	t.Parallel()
	logs := &syncBuffer{}
	r := startRunLogging(t, migratedDSN(t), logs, "-no-webhooks", "-provider-url", "http://127.0.0.1:9/v1", "-lease", "2m30s", "-stop-grace", "1500ms")
	r.stop(t)
	lines := map[string]map[string]any{}
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var l map[string]any
		if err := json.Unmarshal([]byte(line), &l); err != nil {
			t.Fatalf("a log line is not JSON: %v: %s", err, line)
		}
		lines[fmt.Sprint(l["msg"])] = l
	}
	running, stopping := lines["refundd running"], lines["stopping: no more claims; calls in flight finish or are cancelled"]
	if running == nil || stopping == nil {
		t.Fatalf("no start or stop line in the log:\n%s", logs.String())
	}
	if running["lease"] != "2m30s" {
		t.Errorf(`the start line's lease is %#v, want "2m30s": %v`, running["lease"], running)
	}
	if stopping["grace"] != "1.5s" {
		t.Errorf(`the stop line's grace is %#v, want "1.5s": %v`, stopping["grace"], stopping)
	}
}

// freeAddr is a local address nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// signalWriter is a log destination that closes seen once a line contains
// want.
type signalWriter struct {
	syncBuffer
	want string
	seen chan struct{}
	once sync.Once
}

func (w *signalWriter) Write(p []byte) (int, error) {
	n, err := w.syncBuffer.Write(p)
	if strings.Contains(w.syncBuffer.String(), w.want) {
		w.once.Do(func() { close(w.seen) })
	}
	return n, err
}

// refundd run started while nothing answers at the database's address waits
// for it, retrying with backoff, and says so in one line naming the address,
// the account and the database, never the password; when its context ends
// it returns an error saying what it waited for.
func TestRunWaitsForAnUnreachableDatabase(t *testing.T) {
	t.Parallel()
	addr := freeAddr(t)
	dsn := "fencekit_app:s3cret-pw@tcp(" + addr + ")/payments"
	const waiting = "waiting for the database"

	t.Run("several attempts, one line", func(t *testing.T) {
		db, err := fencedwrite.OpenDB(dsn, fencedwrite.DSNOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		logs := &syncBuffer{}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var attempts []error
		err = waitForDatabase(ctx, db, dsn, newLogger(logs), func(n int, err error) {
			attempts = append(attempts, err)
			if n == 4 {
				cancel()
			}
		})
		if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), addr) {
			t.Errorf("waitForDatabase: %v, want context.Canceled naming %s", err, addr)
		}
		if len(attempts) != 4 {
			t.Errorf("%d attempts before the context ended, want 4: %v", len(attempts), attempts)
		}
		if n := strings.Count(logs.String(), waiting); n != 1 {
			t.Errorf("%d lines say what it waits for after 4 attempts, want 1:\n%s", n, logs)
		}
		for _, want := range []string{addr, `\"payments\"`, "fencekit_app"} {
			if !strings.Contains(logs.String(), want) {
				t.Errorf("the waiting line does not name %s:\n%s", want, logs)
			}
		}
		if strings.Contains(logs.String()+err.Error(), "s3cret-pw") {
			t.Errorf("the password is in the log or the error:\n%s\n%v", logs, err)
		}
		t.Logf("log:\n%s\nerror: %v", logs, err)
	})

	t.Run("refundd run waits until stopped", func(t *testing.T) {
		var f runFlags
		fs := flag.NewFlagSet("run", flag.ContinueOnError)
		f.register(fs)
		if err := fs.Parse([]string{"-no-webhooks", "-provider-url", "http://127.0.0.1:9/v1", "-operator-listen", "127.0.0.1:0"}); err != nil {
			t.Fatal(err)
		}
		f.dsn = dsn
		logs := &signalWriter{want: waiting, seen: make(chan struct{})}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- runWorker(ctx, f, logs) }()
		select {
		case <-logs.seen:
		case err := <-done:
			t.Fatalf("refundd run returned without waiting: %v\n%s", err, logs.String())
		case <-time.After(time.Minute):
			t.Fatal("refundd run never said it waits for the database")
		}
		cancel()
		err := <-done
		if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "wait for the database") || !strings.Contains(err.Error(), addr) {
			t.Errorf("refundd run: %v, want an error saying it waited for the database at %s", err, addr)
		}
		if n := strings.Count(logs.String(), waiting); n != 1 {
			t.Errorf("%d waiting lines, want 1:\n%s", n, logs.String())
		}
	})
}

// A server that answers with an error is not waited for: a wrong password
// fails at once.
func TestRunDoesNotWaitForAServerThatRefuses(t *testing.T) {
	t.Parallel()
	cfg, err := devdb.ServerConfig()
	if err != nil {
		t.Fatal(err)
	}
	cfg.User, cfg.Passwd = "fencekit_nobody", "wrong-pw"
	dsn := cfg.FormatDSN()
	db, err := fencedwrite.OpenDB(dsn, fencedwrite.DSNOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	logs := &syncBuffer{}
	err = waitForDatabase(context.Background(), db, dsn, newLogger(logs), func(n int, err error) {
		t.Errorf("attempt %d failed with %v and was retried: the server answered", n, err)
	})
	var me *mysql.MySQLError
	// 1045, or MariaDB's 1698 when it judges the account by another plugin:
	// both are the server's refusal.
	if !errors.As(err, &me) || (me.Number != 1045 && me.Number != 1698) {
		t.Errorf("waitForDatabase with a wrong password: %v, want the server's access denied (1045 or 1698)", err)
	}
	if strings.Contains(logs.String(), "waiting for") {
		t.Errorf("it waited for a server that answered:\n%s", logs)
	}
}
