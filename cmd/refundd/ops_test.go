package main

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/fencekit/fencekit/evidence"
	"github.com/fencekit/fencekit/fencedwrite"
	"github.com/fencekit/fencekit/provider"
	"github.com/fencekit/fencekit/provider/fakeprovider"
)

// cli runs refundd commands on one database, as an operator types them.
type cli struct {
	t   *testing.T
	dsn string
}

// must runs args with -dsn and returns what it printed; it fails the test
// on an error.
func (c cli) must(args ...string) string {
	c.t.Helper()
	out, err := c.try(args...)
	if err != nil {
		c.t.Fatalf("refundd %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func (c cli) try(args ...string) (string, error) {
	var out bytes.Buffer
	err := run(context.Background(), append(args[:1:1], append([]string{"-dsn", c.dsn}, args[1:]...)...), &out)
	return out.String(), err
}

// reviewed enqueues key and hands its job to manual review with a reason
// and evidence, as a worker would.
func (c cli) reviewed(key, payment, amount, currency, reason, evidence string) {
	c.t.Helper()
	c.must("enqueue", "-key", key, "-payment", payment, "-amount", amount, "-currency", currency)
	cl, err := openClient(c.dsn)
	if err != nil {
		c.t.Fatal(err)
	}
	defer cl.Close()
	job, err := cl.RefundJob.Query().Only(context.Background())
	if err != nil {
		c.t.Fatal(err)
	}
	l, err := cl.RefundJob.Claim(context.Background(), job.ID, fencedwriteOpts)
	if err != nil {
		c.t.Fatal(err)
	}
	if err := cl.RefundJob.Apply(context.Background(), l.ManualReview(reason, evidence, ""), nil); err != nil {
		c.t.Fatal(err)
	}
}

// The operators' commands: the queue, a job's timeline (the same bytes on
// every run), search, and resolutions through package operator: a forged
// refund id refused naming itself, a verified one settling the job, an
// approval by a second operator, and errors that name the flag.
func TestOperatorCommands(t *testing.T) {
	t.Parallel()
	c := cli{t: t, dsn: migratedDSN(t)}
	fp := fakeprovider.Start()
	t.Cleanup(fp.Close)
	fp.AddPayment("pay-1", 5000, "EUR")
	c.reviewed("op-1", "pay-1", "10.01", "EUR", "not found after the lookup lag", "lookup by reference: empty")

	if again := c.must("enqueue", "-key", "op-1", "-payment", "pay-1", "-amount", "10.01", "-currency", "EUR"); !strings.Contains(again, "nothing to do") {
		t.Fatalf("a second enqueue: %s", again)
	}
	if q := c.must("jobs", "-state", "manual_review"); !strings.Contains(q, "op-1") || !strings.Contains(q, "10.01 EUR") ||
		!strings.Contains(q, "not found after the lookup lag") || !strings.Contains(q, "IN REVIEW SINCE") {
		t.Fatalf("the manual-review queue:\n%s", q)
	}
	one := c.must("jobs", "-id", "1")
	for _, want := range []string{"job 1: 10.01 EUR to pay-1\nUnknown: 10.01 EUR sent ", "in manual review since", "Ledger                     requested",
		"Next                       Check reference op-1 at the provider, then decide.", "what happened", "Refund of 10.01 EUR to payment pay-1 requested (reference op-1)."} {
		if !strings.Contains(one, want) {
			t.Fatalf("job 1 lacks %q:\n%s", want, one)
		}
	}
	for _, args := range [][]string{{"jobs", "-id", "1"}, {"jobs", "-payment", "pay-1"}, {"jobs", "-id", "1", "-json"}} {
		if a, b := c.must(args...), c.must(args...); a != b {
			t.Fatalf("refundd %v printed different output on two runs:\n%s\n%s", args, a, b)
		}
	}
	var view struct {
		ID     int64 `json:"id"`
		Amount struct {
			Minor    int64  `json:"minor"`
			Currency string `json:"currency"`
		} `json:"amount"`
	}
	if err := json.Unmarshal([]byte(c.must("jobs", "-id", "1", "-json")), &view); err != nil || view.ID != 1 || view.Amount.Minor != 1001 {
		t.Fatalf("jobs -id 1 -json: %+v %v", view, err)
	}

	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"resolve", "-id", "1", "-as", "reconcile"}, "-reason is required"},
		{[]string{"resolve", "-id", "1", "-as", "settle", "-reason", "r", "-operator", "alice"}, `-as: must be succeeded, reconcile or refund, got "settle"`},
		{[]string{"resolve", "-id", "1", "-as", "reconcile", "-reason", "r", "-operator", ""}, "-operator: must name the operator"},
		{[]string{"resolve", "-id", "7", "-as", "reconcile", "-reason", "r"}, "-id 7: job 7: not found"},
		{[]string{"resolve", "-id", "1", "-as", "succeeded", "-refund-id", "re_does_not_exist", "-reason", "r", "-operator", "alice"}, "-provider-url (or $FENCEKIT_PROVIDER_URL) is required"},
		{[]string{"resolve", "-id", "1", "-as", "succeeded", "-refund-id", "re_does_not_exist", "-reason", "r", "-operator", "alice", "-provider-url", fp.URL()}, "re_does_not_exist: provider does not know the refund"},
		{[]string{"approve", "-id", "1", "-operator", "bob", "-provider-url", fp.URL(), "-provider-skew-margin", "-48h"}, "-provider-skew-margin -48h0m0s: must not be negative"},
		{[]string{"resolve", "-id", "1", "-as", "reconcile", "-reason", "r", "-operator", "alice", "-provider-timeout", "-1s"}, "-provider-timeout -1s: must be positive"},
		{[]string{"jobs", "-limit", "0"}, "-limit 0"},
		{[]string{"jobs", "-state", "done"}, `-state: "done" is not a state`},
		{[]string{"jobs", "-after", "x"}, `-after: "x" is not a cursor`},
		{[]string{"enqueue", "-key", "op-2", "-payment", "pay-1", "-amount", "1.5", "-currency", "JPY"}, `-amount "1.5": invalid amount: "1.5" has decimals, JPY has none`},
		{[]string{"enqueue", "-key", "op 2", "-payment", "pay-1", "-amount", "1", "-currency", "EUR"}, `-key "op 2": must be printable ASCII without spaces`},
		{[]string{"jobs", "-bogus"}, "jobs: flag provided but not defined: -bogus (see refundd help jobs)"},
		{[]string{"jobs", "-id", "x"}, `jobs: invalid value "x" for flag -id`},
	} {
		out, err := c.try(tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.says) || strings.Contains(err.Error(), "\n") || out != "" && !strings.HasPrefix(out, "resolve: job 1 is") {
			t.Errorf("refundd %v: %v (printed %q); want one error line saying %q", tc.args, err, out, tc.says)
		}
	}
	if one := c.must("jobs", "-id", "1"); !strings.Contains(one, "alice's attempt to settle it as refunded on refund re_does_not_exist was refused: the provider does not know this refund id") {
		t.Fatalf("the forged refund id is not in the audit:\n%s", one)
	}

	// A resend needs a second operator; the requester cannot approve it.
	if r := c.must("resolve", "-id", "1", "-as", "refund", "-reason", "the provider declined it on an outage", "-operator", "alice", "-provider-url", fp.URL()); !strings.Contains(r, "approve with: refundd approve -id 1") {
		t.Fatalf("resolve -as refund: %s", r)
	}
	if _, err := c.try("approve", "-id", "1", "-operator", "alice", "-provider-url", fp.URL()); err == nil || !strings.Contains(err.Error(), "approver must differ from the requester") {
		t.Fatalf("self-approval: %v", err)
	}
	if l := c.must("approve", "-list"); !strings.Contains(l, "request 1: job 1, 10.01 EUR to pay-1\n  asks      Send the refund of 10.01 EUR to payment pay-1 again with the same key") ||
		!strings.Contains(l, "asked by  alice") || !strings.Contains(l, "reason    the provider declined it on an outage") || !strings.Contains(l, "1 pending") {
		t.Fatalf("approve -list: %s", l)
	}
	// Refused at approval: the refusal says why, and closes the request.
	if _, err := c.try("approve", "-id", "1", "-operator", "bob", "-provider-url", fp.URL()); err == nil || !strings.Contains(err.Error(), "nothing proves the first request did not pay") {
		t.Fatalf("a resend without proof: %v", err)
	}
	if l := c.must("approve", "-list"); !strings.Contains(l, "0 pending") {
		t.Fatalf("a request refused at approval is still pending:\n%s", l)
	}
	// A decline prints the decliner's reason, not the requester's.
	c.must("resolve", "-id", "1", "-as", "refund", "-reason", "the requester's reason", "-operator", "alice", "-provider-url", fp.URL())
	if d := c.must("approve", "-id", "2", "-decline", "-reason", "the decliner's reason", "-operator", "bob"); !strings.Contains(d, "bob declined alice's request 2: “the decliner's reason”") ||
		strings.Contains(d, "the requester's reason") {
		t.Fatalf("approve -decline -reason: %s", d)
	}
	cl, err := openClient(c.dsn)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := evidence.Record(context.Background(), cl, evidence.Observation{OperationKey: "op-1", Source: evidence.ProviderResponse,
		Status: evidence.Rejected, Payload: []byte(`{"error":{"code":"bank_outage"}}`)}); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	c.must("resolve", "-id", "1", "-as", "refund", "-reason", "the provider rejected it on an outage", "-operator", "alice", "-provider-url", fp.URL())
	if r := c.must("approve", "-id", "3", "-operator", "bob", "-provider-url", fp.URL()); !strings.Contains(r, "request 3 approved by bob: job 1 ready at attempt 2") {
		t.Fatalf("approve: %s", r)
	}
	one = c.must("jobs", "-id", "1")
	for _, want := range []string{"State                      waiting: refund at ", "bob approved alice's request 3 to send the refund again with the same key",
		"lookup by reference: empty"} {
		if !strings.Contains(one, want) {
			t.Fatalf("job 1 after the approval lacks %q:\n%s", want, one)
		}
	}
	if left := c.must("jobs", "-left"); !strings.Contains(left, "bob approved alice's request 3 to send the refund again") || !strings.Contains(left, "ready@2") {
		t.Fatalf("jobs -left:\n%s", left)
	}

	// The provider executes it; an operator settles a verified refund.
	c.reviewedAgain(t, "op-1")
	r, err := fp.Client().Refund(context.Background(), provider.RefundRequest{OperationKey: "op-1", PaymentRef: "pay-1", AmountMinor: 1001, Currency: "EUR"})
	if err != nil {
		t.Fatal(err)
	}
	if out := c.must("resolve", "-id", "1", "-as", "succeeded", "-refund-id", r.ProviderRefundID, "-reason", "verified at the provider", "-operator", "carol", "-provider-url", fp.URL()); !strings.Contains(out, "resolved as succeeded by carol: succeeded at attempt 4") {
		t.Fatalf("resolve -as succeeded: %s", out)
	}
	if s := c.must("jobs", "-refund-id", r.ProviderRefundID); !strings.Contains(s, "succeeded") || !strings.Contains(s, "op-1") || strings.Contains(s, "due") {
		t.Fatalf("jobs -refund-id:\n%s", s)
	}
}

// reviewedAgain claims the ready job of key and hands it back to manual
// review.
func (c cli) reviewedAgain(t *testing.T, key string) {
	t.Helper()
	cl, err := openClient(c.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ls, err := cl.RefundJob.ClaimDue(context.Background(), 1, fencedwriteOpts)
	if err != nil || len(ls) != 1 {
		t.Fatalf("claim %s: %v %v", key, ls, err)
	}
	if err := cl.RefundJob.Apply(context.Background(), ls[0].ManualReview("resend answered: unknown", "timeout", ""), nil); err != nil {
		t.Fatal(err)
	}
}

// help lists the commands and prints one command's flags once; -h does the
// same; neither is an error.
func TestHelp(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	if err := run(context.Background(), []string{"help"}, &out); err != nil || !strings.Contains(out.String(), "refundd resolve -id N") {
		t.Fatalf("help: %v\n%s", err, out.String())
	}
	for _, args := range [][]string{{"help", "resolve"}, {"resolve", "-h"}} {
		out.Reset()
		if err := run(context.Background(), args, &out); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		if strings.Count(out.String(), "-reason string") != 1 || !strings.Contains(out.String(), "refundd resolve: resolve a job in manual review") {
			t.Fatalf("%v:\n%s", args, out.String())
		}
	}
	for _, name := range []string{"run", "enqueue", "jobs", "approve", "migrate", "fakeprovider", "demo", "chaos", "fence"} {
		out.Reset()
		if err := run(context.Background(), []string{"help", name}, &out); err != nil || !strings.Contains(out.String(), "flags:") {
			t.Errorf("help %s: %v\n%s", name, err, out.String())
		}
	}
	if err := run(context.Background(), []string{"help", "bogus"}, io.Discard); err == nil || !strings.Contains(err.Error(), `unknown command "bogus"`) {
		t.Fatalf("help bogus: %v", err)
	}
}

// refundd fakeprovider serves the provider over HTTP, and refundd run
// settles a refund through it.
func TestFakeProviderServesRun(t *testing.T) {
	t.Parallel()
	dsn := migratedDSN(t)
	url := startFake(t)
	startRun(t, dsn, "-scan", "10ms", "-no-webhooks", "-provider-url", url)
	c := cli{t: t, dsn: dsn}
	c.must("enqueue", "-key", "fp-1", "-payment", "pay-fp", "-amount", "12.50", "-currency", "EUR")
	deadline := time.Now().Add(time.Minute)
	for tick := time.NewTicker(20 * time.Millisecond); ; <-tick.C {
		// Polling the database is this test's only signal from another
		// process's point of view, as an operator would see it.
		if s := c.must("jobs", "-key", "fp-1"); strings.Contains(s, "succeeded") {
			if !strings.Contains(s, "12.50 EUR") || !strings.Contains(s, "re_1") {
				t.Fatalf("jobs -key fp-1:\n%s", s)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("refundd run never settled the refund through refundd fakeprovider:\n%s", c.must("jobs", "-id", "1"))
		}
	}
}

// startFake serves refundd fakeprovider with the given flags until the test
// ends, and returns its URL.
func startFake(t *testing.T, flags ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := run(ctx, append([]string{"fakeprovider", "-addr", "127.0.0.1:0"}, flags...), pw)
		pw.CloseWithError(err)
		done <- err
	}()
	t.Cleanup(func() {
		cancel()
		go io.Copy(io.Discard, pr) //nolint:errcheck // drain the last line
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(strings.TrimPrefix(line, "fakeprovider: serving on "))[0]
}

// The fake provider's fault flags reach the provider refundd run talks to:
// with every request refused (-rate-limit 1) the job is never sent, and
// waits, ready, with the provider's answer as its last error; a rate
// outside [0, 1] is refused by name.
func TestFakeProviderFaultFlags(t *testing.T) {
	t.Parallel()
	if err := run(context.Background(), []string{"fakeprovider", "-addr", "127.0.0.1:0", "-cut", "1.5"}, io.Discard); err == nil || !strings.Contains(err.Error(), "-cut") {
		t.Fatalf("fakeprovider -cut 1.5: %v, want -cut refused by name", err)
	}
	dsn := migratedDSN(t)
	url := startFake(t, "-rate-limit", "1")
	startRun(t, dsn, "-scan", "10ms", "-no-webhooks", "-provider-url", url)
	c := cli{t: t, dsn: dsn}
	c.must("enqueue", "-key", "fp-refused", "-payment", "pay-fp", "-amount", "1.00", "-currency", "EUR")
	deadline := time.Now().Add(time.Minute)
	for tick := time.NewTicker(20 * time.Millisecond); ; <-tick.C {
		s := c.must("jobs", "-id", "1")
		if strings.Contains(s, "succeeded") {
			t.Fatalf("a refund went through a provider that refuses every request:\n%s", s)
		}
		if strings.Contains(s, "send refund: provider rate limited the request") && strings.Contains(s, "State                      waiting: refund at ") &&
			strings.Contains(s, "Not paid yet: 1.00 EUR, tried ") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the provider's refusals never reached the job:\n%s", s)
		}
	}
}

// Reasons and evidence come from providers and webhooks: printed to an
// operator's terminal they must not carry escape sequences (which can erase
// or rewrite lines, retitle the window), carriage returns or bidi overrides,
// and a newline must not forge a row of a table.
func TestAttackerTextIsInertInTheTerminal(t *testing.T) {
	t.Parallel()
	c := cli{t: t, dsn: migratedDSN(t)}
	const reason = "lookup lag\x1b[2K\r  ledger       refunded re_forged\n99  forged-row"
	const ev = "provider said \x1b]0;owned\x07 \u202etxet desrever\u202c \u009b31m"
	c.reviewed("esc-1", "pay-1", "1.00", "EUR", reason, ev)
	for _, args := range [][]string{{"jobs", "-id", "1"}, {"jobs", "-state", "manual_review"}, {"jobs", "-key", "esc-1"}} {
		out := c.must(args...)
		if i := strings.IndexFunc(out, func(r rune) bool {
			return r != '\n' && (r < ' ' || r == 0x7f || r >= 0x80 && r < 0xa0 || r == '\u202e' || r == '\u202c')
		}); i >= 0 {
			t.Errorf("refundd %v prints a control character %q at %d:\n%q", args, []rune(out[i:])[0], i, out)
		}
		for _, line := range strings.Split(out, "\n") {
			if strings.HasPrefix(line, "99") {
				t.Errorf("refundd %v prints a forged row: %q", args, line)
			}
		}
		if !strings.Contains(out, `lookup lag\x1b[2K`) {
			t.Errorf("refundd %v does not show the reason's control characters escaped:\n%s", args, out)
		}
	}
}

// refundd jobs -id N says which process held each attempt, after a takeover
// moved the job on: the claim's holder and the takeover's, with when and
// the lease.
func TestJobsShowsEachAttemptsHolder(t *testing.T) {
	t.Parallel()
	c := cli{t: t, dsn: migratedDSN(t)}
	c.must("enqueue", "-key", "held-1", "-payment", "pay-1", "-amount", "10.01", "-currency", "EUR")
	cl, err := openClient(c.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	if _, err := cl.RefundJob.Claim(ctx, 1, fencedwrite.ClaimOptions{Lease: time.Microsecond, Holder: "worker-a.example/101"}); err != nil {
		t.Fatal(err)
	}
	raw, err := sql.Open("mysql", c.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	var expired bool
	if err := raw.QueryRow("SELECT lease_until < " + fencedwrite.ClockUTC + " FROM refund_jobs WHERE id = 1").Scan(&expired); err != nil || !expired {
		t.Fatalf("the lease has not expired on the database clock (%v)", err)
	}
	l, err := cl.RefundJob.Takeover(ctx, 1, fencedwrite.ClaimOptions{Holder: "worker-b.example/202"})
	if err != nil {
		t.Fatal(err)
	}
	out := c.must("jobs", "-id", "1")
	for _, want := range []string{
		"@1 claim      worker-a.example/101 at ",
		fmt.Sprintf("@2 takeover   worker-b.example/202 at %s, lease until %s; takeover by worker-b.example/202", tf(l.ClaimedAt()), tf(l.LeaseUntil())),
	} {
		if !strings.Contains(out, want) {
			t.Errorf("jobs -id 1 lacks %q:\n%s", want, out)
		}
	}
}

// The error refundd exits with is inert on the terminal too: an escape
// sequence in a DSN or a provider's text is printed escaped, and a line
// break inside the error indents what follows.
func TestExitErrorIsInertInTheTerminal(t *testing.T) {
	var out bytes.Buffer
	printError(&out, errors.Join(errors.New("-dsn: bad value \"x\x1b[2J\u202e\""), errors.New("refundd: forged line")))
	want := "refundd: -dsn: bad value \"x\\x1b[2J\\u202e\"\n  refundd: forged line\n"
	if out.String() != want {
		t.Errorf("printed %q, want %q", out.String(), want)
	}
}

// Every output of the operators' commands shows the characters that hide
// or reorder text (bidirectional controls, zero-width characters, escape
// sequences) written out, wherever they come from: a review reason, the
// provider's evidence and the refund id it names, an operator's reason.
// -json stays valid JSON that means the same text.
func TestEveryOperatorOutputShowsInvisibleCharacters(t *testing.T) {
	t.Parallel()
	c := cli{t: t, dsn: migratedDSN(t)}
	fp := fakeprovider.Start()
	t.Cleanup(fp.Close)
	c.reviewed("bidi-1", "pay-1", "11.50", "EUR", "not found after the lookup-lag window; resend not safe: \u202eKO\u202c", "notes \u2066x\u2069")
	cl, err := openClient(c.dsn)
	if err != nil {
		t.Fatal(err)
	}
	const evil = "re_9\u202egnp.exe\u200b"
	if _, _, err := evidence.Record(context.Background(), cl, evidence.Observation{OperationKey: "bidi-1", Source: evidence.Webhook, ProviderRefundID: evil,
		Status: evidence.Pending, Payload: []byte("pending \u202e\x1b[2J\u0085"), EventID: "evt-bidi"}); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	dangerous := "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200b\ufeff\u2028\x1b\u0085"
	outputs := map[string]string{}
	outputs["resolve -override"] = c.must("resolve", "-id", "1", "-as", "succeeded", "-refund-id", "re_bank", "-override", "-reason", "approve \u202eobviously\u202c",
		"-operator", "alice", "-provider-url", fp.URL())
	for _, args := range [][]string{{"jobs", "-id", "1"}, {"jobs", "-id", "1", "-json"}, {"jobs", "-state", "manual_review"}, {"jobs", "-state", "manual_review", "-json"},
		{"jobs", "-key", "bidi-1"}, {"approve", "-list"}} {
		outputs[strings.Join(args, " ")] = c.must(args...)
	}
	outputs["approve -decline"] = c.must("approve", "-id", "1", "-decline", "-reason", "no \u202eway\u202c", "-operator", "bob")
	outputs["jobs -left"] = c.must("jobs", "-left")
	for name, out := range outputs {
		if i := strings.IndexAny(out, dangerous); i >= 0 {
			t.Errorf("refundd %s prints %U raw:\n%q", name, []rune(out[i:])[0], out)
		}
	}
	for _, want := range []string{`re_9\u202egnp.exe\u200b`, `approve \u202eobviously\u202c`} {
		if !strings.Contains(outputs["jobs -id 1"], want) {
			t.Errorf("refundd jobs -id 1 does not show %q written out", want)
		}
	}
	var view struct {
		Evidence []struct {
			ProviderRefundID string `json:"provider_refund_id"`
		} `json:"evidence"`
	}
	if err := json.Unmarshal([]byte(outputs["jobs -id 1 -json"]), &view); err != nil || len(view.Evidence) != 1 || view.Evidence[0].ProviderRefundID != evil {
		t.Fatalf("jobs -id 1 -json is not the same data as valid JSON: %+v %v", view, err)
	}
}
