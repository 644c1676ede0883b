// Package fakeprovider is a payment provider held in memory behind a real
// HTTP server on loopback, for tests and the demo. It speaks the API that
// provider.HTTPClient expects and keeps idempotency keys the way real
// providers do: the same key with the same parameters replays the stored
// answer, with other parameters it is refused, and once the key is forgotten
// a resend executes again. That last one is the double refund workers must
// avoid, so the fake really does it.
//
// Faults are scripted per operation key (see Fault), or injected at random
// by rate from a seed (see RandomFaults). Tests order actors with Executed,
// WebhooksSent and Fault.Hold, and assert with Executions, Refunded,
// Requests, Events, WebhookDeliveries and Injected.
//
// The server also behaves by itself over time: pending refunds settle or
// fail, lagging refunds appear in lookups, succeeded refunds are reversed,
// slow answers and late webhooks come due. All of it is measured on the
// server's clock (Config.Now) and carried out by RunDue, which tests call
// after moving their clock; the demo sets Config.Background instead.
//
// Every change of a refund's status (executed succeeded or pending, settled,
// declined, reversed) becomes a webhook event, signed as package provider
// documents and POSTed to Config.WebhookURL in order by one sender. As with
// real providers, a webhook may arrive before the answer to the request that
// caused it. A test makes them late, out of order or duplicated with
// HoldWebhooks, ReleaseWebhooks and Redeliver, or at random with
// RandomFaults.
package fakeprovider

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fencekit/fencekit/provider"
)

// DefaultKeyRetention is how long keys are kept when Config leaves it zero
// (Stripe keeps them for 24 h).
const DefaultKeyRetention = 24 * time.Hour

// Config configures a Server. A zero field takes its default.
type Config struct {
	// KeyRetention is how long a key's answer is kept after its first use;
	// DefaultKeyRetention when zero. ForgetKey expires one at once.
	KeyRetention time.Duration
	// LookupLag is the lag the server declares in its Capabilities. Lookups
	// actually lag only for refunds scripted Unpublished, until Publish or
	// Fault.PublishAfter, and for those RandomFaults.LookupLag picks, which
	// it then hides for exactly LookupLag; set it when a test scripts them,
	// so the declared contract covers them.
	LookupLag time.Duration
	// Now is the server's clock, time.Now when nil. Tests move it to expire
	// keys, and to make timed work due (see RunDue), without sleeping. It
	// also dates webhook signatures, so a receiver must agree with it within
	// its tolerance: a test that moves it further than that waits for the
	// webhooks under way first (WebhooksSent).
	Now func() time.Time

	// WebhookURL receives a signed POST for every change of a refund's
	// status. When it is empty none is sent; Events still records them.
	WebhookURL string
	// WebhookSecret signs the webhooks; required with WebhookURL.
	WebhookSecret []byte
	// WebhookAttempts bounds the POSTs of one sending of an event: a
	// non-2xx answer or a failed POST is retried at once until then.
	// DefaultWebhookAttempts when zero.
	WebhookAttempts int
	// WebhookTimeout bounds each POST; DefaultWebhookTimeout when zero.
	WebhookTimeout time.Duration

	// Random injects faults at random by rate; the zero value injects none.
	Random RandomFaults

	// API is the API the server speaks: APIFencekit (the default), the one
	// provider.HTTPClient expects, or APIStripe, Stripe's refunds (see
	// stripe.go), for provider/stripe. Both keep the same state and inject
	// the same faults.
	API string
	// PaymentCurrency is the currency of the payments AnyPayment takes as
	// captured with APIStripe, "eur" when empty: a Stripe refund carries no
	// currency, so the payment, read first, must say it.
	PaymentCurrency string

	// Addr is the address to listen on; "127.0.0.1:0" (a free loopback
	// port) when empty. refundd fakeprovider sets it.
	Addr string
	// AnyPayment takes a payment the server does not know as captured, on
	// its first refund, for exactly that refund's amount and currency, so
	// that a standalone server (refundd fakeprovider) refunds the payments
	// of whatever is enqueued. Tests leave it false and call AddPayment.
	AnyPayment bool

	// Background runs RunDue by itself from a timer loop, in real time, as
	// the demo needs; Close stops it. Tests leave it false and call RunDue,
	// so that nothing happens behind their back.
	Background bool
}

// withDefaults fills the zero fields that have defaults.
func (cfg Config) withDefaults() Config {
	if cfg.KeyRetention == 0 {
		cfg.KeyRetention = DefaultKeyRetention
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.WebhookAttempts == 0 {
		cfg.WebhookAttempts = DefaultWebhookAttempts
	}
	if cfg.WebhookTimeout == 0 {
		cfg.WebhookTimeout = DefaultWebhookTimeout
	}
	cfg.Random = cfg.Random.withDefaults()
	cfg.WebhookSecret = bytes.Clone(cfg.WebhookSecret)
	if cfg.API == "" {
		cfg.API = APIFencekit
	}
	if cfg.PaymentCurrency == "" {
		cfg.PaymentCurrency = "eur"
	}
	return cfg
}

// validate returns an error naming every invalid field of cfg.
func (cfg Config) validate() error {
	var errs []error
	if cfg.KeyRetention < 0 {
		errs = append(errs, fmt.Errorf("KeyRetention must not be negative, got %v", cfg.KeyRetention))
	}
	if cfg.LookupLag < 0 {
		errs = append(errs, fmt.Errorf("LookupLag must not be negative, got %v", cfg.LookupLag))
	}
	if cfg.WebhookURL != "" {
		if u, err := url.Parse(cfg.WebhookURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("WebhookURL %q is not an http(s) URL", cfg.WebhookURL))
		}
		if len(cfg.WebhookSecret) == 0 {
			errs = append(errs, errors.New("WebhookSecret is required with WebhookURL"))
		}
	}
	if cfg.WebhookAttempts < 0 {
		errs = append(errs, fmt.Errorf("WebhookAttempts must not be negative, got %d", cfg.WebhookAttempts))
	}
	if cfg.WebhookTimeout < 0 {
		errs = append(errs, fmt.Errorf("WebhookTimeout must not be negative, got %v", cfg.WebhookTimeout))
	}
	if cfg.API != APIFencekit && cfg.API != APIStripe {
		errs = append(errs, fmt.Errorf("API %q is not %q or %q", cfg.API, APIFencekit, APIStripe))
	}
	if len(cfg.PaymentCurrency) != 3 {
		errs = append(errs, fmt.Errorf("PaymentCurrency %q is not a three-letter ISO code", cfg.PaymentCurrency))
	}
	errs = append(errs, cfg.Random.validate(cfg.LookupLag))
	return errors.Join(errs...)
}

// Server is a running fake provider. Its methods are safe for concurrent use.
type Server struct {
	cfg       Config
	wire      wire // the API it speaks
	url       string
	http      *http.Server
	mux       *http.ServeMux
	transport *http.Transport
	hooks     *http.Client    // sends webhooks
	done      chan struct{}   // closed by Close: cuts every held answer, stops the loops
	ctx       context.Context // cancelled by Close: ends webhook POSTs
	cancel    context.CancelFunc
	active    sync.WaitGroup // request handlers
	bg        sync.WaitGroup // the sender and the background loop

	mu          sync.Mutex
	closed      bool
	payments    map[string]*payment
	keys        map[string]*keyRecord
	faults      map[string][]Fault
	refunds     []*refund // in creation order
	executions  tally
	requests    []Request
	requestRand *rand.Rand // RandomFaults' stream for refund requests
	eventRand   *rand.Rand // and for webhook events
	injected    Injected
	due         []dueItem
	dueSeq      uint64
	wake        chan struct{} // a due item was scheduled

	events      []*event // in the order they happened
	eventByID   map[string]*event
	holding     map[string]bool     // keys whose events are held
	held        map[string][]*event // their held events, in order
	outbox      []*event            // sendings waiting for the sender
	outboxReady chan struct{}
	deliveries  []WebhookDelivery
	sent        tally // finished sendings, by key
}

// Request is one HTTP request the server received, as it was sent.
type Request struct {
	Method string
	Path   string
	Query  url.Values
	Key    string // the Idempotency-Key header
	Header http.Header
	Body   []byte
}

type payment struct {
	amount   int64
	currency string
	refunded int64 // succeeded and pending refunds
}

// params is a refund request's body; the server refuses any other field.
type params struct {
	Payment   string `json:"payment"`
	Amount    int64  `json:"amount"`
	Currency  string `json:"currency"`
	Reference string `json:"reference"`
}

// keyRecord is what the server remembers about an idempotency key.
type keyRecord struct {
	params   params
	firstUse time.Time
	inFlight bool // its first request has not been answered yet
	code     int
	body     []byte
}

type refund struct {
	ID             string          `json:"id"`
	Payment        string          `json:"payment"`
	Amount         int64           `json:"amount"`
	Currency       string          `json:"currency"`
	Reference      string          `json:"reference"`
	Status         provider.Status `json:"status"`
	Reason         string          `json:"reason,omitempty"`
	created        time.Time       // when it executed, on the server's clock
	hidden         bool            // unpublished: invisible to lookups
	requiresAction bool            // pending, shown as Stripe's requires_action
	reverseAfter   time.Duration   // reverse it this long after it succeeds
}

// tally counts per key and closes each waiter's channel once the count
// reaches the waiter's. Its owner's mutex guards it.
type tally struct {
	n       map[string]int
	waiters map[string][]waiter
}

type waiter struct {
	n  int
	ch chan struct{}
}

func newTally() tally { return tally{n: map[string]int{}, waiters: map[string][]waiter{}} }

func (t *tally) add(key string) {
	t.n[key]++
	kept := t.waiters[key][:0]
	for _, w := range t.waiters[key] {
		if t.n[key] >= w.n {
			close(w.ch)
		} else {
			kept = append(kept, w)
		}
	}
	t.waiters[key] = kept
}

func (t *tally) wait(key string, n int) <-chan struct{} {
	ch := make(chan struct{})
	if t.n[key] >= n {
		close(ch)
	} else {
		t.waiters[key] = append(t.waiters[key], waiter{n: n, ch: ch})
	}
	return ch
}

// Start starts a server with the default Config on 127.0.0.1. Close it when
// done.
func Start() *Server { return StartWith(Config{}) }

// StartWith starts a server with cfg on 127.0.0.1. Like httptest.NewServer
// it panics if cfg is invalid, with a message naming each invalid field, or
// if it cannot listen.
func StartWith(cfg Config) *Server {
	s, err := Listen(cfg)
	if err != nil {
		panic(err.Error())
	}
	return s
}

// Listen starts a server with cfg on cfg.Addr, or returns an error naming
// each invalid field of cfg, or why it cannot listen.
func Listen(cfg Config) (*Server, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("fakeprovider: invalid Config: %w", err)
	}
	addr := cfg.Addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("fakeprovider: listen on %s: %w", addr, err)
	}
	s := &Server{
		cfg:         cfg,
		url:         "http://" + ln.Addr().String(),
		mux:         http.NewServeMux(),
		transport:   &http.Transport{},
		done:        make(chan struct{}),
		payments:    map[string]*payment{},
		keys:        map[string]*keyRecord{},
		faults:      map[string][]Fault{},
		executions:  newTally(),
		wake:        make(chan struct{}, 1),
		eventByID:   map[string]*event{},
		holding:     map[string]bool{},
		held:        map[string][]*event{},
		outboxReady: make(chan struct{}, 1),
		sent:        newTally(),
	}
	s.requestRand, s.eventRand = newGenerators(cfg.Random.Seed)
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.hooks = &http.Client{Transport: &http.Transport{}, Timeout: cfg.WebhookTimeout}
	s.wire = wires[cfg.API]
	s.wire.register(s)
	s.http = &http.Server{Handler: http.HandlerFunc(s.serve)}
	go s.http.Serve(ln) // returns ErrServerClosed on Close
	if cfg.WebhookURL != "" {
		s.bg.Add(1)
		go s.sender()
	}
	if cfg.Background {
		s.bg.Add(1)
		go s.background()
	}
	return s, nil
}

// URL is the server's base URL, e.g. http://127.0.0.1:40123.
func (s *Server) URL() string { return s.url }

// API is the API the server speaks (Config.API).
func (s *Server) API() string { return s.cfg.API }

// Capabilities is what the server's contract guarantees: resending a key
// with the same parameters is safe while it is retained, and every lookup
// exists (with APIStripe, Stripe's: no lookup by reference).
func (s *Server) Capabilities() provider.Capabilities {
	return provider.Capabilities{
		SafeResend:        true,
		KeyRetention:      s.cfg.KeyRetention,
		LookupByReference: s.cfg.API == APIFencekit,
		LookupByRefundID:  true,
		ListByPayment:     true,
		LookupLag:         s.cfg.LookupLag,
	}
}

// Client returns a provider client for the server, with its own connection
// pool and the server's Capabilities. It speaks fencekit's API: it panics
// for a server with APIStripe, whose client is provider/stripe's, given
// URL().
func (s *Server) Client() *provider.HTTPClient {
	if s.cfg.API != APIFencekit {
		panic("fakeprovider: Client speaks fencekit's API, and this server speaks " + s.cfg.API + "'s: use provider/stripe with URL()")
	}
	return provider.NewHTTPClient(s.url, &http.Client{Transport: s.transport}, s.Capabilities())
}

// Close cuts every held answer, abandons the webhooks not yet sent (a POST
// under way fails), stops the server and its loops, and waits for its
// handlers to return.
func (s *Server) Close() {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		close(s.done)
	}
	s.mu.Unlock()
	s.cancel()
	s.http.Close()
	s.active.Wait()
	s.bg.Wait()
	s.transport.CloseIdleConnections()
	s.hooks.CloseIdleConnections()
}

// AddPayment records a captured payment that refunds can draw on. It panics
// if ref already exists.
func (s *Server) AddPayment(ref string, amountMinor int64, currency string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.payments[ref] != nil {
		panic(fmt.Sprintf("fakeprovider: payment %q added twice", ref))
	}
	s.payments[ref] = &payment{amount: amountMinor, currency: currency}
}

// Script queues faults for the next refund requests with key, in order. It
// panics on an invalid Fault.
func (s *Server) Script(key string, faults ...Fault) {
	for _, f := range faults {
		if err := f.validate(); err != nil {
			panic("fakeprovider: " + err.Error())
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults[key] = append(s.faults[key], faults...)
}

// ForgetKey drops key's stored answer, as a provider does when its retention
// ends: the next request with key executes again.
func (s *Server) ForgetKey(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.keys, key)
}

// Settle turns key's pending refunds into succeeded ones, with a
// refund.succeeded webhook each. A resend of the key still replays the
// original pending answer, as real providers do; lookups show the new
// state. It panics if key has no pending refund.
func (s *Server) Settle(key string) {
	s.each(key, provider.StatusPending, s.settle)
}

// Decline rejects key's pending refunds with reason, with a refund.failed
// webhook each, and gives their amount back to the payment. It panics if
// key has no pending refund.
func (s *Server) Decline(key, reason string) {
	s.each(key, provider.StatusPending, func(r *refund) { s.decline(r, reason) })
}

// Reverse reverses key's succeeded refunds, with a refund.reversed webhook
// each, and gives their amount back to the payment: the money came back
// after the refund had succeeded. Executions does not change. It panics if
// key has no succeeded refund.
func (s *Server) Reverse(key string) {
	s.each(key, provider.StatusSucceeded, s.reverse)
}

// each applies apply to key's refunds in status, and panics if there is
// none.
func (s *Server) each(key string, status provider.Status, apply func(*refund)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, r := range s.refunds {
		if r.Reference == key && r.Status == status {
			apply(r)
			n++
		}
	}
	if n == 0 {
		panic(fmt.Sprintf("fakeprovider: no %s refund for key %q", status, key))
	}
}

// settle, decline, reverse and succeeded change a refund's status. s.mu is
// held.
func (s *Server) settle(r *refund) {
	r.Status = provider.StatusSucceeded
	s.succeeded(r, changeSettled)
}

func (s *Server) decline(r *refund, reason string) {
	r.Status, r.Reason = provider.StatusRejected, reason
	s.payments[r.Payment].refunded -= r.Amount
	s.emit(r, changeDeclined)
}

func (s *Server) reverse(r *refund) {
	r.Status = provider.StatusReversed
	s.payments[r.Payment].refunded -= r.Amount
	s.emit(r, changeReversed)
}

// succeeded announces r's success, as change c, and schedules its
// reversal, if any.
func (s *Server) succeeded(r *refund, c change) {
	s.emit(r, c)
	if r.reverseAfter > 0 {
		s.schedule(r.reverseAfter, func() {
			if r.Status == provider.StatusSucceeded {
				s.reverse(r)
			}
		})
	}
}

// Publish makes key's unpublished refunds visible to lookups. It panics if
// key has no refund.
func (s *Server) Publish(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, r := range s.refunds {
		if r.Reference == key {
			r.hidden = false
			n++
		}
	}
	if n == 0 {
		panic(fmt.Sprintf("fakeprovider: no refund for key %q", key))
	}
}

// Executed returns a channel closed once refunds for key have executed n
// times (pending ones included). Tests wait on it to order actors.
func (s *Server) Executed(key string, n int) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.executions.wait(key, n)
}

// Executions is how many refunds the server created for key, pending and
// declined ones included: how many times money moved or was set to move.
// More than one is a double refund.
func (s *Server) Executions(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.executions.n[key]
}

// Injected returns how many faults RandomFaults injected so far, by kind.
func (s *Server) Injected() Injected {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.injected
}

// Refunded is the total of a payment's succeeded and pending refunds:
// declined and reversed ones gave their amount back.
func (s *Server) Refunded(paymentRef string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.payments[paymentRef]; p != nil {
		return p.refunded
	}
	return 0
}

// Requests returns every request received so far, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// serve logs the request and routes it.
func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
	if err != nil {
		writeBody(w)(s.wire.refusal(refusal{kind: refusedInvalid, detail: "read body: " + err.Error()}))
		return
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		writeBody(w)(s.wire.refusal(refusal{kind: refusedClosed}))
		return
	}
	s.active.Add(1)
	defer s.active.Done()
	s.requests = append(s.requests, Request{
		Method: r.Method,
		Path:   r.URL.Path,
		Query:  r.URL.Query(),
		Key:    r.Header.Get("Idempotency-Key"),
		Header: r.Header.Clone(),
		Body:   body,
	})
	s.mu.Unlock()
	r.Body = io.NopCloser(bytes.NewReader(body))
	s.mux.ServeHTTP(w, r)
}

// answer is the outcome of processing one refund request.
type answer struct {
	code     int
	body     []byte
	fault    Fault
	replayed bool       // the key's stored answer, sent again
	taken    *keyRecord // the key this request took, released once answered
}

// create serves POST /v1/refunds in fencekit's API.
func (s *Server) create(w http.ResponseWriter, r *http.Request) {
	var p params
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request", "decode body: "+err.Error())
		return
	}
	key := r.Header.Get("Idempotency-Key")
	switch {
	case key == "":
		writeError(w, http.StatusBadRequest, "invalid_request", "Idempotency-Key header is required")
		return
	case key != p.Reference:
		writeError(w, http.StatusBadRequest, "invalid_request", "Idempotency-Key must equal the reference")
		return
	case p.Payment == "" || p.Currency == "" || p.Amount <= 0:
		writeError(w, http.StatusBadRequest, "invalid_request", "payment, currency and a positive amount are required")
		return
	}
	s.deliver(w, s.process(key, p))
}

func (s *Server) process(key string, p params) answer {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := drawRequest(s.requestRand)
	f, random := d.fault(s.cfg.Random, s.cfg.LookupLag), true
	if q := s.faults[key]; len(q) > 0 {
		f, s.faults[key], random = q[0], q[1:], false
	}
	if random {
		s.countAnswerFaults(f)
	}
	if f.Latency > 0 {
		// A slow answer is a held one that RunDue releases.
		release := make(chan struct{})
		s.schedule(f.Latency, func() { close(release) })
		f.Hold = release
	}
	a := answer{fault: f}
	rec := s.keys[key]
	if rec != nil && !rec.inFlight && s.cfg.Now().Sub(rec.firstUse) >= s.cfg.KeyRetention {
		delete(s.keys, key)
		rec = nil
	}
	switch {
	case f.Refuse == http.StatusTooManyRequests:
		a.code, a.body = s.wire.refusal(refusal{kind: refusedRateLimited})
	case f.Refuse != 0:
		a.code, a.body = s.wire.refusal(refusal{kind: refusedServerError, status: f.Refuse})
	case rec != nil && rec.params != p:
		a.code, a.body = s.wire.refusal(refusal{kind: refusedKeyParams, key: key})
	case rec != nil && rec.inFlight:
		a.code, a.body = s.wire.refusal(refusal{kind: refusedKeyInUse, key: key})
	case rec != nil:
		a.code, a.body, a.replayed = rec.code, rec.body, true
	default:
		var r *refund
		rec = &keyRecord{params: p, firstUse: s.cfg.Now(), inFlight: true}
		rec.code, rec.body, r = s.execute(key, p, f)
		s.keys[key] = rec
		a.code, a.body, a.taken = rec.code, rec.body, rec
		if r != nil && random {
			s.countRefundFaults(f)
		}
	}
	return a
}

// countAnswerFaults counts the random faults that befall an answer. s.mu is
// held.
func (s *Server) countAnswerFaults(f Fault) {
	switch {
	case f.Refuse == http.StatusTooManyRequests:
		s.injected.RateLimit++
	case f.Refuse != 0:
		s.injected.ServerError++
	}
	if f.After == Cut {
		s.injected.Cut++
	}
	if f.Latency > 0 {
		s.injected.Latency++
	}
}

// countRefundFaults counts the random faults that befall a refund that
// executed. s.mu is held.
func (s *Server) countRefundFaults(f Fault) {
	if f.Pending {
		s.injected.Pending++
	}
	if f.DeclineAfter > 0 {
		s.injected.Declined++
	}
	if f.Unpublished {
		s.injected.LookupLag++
	}
	if f.ReverseAfter > 0 && f.DeclineAfter == 0 { // a declined refund is never reversed
		s.injected.Reversal++
	}
}

// execute decides a new refund request and, unless it is rejected, moves
// the money, announces it and schedules what f says becomes of it. It
// returns the answer and the refund, nil when rejected. s.mu is held.
func (s *Server) execute(key string, p params, f Fault) (int, []byte, *refund) {
	code, body := s.refuse(p, f)
	if code != 0 {
		return code, body, nil
	}
	pay := s.payments[p.Payment]
	r := &refund{
		ID:             fmt.Sprintf("re_%d", len(s.refunds)+1),
		Payment:        p.Payment,
		Amount:         p.Amount,
		Currency:       cmp.Or(p.Currency, pay.currency), // a Stripe refund is in its payment's currency
		Reference:      key,
		Status:         provider.StatusSucceeded,
		created:        s.cfg.Now(),
		hidden:         f.Unpublished,
		requiresAction: f.RequiresAction,
		reverseAfter:   f.ReverseAfter,
	}
	if f.Pending {
		r.Status = provider.StatusPending
	}
	s.refunds = append(s.refunds, r)
	pay.refunded += p.Amount
	s.executions.add(key)
	body = s.wire.refund(s, r) // the answer shows the refund as it executed
	if r.Status == provider.StatusSucceeded {
		s.succeeded(r, changeExecuted)
	} else {
		s.emit(r, changeExecuted)
	}
	switch {
	case f.SettleAfter > 0:
		s.schedule(f.SettleAfter, func() {
			if r.Status == provider.StatusPending {
				s.settle(r)
			}
		})
	case f.DeclineAfter > 0:
		s.schedule(f.DeclineAfter, func() {
			if r.Status == provider.StatusPending {
				s.decline(r, AsyncDeclineReason)
			}
		})
	}
	if f.PublishAfter > 0 {
		s.schedule(f.PublishAfter, func() { r.hidden = false })
	}
	return http.StatusOK, body, r
}

// refuse returns the rejection of a new refund request, or a zero code when
// it may execute. s.mu is held.
func (s *Server) refuse(p params, f Fault) (int, []byte) {
	pay := s.payments[p.Payment]
	if pay == nil && s.cfg.AnyPayment && f.Reject == "" {
		pay = s.anyPayment(p.Payment, p.Amount, p.Currency)
	}
	// A Stripe refund names no currency (p.Currency is empty): it is the
	// payment's, and the client must have checked it.
	switch {
	case f.Reject != "":
		return s.wire.refusal(refusal{kind: refusedRejected, code: f.Reject})
	case pay == nil:
		return s.wire.refusal(refusal{kind: refusedNoPayment, payment: p.Payment})
	case p.Currency != "" && !strings.EqualFold(pay.currency, p.Currency):
		return s.wire.refusal(refusal{kind: refusedCurrency, detail: pay.currency})
	case pay.refunded == pay.amount:
		return s.wire.refusal(refusal{kind: refusedAlreadyRefunded, payment: p.Payment})
	case p.Amount > pay.amount-pay.refunded:
		return s.wire.refusal(refusal{kind: refusedExceeds, payment: p.Payment, amount: p.Amount, left: pay.amount - pay.refunded})
	}
	return 0, nil
}

// deliver holds a as a.fault says, releases the key it took, then sends a
// or spoils it. The key is released first so that whoever sees the answer
// (or its loss) finds the key free.
func (s *Server) deliver(w http.ResponseWriter, a answer) {
	after := a.fault.After
	if a.fault.Hold != nil {
		select {
		case <-a.fault.Hold:
		case <-s.done:
			after = Cut
		}
	}
	if a.taken != nil {
		s.mu.Lock()
		a.taken.inFlight = false
		s.mu.Unlock()
	}
	switch after {
	case Deliver:
		if a.replayed && s.wire.replayHeader() != "" {
			w.Header().Set(s.wire.replayHeader(), "true")
		}
		writeBody(w)(a.code, a.body)
	case ServerError:
		writeBody(w)(s.wire.refusal(refusal{kind: refusedServerError, status: http.StatusInternalServerError, processed: true}))
	case Cut, Truncate:
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return // the connection is gone: the answer is lost all the same
		}
		defer conn.Close()
		if after == Truncate {
			fmt.Fprintf(conn, "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n",
				a.code, http.StatusText(a.code), len(a.body))
			conn.Write(a.body[:len(a.body)/2])
		}
	}
}

// list serves GET /v1/refunds?reference=KEY and ?payment=REF in fencekit's
// API.
func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	ref, pay := r.URL.Query().Get("reference"), r.URL.Query().Get("payment")
	if ref == "" && pay == "" {
		writeError(w, http.StatusBadRequest, "invalid_request", "reference or payment is required")
		return
	}
	s.mu.Lock()
	data := []*refund{}
	for _, x := range s.refunds {
		if !x.hidden && (ref == "" || x.Reference == ref) && (pay == "" || x.Payment == pay) {
			data = append(data, x)
		}
	}
	body := mustJSON(map[string]any{"data": data})
	s.mu.Unlock()
	writeBody(w)(http.StatusOK, body)
}

// get serves GET /v1/refunds/{id} in fencekit's API.
func (s *Server) get(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	s.mu.Lock()
	i := slices.IndexFunc(s.refunds, func(x *refund) bool { return x.ID == id && !x.hidden })
	var body []byte
	if i >= 0 {
		body = mustJSON(s.refunds[i])
	}
	s.mu.Unlock()
	if i < 0 {
		writeError(w, http.StatusNotFound, "resource_missing", "no such refund")
		return
	}
	writeBody(w)(http.StatusOK, body)
}

func errorBody(code int, errCode, message string) (int, []byte) {
	return code, mustJSON(map[string]any{"error": map[string]string{"code": errCode, "message": message}})
}

func writeError(w http.ResponseWriter, code int, errCode, message string) {
	writeBody(w)(errorBody(code, errCode, message))
}

// writeBody returns a function that writes an answer to w: a status and a
// JSON body, as the wire's methods return them.
func writeBody(w http.ResponseWriter) func(code int, body []byte) {
	return func(code int, body []byte) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		w.Write(body)
	}
}

// mustJSON encodes values built here, which always encode.
func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic("fakeprovider: encode json: " + err.Error())
	}
	return b
}
