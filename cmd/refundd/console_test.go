package main

import (
	"bytes"
	"context"
	"flag"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/fencekit/fencekit/internal/console"
	"github.com/fencekit/fencekit/provider/fakeprovider"
	"github.com/fencekit/fencekit/worker"
)

// The console's flags are refused, each naming its flag, when the console
// would share the webhook listener (or the operators'), when it has no
// users, and when proxy settings come without each other.
func TestConsoleFlagsRefused(t *testing.T) {
	t.Parallel()
	ok := consoleFlags{addr: "127.0.0.1:9443", users: "users", slo: time.Hour}
	if err := ok.check("127.0.0.1:8080", "127.0.0.1:9090", false); err != nil {
		t.Fatalf("good flags refused: %v", err)
	}
	for name, c := range map[string]struct {
		edit           func(*consoleFlags)
		listen, opAddr string
		want           string
	}{
		"on -listen's address":               {func(f *consoleFlags) { f.addr = "127.0.0.1:8080" }, "127.0.0.1:8080", "127.0.0.1:9090", "-console-addr \"127.0.0.1:8080\" is -listen's address"},
		"on -listen's port, every address":   {func(f *consoleFlags) { f.addr = ":8080" }, "127.0.0.1:8080", "127.0.0.1:9090", "never the webhook listener"},
		"on -listen's port, spelled another": {func(f *consoleFlags) { f.addr = "[::ffff:127.0.0.1]:8080" }, "127.0.0.1:8080", "127.0.0.1:9090", "is -listen's address"},
		"on -operator-listen's address":      {func(f *consoleFlags) { f.addr = "127.0.0.1:9090" }, "127.0.0.1:8080", "127.0.0.1:9090", "-operator-listen's address"},
		"without users":                      {func(f *consoleFlags) { f.users = "" }, "127.0.0.1:8080", "127.0.0.1:9090", "-console-users is required"},
		"a header without proxies":           {func(f *consoleFlags) { f.authHeader = "X-Forwarded-User" }, "", "", "-console-trusted-proxies is required with -console-auth-header"},
		"proxies without a header":           {func(f *consoleFlags) { f.trustedProxies = "10.0.0.0/8" }, "", "", "without -console-auth-header"},
		"a bad proxy address":                {func(f *consoleFlags) { f.authHeader, f.trustedProxies = "X-User", "10.0.0.0/8,proxy.local" }, "", "", `-console-trusted-proxies: "proxy.local" is neither a CIDR nor an address`},
		"a certificate without its key":      {func(f *consoleFlags) { f.tlsCert = "c.pem" }, "", "", "-console-tls-cert and -console-tls-key go together"},
		"users without a console":            {func(f *consoleFlags) { f.addr = "" }, "", "", "-console-users is set without -console-addr"},
	} {
		f := ok
		c.edit(&f)
		err := f.check(c.listen, c.opAddr, false)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
	}
	if err := (consoleFlags{addr: "127.0.0.1:8080", users: "u", slo: time.Hour}).check("127.0.0.1:8080", "127.0.0.1:9090", true); err != nil {
		t.Errorf("-listen's address with -no-webhooks (no webhook listener): %v", err)
	}
}

// refundd console-user prints a users-file line the console reads back,
// with the password from stdin; a bad role names the flag.
func TestConsoleUserCommand(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	fs := flag.NewFlagSet("console-user", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	if err := consoleUser(fs, []string{"-name", "ops.lead", "-role", "resolver,approver"}, strings.NewReader("correct horse\n"), &out); err != nil {
		t.Fatal(err)
	}
	us, err := console.ParseUsers(&out)
	if err != nil {
		t.Fatal(err)
	}
	if u := us["ops.lead"]; !u.Has(console.Resolver) || !u.Has(console.Approver) || len(u.Hash) == 0 {
		t.Fatalf("line read back as %+v", u)
	}
	fs = flag.NewFlagSet("console-user", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	if err := consoleUser(fs, []string{"-name", "x", "-role", "admin"}, strings.NewReader("pw\n"), io.Discard); err == nil || !strings.Contains(err.Error(), `-role "admin"`) {
		t.Fatalf("a bad role: %v", err)
	}
}

// refundd run -console-addr serves the console on a listener of its own:
// the console's pages there, with its security headers, and neither the
// webhook listener nor the operators' serves them.
func TestRunServesTheConsole(t *testing.T) {
	dsn := migratedDSN(t)
	t.Setenv("FENCEKIT_WEBHOOK_SECRET", "whsec_console_test")
	srv := fakeprovider.Start()
	defer srv.Close()
	users := filepath.Join(t.TempDir(), "users")
	hash, err := bcrypt.GenerateFromPassword([]byte("pw-rita"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(users, []byte("rita:resolver:"+string(hash)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	consoleAddr := make(chan string, 1)
	r := startRunWith(t, dsn, func(f *runFlags) { f.console.listening = func(a string) { consoleAddr <- a } },
		"-provider-url", srv.URL(), "-console-addr", "127.0.0.1:0", "-console-users", users)
	addr := <-consoleAddr
	resp, err := http.Get("http://" + addr + "/login")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `id="signin"`) || resp.Header.Get("X-Frame-Options") != "DENY" {
		t.Fatalf("console /login: %d %v", resp.StatusCode, resp.Header)
	}
	for name, other := range map[string]string{"webhook": r.webhooks, "operators'": r.operator} {
		if code, _ := get(t, other, "/login"); code != http.StatusNotFound {
			t.Errorf("/login on the %s listener: %d, want 404", name, code)
		}
	}
	if code, _ := get(t, addr, "/webhooks"); code != http.StatusNotFound {
		t.Errorf("/webhooks on the console: %d, want 404", code)
	}
	// Signed in, the dashboard shows the money first; the engineering tab
	// the fleet's takeovers (the attempts log), this process's counters and
	// the fleet's budget, which the worker opened.
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	resp, err = c.Get("http://" + addr + "/login")
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	token := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindSubmatch(body)
	if token == nil {
		t.Fatal("no CSRF token on /login")
	}
	resp, err = c.PostForm("http://"+addr+"/login", url.Values{"csrf": {string(token[1])}, "name": {"rita"}, "password": {"pw-rita"}})
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`<span id="who">rita</span>`, "Money not settled yet", `id="stake-manual_review"`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("the dashboard (%d) lacks %q", resp.StatusCode, want)
		}
	}
	resp, err = c.Get("http://" + addr + "/engineering")
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{"Takeovers, whole fleet, last 1h", "This process only, since it started",
		"Stale writes refused by the fence: <strong>none</strong>", "Takeovers by this process: 0", "Reconcile share", `id="budget"`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("the engineering tab (%d) lacks %q", resp.StatusCode, want)
		}
	}
	r.cancel()
	if err := r.wait(); err != nil {
		t.Fatal(err)
	}
}

// startRunWith is startRun with edit applied to the flags after parsing
// (to hook the console's listening).
func startRunWith(t *testing.T, dsn string, edit func(*runFlags), args ...string) *running {
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
	edit(&f)
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- runWorker(ctx, f, io.Discard) }()
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

// The console's resolutions use the key window the workers use: run's
// -provider-skew-margin (and -provider-timeout) shorten it for the console
// too, so an operator is never offered a resend the workers consider
// outside the window. Here the margin leaves a window of 1ms, long past
// when the operator asks.
func TestConsoleUsesRunsKeyWindow(t *testing.T) {
	dsn := migratedDSN(t)
	c := cli{t: t, dsn: dsn}
	c.reviewed("window-1", "pay-1", "1.00", "EUR", "rejected on an outage", "{}")
	t.Setenv("FENCEKIT_WEBHOOK_SECRET", "whsec_console_test")
	srv := fakeprovider.Start()
	defer srv.Close()
	users := filepath.Join(t.TempDir(), "users")
	hash, err := bcrypt.GenerateFromPassword([]byte("pw-rita"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(users, []byte("rita:resolver:"+string(hash)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	skew := 24*time.Hour - worker.DefaultProviderTimeout - time.Millisecond
	consoleAddr := make(chan string, 1)
	r := startRunWith(t, dsn, func(f *runFlags) { f.console.listening = func(a string) { consoleAddr <- a } },
		"-provider-url", srv.URL(), "-provider-key-retention", "24h", "-provider-skew-margin", skew.String(),
		"-console-addr", "127.0.0.1:0", "-console-users", users)
	base := "http://" + <-consoleAddr
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar}
	csrf := func(path string) string {
		resp, err := hc.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindSubmatch(body)
		if m == nil {
			t.Fatalf("no CSRF token on %s (%d)", path, resp.StatusCode)
		}
		return string(m[1])
	}
	resp, err := hc.PostForm(base+"/login", url.Values{"csrf": {csrf("/login")}, "name": {"rita"}, "password": {"pw-rita"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err = hc.PostForm(base+"/jobs/1/request", url.Values{"csrf": {csrf("/jobs/1")}, "as": {"refund"}, "reason": {"send again"}, "seen_attempt": {"1"}})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusConflict || !strings.Contains(string(body), "safe window has closed") {
		t.Fatalf("a resend past the workers' key window, asked in the console: %d %s", resp.StatusCode, regexp.MustCompile(`id="(error|flash)">[^<]*`).Find(body))
	}
	r.cancel()
	if err := r.wait(); err != nil {
		t.Fatal(err)
	}
}
