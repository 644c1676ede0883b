package console

import (
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/fencekit/fencekit/ent"
	"github.com/fencekit/fencekit/internal/dbtest"
	"github.com/fencekit/fencekit/operator"
)

func TestUsersFile(t *testing.T) {
	t.Parallel()
	t.Run("a good file gives each operator their roles", func(t *testing.T) {
		us, err := ParseUsers(strings.NewReader(usersFile(t) + "\n# proxy only\npat:viewer:-\n"))
		if err != nil {
			t.Fatal(err)
		}
		if !us["alice"].Has(Resolver) || !us["alice"].Has(Approver) || us["rita"].Has(Approver) || !us["vic"].Has(Viewer) {
			t.Fatalf("roles: %+v", us)
		}
		if _, ok := us.authenticate("rita", "pw-rita"); !ok {
			t.Error("rita's password refused")
		}
		for _, c := range [][2]string{{"rita", "pw-alice"}, {"nobody", "pw-nobody"}, {"pat", ""}, {"pat", "-"}} {
			if _, ok := us.authenticate(c[0], c[1]); ok {
				t.Errorf("%s signed in with %q", c[0], c[1])
			}
		}
	})
	t.Run("every bad line is named, and the file is refused whole", func(t *testing.T) {
		_, err := ParseUsers(strings.NewReader("ok:viewer:-\nbad line\nx:boss:-\ny:viewer:notahash\nok:viewer:-\nsp ace:viewer:-\n"))
		if err == nil {
			t.Fatal("accepted")
		}
		for _, want := range []string{"line 2: want name:roles:hash", `line 3 (x): unknown role "boss"`, "line 4 (y): the hash is not a bcrypt hash", "line 5: ok is listed twice", "line 6:"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q lacks %q", err, want)
			}
		}
	})
	t.Run("console-user's line reads back", func(t *testing.T) {
		h, err := hashPassword([]byte("s3cret"), bcrypt.MinCost) // HashPassword's cost takes seconds under -race
		if err != nil {
			t.Fatal(err)
		}
		line, err := UserLine("ops.lead@example", []Role{Resolver, Approver}, h)
		if err != nil {
			t.Fatal(err)
		}
		us, err := ParseUsers(strings.NewReader(line))
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := us.authenticate("ops.lead@example", "s3cret"); !ok || !us["ops.lead@example"].Has(Approver) {
			t.Fatalf("%q does not read back: %+v", line, us)
		}
		if _, err := UserLine("a:b", []Role{Viewer}, h); err == nil || !strings.Contains(err.Error(), "-name") {
			t.Errorf("a name with a colon: %v", err)
		}
	})
}

// A sign-in is refused after MaxFailures wrong passwords for one name from
// one address, even with the right password, until the window passes;
// another address, or another name, is not held back.
func TestSignInLimit(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	a := f.agent("192.0.2.1:1000")
	for i := 0; i < MaxFailures; i++ {
		rw := a.do("POST", "/login", url.Values{"csrf": {a.csrf("/login")}, "name": {"rita"}, "password": {"wrong"}})
		if rw.Code != http.StatusUnauthorized {
			t.Fatalf("failure %d: %d", i, rw.Code)
		}
	}
	rw := a.do("POST", "/login", url.Values{"csrf": {a.csrf("/login")}, "name": {"rita"}, "password": {"pw-rita"}})
	if rw.Code != http.StatusTooManyRequests || !strings.Contains(rw.Body.String(), "Too many failed sign-ins") {
		t.Fatalf("right password after %d failures: %d, want 429", MaxFailures, rw.Code)
	}
	// RFC 9110: Retry-After is a number of seconds (or a date), not "15m0s".
	if ra, err := strconv.Atoi(rw.Header().Get("Retry-After")); err != nil || ra <= 0 || ra > int(FailureWindow/time.Second) {
		t.Errorf("Retry-After %q, want the seconds until the window passes", rw.Header().Get("Retry-After"))
	}
	f.agent("192.0.2.2:1000").signIn("rita")
	f.agent("192.0.2.1:1001").signIn("alice")
	f.clock.advance(FailureWindow + time.Second)
	a.signIn("rita")
	// A sign-in form left open past the session's idle time is refused
	// with a fresh form, which then works.
	late := f.agent("192.0.2.3:1000")
	token := late.csrf("/login")
	f.clock.advance(DefaultSessionIdle + time.Second)
	rw = late.do("POST", "/login", url.Values{"csrf": {token}, "name": {"amy"}, "password": {"pw-amy"}})
	if rw.Code != http.StatusForbidden || !strings.Contains(rw.Body.String(), "has expired") {
		t.Fatalf("an expired sign-in form: %d", rw.Code)
	}
	fresh := csrfField.FindStringSubmatch(rw.Body.String())
	if rw := late.do("POST", "/login", url.Values{"csrf": {fresh[1]}, "name": {"amy"}, "password": {"pw-amy"}}); rw.Code != http.StatusSeeOther {
		t.Fatalf("the fresh form: %d", rw.Code)
	}
}

// A POST without the session's CSRF token, with another one, or from
// another origin is refused with 403 and writes nothing; the same form with
// the token goes through.
func TestCSRFRefusesForgedForms(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	id, refundID := f.reviewJob("csrf-1", true, "not found after the lag", "{}")
	a := f.agent("192.0.2.1:1000")
	a.signIn("rita")
	token := a.csrf(fmt.Sprintf("/jobs/%d", id))
	form := func(csrf string) url.Values {
		v := url.Values{"as": {"succeeded"}, "refund_id": {refundID}, "reason": {"the provider shows it"}, "seen_attempt": {"1"}}
		if csrf != "" {
			v.Set("csrf", csrf)
		}
		return v
	}
	path := fmt.Sprintf("/jobs/%d/resolve", id)
	other := f.agent("192.0.2.9:1000")
	other.signIn("alice")
	for name, try := range map[string]func() int{
		"no token":                func() int { return a.do("POST", path, form("")).Code },
		"a made-up token":         func() int { return a.do("POST", path, form("forged")).Code },
		"another session's token": func() int { return a.do("POST", path, form(other.csrf("/"))).Code },
		"the right token from another site": func() int {
			a.header.Set("Sec-Fetch-Site", "cross-site")
			defer a.header.Set("Sec-Fetch-Site", "same-origin")
			return a.do("POST", path, form(token)).Code
		},
		"the right token from another origin (no Sec-Fetch-Site)": func() int {
			a.header.Del("Sec-Fetch-Site")
			a.header.Set("Origin", "http://evil.test")
			defer func() { a.header.Del("Origin"); a.header.Set("Sec-Fetch-Site", "same-origin") }()
			return a.do("POST", path, form(token)).Code
		},
	} {
		if code := try(); code != http.StatusForbidden {
			t.Errorf("%s: %d, want 403", name, code)
		}
		if state, attempt := f.jobRow(id); state != "manual_review" || attempt != 1 {
			t.Fatalf("after %s the job is %s at attempt %d", name, state, attempt)
		}
	}
	if n := f.audits(id); n != 0 {
		t.Fatalf("refused forms left %d audit entries", n)
	}
	if rw := a.do("POST", path, form(token)); rw.Code != http.StatusSeeOther {
		t.Fatalf("the console's own form: %d %s", rw.Code, rw.Body)
	}
	if state, attempt := f.jobRow(id); state != "succeeded" || attempt != 2 {
		t.Fatalf("resolved job is %s at attempt %d", state, attempt)
	}
}

// A viewer reads but gets no resolve form, and a resolve they post anyway
// (with their own valid token) is refused 403; a resolver cannot approve.
func TestRolesAreChecked(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	id, _ := f.reviewJob("roles-1", false, "not found after the lag", "{}")
	vic := f.agent("192.0.2.1:1000")
	vic.signIn("vic")
	page := vic.do("GET", fmt.Sprintf("/jobs/%d", id), nil)
	if page.Code != http.StatusOK || strings.Contains(page.Body.String(), `id="resolve-form"`) || !strings.Contains(page.Body.String(), `id="read-only"`) {
		t.Fatalf("viewer's job page: %d, resolve form shown: %v", page.Code, strings.Contains(page.Body.String(), "resolve-form"))
	}
	token := vic.csrf("/")
	rw := vic.do("POST", fmt.Sprintf("/jobs/%d/resolve", id), url.Values{"csrf": {token}, "as": {"reconcile"}, "reason": {"try"}, "seen_attempt": {"1"}})
	if rw.Code != http.StatusForbidden || !strings.Contains(rw.Body.String(), "resolver role") {
		t.Fatalf("viewer's resolve: %d", rw.Code)
	}
	rita := f.agent("192.0.2.2:1000")
	rita.signIn("rita")
	if rw := rita.do("POST", "/approvals/1/approve", url.Values{"csrf": {rita.csrf("/")}}); rw.Code != http.StatusForbidden {
		t.Fatalf("resolver's approval: %d", rw.Code)
	}
	if state, attempt := f.jobRow(id); state != "manual_review" || attempt != 1 {
		t.Fatalf("the job is %s at attempt %d", state, attempt)
	}
	if n := f.audits(id); n != 0 {
		t.Fatalf("refused actions left %d audit entries", n)
	}
}

// With a proxy's identity header, the console believes it only on a
// connection from the trusted proxies; from anywhere else, with or without
// the header, it refuses; it serves no sign-in form.
func TestProxyHeaderTrustedOnlyFromProxies(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *Config) {
		c.AuthHeader = "X-Forwarded-User"
		c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	})
	proxy := f.agent("10.1.2.3:4000")
	proxy.header.Set("X-Forwarded-User", "rita")
	if rw := proxy.do("GET", "/", nil); rw.Code != http.StatusOK || !strings.Contains(rw.Body.String(), `<span id="who">rita</span>`) || strings.Contains(rw.Body.String(), `id="logout"`) {
		t.Fatalf("through the proxy: %d (a sign-out button: %v)", rw.Code, strings.Contains(rw.Body.String(), `id="logout"`))
	}
	direct := f.agent("192.0.2.1:4000")
	direct.header.Set("X-Forwarded-User", "alice")
	if rw := direct.do("GET", "/", nil); rw.Code != http.StatusForbidden {
		t.Fatalf("the header from an untrusted address: %d, want 403", rw.Code)
	}
	direct.header.Del("X-Forwarded-User")
	if rw := direct.do("GET", "/", nil); rw.Code != http.StatusForbidden {
		t.Fatalf("no header from an untrusted address: %d, want 403", rw.Code)
	}
	if rw := direct.do("POST", "/login", url.Values{"name": {"rita"}, "password": {"pw-rita"}}); rw.Code == http.StatusSeeOther {
		t.Fatal("password sign-in accepted in proxy mode")
	}
	stranger := f.agent("10.1.2.3:4001")
	stranger.header.Set("X-Forwarded-User", "mallory")
	if rw := stranger.do("GET", "/", nil); rw.Code != http.StatusForbidden {
		t.Fatalf("a name the users file does not list: %d", rw.Code)
	}
	// The session follows the header: a cookie of rita's with another name
	// in the header is alice's, with alice's roles.
	proxy.header.Set("X-Forwarded-User", "vic")
	if rw := proxy.do("GET", "/", nil); !strings.Contains(rw.Body.String(), `<span id="who">vic</span>`) {
		t.Fatal("the session kept rita's name under vic's header")
	}
}

// Provider evidence and reasons are rendered as text, never markup.
func TestEvidenceIsEscaped(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	const evil = `<script>alert("pwned")</script><img src=x onerror=alert(1)>`
	id, _ := f.reviewJob("xss-1", false, "reason "+evil, `{"note":"`+evil+`"}`)
	a := f.agent("192.0.2.1:1000")
	a.signIn("rita")
	for _, path := range []string{fmt.Sprintf("/jobs/%d", id), "/queue"} {
		body := a.do("GET", path, nil).Body.String()
		if strings.Contains(body, "<script>") || strings.Contains(body, "<img") {
			t.Errorf("%s renders the evidence as markup", path)
		}
		if !strings.Contains(body, "&lt;script&gt;alert(&#34;pwned&#34;)&lt;/script&gt;") {
			t.Errorf("%s does not show the evidence as text", path)
		}
	}
}

// Every page carries the security headers; the session cookie is HttpOnly
// and SameSite=Strict, Secure with the __Host- prefix when asked.
func TestHeadersAndCookies(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *Config) { c.SecureCookies = true })
	a := f.agent("192.0.2.1:1000")
	rw := a.do("GET", "/login", nil)
	h := rw.Header()
	if csp := h.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") || !strings.Contains(csp, "frame-ancestors 'none'") {
		t.Errorf("CSP %q", csp)
	}
	if h.Get("X-Frame-Options") != "DENY" || h.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("headers %v", h)
	}
	for _, name := range []string{"__Host-fencekit_signin", "__Host-fencekit_console"} {
		if name == "__Host-fencekit_console" {
			a.signIn("vic")
		}
		c := a.jar[name]
		if c == nil || !c.HttpOnly || !c.Secure || c.SameSite != http.SameSiteStrictMode || c.Path != "/" {
			t.Fatalf("cookie %s: %+v", name, c)
		}
	}
	if rw := a.do("GET", "/static/console.css", nil); rw.Code != http.StatusOK || !strings.HasPrefix(rw.Header().Get("Content-Type"), "text/css") {
		t.Errorf("the embedded stylesheet: %d %s", rw.Code, rw.Header().Get("Content-Type"))
	}
}

// A session ends after SessionIdle unused, and a signed-out session's id is
// worth nothing.
func TestSessionsEnd(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	a := f.agent("192.0.2.1:1000")
	a.signIn("rita")
	if rw := a.do("GET", "/", nil); rw.Code != http.StatusOK {
		t.Fatalf("signed in: %d", rw.Code)
	}
	f.clock.advance(DefaultSessionIdle + time.Second)
	if rw := a.do("GET", "/", nil); rw.Code != http.StatusSeeOther || rw.Header().Get("Location") != "/login" {
		t.Fatalf("after the idle time: %d %s", rw.Code, rw.Header().Get("Location"))
	}
	a.signIn("rita")
	old := *a.session()
	if rw := a.do("POST", "/logout", url.Values{"csrf": {a.csrf("/")}}); rw.Code != http.StatusSeeOther {
		t.Fatalf("sign out: %d", rw.Code)
	}
	a.setSession(&old)
	if rw := a.do("GET", "/", nil); rw.Code != http.StatusSeeOther {
		t.Fatalf("the signed-out session still serves: %d", rw.Code)
	}
	big := url.Values{"csrf": {"x"}, "reason": {strings.Repeat("a", MaxBody)}}
	a.signIn("rita")
	if rw := a.do("POST", "/jobs/1/resolve", big); rw.Code != http.StatusRequestEntityTooLarge {
		t.Fatalf("a form over MaxBody: %d, want 413", rw.Code)
	}
}

// The dashboard's queries read indexes, not the table.
func TestDashboardQueriesUseIndexes(t *testing.T) {
	t.Parallel()
	db := dbtest.New(t)
	raw := db.RawDB()
	for _, q := range []string{countState, lowestID} {
		for _, a := range dbtest.Explain(t, raw, q, "ready") {
			if a.Table == "refund_jobs" && a.Key == "" {
				t.Errorf("%s scans refund_jobs without an index: %+v", q, a)
			}
		}
	}
	// The attempts log as a deployment holds it (the bench's fill, 20,000
	// jobs over five and a half hours): with an empty log the optimizer's
	// choice says nothing.
	logged := dbtest.NewWithHistory(t, 1, func(raw *sql.DB) { fill(t, raw, 20_000) })
	fillAttempts(t, logged.RawDB())
	raw = logged.RawDB()
	since := time.Now().UTC().Add(-TakeoverWindow)
	for _, a := range dbtest.Explain(t, raw, countAttempts, "takeover", since) {
		if a.Table == "refund_job_attempts" && a.Key != "refund_job_attempts_op" {
			t.Errorf("%s does not read the attempts log's (op, claimed_at) index: %+v", countAttempts, a)
		}
	}
	// Both columns of it: a range, not every row of the op (a clock in
	// the query, SYSDATE(6), is read per row and leaves only op's ref).
	// The values are written into the text: EXPLAIN of a prepared
	// statement plans without them.
	literal := strings.Replace(strings.Replace(countAttempts, "?", "'claim'", 1), "?", "'"+since.Format("2006-01-02 15:04:05.000000")+"'", 1)
	for _, row := range dbtest.ExplainRows(t, raw, literal) {
		if typ, ok := row["type"]; ok && row["table"] == "refund_job_attempts" && typ != "range" {
			t.Errorf("%s reads the attempts log by %q, want a range of (op, claimed_at): %v", countAttempts, typ, row)
		}
	}
	for _, a := range dbtest.Explain(t, raw, jobAge, 1) {
		if a.Key != "PRIMARY" && a.Table == "refund_jobs" {
			t.Errorf("%s: %+v", jobAge, a)
		}
	}
}

// Two resolvers look at one job; the first resolves it; the second's form,
// made on the attempt they saw, is refused with 409 and the reason, and
// writes nothing more.
func TestStaleFormRefused(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	id, _ := f.reviewJob("stale-1", false, "not found after the lag", "{}")
	rita, alice := f.agent("192.0.2.1:1000"), f.agent("192.0.2.2:1000")
	rita.signIn("rita")
	alice.signIn("alice")
	path := fmt.Sprintf("/jobs/%d", id)
	ritaToken, aliceToken := rita.csrf(path), alice.csrf(path)
	form := func(token, reason string) url.Values {
		return url.Values{"csrf": {token}, "as": {"reconcile"}, "reason": {reason}, "seen_attempt": {"1"}}
	}
	if rw := rita.do("POST", path+"/resolve", form(ritaToken, "ask again")); rw.Code != http.StatusSeeOther {
		t.Fatalf("first resolution: %d %s", rw.Code, rw.Body)
	}
	rw := alice.do("POST", path+"/resolve", form(aliceToken, "ask again too"))
	if rw.Code != http.StatusConflict || !strings.Contains(rw.Body.String(), "the job moved since it was seen") {
		t.Fatalf("the stale form: %d", rw.Code)
	}
	if _, attempt := f.jobRow(id); attempt != 2 {
		t.Fatalf("attempt %d after one resolution", attempt)
	}
}

// Search by a field, or by any; one match opens the job; an unknown field
// is refused naming it.
func TestSearch(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	id, refundID := f.reviewJob("search-1", true, "r", "{}")
	f.reviewJob("search-2", false, "r", "{}")
	a := f.agent("192.0.2.1:1000")
	a.signIn("vic")
	for _, q := range []string{"by=key&q=search-1", "q=search-1", "by=payment&q=pay-search-1"} {
		if rw := a.do("GET", "/search?"+q, nil); rw.Code != http.StatusSeeOther || rw.Header().Get("Location") != fmt.Sprintf("/jobs/%d", id) {
			t.Errorf("%s: %d %s", q, rw.Code, rw.Header().Get("Location"))
		}
	}
	if refundID != "" { // the job in review holds no refund id yet: the search finds none
		if rw := a.do("GET", "/search?by=refund&q="+url.QueryEscape(refundID), nil); rw.Code != http.StatusOK || !strings.Contains(rw.Body.String(), "No job matches") {
			t.Errorf("by refund id of a job that does not hold it: %d", rw.Code)
		}
	}
	if rw := a.do("GET", "/search?by=nope&q=x", nil); rw.Code != http.StatusBadRequest || !strings.Contains(rw.Body.String(), `by=&#34;nope&#34;`) {
		t.Errorf("an unknown field: %d", rw.Code)
	}
	for _, path := range []string{"/jobs/999999", "/jobs/x"} {
		if rw := a.do("GET", path, nil); rw.Code != http.StatusNotFound {
			t.Errorf("%s: %d, want 404", path, rw.Code)
		}
	}
}

// An approver declines a request with a reason: the job is untouched and
// the request leaves the queue; a resolver cannot decline, and a decline
// without a reason is refused naming the field.
func TestDecline(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	id, _ := f.reviewJob("decline-1", false, "not found after the lag", "{}")
	rita := f.agent("192.0.2.1:1000")
	rita.signIn("rita")
	path := fmt.Sprintf("/jobs/%d", id)
	if rw := rita.do("POST", path+"/request", url.Values{"csrf": {rita.csrf(path)}, "as": {"override"}, "refund_id": {"re_unknown"},
		"reason": {"the bank shows it"}, "seen_attempt": {"1"}}); rw.Code != http.StatusSeeOther {
		t.Fatalf("request: %d %s", rw.Code, rw.Body)
	}
	req := f.pendingApproval(id)
	decline := fmt.Sprintf("/approvals/%d/decline", req)
	if rw := rita.do("POST", decline, url.Values{"csrf": {rita.csrf("/approvals")}, "reason": {"mine"}}); rw.Code != http.StatusForbidden {
		t.Fatalf("a resolver's decline: %d, want 403", rw.Code)
	}
	amy := f.agent("192.0.2.2:1000")
	amy.signIn("amy")
	if rw := amy.do("POST", decline, url.Values{"csrf": {amy.csrf("/approvals")}}); rw.Code != http.StatusUnprocessableEntity || !strings.Contains(rw.Body.String(), "reason") {
		t.Fatalf("a decline without a reason: %d", rw.Code)
	}
	if rw := amy.do("POST", decline, url.Values{"csrf": {amy.csrf("/approvals")}, "reason": {"no proof the bank's refund is this one"}}); rw.Code != http.StatusSeeOther {
		t.Fatalf("decline: %d %s", rw.Code, rw.Body)
	}
	if state, attempt := f.jobRow(id); state != "manual_review" || attempt != 1 {
		t.Fatalf("after a decline the job is %s at attempt %d", state, attempt)
	}
	if body := amy.do("GET", "/approvals", nil).Body.String(); strings.Contains(body, fmt.Sprintf(`id="approval-%d"`, req)) {
		t.Fatal("the declined request is still in the queue")
	}
	if rw := amy.do("POST", fmt.Sprintf("/approvals/%d/approve", req), url.Values{"csrf": {amy.csrf("/approvals")}}); rw.Code != http.StatusConflict {
		t.Fatalf("approving a declined request: %d, want 409", rw.Code)
	}
}

// The dashboard counts jobs by state, finds the oldest unfinished job and
// compares its age with the SLO, counts the fleet's takeovers over the last
// hour from the attempts log, and shows this process's counters labelled
// as such.
func TestDashboard(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *Config) {
		c.SLO = time.Microsecond // every unfinished job is over it
		c.Counters = func() Counters {
			return Counters{Takeovers: 3, StaleWrites: map[string]float64{"complete": 2, "reschedule": 1}, Calls: map[string]float64{"send": 6, "reconcile": 2}}
		}
	})
	first, _ := f.reviewJob("dash-1", false, "r", "{}")
	f.reviewJob("dash-2", false, "r", "{}")
	f.takenOver("dash-3", "worker-a/1", "worker-b/2") // another process's takeover: not in this process's counters
	a := f.agent("192.0.2.1:1000")
	a.signIn("vic")
	body := a.do("GET", "/", nil).Body.String()
	for _, want := range []string{
		// Money first: each unfinished state's jobs and money, linking to
		// their lists.
		`<tr id="stake-manual_review"><td><a href="/queue">In manual review: an operator must decide</a></td><td class="num"><a href="/queue">2</a></td><td>25.00 EUR</td></tr>`,
		`<tr id="stake-ready"><td><a href="/search?state=ready">Waiting to be sent or checked</a></td><td class="num"><a href="/search?state=ready">0</a></td><td>nothing</td></tr>`,
		`<tr id="stake-running"><td><a href="/search?state=running">Being sent or checked now</a></td><td class="num"><a href="/search?state=running">1</a></td><td>12.50 EUR</td></tr>`,
		`<tr id="settled-failed"><td><a href="/search?state=failed">Not refunded (declined)</a></td><td class="num"><a href="/search?state=failed">0</a></td></tr>`,
		fmt.Sprintf(`<a href="/jobs/%d">job %d</a>`, first, first), "<strong>over the SLO</strong>",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the dashboard lacks %q", want)
		}
	}
	for _, engineering := range []string{`id="takeovers"`, `id="fence"`, `id="budget"`, "Reconcile share", "calls free"} {
		if strings.Contains(body, engineering) {
			t.Errorf("the dashboard shows engineering figures (%q): they have a tab of their own", engineering)
		}
	}
	body = a.do("GET", "/engineering", nil).Body.String()
	for _, want := range []string{
		"Takeovers, whole fleet, last 1h", `<p class="big">1</p>`, "against 3 claim(s), by every process (the attempts log)",
		"This process only, since it started",
		"Stale writes refused by the fence: <strong>3 (complete 2, reschedule 1)</strong>", "Takeovers by this process: 3",
		"Reconcile share: <strong>2 of 8 provider calls (25%)</strong>",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the engineering tab lacks %q", want)
		}
	}
}

// Served over TLS, the console marks its cookie Secure (with the __Host-
// prefix) and sends HSTS without being asked.
func TestTLSMakesCookiesSecure(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	srv := httptest.NewTLSServer(f.con)
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL + "/login")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	cs := resp.Cookies()
	if len(cs) != 1 || cs[0].Name != "__Host-fencekit_signin" || !cs[0].Secure || !cs[0].HttpOnly || cs[0].SameSite != http.SameSiteStrictMode {
		t.Fatalf("cookies over TLS: %+v", cs)
	}
	if resp.Header.Get("Strict-Transport-Security") == "" {
		t.Error("no HSTS over TLS")
	}
	plain := f.agent("192.0.2.1:1000")
	plain.signIn("vic")
	if c := plain.session(); c == nil || c.Secure || c.Name != "fencekit_console" {
		t.Fatalf("cookie over plain HTTP without -console-secure-cookies: %+v", c)
	}
}

// A link from another site reaches the console without the SameSite=Strict
// cookie: the console reloads the page from itself instead of starting a
// new session, so the operator stays signed in.
func TestCrossSiteLinkKeepsTheSession(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	a := f.agent("192.0.2.1:1000")
	a.signIn("vic")
	session := a.session()
	a.setSession(nil) // what the browser sends on a cross-site navigation
	a.header.Set("Sec-Fetch-Site", "cross-site")
	rw := a.do("GET", "/queue", nil)
	if rw.Code != http.StatusOK || !strings.Contains(rw.Body.String(), `<meta http-equiv="refresh" content="0">`) || len(rw.Result().Cookies()) != 0 {
		t.Fatalf("a cross-site link: %d, cookies %v", rw.Code, rw.Result().Cookies())
	}
	a.setSession(session) // the reload comes from the console's own page
	a.header.Set("Sec-Fetch-Site", "same-origin")
	if rw := a.do("GET", "/queue", nil); rw.Code != http.StatusOK || !strings.Contains(rw.Body.String(), `<span id="who">vic</span>`) {
		t.Fatalf("the reload: %d", rw.Code)
	}
}

// A proxy that appends its identity header to the client's instead of
// replacing it forwards two values, the client's first: the console must
// believe neither, not the first one it reads.
func TestProxyHeaderWithTwoValuesRefused(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *Config) {
		c.AuthHeader = "X-Forwarded-User"
		c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	})
	a := f.agent("10.1.2.3:4000")
	for name, values := range map[string][]string{
		"the client's name, then the proxy's": {"alice", "vic"},
		"the same name twice":                 {"vic", "vic"},
		"a comma-joined list":                 {"alice, vic"},
	} {
		a.header["X-Forwarded-User"] = values
		if rw := a.do("GET", "/", nil); rw.Code != http.StatusForbidden {
			t.Errorf("%s: %d, want 403 (signed in as %q)", name, rw.Code, regexp.MustCompile(`<span id="who">([^<]*)</span>`).FindStringSubmatch(rw.Body.String()))
		}
	}
	// Held before: a spelling with underscores is another header, and a
	// forwarded-for header never makes an untrusted peer a proxy.
	delete(a.header, "X-Forwarded-User")
	a.header["X_forwarded_user"] = []string{"alice"}
	if rw := a.do("GET", "/", nil); rw.Code != http.StatusForbidden {
		t.Errorf("the header spelled with underscores: %d, want 403", rw.Code)
	}
	direct := f.agent("192.0.2.1:4000")
	direct.header.Set("X-Forwarded-User", "alice")
	direct.header.Set("X-Forwarded-For", "10.1.2.3")
	direct.header.Set("X-Real-Ip", "10.1.2.3")
	direct.header.Set("Forwarded", "for=10.1.2.3")
	if rw := direct.do("GET", "/", nil); rw.Code != http.StatusForbidden {
		t.Errorf("an untrusted peer claiming a proxy's address in forwarded headers: %d, want 403", rw.Code)
	}
}

// A session id planted before sign-in (session fixation) is worth nothing
// after it: sign-in issues a new id, and the planted one stays anonymous.
func TestSignInRotatesTheSessionID(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	victim := f.agent("192.0.2.1:1000")
	victim.csrf("/login")
	planted := *victim.jar["fencekit_signin"]
	planted.Name = "fencekit_console" // the attacker plants a session cookie of their choice
	victim.jar[planted.Name] = &planted
	victim.signIn("rita")
	if victim.session().Value == planted.Value {
		t.Fatal("sign-in kept the session id from before it")
	}
	attacker := f.agent("192.0.2.66:1000")
	attacker.setSession(&planted)
	if rw := attacker.do("GET", "/", nil); rw.Code != http.StatusSeeOther || rw.Header().Get("Location") != "/login" {
		t.Fatalf("the planted id after the victim signed in: %d %s, want a redirect to /login", rw.Code, rw.Header().Get("Location"))
	}
}

// A state change never rides on a GET, a token in the URL, or a body that
// is not a form: each is refused and the job stays where it was.
func TestStateChangesOnlyByTheConsolesForm(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	id, _ := f.reviewJob("methods-1", false, "r", "{}")
	a := f.agent("192.0.2.1:1000")
	a.signIn("rita")
	token := a.csrf("/")
	path := fmt.Sprintf("/jobs/%d/resolve", id)
	form := url.Values{"as": {"reconcile"}, "reason": {"ask again"}, "seen_attempt": {"1"}}
	if rw := a.do("GET", path+"?"+form.Encode()+"&csrf="+token, nil); rw.Code != http.StatusMethodNotAllowed {
		t.Errorf("GET of the resolve action: %d, want 405", rw.Code)
	}
	if rw := a.do("POST", path+"?csrf="+token, form); rw.Code != http.StatusForbidden {
		t.Errorf("the token in the URL instead of the form: %d, want 403", rw.Code)
	}
	withToken := url.Values{"csrf": {token}}
	for k, v := range form {
		withToken[k] = v
	}
	r := httptest.NewRequest("POST", "http://console.test"+path, strings.NewReader(withToken.Encode()))
	r.RemoteAddr, r.Header = a.remote, http.Header{"Sec-Fetch-Site": {"same-origin"}, "Content-Type": {"text/plain"}}
	r.AddCookie(a.session())
	rw := httptest.NewRecorder()
	f.con.ServeHTTP(rw, r)
	if rw.Code != http.StatusForbidden {
		t.Errorf("a text/plain body (what a cross-site form can send without preflight): %d, want 403", rw.Code)
	}
	if state, attempt := f.jobRow(id); state != "manual_review" || attempt != 1 {
		t.Fatalf("the job is %s at attempt %d", state, attempt)
	}
}

// Every field an attacker controls (operation key, payment reference, the
// provider's refund id, reasons, evidence) is text on every page, in
// element content, attributes and URLs alike.
func TestAttackerFieldsAreTextOnEveryPage(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	const evil = `"'><svg/onload=alert(1)>`
	key := "k" + evil
	id, _ := f.reviewJob(key, false, "reason <script>alert(2)</script>", `{"x":"`+strings.ReplaceAll(evil, `"`, `\"`)+`"}`)
	if _, err := f.op.RequestApproval(context.Background(), operator.Resolution{JobID: id, As: operator.AsSucceeded, Override: true,
		RefundID: "re_" + evil, Reason: "why <script>alert(3)</script>", Operator: "rita", SeenAttempt: 1}); err != nil {
		t.Fatal(err)
	}
	a := f.agent("192.0.2.1:1000")
	a.signIn("alice")
	for _, path := range []string{"/", "/queue", fmt.Sprintf("/jobs/%d", id), "/approvals", "/search?by=key&q=" + url.QueryEscape(key),
		"/search?by=refund&q=" + url.QueryEscape("re_"+evil), "/search?q=" + url.QueryEscape(evil)} {
		rw := a.do("GET", path, nil)
		body := rw.Body.String()
		if rw.Code != http.StatusOK && rw.Code != http.StatusSeeOther {
			t.Errorf("%s: %d", path, rw.Code)
		}
		if strings.Contains(body, "<svg") || strings.Contains(body, "<script") || strings.Contains(body, `"'>`) {
			t.Errorf("%s renders attacker text as markup:\n%s", path, body)
		}
		if (path == "/approvals" || strings.HasPrefix(path, "/jobs/")) && !strings.Contains(body, "re_&#34;&#39;&gt;&lt;svg/onload=alert(1)&gt;") {
			t.Errorf("%s does not show the refund id as text", path)
		}
	}
}

// The job's page says which process held each attempt: after a takeover
// moved the row on, the claim's holder and the takeover's both show, with
// when and until when; an operator's resolution shows the operator.
func TestJobPageNamesEachAttemptsHolder(t *testing.T) {
	t.Parallel()
	f := newFixture(t, nil)
	id, taker := f.takenOver("held-1", "worker-a.example/101", "worker-b.example/202")
	a := f.agent("192.0.2.1:1000")
	a.signIn("vic")
	rw := a.do("GET", fmt.Sprintf("/jobs/%d", id), nil)
	body := rw.Body.String()
	if rw.Code != http.StatusOK {
		t.Fatalf("the job page: %d", rw.Code)
	}
	for _, want := range []string{
		`<tr class="attempt" id="attempt-1"><td>1</td><td class="op">claim</td><td class="mono holder">worker-a.example/101</td>`,
		`<tr class="attempt" id="attempt-2"><td>2</td><td class="op">takeover</td><td class="mono holder">worker-b.example/202</td>`,
		"<td>" + operator.Stamp(taker.ClaimedAt()) + "</td><td>" + operator.Stamp(taker.LeaseUntil()) + "</td>",
		"claim by worker-a.example/101",
		"worker-b.example/202 took it over (attempt 2) after the lease of attempt 1 expired, to ask the provider what became of the last send (a takeover never sends); leased until " + operator.Stamp(taker.LeaseUntil()),
		`<span class="money unknown">Unknown:</span> <span class="status-text">12.50 EUR sent ` + operator.Stamp(*jobOf(t, f, id).LastSendAt) + ", no answer recorded yet; the provider may have paid.", // money first, even while running
		"worker-b.example/202 is asking the provider about it now (lease until " + operator.Stamp(taker.LeaseUntil()) + ")",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the job page lacks %q", want)
		}
	}
}

func jobOf(t *testing.T, f *fixture, id int64) *ent.RefundJob {
	t.Helper()
	j, err := f.client.RefundJob.Get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return j
}
