package console

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/fencekit/fencekit/ent"
	"github.com/fencekit/fencekit/evidence"
	"github.com/fencekit/fencekit/fencedwrite"
	"github.com/fencekit/fencekit/internal/dbtest"
	"github.com/fencekit/fencekit/ledger"
	"github.com/fencekit/fencekit/operator"
	"github.com/fencekit/fencekit/provider"
	"github.com/fencekit/fencekit/provider/fakeprovider"
)

// The operators of the tests: name, roles. Each one's password is
// "pw-" + name.
var testUsers = map[string]string{
	"rita":  "resolver",          // resolves and asks for approvals
	"alice": "resolver,approver", // both
	"amy":   "approver",          // approves only
	"vic":   "viewer",            // reads only
}

var (
	usersOnce sync.Once
	usersText string
)

// usersFile is the users file of the tests, hashed once at bcrypt's least
// cost (the file accepts any cost; refundd console-user uses BcryptCost).
func usersFile(t testing.TB) string {
	usersOnce.Do(func() {
		var b strings.Builder
		b.WriteString("# the tests' operators\n")
		for _, name := range []string{"rita", "alice", "amy", "vic"} {
			h, err := bcrypt.GenerateFromPassword([]byte("pw-"+name), bcrypt.MinCost)
			if err != nil {
				panic(err)
			}
			fmt.Fprintf(&b, "%s:%s:%s\n", name, testUsers[name], h)
		}
		usersText = b.String()
	})
	return usersText
}

// fixture is one console on its own database and fake provider.
type fixture struct {
	t      testing.TB
	db     *dbtest.DB
	client *ent.Client
	fake   *fakeprovider.Server
	op     *operator.Service
	con    *Console
	clock  *clock
}

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func newFixture(t testing.TB, edit func(*Config)) *fixture {
	t.Helper()
	return fixtureOnDB(t, dbtest.New(t), edit)
}

// fixtureOn is a console on db, with the tests' operators.
func fixtureOn(t testing.TB, db *dbtest.DB) *fixture {
	t.Helper()
	return fixtureOnDB(t, db, nil)
}

func fixtureOnDB(t testing.TB, db *dbtest.DB, edit func(*Config)) *fixture {
	t.Helper()
	client := db.Client()
	fake := fakeprovider.Start()
	t.Cleanup(fake.Close)
	op, err := operator.New(operator.Config{Client: client, Provider: fake.Client()})
	if err != nil {
		t.Fatal(err)
	}
	users, err := ParseUsers(strings.NewReader(usersFile(t)))
	if err != nil {
		t.Fatal(err)
	}
	clk := &clock{t: time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)}
	var logs io.Writer = io.Discard
	if os.Getenv("FENCEKIT_CONSOLE_LOG") == "1" { // the console's log lines, to debug a test
		logs = os.Stderr
	}
	cfg := Config{Client: client, Operator: op, Users: users, Now: clk.now, Logger: slog.New(slog.NewTextHandler(logs, nil))}
	if edit != nil {
		edit(&cfg)
	}
	con, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{t: t, db: db, client: client, fake: fake, op: op, con: con, clock: clk}
}

// reviewJob is a job in manual review for key: its payment exists at the
// provider and, when refunded, the provider executed its refund (whose id
// it returns). The worker's answer, payload, is recorded as evidence and as
// the review evidence: tests put attacker-controlled text in it.
func (f *fixture) reviewJob(key string, refunded bool, reason, payload string) (int64, string) {
	f.t.Helper()
	ctx := context.Background()
	req := ent.RefundJobEnqueue{OperationKey: key, PaymentRef: "pay-" + key, AmountMinor: 1250, Currency: "EUR"}
	f.fake.AddPayment(req.PaymentRef, 5000, "EUR")
	job, _, err := f.client.RefundJob.Enqueue(ctx, req, ledger.Open(req))
	if err != nil {
		f.t.Fatal(err)
	}
	lease, err := f.client.RefundJob.Claim(ctx, job.ID, fencedwrite.ClaimOptions{Lease: time.Hour})
	if err != nil {
		f.t.Fatal(err)
	}
	var refundID string
	if refunded {
		r, err := f.fake.Client().Refund(ctx, provider.RefundRequest{OperationKey: key, PaymentRef: req.PaymentRef, AmountMinor: req.AmountMinor, Currency: req.Currency})
		if err != nil {
			f.t.Fatal(err)
		}
		refundID = r.ProviderRefundID
	}
	if _, _, err := evidence.Record(ctx, f.client, evidence.Observation{OperationKey: key, JobID: job.ID, Attempt: 1,
		Source: evidence.ProviderResponse, Status: evidence.Conflict, Payload: []byte(payload)}); err != nil {
		f.t.Fatal(err)
	}
	if err := f.client.RefundJob.Apply(ctx, lease.ManualReview(reason, payload, ""), nil); err != nil {
		f.t.Fatal(err)
	}
	return job.ID, refundID
}

// jobRow reads the job's state and attempt straight from the table.
func (f *fixture) jobRow(id int64) (string, int64) {
	f.t.Helper()
	j, err := f.client.RefundJob.Get(context.Background(), id)
	if err != nil {
		f.t.Fatal(err)
	}
	return string(j.State), j.Attempt
}

// audits counts the job's audit entries.
func (f *fixture) audits(id int64) int {
	f.t.Helper()
	v, err := f.op.Job(context.Background(), id)
	if err != nil {
		f.t.Fatal(err)
	}
	return len(v.Audit)
}

// agent is a client of the console through its ServeHTTP, with a cookie
// jar of one cookie and a peer address of its own, as a browser would
// send: same-origin requests carry Sec-Fetch-Site.
type agent struct {
	t      testing.TB
	h      http.Handler
	remote string
	jar    map[string]*http.Cookie
	header http.Header
}

func (f *fixture) agent(remote string) *agent {
	return &agent{t: f.t, h: f.con, remote: remote, jar: map[string]*http.Cookie{}, header: http.Header{"Sec-Fetch-Site": {"same-origin"}}}
}

// session is the agent's session cookie (nil when it holds none).
func (a *agent) session() *http.Cookie {
	for name, c := range a.jar {
		if strings.HasSuffix(name, "fencekit_console") {
			return c
		}
	}
	return nil
}

// setSession replaces the agent's session cookie with c (none when nil).
func (a *agent) setSession(c *http.Cookie) {
	for name := range a.jar {
		if strings.HasSuffix(name, "fencekit_console") {
			delete(a.jar, name)
		}
	}
	if c != nil {
		a.jar[c.Name] = c
	}
}

// do sends a request and keeps the session cookie it sets.
func (a *agent) do(method, path string, form url.Values) *httptest.ResponseRecorder {
	a.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	r := httptest.NewRequest(method, "http://console.test"+path, body)
	r.RemoteAddr = a.remote
	if form != nil {
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range a.header {
		r.Header[k] = v
	}
	for _, c := range a.jar {
		r.AddCookie(c)
	}
	rw := httptest.NewRecorder()
	a.h.ServeHTTP(rw, r)
	for _, c := range rw.Result().Cookies() {
		if c.MaxAge < 0 {
			delete(a.jar, c.Name)
		} else {
			a.jar[c.Name] = c
		}
	}
	return rw
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf is the CSRF token of the page path.
func (a *agent) csrf(path string) string {
	a.t.Helper()
	rw := a.do("GET", path, nil)
	m := csrfField.FindStringSubmatch(rw.Body.String())
	if m == nil {
		a.t.Fatalf("GET %s (%d): no CSRF token in the page", path, rw.Code)
	}
	return m[1]
}

// signIn signs in as name with the right password.
func (a *agent) signIn(name string) {
	a.t.Helper()
	rw := a.do("POST", "/login", url.Values{"csrf": {a.csrf("/login")}, "name": {name}, "password": {"pw-" + name}})
	if rw.Code != http.StatusSeeOther {
		a.t.Fatalf("sign in as %s: %d %s", name, rw.Code, rw.Body)
	}
}

// takenOver enqueues key's job, claims it as process a with a lease that
// has expired by the database clock when it returns, and takes it over as
// process b; it returns the job's id and b's lease.
func (f *fixture) takenOver(key, a, b string) (int64, *ent.RefundJobLease) {
	f.t.Helper()
	ctx := context.Background()
	req := ent.RefundJobEnqueue{OperationKey: key, PaymentRef: "pay-" + key, AmountMinor: 1250, Currency: "EUR"}
	job, _, err := f.client.RefundJob.Enqueue(ctx, req, ledger.Open(req))
	if err != nil {
		f.t.Fatal(err)
	}
	if _, err := f.db.Client().RefundJob.Claim(ctx, job.ID, fencedwrite.ClaimOptions{Lease: time.Microsecond, Holder: a}); err != nil {
		f.t.Fatal(err)
	}
	var expired bool
	if err := f.db.RawDB().QueryRow("SELECT lease_until < "+fencedwrite.ClockUTC+" FROM refund_jobs WHERE id = ?", job.ID).Scan(&expired); err != nil || !expired {
		f.t.Fatalf("the lease of %s has not expired on the database clock (%v)", key, err)
	}
	l, err := f.db.Client().RefundJob.Takeover(ctx, job.ID, fencedwrite.ClaimOptions{Lease: time.Hour, Holder: b})
	if err != nil {
		f.t.Fatal(err)
	}
	return job.ID, l
}
