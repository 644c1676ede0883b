// Package console is the operators' console in the browser: the
// manual-review queue, a job's timeline, search, a dashboard and the
// approvals queue, served from server-rendered pages (html/template, with
// embedded assets: it works offline) on a listener of its own, never the
// webhook listener.
//
// The console never writes a job by itself: reads go through its own
// indexed queries, and every action (resolve, request an override, approve)
// goes through package operator, which verifies, fences and audits it.
//
// Every page says first, in plain words, what happened to the money (the
// operator view's status line, derived once in package operator and shown
// the same by `refundd jobs`), then the facts, the timeline and the
// decisions; engineering figures come second, on a tab of their own.
//
// Operators sign in with a users file of bcrypt hashes (ParseUsers), or
// arrive authenticated by a reverse proxy whose identity header is trusted
// only from configured addresses (Config.AuthHeader, Config.TrustedProxies).
// Sessions live in the database (a restart or a second console process
// keeps everyone signed in), with an HttpOnly, SameSite=Strict cookie,
// Secure behind TLS. Every form carries the session's CSRF token, checked
// on every POST together with the browser's Sec-Fetch-Site and Origin
// headers, whoever signed the operator in. Provider evidence and reasons
// are attacker-controlled text: html/template escapes them, every
// invisible or reordering character is made visible on every page, and the
// Content-Security-Policy allows no inline script.
package console

import (
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/netip"
	"time"

	"github.com/fencekit/fencekit/ent"
	"github.com/fencekit/fencekit/operator"
	"github.com/fencekit/fencekit/worker"
)

// Defaults of Config.
const (
	DefaultSessionIdle   = 30 * time.Minute
	DefaultSessionMaxAge = 12 * time.Hour
	DefaultSLO           = time.Hour
	// TakeoverWindow is how far back the dashboard counts the fleet's
	// takeovers and claims in the attempts log.
	TakeoverWindow  = time.Hour
	DefaultPageSize = 50
	// MaxBody bounds a request's body: the console's forms are small.
	MaxBody = 64 << 10
	// MaxCounted bounds each per-state count of the dashboard, so that a
	// page view never scans a million rows: above it the page says "10000+".
	MaxCounted = 10_000
)

// Config is the console's settings.
type Config struct {
	// Client reads the jobs, their ledger rows and their evidence. The
	// console writes nothing through it.
	Client *ent.Client
	// Operator carries out every action. Required.
	Operator *operator.Service
	// Users are the operators who may sign in, and the roles of every
	// operator, also those the proxy authenticates. Required.
	Users Users
	// AuthHeader, when set, is the header in which an authenticating
	// reverse proxy names the operator (X-Forwarded-User, say). The console
	// then has no sign-in form: it trusts the header only on a connection
	// from TrustedProxies, and refuses every other request (403). The name
	// must be in Users, which gives its roles.
	AuthHeader string
	// TrustedProxies are the addresses the AuthHeader is believed from: the
	// peer address of the connection, never a forwarded-for header.
	TrustedProxies []netip.Prefix
	// SecureCookies marks the session cookie Secure even when the console
	// itself serves plain HTTP (behind a TLS-terminating proxy). With TLS
	// the cookie is Secure anyway.
	SecureCookies bool
	// SessionIdle ends a session unused this long (DefaultSessionIdle, to
	// within operator.SessionTouch); SessionMaxAge ends it this long after
	// sign-in (DefaultSessionMaxAge).
	SessionIdle, SessionMaxAge time.Duration
	// SLO is the age an unfinished job should never reach; the dashboard
	// compares the oldest with it (DefaultSLO).
	SLO time.Duration
	// BudgetName is the outbound budget the dashboard shows
	// (worker.DefaultBudgetName when empty).
	BudgetName string
	// Counters, when set, gives this process's counters for the dashboard
	// (takeovers, stale writes refused, provider calls by kind).
	Counters func() Counters
	// PageSize is the number of rows per page (DefaultPageSize).
	PageSize int
	// Logger receives refusals and failures (slog.Default when nil).
	Logger *slog.Logger
	// Now is the clock of sessions and the sign-in limit (time.Now when nil).
	// Sessions are stamped by it in the database: console processes that
	// share sessions need clocks that agree to within a minute or so.
	Now func() time.Time
}

// Counters are the process's own counters since it started: the worker's
// metrics, as Prometheus exports them.
type Counters struct {
	Takeovers   float64
	StaleWrites map[string]float64 // by transition
	Calls       map[string]float64 // provider calls by kind: send, resend, reconcile
}

// Console is the console's http.Handler.
type Console struct {
	cfg   Config
	pages map[string]*template.Template
	limit *limiter
	log   *slog.Logger
	mux   *http.ServeMux
	dash  dashCache
}

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// New checks cfg and returns the console.
func New(cfg Config) (*Console, error) {
	var errs []error
	if cfg.Client == nil {
		errs = append(errs, errors.New("console: Config.Client is required"))
	}
	if cfg.Operator == nil {
		errs = append(errs, errors.New("console: Config.Operator is required: every action goes through package operator"))
	}
	if len(cfg.Users) == 0 {
		errs = append(errs, errors.New("console: no operators: give a users file (-console-users)"))
	}
	if cfg.AuthHeader != "" && len(cfg.TrustedProxies) == 0 {
		errs = append(errs, errors.New("-console-trusted-proxies is required with -console-auth-header: the header is believed only from those addresses"))
	}
	if cfg.AuthHeader == "" && len(cfg.TrustedProxies) > 0 {
		errs = append(errs, errors.New("-console-trusted-proxies is set without -console-auth-header: name the header the proxy sets"))
	}
	for name, d := range map[string]time.Duration{"session idle time": cfg.SessionIdle, "session max age": cfg.SessionMaxAge, "SLO": cfg.SLO} {
		if d < 0 {
			errs = append(errs, fmt.Errorf("console: %s must not be negative, got %v", name, d))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if cfg.SessionIdle == 0 {
		cfg.SessionIdle = DefaultSessionIdle
	}
	if cfg.SessionMaxAge == 0 {
		cfg.SessionMaxAge = DefaultSessionMaxAge
	}
	if cfg.SLO == 0 {
		cfg.SLO = DefaultSLO
	}
	if cfg.PageSize <= 0 {
		cfg.PageSize = DefaultPageSize
	}
	if cfg.BudgetName == "" {
		cfg.BudgetName = worker.DefaultBudgetName
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	pages, err := parsePages()
	if err != nil {
		return nil, err
	}
	c := &Console{
		cfg:   cfg,
		pages: pages,
		limit: &limiter{now: cfg.Now, fails: map[string][]time.Time{}},
		log:   cfg.Logger,
	}
	c.routes()
	return c, nil
}

// Server returns an http.Server for the console with its own limits: every
// phase of a request is bounded, and a body over MaxBody is refused.
func (c *Console) Server() *http.Server {
	return &http.Server{
		Handler:           c,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    16 << 10,
	}
}

func (c *Console) routes() {
	mux := http.NewServeMux()
	static, _ := fs.Sub(staticFS, "static")
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	mux.HandleFunc("GET /login", c.loginPage)
	mux.HandleFunc("POST /login", c.login)
	mux.HandleFunc("POST /logout", c.logout)
	mux.Handle("GET /{$}", c.signedIn(Viewer, c.dashboard))
	mux.Handle("GET /queue", c.signedIn(Viewer, c.queue))
	mux.Handle("GET /search", c.signedIn(Viewer, c.search))
	mux.Handle("GET /jobs/{id}", c.signedIn(Viewer, c.job))
	mux.Handle("GET /approvals", c.signedIn(Viewer, c.approvals))
	mux.Handle("GET /engineering", c.signedIn(Viewer, c.engineering))
	mux.Handle("POST /jobs/{id}/resolve", c.signedIn(Resolver, c.resolve))
	mux.Handle("POST /jobs/{id}/request", c.signedIn(Resolver, c.request))
	mux.Handle("POST /jobs/{id}/onit", c.signedIn(Resolver, c.onIt))
	mux.Handle("POST /jobs/{id}/letgo", c.signedIn(Resolver, c.letGo))
	mux.Handle("POST /approvals/{id}/approve", c.signedIn(Approver, c.approve))
	mux.Handle("POST /approvals/{id}/decline", c.signedIn(Approver, c.decline))
	c.mux = mux
}

// cop refuses cross-origin POSTs by the browser's Sec-Fetch-Site header,
// or, without it, by Origin against Host (net/http's CrossOriginProtection).
var cop = http.NewCrossOriginProtection()

// ServeHTTP serves the console with its security headers; every POST is
// first checked for a cross-origin request.
func (c *Console) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	h := rw.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; img-src 'self'; script-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	if c.secure(r) {
		h.Set("Strict-Transport-Security", "max-age=31536000")
	}
	r.Body = http.MaxBytesReader(rw, r.Body, MaxBody)
	if err := cop.Check(r); err != nil {
		c.log.Warn("console: cross-origin request refused", "method", r.Method, "path", r.URL.Path, "remote", r.RemoteAddr, "err", err)
		c.refuse(rw, r, http.StatusForbidden, "Cross-origin request refused.")
		return
	}
	c.mux.ServeHTTP(rw, r)
}
