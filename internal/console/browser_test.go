package console

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	cdppage "github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/fencekit/fencekit/fencedwrite"
)

// The browser tests drive Debian's headless Chromium (scripts/
// ensure-chromium.sh installs it; $FENCEKIT_CHROMIUM names another) with
// chromedp: one browser for the package, a browser context of its own (its
// own cookies) for every operator. Without a browser they fail, never skip.
//
// FENCEKIT_SCREENSHOTS=1 writes the screenshots of docs/operators.md into
// docs/operators/.

var shared struct {
	once   sync.Once
	ctx    context.Context
	cancel []context.CancelFunc
	err    error
}

func TestMain(m *testing.M) {
	code := m.Run()
	for _, c := range shared.cancel {
		c()
	}
	os.Exit(code)
}

// browser is the package's one headless Chromium, started on first use.
func browser(t testing.TB) context.Context {
	t.Helper()
	shared.once.Do(func() {
		path := os.Getenv("FENCEKIT_CHROMIUM")
		if path == "" {
			path = "/usr/bin/chromium"
		}
		if _, err := os.Stat(path); err != nil {
			shared.err = fmt.Errorf("no Chromium for the browser tests at %s (run scripts/ensure-chromium.sh, or set FENCEKIT_CHROMIUM): %w", path, err)
			return
		}
		opts := append(chromedp.DefaultExecAllocatorOptions[:],
			chromedp.ExecPath(path), chromedp.NoSandbox, chromedp.Headless, chromedp.DisableGPU,
			chromedp.WindowSize(1280, 900))
		alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
		ctx, cancel := chromedp.NewContext(alloc)
		shared.cancel = []context.CancelFunc{cancel, cancelAlloc}
		// The first Do starts the browser: no timeout on this context.
		if err := chromedp.Do(ctx); err != nil {
			shared.err = fmt.Errorf("start Chromium at %s: %w", path, err)
			return
		}
		shared.ctx = ctx
	})
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.ctx
}

// serve runs the console with its own server settings on a local port.
func (f *fixture) serve() string {
	f.t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.t.Fatal(err)
	}
	srv := f.con.Server()
	go func() { _ = srv.Serve(ln) }()
	f.t.Cleanup(func() { _ = srv.Close() })
	return "http://" + ln.Addr().String()
}

// tab is one operator's browser window, with cookies of its own. Dialogs
// (alert, confirm) are accepted and counted.
type tab struct {
	t       *testing.T
	ctx     context.Context
	base    string
	mu      sync.Mutex
	dialogs []string
}

func (f *fixture) tab(t *testing.T, base string) *tab {
	t.Helper()
	ctx, cancel := chromedp.NewContext(browser(t), chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatal(err)
	}
	tb := &tab{t: t, base: base}
	dialogs := chromedp.Events(ctx, cdppage.JavascriptDialogOpening)
	go func() {
		for ev, err := range dialogs {
			if err != nil {
				return
			}
			tb.mu.Lock()
			tb.dialogs = append(tb.dialogs, ev.Message)
			tb.mu.Unlock()
			_, _ = chromedp.Call(ctx, cdppage.HandleJavaScriptDialog, cdppage.HandleJavaScriptDialogParams{Accept: true})
		}
	}()
	tctx, cancelT := context.WithTimeout(ctx, 2*time.Minute)
	t.Cleanup(cancelT)
	tb.ctx = tctx
	return tb
}

func (tb *tab) do(steps ...chromedp.Action[chromedp.Void]) {
	tb.t.Helper()
	if err := chromedp.Do(tb.ctx, steps...); err != nil {
		tb.t.Fatal(err)
	}
}

// open loads path and returns the HTTP status of the page.
func (tb *tab) open(path string) int64 {
	tb.t.Helper()
	resp, err := chromedp.Run(tb.ctx, chromedp.NavigateResponse(tb.base+path))
	if err != nil {
		tb.t.Fatal(err)
	}
	return resp.Status
}

// submit runs steps that submit a form and returns the status of the page
// the browser lands on (the last of a redirect chain).
func (tb *tab) submit(steps ...chromedp.Action[chromedp.Void]) int64 {
	tb.t.Helper()
	resp, err := chromedp.RunResponse(tb.ctx, steps...)
	if err != nil {
		tb.t.Fatal(err)
	}
	return resp.Status
}

func (tb *tab) text(sel string) string {
	tb.t.Helper()
	s, err := chromedp.Run(tb.ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		tb.t.Fatalf("text of %s: %v", sel, err)
	}
	return s
}

// textContent is the text of sel whether it shows or not (a closed
// <details>, say).
func (tb *tab) textContent(sel string) string {
	tb.t.Helper()
	js, _ := json.Marshal(sel)
	s, err := chromedp.Run(tb.ctx, chromedp.Evaluate[string](fmt.Sprintf(`(document.querySelector(%s) || {textContent: ""}).textContent`, js)))
	if err != nil {
		tb.t.Fatalf("text of %s: %v", sel, err)
	}
	return s
}

func (tb *tab) eval(js string) bool {
	tb.t.Helper()
	v, err := chromedp.Run(tb.ctx, chromedp.Evaluate[bool](js))
	if err != nil {
		tb.t.Fatalf("%s: %v", js, err)
	}
	return v
}

func (tb *tab) location() string {
	tb.t.Helper()
	l, err := chromedp.Run(tb.ctx, chromedp.Location())
	if err != nil {
		tb.t.Fatal(err)
	}
	return strings.TrimPrefix(l, tb.base)
}

// signIn signs in through the form.
func (tb *tab) signIn(name string) {
	tb.t.Helper()
	tb.open("/login")
	tb.do(chromedp.SendKeys(chromedp.CSS("#name"), name), chromedp.SendKeys(chromedp.CSS("#password"), "pw-"+name))
	if status := tb.submit(chromedp.Click(chromedp.CSS("#signin"))); status != http.StatusOK || tb.location() != "/" {
		tb.t.Fatalf("sign in as %s: %d at %s", name, status, tb.location())
	}
}

// post submits a form the page did not offer, built in the page (as a
// person with the browser's developer tools could), with the page's own
// CSRF token unless fields sets one; it returns the answer's status.
func (tb *tab) post(action string, fields map[string]string) int64 {
	tb.t.Helper()
	js, _ := json.Marshal(fields)
	return tb.submit(chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`(() => {
		const f = document.createElement("form");
		f.method = "post"; f.action = %q;
		const fields = %s;
		const own = document.querySelector("input[name=csrf]");
		if (own && !("csrf" in fields)) fields.csrf = own.value;
		for (const [k, v] of Object.entries(fields)) {
			if (v === null) continue;
			const i = document.createElement("input");
			i.type = "hidden"; i.name = k; i.value = v; f.appendChild(i);
		}
		document.body.appendChild(f);
		f.submit();
	})()`, action, js)))
}

// shot saves a screenshot for docs/operators.md when FENCEKIT_SCREENSHOTS=1.
func (tb *tab) shot(name string) {
	tb.t.Helper()
	if os.Getenv("FENCEKIT_SCREENSHOTS") != "1" {
		return
	}
	png, err := chromedp.Run(tb.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		tb.t.Fatal(err)
	}
	dir := filepath.Join("..", "..", "docs", "operators")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		tb.t.Fatal(err)
	}
}

// An operator signs in, finds a job by its operation key from the search
// box, resolves it as succeeded with the refund id the provider confirms,
// and the job page shows it settled, with the operator's action in its
// audit.
func TestBrowserSignInFindAndResolve(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *Config) { c.Now = time.Now })
	id, refundID := f.reviewJob("refund-20261203-0042", true, "not found after the lookup lag", `{"error":{"code":"lookup_lag","message":"no refund for this reference yet"}}`)
	f.reviewJob("refund-20261203-0043", false, "idempotency conflict: same key, different parameters", `{"error":{"code":"idempotency_params_mismatch"}}`)
	base := f.serve()
	rita := f.tab(t, base)
	rita.open("/login")
	rita.shot("login")
	rita.signIn("rita")
	if !strings.Contains(rita.text("#at-stake"), "In manual review") {
		t.Fatalf("dashboard: %q", rita.text("#at-stake"))
	}
	rita.shot("dashboard")
	rita.open("/queue")
	if q := rita.text("#queue"); !strings.Contains(q, "refund-20261203-0042") || !strings.Contains(q, "12.50 EUR") {
		t.Fatalf("queue: %q", q)
	}
	rita.shot("queue")

	rita.do(chromedp.SendKeys(chromedp.CSS("#search-q"), "refund-20261203-0042"))
	rita.submit(chromedp.Click(chromedp.CSS("#search-go")))
	if loc := rita.location(); loc != fmt.Sprintf("/jobs/%d", id) {
		t.Fatalf("search by key landed on %s", loc)
	}
	rita.do(chromedp.SendKeys(chromedp.CSS("#refund-id"), refundID),
		chromedp.SendKeys(chromedp.CSS("#reason"), "the provider's dashboard shows "+refundID+" for this reference, succeeded"))
	rita.shot("job")
	if status := rita.submit(chromedp.Click(chromedp.CSS("#resolve"))); status != http.StatusOK {
		t.Fatalf("resolve: %d", status)
	}
	if s := rita.text("#status"); !strings.HasPrefix(s, "Refunded: 12.50 EUR to pay-refund-20261203-0042, refund "+refundID) {
		t.Fatalf("after resolving, the page shows %q (%s)", s, rita.text("main"))
	}
	if a := rita.text("#audit"); !strings.Contains(a, "rita settled it as refunded on refund "+refundID+", confirmed by the provider") {
		t.Fatalf("audit: %q", a)
	}
	// The attempts log: the fixture's claim by this process, then rita's
	// resolution.
	if a := rita.textContent("#attempts"); !strings.Contains(a, "claim by "+fencedwrite.DefaultHolder()) || !strings.Contains(a, "resolution") ||
		!strings.Contains(a, "resolve_succeeded by rita") {
		t.Fatalf("attempts: %q", a)
	}
	rita.shot("resolved")
	if state, attempt := f.jobRow(id); state != "succeeded" || attempt != 2 {
		t.Fatalf("the job is %s at attempt %d", state, attempt)
	}
}

// Four eyes: a resolver asks to settle a job on a refund id the provider
// does not confirm; the requester cannot approve it (no button, and a
// posted approval is refused); a second operator approves, and the audit
// names both and marks the override.
func TestBrowserFourEyes(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *Config) { c.Now = time.Now })
	id, _ := f.reviewJob("refund-4eyes-1", false, "not found after the lookup lag", `{}`)
	base := f.serve()
	alice := f.tab(t, base)
	alice.signIn("alice")
	alice.open(fmt.Sprintf("/jobs/%d", id))
	alice.do(chromedp.SendKeys(chromedp.CSS("#req-refund-id"), "re_from_the_bank_statement"),
		chromedp.SendKeys(chromedp.CSS("#req-reason"), "the bank statement shows the refund; the provider's lookup is down"))
	alice.submit(chromedp.Click(chromedp.CSS("#request")))
	if fl := alice.text("#flash"); !strings.Contains(fl, "Approval requested") {
		t.Fatalf("flash: %q", fl)
	}
	alice.open("/approvals")
	reqID := f.pendingApproval(id)
	if !alice.eval(`document.querySelector("main .approve") === null`) || !strings.Contains(alice.text(fmt.Sprintf("#approval-%d", reqID)), "Your request") {
		t.Fatal("the requester is offered an approve button for their own request")
	}
	if status := alice.post(fmt.Sprintf("/approvals/%d/approve", reqID), map[string]string{}); status != http.StatusForbidden {
		t.Fatalf("the requester's own approval: %d, want 403", status)
	}
	if !strings.Contains(alice.text("#error"), "another operator must approve it") {
		t.Fatalf("refusal: %q", alice.text("#error"))
	}
	if state, _ := f.jobRow(id); state != "manual_review" {
		t.Fatalf("after the requester's approval the job is %s", state)
	}

	amy := f.tab(t, base)
	amy.signIn("amy")
	amy.open("/approvals")
	amy.shot("approvals")
	amy.do(chromedp.SendKeys(chromedp.CSS(fmt.Sprintf("#confirm-%d", reqID)), "re_from_the_bank_statement"))
	if status := amy.submit(chromedp.Click(chromedp.CSS(fmt.Sprintf("#approve-%d", reqID)))); status != http.StatusOK {
		t.Fatalf("approve: %d", status)
	}
	if s := amy.text("#status"); !strings.HasPrefix(s, "Refunded, UNVERIFIED:") {
		t.Fatalf("after the approval the job says %q", s)
	}
	a := amy.text("#audit")
	if !strings.Contains(a, "amy approved alice's request") || !strings.Contains(a, "WITHOUT the provider's confirmation") {
		t.Fatalf("audit: %q", a)
	}
	amy.shot("approved")
}

// pendingApproval is the id of the job's pending approval request.
func (f *fixture) pendingApproval(jobID int64) int64 {
	f.t.Helper()
	v, err := f.op.Job(context.Background(), jobID)
	if err != nil {
		f.t.Fatal(err)
	}
	for _, a := range v.Approvals {
		if a.Status == "pending" {
			return a.ID
		}
	}
	f.t.Fatalf("job %d has no pending approval request", jobID)
	return 0
}

// Forged forms: the console's own form with its token altered or removed,
// and a page on another origin posting to the console (even with a token
// it somehow learnt), are refused with 403, and nothing is written.
func TestBrowserForgedFormsRefused(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *Config) { c.Now = time.Now })
	id, refundID := f.reviewJob("refund-csrf-1", true, "not found after the lookup lag", `{}`)
	base := f.serve()
	rita := f.tab(t, base)
	rita.signIn("rita")
	fields := func(csrf *string) map[string]string {
		m := map[string]string{"as": "succeeded", "refund_id": refundID, "reason": "forged", "seen_attempt": "1"}
		if csrf != nil {
			m["csrf"] = *csrf
		}
		return m
	}
	wrong, none := "forged-token", ""
	for name, csrf := range map[string]*string{"a wrong token": &wrong, "no token": &none} {
		rita.open(fmt.Sprintf("/jobs/%d", id))
		if status := rita.post(fmt.Sprintf("/jobs/%d/resolve", id), fields(csrf)); status != http.StatusForbidden {
			t.Fatalf("%s: %d, want 403", name, status)
		}
		if !strings.Contains(rita.text("#error"), "did not come from the console") {
			t.Fatalf("%s: %q", name, rita.text("#error"))
		}
	}
	// Another origin (another port: same site, other origin), with the
	// session's real token in its form.
	rita.open(fmt.Sprintf("/jobs/%d", id))
	token, err := chromedp.Run(rita.ctx, chromedp.Evaluate[string](`document.querySelector("input[name=csrf]").value`))
	if err != nil {
		t.Fatal(err)
	}
	evil := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		rw.Header().Set("Content-Type", "text/html")
		if r.URL.Path == "/link" {
			fmt.Fprintf(rw, `<a id="link" href="%s/queue">the queue</a>`, base)
			return
		}
		fmt.Fprintf(rw, `<form method="post" action="%s/jobs/%d/resolve"><input type="hidden" name="csrf" value="%s">
<input type="hidden" name="as" value="succeeded"><input type="hidden" name="refund_id" value="%s">
<input type="hidden" name="reason" value="forged"><input type="hidden" name="seen_attempt" value="1">
<button id="go">Claim your prize</button></form>`, base, id, token, refundID)
	}))
	defer evil.Close()
	if _, err := chromedp.Run(rita.ctx, chromedp.NavigateResponse(evil.URL)); err != nil {
		t.Fatal(err)
	}
	if status := rita.submit(chromedp.Click(chromedp.CSS("#go"))); status != http.StatusForbidden {
		t.Fatalf("a form from %s: %d, want 403", evil.URL, status)
	}
	if state, attempt := f.jobRow(id); state != "manual_review" || attempt != 1 {
		t.Fatalf("after forged forms the job is %s at attempt %d", state, attempt)
	}
	if n := f.audits(id); n != 0 {
		t.Fatalf("forged forms left %d audit entries", n)
	}
	// A plain link from another site (localhost is another site than
	// 127.0.0.1: the browser holds the SameSite=Strict cookie back) opens
	// the console still signed in: the page reloads itself to get it.
	if _, err := chromedp.Run(rita.ctx, chromedp.NavigateResponse(strings.Replace(evil.URL, "127.0.0.1", "localhost", 1)+"/link")); err != nil {
		t.Fatal(err)
	}
	rita.submit(chromedp.Click(chromedp.CSS("#link")))
	wctx, cancel := context.WithTimeout(rita.ctx, 20*time.Second)
	defer cancel()
	if _, err := chromedp.Run(wctx, chromedp.WaitVisible(chromedp.CSS("#queue"))); err != nil {
		t.Fatalf("after a link from another site, no queue at %s: %v", rita.location(), err)
	}
	if who := rita.text("#who"); who != "rita" {
		t.Fatalf("after a link from another site the console shows %q signed in", who)
	}
}

// A <script> in a provider's evidence is shown as text: no dialog opens,
// no script element is in the page, and the text is visible.
func TestBrowserScriptInEvidenceIsText(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *Config) { c.Now = time.Now })
	const evil = `<script>alert("evidence ran")</script><img src=x onerror="alert('img ran')">`
	id, _ := f.reviewJob("refund-xss-1", false, "provider says: "+evil, `{"message":"`+evil+`"}`)
	base := f.serve()
	rita := f.tab(t, base)
	rita.signIn("rita")
	rita.open(fmt.Sprintf("/jobs/%d", id))
	if ev := rita.text("#evidence"); !strings.Contains(ev, `<script>alert("evidence ran")</script>`) {
		t.Fatalf("the evidence is not visible as text: %q", ev)
	}
	if r := rita.textContent("#eng-review-reason"); !strings.Contains(r, "<img src=x") {
		t.Fatalf("the reason is not visible as text: %q", r)
	}
	if !rita.eval(`document.querySelectorAll("main script, main img").length === 0`) {
		t.Fatal("the evidence became elements of the page")
	}
	rita.shot("evidence-escaped")
	rita.open("/queue") // a second page with the reason, and a navigation that flushes events
	rita.mu.Lock()
	defer rita.mu.Unlock()
	if len(rita.dialogs) != 0 {
		t.Fatalf("dialogs opened: %q", rita.dialogs)
	}
}

// A viewer reads the job but gets no form, and a resolve posted anyway
// (with the viewer's own valid token) is refused with 403.
func TestBrowserViewerCannotResolve(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *Config) { c.Now = time.Now })
	id, refundID := f.reviewJob("refund-viewer-1", true, "not found after the lookup lag", `{}`)
	base := f.serve()
	vic := f.tab(t, base)
	vic.signIn("vic")
	vic.open(fmt.Sprintf("/jobs/%d", id))
	if !vic.eval(`document.getElementById("resolve-form") === null && document.getElementById("request-form") === null`) {
		t.Fatal("the viewer is offered a resolve form")
	}
	if !strings.Contains(vic.text("#read-only"), "not resolve it") {
		t.Fatal("no read-only note")
	}
	if status := vic.post(fmt.Sprintf("/jobs/%d/resolve", id), map[string]string{"as": "succeeded", "refund_id": refundID, "reason": "I can't", "seen_attempt": "1"}); status != http.StatusForbidden {
		t.Fatalf("the viewer's resolve: %d, want 403", status)
	}
	if state, attempt := f.jobRow(id); state != "manual_review" || attempt != 1 {
		t.Fatalf("the job is %s at attempt %d", state, attempt)
	}
	if n := f.audits(id); n != 0 {
		t.Fatalf("the viewer's attempt left %d audit entries", n)
	}
}
