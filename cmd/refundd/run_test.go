package main

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fencekit/fencekit/fencedwrite"
	"github.com/fencekit/fencekit/provider"
	"github.com/fencekit/fencekit/provider/fakeprovider"
	"github.com/fencekit/fencekit/worker"
)

// refundd run serves a real queue: it claims and settles an enqueued refund,
// accepts the provider's signed webhooks (and refuses unsigned ones) on its
// webhook listener, serves /metrics and /healthz on the operators' listener
// (and neither serves the other's paths), and on SIGTERM (its context) stops
// claiming and lets the call in flight write back.
func TestRunServesTheQueue(t *testing.T) {
	dsn := migratedDSN(t)
	var out bytes.Buffer
	const secret = "whsec_run_test"
	t.Setenv("FENCEKIT_WEBHOOK_SECRET", secret)
	srv := fakeprovider.Start()
	defer srv.Close()
	hold := make(chan struct{})
	srv.AddPayment("pay-run-1", 5000, "EUR")
	srv.Script("run-1", fakeprovider.Fault{Hold: hold})

	r := startRun(t, dsn, "-scan", "10ms", "-provider-url", srv.URL())
	if err := run(context.Background(), []string{"enqueue", "-dsn", dsn, "-key", "run-1", "-payment", "pay-run-1", "-amount", "12.50", "-currency", "EUR"}, &out); err != nil {
		t.Fatal(err)
	}
	select {
	case <-srv.Executed("run-1", 1):
	case <-time.After(time.Minute):
		t.Fatal("refundd run never sent the refund")
	}
	if code, body := get(t, r.operator, "/healthz"); code != http.StatusOK || !strings.Contains(body, "ok") {
		t.Fatalf("/healthz: %d %s", code, body)
	}
	if code, body := get(t, r.operator, "/metrics"); code != http.StatusOK || !strings.Contains(body, `fencekit_provider_calls_total{kind="send"} 1`) ||
		!strings.Contains(body, "fencekit_reconciles_due") {
		t.Fatalf("/metrics: %d %s", code, body)
	}
	for _, path := range []string{"/metrics", "/healthz"} {
		if code, _ := get(t, r.webhooks, path); code != http.StatusNotFound {
			t.Errorf("%s on the webhook listener: %d, want 404", path, code)
		}
	}
	hook := []byte(`{"id":"evt_run","type":"refund.pending","created":1,"refund":{"id":"re_x","payment":"pay-run-1","amount":1250,"currency":"EUR","reference":"run-1","status":"pending"}}`)
	if code := post(t, r.operator, hook, provider.SignWebhook([]byte(secret), time.Now(), hook)); code != http.StatusNotFound {
		t.Errorf("/webhooks on the operators' listener: %d, want 404", code)
	}
	if code := post(t, r.webhooks, hook, ""); code != http.StatusUnauthorized {
		t.Fatalf("unsigned webhook: %d", code)
	}
	if code := post(t, r.webhooks, hook, provider.SignWebhook([]byte(secret), time.Now(), hook)); code != http.StatusOK {
		t.Fatalf("signed webhook: %d", code)
	}
	// An oversize webhook, however well signed, is refused with 413 and
	// recorded nowhere.
	big := []byte(`{"id":"evt_big","type":"refund.succeeded","created":1,"refund":{"id":"re_big","payment":"p","amount":1,"currency":"EUR","reference":"big","status":"succeeded"}}`)
	big = append(big, bytes.Repeat([]byte(" "), worker.MaxWebhookBody+1-len(big))...)
	if code := post(t, r.webhooks, big, provider.SignWebhook([]byte(secret), time.Now(), big)); code != http.StatusRequestEntityTooLarge {
		t.Fatalf("a webhook of %d bytes: %d, want 413", len(big), code)
	}

	// SIGTERM while the call is in flight: run stops claiming and waits;
	// the job writes back once the provider answers.
	r.cancel()
	close(hold)
	if err := r.wait(); err != nil {
		t.Fatal(err)
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
	var n int
	if err := db.QueryRow("SELECT COUNT(*) FROM refund_observations WHERE operation_key = 'big'").Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d observations of the oversize webhook (%v), want none", n, err)
	}
}

// Every listener has a deadline on each phase of a request: a client that
// sends its headers, or its body, too slowly is cut; a webhook body over the
// limit is refused with 413 and recorded nowhere.
func TestRunServersBoundEveryRequest(t *testing.T) {
	dsn := migratedDSN(t)
	t.Setenv("FENCEKIT_WEBHOOK_SECRET", "whsec_slow")
	srv := fakeprovider.Start()
	defer srv.Close()
	r := startRun(t, dsn, "-provider-url", srv.URL(), "-http-timeout", "200ms")
	for _, tc := range []struct{ name, addr, sent string }{
		{"a slow header on the webhook listener", r.webhooks, "POST /webhooks HTTP/1.1\r\nHost: x\r\n"},
		{"a slow body on the webhook listener", r.webhooks, "POST /webhooks HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"},
		{"a slow header on the operators' listener", r.operator, "GET /metrics HTTP/1.1\r\nHost: x\r\n"},
	} {
		t.Run(tc.name+" is cut by the timeout", func(t *testing.T) {
			conn, err := net.Dial("tcp", tc.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if _, err := io.WriteString(conn, tc.sent); err != nil {
				t.Fatal(err)
			}
			// The deadline is the test's safety net, not what it waits
			// for: the server's timeout closes the connection long before.
			_ = conn.SetReadDeadline(time.Now().Add(time.Minute))
			answer, err := io.ReadAll(conn)
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatalf("the server still held the connection after a minute (read %q)", answer)
			}
		})
	}
}

// refundd run refuses to start, naming the flag, without a webhook secret
// (unless -no-webhooks), with a provider URL that is not an absolute
// http(s) URL, with a -holder the attempts log would refuse, and with another outbound budget than the fleet's (unless
// -change-budget, which it logs).
func TestRunRefusesToStart(t *testing.T) {
	dsn := migratedDSN(t)
	srv := fakeprovider.Start()
	defer srv.Close()
	refused := func(t *testing.T, want []string, args ...string) {
		t.Helper()
		var f runFlags
		fs := flag.NewFlagSet("run", flag.ContinueOnError)
		f.register(fs)
		if err := fs.Parse(append([]string{"-listen", "127.0.0.1:0", "-operator-listen", "127.0.0.1:0"}, args...)); err != nil {
			t.Fatal(err)
		}
		f.dsn = dsn
		f.listening = func(string, string) { t.Error("refundd run started before refusing") }
		err := runWorker(t.Context(), f, io.Discard)
		if err == nil {
			t.Fatalf("refundd run %v started", args)
		}
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("refundd run %v: %v; want it to name %s", args, err, w)
			}
		}
	}
	t.Run("without a webhook secret", func(t *testing.T) {
		t.Setenv("FENCEKIT_WEBHOOK_SECRET", "")
		refused(t, []string{"$FENCEKIT_WEBHOOK_SECRET", "-no-webhooks"}, "-provider-url", srv.URL())
	})
	for _, u := range []string{"", "psp.example/v1", "/v1", "ftp://psp.example/v1", "http://", "https://psp.example/v1?key=1", "https://user:pw@psp.example", "mailto:psp@example"} {
		t.Run(fmt.Sprintf("with the provider URL %q", u), func(t *testing.T) {
			t.Setenv("FENCEKIT_WEBHOOK_SECRET", "whsec")
			refused(t, []string{"-provider-url"}, "-provider-url", u)
		})
	}
	for _, l := range []string{"", "reference,merchant", "by-key"} {
		t.Run(fmt.Sprintf("with the provider lookups %q", l), func(t *testing.T) {
			t.Setenv("FENCEKIT_WEBHOOK_SECRET", "whsec")
			refused(t, []string{"-provider-lookups"}, "-provider-url", srv.URL(), "-provider-lookups", l)
		})
	}
	for _, h := range []string{"", "worker-a/1\nworker-b/2", "w\x1b[2J", strings.Repeat("h", 256)} {
		t.Run(fmt.Sprintf("with the holder %.20q", h), func(t *testing.T) {
			t.Setenv("FENCEKIT_WEBHOOK_SECRET", "whsec")
			refused(t, []string{"-holder"}, "-provider-url", srv.URL(), "-holder", h)
		})
	}
	for _, tc := range []struct {
		name string
		want []string
		args []string
	}{
		{"with an unknown dispatch", []string{"-dispatch", `"sqs"`}, []string{"-dispatch", "sqs"}},
		{"with Kafka's dispatch and no brokers", []string{"-dispatch kafka", "-kafka-brokers"}, []string{"-dispatch", "kafka"}},
		{"with Kafka's dispatch and a broker that is not host:port", []string{"-kafka-brokers", "kafka.Config.Brokers", "kafka:nine"}, []string{"-dispatch", "kafka", "-kafka-brokers", "kafka:nine"}},
		{"with Kafka's brokers and RabbitMQ's dispatch", []string{"-kafka-brokers", "-dispatch kafka"}, []string{"-dispatch", "rabbitmq", "-amqp-url", "amqp://127.0.0.1/", "-kafka-brokers", "127.0.0.1:9092"}},
		{"with the broker's dispatch and no broker", []string{"-dispatch rabbitmq", "-amqp-url"}, []string{"-dispatch", "rabbitmq"}},
		{"with the broker's dispatch and a URL that is not AMQP's", []string{"-amqp-url", "rabbitmq.Config.URL", "xxxxx"}, []string{"-dispatch", "rabbitmq", "-amqp-url", "http://u:secret@host/"}},
		{"with a broker URL and the scan's dispatch", []string{"-amqp-url", "-dispatch rabbitmq"}, []string{"-amqp-url", "amqp://127.0.0.1/"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("FENCEKIT_WEBHOOK_SECRET", "whsec")
			t.Setenv("FENCEKIT_AMQP_URL", "")
			t.Setenv("FENCEKIT_KAFKA_BROKERS", "")
			refused(t, tc.want, append([]string{"-provider-url", srv.URL()}, tc.args...)...)
		})
	}
	t.Run("with another budget rate than the fleet's", func(t *testing.T) {
		t.Setenv("FENCEKIT_WEBHOOK_SECRET", "whsec")
		r := startRun(t, dsn, "-provider-url", srv.URL(), "-budget-rate", "50")
		r.stop(t)
		var f runFlags
		fs := flag.NewFlagSet("run", flag.ContinueOnError)
		f.register(fs)
		if err := fs.Parse([]string{"-listen", "127.0.0.1:0", "-operator-listen", "127.0.0.1:0", "-provider-url", srv.URL(), "-budget-rate", "7"}); err != nil {
			t.Fatal(err)
		}
		f.dsn = dsn
		err := runWorker(t.Context(), f, io.Discard)
		for _, w := range []string{"-budget-rate", "-change-budget", "7/s", "50/s"} {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("a process with -budget-rate 7 on a fleet at 50: %v; want it refused naming %s", err, w)
			}
		}
		var logged syncBuffer
		r = startRunLogging(t, dsn, &logged, "-provider-url", srv.URL(), "-budget-rate", "7", "-change-budget")
		r.stop(t)
		if !strings.Contains(logged.String(), "changed the fleet's outbound budget") || !strings.Contains(logged.String(), `"from_rate":50`) {
			t.Fatalf("-change-budget did not log the change:\n%s", logged.String())
		}
	})
	t.Run("with -no-webhooks, no secret is needed and no webhook listener opens", func(t *testing.T) {
		t.Setenv("FENCEKIT_WEBHOOK_SECRET", "")
		r := startRun(t, dsn, "-provider-url", srv.URL(), "-budget-rate", "7", "-no-webhooks")
		if r.webhooks != "" {
			t.Errorf("a webhook listener opened at %s", r.webhooks)
		}
		if code, _ := get(t, r.operator, "/healthz"); code != http.StatusOK {
			t.Errorf("/healthz: %d", code)
		}
		r.stop(t)
	})
}

// migratedDSN is a fresh database with the migrations applied.
func migratedDSN(t *testing.T) string {
	t.Helper()
	dsn := demoDSN(t)
	if err := run(context.Background(), []string{"migrate", "-create", "-dsn", dsn}, io.Discard); err != nil {
		t.Fatal(err)
	}
	return dsn
}

// running is a refundd run started by a test.
type running struct {
	webhooks, operator string // host:port; webhooks is empty with -no-webhooks
	cancel             context.CancelFunc
	done               chan error
}

// startRun starts refundd run on dsn with args and both listeners on free
// ports, and waits until it serves; it is stopped when the test ends.
func startRun(t *testing.T, dsn string, args ...string) *running {
	t.Helper()
	return startRunLogging(t, dsn, io.Discard, args...)
}

func startRunLogging(t *testing.T, dsn string, logOut io.Writer, args ...string) *running {
	t.Helper()
	var f runFlags
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	f.register(fs)
	if err := fs.Parse(append([]string{"-listen", "127.0.0.1:0", "-operator-listen", "127.0.0.1:0"}, args...)); err != nil {
		t.Fatal(err)
	}
	type addrs struct{ webhooks, operator string }
	listening := make(chan addrs, 1)
	f.dsn, f.listening = dsn, func(w, o string) { listening <- addrs{w, o} }
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- runWorker(ctx, f, logOut) }()
	t.Cleanup(func() { r.stop(t) })
	select {
	case a := <-listening:
		r.webhooks, r.operator = a.webhooks, a.operator
	case err := <-r.done:
		r.done <- err
		t.Fatalf("refundd run did not listen: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("refundd run did not listen")
	}
	return r
}

// wait waits for refundd run to return.
func (r *running) wait() error {
	select {
	case err := <-r.done:
		r.done <- err
		return err
	case <-time.After(time.Minute):
		return errors.New("refundd run did not stop")
	}
}

// stop stops refundd run (SIGTERM) and waits for it.
func (r *running) stop(t *testing.T) {
	t.Helper()
	r.cancel()
	if err := r.wait(); err != nil {
		t.Fatal(err)
	}
}

func get(t *testing.T, addr, path string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func post(t *testing.T, addr string, body []byte, signature string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/webhooks", bytes.NewReader(body))
	if signature != "" {
		req.Header.Set(provider.WebhookSignatureHeader, signature)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// syncBuffer is a log destination a test reads while refundd run writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

var fencedwriteOpts = fencedwrite.ClaimOptions{}

// -provider-lookups declares the lookups the provider offers, and nothing
// else: a reconcile asks only those.
func TestRunDeclaresTheProvidersLookups(t *testing.T) {
	for lookups, want := range map[string]provider.Capabilities{
		"reference,payment,refund-id": {LookupByReference: true, ListByPayment: true, LookupByRefundID: true},
		"payment":                     {ListByPayment: true},
		" refund-id , reference":      {LookupByRefundID: true, LookupByReference: true},
	} {
		got, err := providerConfig{providerLookups: lookups}.capabilities()
		if err != nil || got != want {
			t.Errorf("-provider-lookups %q: %+v, %v; want %+v", lookups, got, err, want)
		}
	}
}
