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

// The operators' day, in a real browser, asserting what each page says:
// alice finds the oldest job in review and understands it from its status
// line alone (the queue's row and the job's page say the same), says she
// is on it, resolves it on a refund the provider confirms and goes on to the
// next; there she asks for an override on her bank statement's refund id
// (she may approve, but not her own request); amy sees the facts of the
// request (amount, payment, what the provider said, alice's reason), types the refund id to confirm and approves; the
// job is marked unverified for good; amy finds a failed refund by the start
// of its key. The pages of docs/operators.md are these screenshots.
func TestBrowserOperatorsDay(t *testing.T) {
	t.Parallel()
	f := newFixture(t, func(c *Config) { c.Now = time.Now })
	lost := "the provider offers no lookup for this refund: it cannot be reconciled (look up refund: no lookup offered for the query)"
	oldest, refundID := f.reviewJob("refund-20261205-0007", true, lost, `{"error":{"type":"api_error","message":"EOF"}}`)
	next, _ := f.reviewJob("refund-20261205-0012", false, lost, `{"error":{"type":"api_error","message":"EOF"}}`)
	f.reviewJob("refund-20261205-0019", false, "not found after the lookup-lag window; resend not safe: the provider does not guarantee that resending the same key is safe", "{}")
	failed := f.failedJob("refund-20261204-0031", 4200, "JPY")
	base := f.serve()

	alice := f.tab(t, base)
	alice.open("/login")
	alice.shot("login")
	alice.signIn("alice")
	if s := alice.text("#stake-manual_review"); !strings.Contains(s, "In manual review: an operator must decide") || !strings.Contains(s, "3") || !strings.Contains(s, "37.50 EUR") {
		t.Fatalf("the dashboard's money in review: %q", s)
	}
	alice.shot("dashboard")

	// The oldest job, understood from its status line alone.
	alice.open("/queue")
	if s := alice.text("#queue-summary"); !strings.Contains(s, "3 job(s), 37.50 EUR at stake") || !strings.Contains(s, "Answer lost; the provider cannot be asked") {
		t.Fatalf("the queue's summary: %q", s)
	}
	row := alice.text("#queue tbody tr:first-child .status")
	if !strings.HasPrefix(row, "Unknown: 12.50 EUR sent ") || !strings.Contains(row, "the answer was lost") || !strings.Contains(row, "the provider may have paid") ||
		!strings.Contains(row, "Check reference refund-20261205-0007 at the provider") {
		t.Fatalf("the oldest job's status line says %q", row)
	}
	alice.shot("queue")
	alice.submit(chromedp.Click(chromedp.CSS("#queue tbody tr:first-child a")))
	if loc := alice.location(); loc != fmt.Sprintf("/jobs/%d", oldest) {
		t.Fatalf("the oldest job's link opened %s", loc)
	}
	if s := alice.text("#status"); s != row {
		t.Fatalf("the job's status line %q differs from its queue row's %q", s, row)
	}
	alice.submit(chromedp.Click(chromedp.CSS("#onit-go")))
	if s := alice.text("#onit"); !strings.Contains(s, "On it: alice since") {
		t.Fatalf("after I'm on it: %q", s)
	}
	alice.do(chromedp.SendKeys(chromedp.CSS("#refund-id"), refundID),
		chromedp.SendKeys(chromedp.CSS("#reason"), "the provider's dashboard shows "+refundID+" for this reference, succeeded"))
	alice.shot("job")

	// Resolved on a refund the provider confirms; on to the next job.
	if status := alice.submit(chromedp.Click(chromedp.CSS("#resolve-next"))); status != http.StatusOK {
		t.Fatalf("resolve and open the next: %d", status)
	}
	if loc := alice.location(); loc != fmt.Sprintf("/jobs/%d?done=next", next) {
		t.Fatalf("resolve and open the next landed on %s", loc)
	}
	if fl := alice.text("#flash"); !strings.Contains(fl, "This is the next job in the queue") {
		t.Fatalf("flash: %q", fl)
	}
	alice.open(fmt.Sprintf("/jobs/%d", oldest))
	if s := alice.text("#status"); !strings.HasPrefix(s, "Refunded: 12.50 EUR to pay-refund-20261205-0007, refund "+refundID+", confirmed by the provider.") {
		t.Fatalf("the resolved job says %q", s)
	}
	if a := alice.text("#audit"); !strings.Contains(a, "alice settled it as refunded on refund "+refundID+", confirmed by the provider") {
		t.Fatalf("audit: %q", a)
	}
	if a := alice.textContent("#attempts"); !strings.Contains(a, "claim by "+fencedwrite.DefaultHolder()) || !strings.Contains(a, "resolve_succeeded by alice") {
		t.Fatalf("attempts: %q", a)
	}
	alice.shot("resolved")

	// The next one: the bank statement shows a refund the provider cannot
	// confirm. alice asks a second operator.
	alice.open(fmt.Sprintf("/jobs/%d", next))
	alice.do(chromedp.SendKeys(chromedp.CSS("#req-refund-id"), "re_bank_20261205_17"),
		chromedp.SendKeys(chromedp.CSS("#req-reason"), "bank statement line 17 shows 12.50 EUR back to the customer on 5 December"))
	alice.submit(chromedp.Click(chromedp.CSS("#request")))
	if fl := alice.text("#flash"); !strings.Contains(fl, "Approval requested") {
		t.Fatalf("flash: %q", fl)
	}
	reqID := f.pendingApproval(next)
	alice.open("/approvals")
	if !alice.eval(`document.querySelector("main .approve") === null`) || !strings.Contains(alice.text(fmt.Sprintf("#approval-%d", reqID)), "Your request") {
		t.Fatal("the requester is offered an approve button for her own request")
	}
	if status := alice.post(fmt.Sprintf("/approvals/%d/approve", reqID), map[string]string{"confirm": "re_bank_20261205_17"}); status != http.StatusForbidden {
		t.Fatalf("the requester's own approval: %d, want 403", status)
	}
	if !strings.Contains(alice.text("#error"), "another operator must approve it") {
		t.Fatalf("refusal: %q", alice.text("#error"))
	}

	// amy approves on the facts, typing the refund id.
	amy := f.tab(t, base)
	amy.signIn("amy")
	amy.open("/approvals")
	card := amy.text(fmt.Sprintf("#approval-%d", reqID))
	for _, want := range []string{fmt.Sprintf("Request %d: job %d, 12.50 EUR to pay-refund-20261205-0012", reqID, next),
		"Settle 12.50 EUR to payment pay-refund-20261205-0012 as refunded on refund re_bank_20261205_17, which the provider does not confirm",
		"alice, ", "bank statement line 17 shows 12.50 EUR back to the customer", "The provider does not know refund re_bank_20261205_17"} {
		if !strings.Contains(card, want) {
			t.Fatalf("the approval request lacks %q:\n%s", want, card)
		}
	}
	amy.shot("approvals")
	amy.do(chromedp.SendKeys(chromedp.CSS(fmt.Sprintf("#confirm-%d", reqID)), "re_bank_20261205_17"))
	if status := amy.submit(chromedp.Click(chromedp.CSS(fmt.Sprintf("#approve-%d", reqID)))); status != http.StatusOK {
		t.Fatalf("approve: %d", status)
	}
	if s := amy.text("#status"); !strings.HasPrefix(s, "Refunded, UNVERIFIED: 12.50 EUR to pay-refund-20261205-0012 settled on refund re_bank_20261205_17 by an override (asked by alice, approved by amy)") {
		t.Fatalf("the overridden job says %q", s)
	}
	if m := amy.text("#unverified"); !strings.HasPrefix(m, "UNVERIFIED: settled by an override on refund re_bank_20261205_17") {
		t.Fatalf("the unverified mark: %q", m)
	}
	if a := amy.text("#audit"); !strings.Contains(a, "amy approved alice's request") || !strings.Contains(a, "WITHOUT the provider's confirmation") {
		t.Fatalf("audit: %q", a)
	}
	amy.shot("approved")
	amy.open("/queue")
	if d := amy.text("#departures"); !strings.Contains(d, "amy approved alice's request") || !strings.Contains(d, "UNVERIFIED") {
		t.Fatalf("the departures: %q", d)
	}

	// A failed refund, found by the start of its key.
	amy.open("/search?state=failed")
	amy.do(chromedp.SendKeys(chromedp.CSS("#q"), "refund-20261204-00"))
	amy.submit(chromedp.Click(chromedp.CSS("#search-submit")))
	if loc := amy.location(); loc != fmt.Sprintf("/jobs/%d", failed) {
		t.Fatalf("the failed refund's search landed on %s", loc)
	}
	if s := amy.text("#status"); !strings.HasPrefix(s, "Not refunded: the provider declined 4200 JPY to pay-refund-20261204-0031") {
		t.Fatalf("the failed refund says %q", s)
	}
	amy.shot("failed")
	amy.open("/engineering")
	amy.shot("engineering")
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
