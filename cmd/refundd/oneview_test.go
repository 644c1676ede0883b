package main

import (
	"context"
	"html"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/fencekit/fencekit/evidence"
	"github.com/fencekit/fencekit/fencedwrite"
	"github.com/fencekit/fencekit/internal/console"
	"github.com/fencekit/fencekit/operator"
)

// The console and `refundd jobs -id` show one view: the same status line,
// the same facts under the same labels with the same values (one time
// format, the lease shown by the same rule), and the same timeline, each
// line with the same time. They are checked for a running job (the lease
// shows) and for the same job in manual review (it does not).
func TestConsoleAndJobsShowTheSameFacts(t *testing.T) {
	t.Parallel()
	c := cli{t: t, dsn: migratedDSN(t)}
	c.must("enqueue", "-key", "same-1", "-payment", "pay-same", "-amount", "11.50", "-currency", "EUR")
	cl, err := openClient(c.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	l, err := cl.RefundJob.Claim(ctx, 1, fencedwrite.ClaimOptions{Lease: time.Hour, Holder: "worker-a.example/7"})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := evidence.Record(ctx, cl, evidence.Observation{OperationKey: "same-1", Source: evidence.Webhook, Status: evidence.Pending,
		ProviderRefundID: "re_77", Payload: []byte(`{"status":"pending"}`), EventID: "evt-1"}); err != nil {
		t.Fatal(err)
	}
	ops, err := operator.New(operator.Config{Client: cl})
	if err != nil {
		t.Fatal(err)
	}
	h, err := bcrypt.GenerateFromPassword([]byte("pw"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	users, err := console.ParseUsers(strings.NewReader("vic:viewer:" + string(h) + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	con, err := console.New(console.Config{Client: cl, Operator: ops, Users: users, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(con)
	defer srv.Close()
	page := signedInPage(t, srv.URL, "vic", "pw")

	check := func(state string, leaseShows bool) {
		t.Helper()
		v, err := ops.Job(ctx, 1)
		if err != nil {
			t.Fatal(err)
		}
		if v.State != state {
			t.Fatalf("the job is %s, want %s", v.State, state)
		}
		body := page("/jobs/1")
		text := c.must("jobs", "-id", "1")
		if !strings.Contains(text, "\n"+v.Status.String()+"\n") || !strings.Contains(body, html.EscapeString(v.Status.Text)) {
			t.Errorf("the status line %q is not in both front ends", v.Status)
		}
		for _, f := range append(append([]operator.Fact(nil), v.Facts...), v.Engineering...) {
			cell := regexp.MustCompile(`(?s)<tr id="(?:fact|eng)-` + regexp.QuoteMeta(f.Key) + `"><th>([^<]*)</th><td>(?:<pre>)?(.*?)(?:</pre>)?</td></tr>`).FindStringSubmatch(body)
			if cell == nil || html.UnescapeString(cell[1]) != f.Label || html.UnescapeString(cell[2]) != f.Value {
				t.Errorf("the console shows fact %s as %q, want %q: %q", f.Key, cell, f.Label, f.Value)
			}
			first := strings.SplitN(f.Value, "\n", 2)[0]
			if !regexp.MustCompile(`(?m)^  ` + regexp.QuoteMeta(f.Label) + ` +` + regexp.QuoteMeta(first) + `$`).MatchString(text) {
				t.Errorf("refundd jobs -id does not print fact %s as %q: %q", f.Key, f.Label, first)
			}
		}
		for _, e := range v.Timeline {
			line := operator.Stamp(e.At) + "  " + e.Text
			if !strings.Contains(text, line) {
				t.Errorf("refundd jobs -id lacks the timeline line %q", line)
			}
			if !strings.Contains(body, `<span class="when">`+operator.Stamp(e.At)+`</span> <span class="text">`+html.EscapeString(e.Text)+`</span>`) {
				t.Errorf("the console lacks the timeline line %q", line)
			}
		}
		lease := "Lease until"
		if strings.Contains(text, lease) != leaseShows || strings.Contains(body, ">"+lease+"<") != leaseShows {
			t.Errorf("%s: the lease shows in jobs %v, in the console %v; want %v in both", state, strings.Contains(text, lease), strings.Contains(body, ">"+lease+"<"), leaseShows)
		}
		if strings.Contains(text, ".000000") || regexp.MustCompile(`\d{2}:\d{2}:\d{2}\.\d{6}`).MatchString(body+text) {
			t.Error("a time printed in microseconds: one format, to the millisecond, in both")
		}
	}
	check(fencedwrite.StateRunning, true)
	if err := cl.RefundJob.Apply(ctx, l.ManualReview("the provider offers no lookup for this refund: it cannot be reconciled", "lookup: none", ""), nil); err != nil {
		t.Fatal(err)
	}
	check(fencedwrite.StateManualReview, false)
}

// signedInPage signs name in to the console at base and returns a getter
// of its pages.
func signedInPage(t *testing.T, base, name, password string) func(path string) string {
	t.Helper()
	jar := newJar(t)
	hc := &http.Client{Jar: jar}
	get := func(path string) string {
		resp, err := hc.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(get("/login"))
	if m == nil {
		t.Fatal("no sign-in form")
	}
	resp, err := hc.PostForm(base+"/login", url.Values{"csrf": {m[1]}, "name": {name}, "password": {password}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return get
}

func newJar(t *testing.T) http.CookieJar {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return jar
}
