package main

import (
	"bytes"
	"context"
	"database/sql"
	"flag"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fencekit/fencekit/fencedwrite"
	"github.com/fencekit/fencekit/provider"
	"github.com/fencekit/fencekit/provider/fakeprovider"
)

// refundd run serves a real queue: it claims and settles an enqueued refund,
// accepts the provider's signed webhooks (and refuses unsigned ones), serves
// /metrics and /healthz, and on SIGTERM (its context) stops claiming and
// lets the call in flight write back.
func TestRunServesTheQueue(t *testing.T) {
	dsn := demoDSN(t)
	var out bytes.Buffer
	if err := run(context.Background(), []string{"migrate", "-create", "-dsn", dsn}, &out); err != nil {
		t.Fatal(err)
	}
	const secret = "whsec_run_test"
	t.Setenv("FENCEKIT_WEBHOOK_SECRET", secret)
	srv := fakeprovider.Start()
	defer srv.Close()
	hold := make(chan struct{})
	srv.AddPayment("pay-run-1", 5000, "EUR")
	srv.Script("run-1", fakeprovider.Fault{Hold: hold})

	var f runFlags
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	f.register(fs)
	if err := fs.Parse([]string{"-listen", "127.0.0.1:0", "-scan", "10ms", "-provider-url", srv.URL()}); err != nil {
		t.Fatal(err)
	}
	addr := make(chan string, 1)
	f.dsn, f.listening = dsn, func(a string) { addr <- a }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- runWorker(ctx, f, io.Discard) }()
	var base string
	select {
	case a := <-addr:
		base = "http://" + a
	case <-time.After(time.Minute):
		t.Fatal("refundd run did not listen")
	}

	if err := run(context.Background(), []string{"enqueue", "-dsn", dsn, "-key", "run-1", "-payment", "pay-run-1", "-amount", "1250", "-currency", "EUR"}, &out); err != nil {
		t.Fatal(err)
	}
	select {
	case <-srv.Executed("run-1", 1):
	case <-time.After(time.Minute):
		t.Fatal("refundd run never sent the refund")
	}
	get := func(path string) (int, string) {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, body := get("/healthz"); code != http.StatusOK || !strings.Contains(body, "ok") {
		t.Fatalf("/healthz: %d %s", code, body)
	}
	if code, body := get("/metrics"); code != http.StatusOK || !strings.Contains(body, `fencekit_provider_calls_total{kind="send"} 1`) {
		t.Fatalf("/metrics: %d %s", code, body)
	}
	hook := []byte(`{"id":"evt_run","type":"refund.pending","created":1,"refund":{"id":"re_x","payment":"pay-run-1","amount":1250,"currency":"EUR","reference":"run-1","status":"pending"}}`)
	post := func(header string) int {
		req, _ := http.NewRequest(http.MethodPost, base+"/webhooks", bytes.NewReader(hook))
		if header != "" {
			req.Header.Set(provider.WebhookSignatureHeader, header)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post(""); code != http.StatusUnauthorized {
		t.Fatalf("unsigned webhook: %d", code)
	}
	if code := post(provider.SignWebhook([]byte(secret), time.Now(), hook)); code != http.StatusOK {
		t.Fatalf("signed webhook: %d", code)
	}

	// SIGTERM while the call is in flight: run stops claiming and waits;
	// the job writes back once the provider answers.
	cancel()
	close(hold)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("refundd run did not stop")
	}
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var state, ledgerStatus string
	if err := db.QueryRow("SELECT j.state, r.status FROM refund_jobs j JOIN refunds r USING (operation_key) WHERE j.operation_key = 'run-1'").Scan(&state, &ledgerStatus); err != nil {
		t.Fatal(err)
	}
	if state != "succeeded" || ledgerStatus != "refunded" || srv.Executions("run-1") != 1 {
		t.Fatalf("after refundd run: job %s, ledger %s, %d executions", state, ledgerStatus, srv.Executions("run-1"))
	}
}

// The operators' commands: the manual-review queue, one job with its
// evidence, and a resolution fenced on the attempt read.
func TestOperatorCommands(t *testing.T) {
	dsn := demoDSN(t)
	var out bytes.Buffer
	must := func(args ...string) string {
		t.Helper()
		out.Reset()
		if err := run(context.Background(), append(args[:1:1], append([]string{"-dsn", dsn}, args[1:]...)...), &out); err != nil {
			t.Fatalf("refundd %v: %v\n%s", args, err, out.String())
		}
		return out.String()
	}
	must("migrate", "-create")
	must("enqueue", "-key", "op-1", "-payment", "pay-1", "-amount", "500", "-currency", "EUR")
	if again := must("enqueue", "-key", "op-1", "-payment", "pay-1", "-amount", "500", "-currency", "EUR"); !strings.Contains(again, "nothing to do") {
		t.Fatalf("a second enqueue: %s", again)
	}
	c, err := openClient(dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	l, err := c.RefundJob.Claim(context.Background(), 1, fencedwriteOpts)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.RefundJob.Apply(context.Background(), l.ManualReview("not found after the lookup lag", "lookup by reference: empty", ""), nil); err != nil {
		t.Fatal(err)
	}
	if q := must("jobs", "-state", "manual_review"); !strings.Contains(q, "op-1") || !strings.Contains(q, "not found after the lookup lag") {
		t.Fatalf("the manual-review queue:\n%s", q)
	}
	if one := must("jobs", "-id", "1"); !strings.Contains(one, "manual_review at attempt 1") || !strings.Contains(one, "ledger       requested") {
		t.Fatalf("job 1:\n%s", one)
	}
	out.Reset()
	if err := run(context.Background(), []string{"resolve", "-dsn", dsn, "-id", "1", "-as", "reconcile"}, &out); err == nil || !strings.Contains(err.Error(), "-evidence is required") {
		t.Fatalf("a resolution without evidence: %v", err)
	}
	if r := must("resolve", "-id", "1", "-as", "reconcile", "-evidence", "provider support: ask again"); !strings.Contains(r, "resolved as reconcile at attempt 2") {
		t.Fatalf("resolve: %s", r)
	}
	if one := must("jobs", "-id", "1"); !strings.Contains(one, "ready at attempt 2, next reconcile") {
		t.Fatalf("job 1 after the resolution:\n%s", one)
	}
}

var fencedwriteOpts = fencedwrite.ClaimOptions{}
