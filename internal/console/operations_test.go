package console

import (
	"context"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/fencekit/fencekit/ent"
	"github.com/fencekit/fencekit/evidence"
	"github.com/fencekit/fencekit/fencedwrite"
	"github.com/fencekit/fencekit/ledger"
	"github.com/fencekit/fencekit/operator"
)

// another is a second console process on the fixture's database, with the
// users of usersText (the fixture's when empty), sharing its clock.
func (f *fixture) another(t *testing.T, usersText string) *Console {
	t.Helper()
	if usersText == "" {
		usersText = usersFile(t)
	}
	users, err := ParseUsers(strings.NewReader(usersText))
	if err != nil {
		t.Fatal(err)
	}
	con, err := New(Config{Client: f.client, Operator: f.op, Users: users, Now: f.clock.now, Logger: f.con.log})
	if err != nil {
		t.Fatal(err)
	}
	return con
}

// on is a copy of the agent talking to another console process, with the
// same cookies.
func (a *agent) on(h http.Handler) *agent {
	b := *a
	b.h, b.jar = h, map[string]*http.Cookie{}
	for k, v := range a.jar {
		b.jar[k] = v
	}
	return &b
}

// signedInAs says who the page shows signed in, or "" when the answer is
// a redirect to the sign-in page.
func signedInAs(rw interface{ Result() *http.Response }, body string) string {
	if m := regexp.MustCompile(`<span id="who">([^<]*)</span>`).FindStringSubmatch(body); m != nil {
		return m[1]
	}
	return ""
}

// Sessions live in the database: a restart, or a second console process,
// keeps the operator signed in; the table holds a hash of the token, never
// the token; signing out ends the session on every process; a change of
// the operator's roles in the users file ends it too.
func TestSessionsSurviveRestartsAndEndForGood(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	a := f.agent("192.0.2.1:1000")
	a.signIn("rita")
	token := a.session().Value

	restarted := a.on(f.another(t, ""))
	if rw := restarted.do("GET", "/", nil); rw.Code != http.StatusOK || signedInAs(rw, rw.Body.String()) != "rita" {
		t.Fatalf("after a restart: %d, signed in as %q", rw.Code, signedInAs(rw, rw.Body.String()))
	}
	var stored int
	if err := f.db.RawDB().QueryRow("SELECT COUNT(*) FROM console_sessions WHERE token_hash = ? OR operator = 'rita' AND token_hash LIKE CONCAT('%', ?, '%')", token, token).Scan(&stored); err != nil || stored != 0 {
		t.Fatalf("the table holds the session token itself (%d rows, %v)", stored, err)
	}
	// A form made by one process is accepted by the other: the CSRF token
	// is the session's, not the process's.
	id, _ := f.reviewJob("sess-1", false, "not found after the lookup-lag window; resend not safe: x", "{}")
	form := url.Values{"csrf": {a.csrf(fmt.Sprintf("/jobs/%d", id))}, "seen_attempt": {"1"}}
	if rw := restarted.do("POST", fmt.Sprintf("/jobs/%d/onit", id), form); rw.Code != http.StatusSeeOther {
		t.Fatalf("a form of the first process posted to the second: %d %s", rw.Code, rw.Body)
	}

	// Signing out on one process ends the session on both.
	if rw := restarted.do("POST", "/logout", url.Values{"csrf": {form.Get("csrf")}}); rw.Code != http.StatusSeeOther {
		t.Fatalf("sign out: %d", rw.Code)
	}
	if rw := a.do("GET", "/", nil); rw.Code != http.StatusSeeOther || rw.Header().Get("Location") != "/login" {
		t.Fatalf("the signed-out session on the other process: %d %s", rw.Code, rw.Header().Get("Location"))
	}

	// A change of roles ends the session: rita loses the resolver role.
	a.signIn("rita")
	h, err := bcrypt.GenerateFromPassword([]byte("pw-rita"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	demoted := a.on(f.another(t, "rita:viewer:"+string(h)+"\n"))
	if rw := demoted.do("GET", "/", nil); rw.Code != http.StatusSeeOther || rw.Header().Get("Location") != "/login" {
		t.Fatalf("a session whose roles changed: %d %s, want a new sign-in", rw.Code, rw.Header().Get("Location"))
	}
	if rw := a.do("GET", "/", nil); rw.Code != http.StatusSeeOther {
		t.Fatalf("the session whose roles changed still serves on the first process: %d", rw.Code)
	}
	var why string
	if err := f.db.RawDB().QueryRow("SELECT end_reason FROM console_sessions WHERE operator = 'rita' ORDER BY id DESC LIMIT 1").Scan(&why); err != nil || why != "roles changed" {
		t.Fatalf("the session's end: %q %v", why, err)
	}
}

// The CSRF check holds for operators the proxy signs in, exactly as for
// those of the sign-in form: a forged or tokenless POST through the proxy
// is refused and writes nothing.
func TestCSRFHoldsForProxySignIns(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *Config) {
		c.AuthHeader = "X-Forwarded-User"
		c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	})
	id, refundID := f.reviewJob("proxy-csrf-1", true, "not found after the lookup lag", "{}")
	rita := f.agent("10.1.2.3:4000")
	rita.header.Set("X-Forwarded-User", "rita")
	path := fmt.Sprintf("/jobs/%d", id)
	token := rita.csrf(path)
	form := func(csrf string) url.Values {
		v := url.Values{"as": {"succeeded"}, "refund_id": {refundID}, "reason": {"the provider shows it"}, "seen_attempt": {"1"}}
		if csrf != "" {
			v.Set("csrf", csrf)
		}
		return v
	}
	alice := f.agent("10.1.2.3:4001")
	alice.header.Set("X-Forwarded-User", "alice")
	for name, csrf := range map[string]string{"no token": "", "a made-up token": "forged", "another operator's token": alice.csrf("/")} {
		if rw := rita.do("POST", path+"/resolve", form(csrf)); rw.Code != http.StatusForbidden {
			t.Errorf("a proxied POST with %s: %d, want 403", name, rw.Code)
		}
		if state, attempt := f.jobRow(id); state != "manual_review" || attempt != 1 {
			t.Fatalf("after a proxied POST with %s the job is %s at attempt %d", name, state, attempt)
		}
	}
	if n := f.audits(id); n != 0 {
		t.Fatalf("refused proxied forms left %d audit entries", n)
	}
	if rw := rita.do("POST", path+"/resolve", form(token)); rw.Code != http.StatusSeeOther {
		t.Fatalf("the console's own form through the proxy: %d %s", rw.Code, rw.Body)
	}
	if state, _ := f.jobRow(id); state != "succeeded" {
		t.Fatalf("the proxied resolution left the job %s", state)
	}
}

// dangerous are characters that hide or reorder text: the bidirectional
// embeddings, overrides and isolates, zero-width characters, a byte-order
// mark, a line separator, and an escape sequence.
var dangerous = []rune{'\u202a', '\u202b', '\u202c', '\u202d', '\u202e', '\u2066', '\u2067', '\u2068', '\u2069', '\u200b', '\u200e', '\u200f', '\ufeff', '\u2028', '\x1b'}

// Text someone else wrote (a review reason, a provider's evidence and the
// refund id it names, an operator's reason, a name typed in the sign-in
// form) never reaches a page with a character that hides or reorders
// text: each is shown written out ("\u202e"), on every page.
func TestInvisibleCharactersAreVisibleOnEveryPage(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	ctx := context.Background()
	evil := "re_9\u202egnp.exe\u2066x\u2069\u200b"
	id, _ := f.reviewJob("bidi-1", false, "not found after the lookup-lag window; resend not safe: \u202eKO\u202c", `{"id":"`+evil+`"}`)
	if _, _, err := evidence.Record(ctx, f.client, evidence.Observation{OperationKey: "bidi-1", Source: evidence.Webhook, ProviderRefundID: evil,
		Status: evidence.Pending, Payload: []byte("pending \u202e\x1b[2J"), EventID: "evt-bidi"}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.op.RequestApproval(ctx, operator.Resolution{JobID: id, As: operator.AsSucceeded, Override: true, RefundID: "re_bank",
		Reason: "approve \u202eobviously\u202c \u2067fine\u2069", Operator: "rita", SeenAttempt: 1}); err != nil {
		t.Fatal(err)
	}
	a := f.agent("192.0.2.1:1000")
	// A name typed in the sign-in form comes back in the form.
	rw := a.do("POST", "/login", url.Values{"csrf": {a.csrf("/login")}, "name": {"ri\u202eta"}, "password": {"wrong"}})
	pages := map[string]string{"/login (a failed sign-in)": rw.Body.String()}
	a.signIn("alice")
	for _, path := range []string{"/", "/queue", fmt.Sprintf("/jobs/%d", id), "/approvals", "/search?q=bidi", "/search?state=manual_review", "/engineering",
		"/queue?reason=not_found", "/search?q=" + url.QueryEscape("re_9\u202e")} {
		rw := a.do("GET", path, nil)
		pages[path] = rw.Body.String()
	}
	for path, body := range pages {
		for _, r := range dangerous {
			if strings.ContainsRune(body, r) {
				t.Errorf("%s shows %U raw", path, r)
			}
		}
	}
	job := pages[fmt.Sprintf("/jobs/%d", id)]
	for _, want := range []string{`re_9\u202egnp.exe\u2066x\u2069\u200b`, `pending \u202e\x1b[2J`, `approve \u202eobviously\u202c \u2067fine\u2069`} {
		if !strings.Contains(job, want) {
			t.Errorf("the job page does not show %q written out", want)
		}
	}
	if !strings.Contains(pages["/login (a failed sign-in)"], `ri\u202eta`) {
		t.Error("the sign-in form does not show the typed name written out")
	}
}

// An audited refusal is a page that says what was refused and why, never
// "internal error": a resend approved without proof that the first
// request did not pay answers 409 with the reason, names the request, and
// closes it.
func TestAuditedRefusalIsNeverAServerError(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	id, _ := f.reviewJob("noproof-1", false, "not found after the lookup-lag window; resend not safe: x", "{}")
	req, err := f.op.RequestApproval(context.Background(), operator.Resolution{JobID: id, As: operator.AsRefund, Reason: "send again", Operator: "rita", SeenAttempt: 1})
	if err != nil {
		t.Fatal(err)
	}
	amy := f.agent("192.0.2.2:1000")
	amy.signIn("amy")
	rw := amy.do("POST", fmt.Sprintf("/approvals/%d/approve", req.ID), url.Values{"csrf": {amy.csrf("/approvals")}})
	body := rw.Body.String()
	if rw.Code != http.StatusConflict || !strings.Contains(body, fmt.Sprintf("Request %d: Refused: nothing proves the first request did not pay", req.ID)) {
		t.Fatalf("a resend without proof, approved: %d %s", rw.Code, regexp.MustCompile(`id="error">[^<]*`).FindString(body))
	}
	if strings.Contains(body, fmt.Sprintf(`id="approval-%d"`, req.ID)) {
		t.Fatal("the refused request is still offered for approval")
	}
	a, err := f.op.Approval(context.Background(), req.ID)
	if err != nil || a.Status != operator.Declined || !strings.Contains(a.Closed, "was refused") {
		t.Fatalf("the request after its refused approval: %+v %v", a, err)
	}
}

// The queue an operations team works: the money at stake per currency and
// by kind of reason, filters by reason, the "I'm on it" mark shown to the
// others, resolve and open the next job; a failed refund found by the
// start of its key; the dashboard's counts link to their lists.
func TestQueueForAnOperationsTeam(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	lost, _ := f.reviewJob("day-lost-1", false, "the provider offers no lookup for this refund: it cannot be reconciled (look up refund: no lookup offered for the query)", "{}")
	notFound, _ := f.reviewJob("day-nf-1", false, "not found after the lookup-lag window; resend not safe: the key's window closed", "{}")
	third, _ := f.reviewJob("day-nf-2", false, "not found after the lookup-lag window; resend not safe: x", "{}")
	failed := f.failedJob("refund-2026-failed-77", 990, "JPY")

	rita, alice := f.agent("192.0.2.1:1000"), f.agent("192.0.2.2:1000")
	rita.signIn("rita")
	alice.signIn("alice")
	body := rita.do("GET", "/queue", nil).Body.String()
	for _, want := range []string{
		"3 job(s), 37.50 EUR at stake",
		`<a href="/queue?reason=answer_lost" id="group-answer_lost">Answer lost; the provider cannot be asked</a></td><td class="num">1</td><td>12.50 EUR</td>`,
		`<a href="/queue?reason=not_found" id="group-not_found">Sent; the provider does not show it</a></td><td class="num">2</td><td>25.00 EUR</td>`,
		`<span class="money unknown">Unknown:</span> <span class="status-text">12.50 EUR sent `,
		"the answer was lost, and the provider offers no lookup that can find this refund; the provider may have paid. Check reference day-lost-1 at the provider, then decide.",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the queue lacks %q", want)
		}
	}
	filtered := rita.do("GET", "/queue?reason=not_found", nil).Body.String()
	if strings.Contains(filtered, fmt.Sprintf(`id="queue-%d"`, lost)) || !strings.Contains(filtered, fmt.Sprintf(`id="queue-%d"`, notFound)) {
		t.Error("the queue filtered by reason shows the wrong jobs")
	}

	// Alice is on the oldest job: rita sees it, and resolving with "open
	// the next" skips it.
	if rw := alice.do("POST", fmt.Sprintf("/jobs/%d/onit", lost), url.Values{"csrf": {alice.csrf("/")}, "seen_attempt": {"1"}}); rw.Code != http.StatusSeeOther {
		t.Fatalf("I'm on it: %d %s", rw.Code, rw.Body)
	}
	if body := rita.do("GET", "/queue", nil).Body.String(); !strings.Contains(body, fmt.Sprintf(`<tr id="queue-%d">`, lost)) ||
		!regexp.MustCompile(fmt.Sprintf(`(?s)<tr id="queue-%d">.*?<td class="onit">alice</td>`, lost)).MatchString(body) {
		t.Error("the queue does not show that alice is on the job")
	}
	if page := rita.do("GET", fmt.Sprintf("/jobs/%d", lost), nil).Body.String(); !strings.Contains(page, `On it: <strong>alice</strong>`) {
		t.Error("the job page does not show that alice is on it")
	}
	rw := rita.do("POST", fmt.Sprintf("/jobs/%d/resolve", notFound), url.Values{"csrf": {rita.csrf("/")}, "seen_attempt": {"1"}, "as": {"reconcile"},
		"reason": {"ask again"}, "next": {"1"}})
	if rw.Code != http.StatusSeeOther || rw.Header().Get("Location") != fmt.Sprintf("/jobs/%d?done=next", third) {
		t.Fatalf("resolve and open the next: %d %s, want the next free job %d", rw.Code, rw.Header().Get("Location"), third)
	}

	// A failed refund, found by the start of its key among the failed.
	rw = rita.do("GET", "/search?q=refund-2026-f&state=failed", nil)
	if rw.Code != http.StatusSeeOther || rw.Header().Get("Location") != fmt.Sprintf("/jobs/%d", failed) {
		t.Fatalf("a failed refund by the start of its key: %d %s", rw.Code, rw.Header().Get("Location"))
	}
	page := rita.do("GET", fmt.Sprintf("/jobs/%d", failed), nil).Body.String()
	if !strings.Contains(page, `<span class="money not_refunded">Not refunded:</span> <span class="status-text">the provider declined 990 JPY to pay-refund-2026-failed-77`) {
		t.Errorf("the failed job's status line: %s", regexp.MustCompile(`id="status">.*`).FindString(page))
	}
	f.clock.advance(dashTTL) // the dashboard's figures are reused for dashTTL
	dash := rita.do("GET", "/", nil).Body.String()
	for _, want := range []string{`<a href="/search?state=failed">1</a>`, `<a href="/queue">2</a>`} {
		if !strings.Contains(dash, want) {
			t.Errorf("the dashboard lacks the link %q:\n%s", want, regexp.MustCompile(`(?s)<table id="at-stake">.*?</table>`).FindString(dash))
		}
	}
}

// failedJob enqueues key and has a worker fail it on a provider's
// rejection.
func (f *fixture) failedJob(key string, minor int64, currency string) int64 {
	f.t.Helper()
	ctx := context.Background()
	req := ent.RefundJobEnqueue{OperationKey: key, PaymentRef: "pay-" + key, AmountMinor: minor, Currency: currency}
	job, _, err := f.client.RefundJob.Enqueue(ctx, req, ledger.Open(req))
	if err != nil {
		f.t.Fatal(err)
	}
	l, err := f.client.RefundJob.Claim(ctx, job.ID, fencedwrite.ClaimOptions{Lease: time.Hour})
	if err != nil {
		f.t.Fatal(err)
	}
	if err := f.client.RefundJob.Apply(ctx, l.Fail("rejected: charge_disputed: the charge is disputed", ""), ledger.Failed(key)); err != nil {
		f.t.Fatal(err)
	}
	return job.ID
}
