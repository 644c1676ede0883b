package stripe

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	stripego "github.com/stripe/stripe-go/v84"

	"github.com/fencekit/fencekit/provider"
)

// Config configures a Client. Key is required; a zero field takes its
// default.
type Config struct {
	// Key is the Stripe secret or restricted key (sk_…, rk_…). It is sent
	// as the bearer token of every request and appears in no error, log or
	// evidence. A restricted key needs write access to refunds and read
	// access to payment intents and charges.
	Key string
	// URL is the API's base URL, stripego.APIURL (https://api.stripe.com)
	// when empty: set it for stripe-mock or the fake provider's Stripe API.
	URL string
	// HTTPClient sends the requests; a client of its own when nil. Its
	// transport is wrapped so that net/http never replays a refund on its
	// own (see New). Calls are bounded by their context's deadline, which
	// should be the provider timeout.
	HTTPClient *http.Client
	// KeyRetention is the key retention the client declares; KeyRetention
	// (Stripe's 24 h) when zero. Less is allowed, for a test double of
	// Stripe that forgets keys sooner; more is refused.
	KeyRetention time.Duration
	// LookupLag is the lookup lag the client declares; DefaultLookupLag
	// when zero.
	LookupLag time.Duration
}

// ErrConfig is what New returns for a Config it refuses; the error names
// each bad field.
var ErrConfig = errors.New("invalid Stripe client configuration")

// Client is a provider.Client for Stripe's refunds, on Stripe's official
// Go client (github.com/stripe/stripe-go/v84, API version
// stripego.APIVersion). Its methods are safe for concurrent use.
//
// It sends each request once: stripe-go's own retries are off (zero
// MaxNetworkRetries), and net/http's replay of a request carrying an
// Idempotency-Key on a reused connection is disabled. A resend is always
// the worker's decision, after a reconcile.
type Client struct {
	sc        *stripego.Client
	key       string // only to scrub it from Stripe's answers (scrub)
	retention time.Duration
	lookupLag time.Duration
}

var _ provider.Client = (*Client)(nil)

// New returns a Client for cfg, or an error wrapping ErrConfig that names
// each bad field.
func New(cfg Config) (*Client, error) {
	var problems []string
	if cfg.Key == "" {
		problems = append(problems, "Key is empty: set the Stripe secret key (sk_…) or a restricted key (rk_…)")
	} else if strings.ContainsAny(cfg.Key, " \t\r\n") {
		problems = append(problems, "Key contains white space")
	}
	base := stripego.APIURL
	if cfg.URL != "" {
		u, err := url.Parse(cfg.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			problems = append(problems, fmt.Sprintf("URL %q is not an absolute http(s) URL with a host and no query, fragment or credentials", cfg.URL))
		}
		base = strings.TrimSuffix(cfg.URL, "/")
	}
	retention := cfg.KeyRetention
	switch {
	case retention == 0:
		retention = KeyRetention
	case retention < 0 || retention > KeyRetention:
		problems = append(problems, fmt.Sprintf("KeyRetention %v: must be positive and at most Stripe's %v", retention, KeyRetention))
	}
	lag := cfg.LookupLag
	switch {
	case lag == 0:
		lag = DefaultLookupLag
	case lag < 0:
		problems = append(problems, fmt.Sprintf("LookupLag %v: must not be negative", lag))
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("%w: %s", ErrConfig, strings.Join(problems, "; "))
	}
	hc := &http.Client{}
	if cfg.HTTPClient != nil {
		c := *cfg.HTTPClient
		hc = &c
	}
	next := hc.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	hc.Transport = noReplay{next}
	backend := stripego.GetBackendWithConfig(stripego.APIBackend, &stripego.BackendConfig{
		HTTPClient:        hc,
		URL:               stripego.String(base),
		MaxNetworkRetries: stripego.Int64(0),
		EnableTelemetry:   stripego.Bool(false),
		LeveledLogger:     &stripego.LeveledLogger{Level: stripego.LevelNull},
	})
	sc := stripego.NewClient(cfg.Key, stripego.WithBackends(&stripego.Backends{API: backend}))
	return &Client{sc: sc, key: cfg.Key, retention: retention, lookupLag: lag}, nil
}

// noReplay keeps net/http from sending a POST again by itself. net/http
// replays a request that carries an Idempotency-Key when a reused
// connection fails, using GetBody, which stripe-go sets: that would be a
// resend nobody decided on, after an outcome that may be unknown. Without
// GetBody it cannot.
type noReplay struct{ next http.RoundTripper }

func (t noReplay) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.GetBody != nil && r.Method != http.MethodGet {
		r = r.Clone(r.Context())
		r.GetBody = nil
	}
	return t.next.RoundTrip(r)
}

// paymentKind says which kind of Stripe object a payment reference names.
type paymentKind int

const (
	anyPayment    paymentKind = iota // unknown: a webhook's refund
	paymentIntent                    // pi_…
	charge                           // ch_…, py_…
)

// kindOf returns the kind of ref, or an error wrapping ErrInvalidRequest.
func kindOf(ref string) (paymentKind, error) {
	switch {
	case strings.HasPrefix(ref, "pi_"):
		return paymentIntent, nil
	case strings.HasPrefix(ref, "ch_"), strings.HasPrefix(ref, "py_"):
		return charge, nil
	}
	return anyPayment, fmt.Errorf("payment %q is neither a PaymentIntent (pi_…) nor a Charge (ch_…, py_…): %w", ref, provider.ErrInvalidRequest)
}

// check refuses a request that cannot be sent, naming the field.
func check(req provider.RefundRequest) (paymentKind, error) {
	switch {
	case req.OperationKey == "":
		return anyPayment, fmt.Errorf("check refund: no operation key: %w", provider.ErrInvalidRequest)
	case len(req.OperationKey) > 255:
		// Stripe's limit for an idempotency key and for a metadata value
		// alike (https://docs.stripe.com/api/idempotent_requests).
		return anyPayment, fmt.Errorf("check refund: operation key of %d characters, Stripe takes 255 at most: %w", len(req.OperationKey), provider.ErrInvalidRequest)
	case req.AmountMinor <= 0:
		return anyPayment, fmt.Errorf("check refund: amount %d: %w", req.AmountMinor, provider.ErrInvalidRequest)
	case len(req.Currency) != 3:
		return anyPayment, fmt.Errorf("check refund: currency %q is not a three-letter ISO code: %w", req.Currency, provider.ErrInvalidRequest)
	}
	kind, err := kindOf(req.PaymentRef)
	if err != nil {
		return anyPayment, fmt.Errorf("check refund: %w", err)
	}
	return kind, nil
}

// Refund implements provider.Client: before the refund is sent, it reads the
// payment and checks the request's currency and amount against it (a Stripe
// refund carries no currency of its own: it is the payment's); then it
// creates the refund with the operation key as the Idempotency-Key and as
// metadata[fencekit_operation_key], and classifies Stripe's answer (see the
// package documentation). A payment check that fails sends nothing: it is
// *provider.RejectedError when the payment is another currency or holds
// less than the amount (facts that never change, so a resend meets them
// exactly as the first send did), ErrInvalidRequest when the account does
// not know the payment (a key of another account: an earlier send may have
// executed under the right one, so it is an operator's to look, never a
// failure), ErrRateLimited on a 429, and ErrOutcomeUnknown when the payment
// could not be read.
func (c *Client) Refund(ctx context.Context, req provider.RefundRequest) (provider.Refund, error) {
	kind, err := check(req)
	if err != nil {
		return provider.Refund{}, fmt.Errorf("send refund: %w", err)
	}
	if err := c.checkPayment(ctx, req, kind); err != nil {
		return provider.Refund{}, fmt.Errorf("send refund: %w", err)
	}
	return c.create(ctx, req, kind)
}

// checkPayment reads req's payment and refuses a refund it cannot hold:
// another currency, or more than was captured. Nothing is sent to refund.
func (c *Client) checkPayment(ctx context.Context, req provider.RefundRequest, kind paymentKind) error {
	var (
		captured int64
		currency stripego.Currency
		err      error
	)
	if kind == paymentIntent {
		var pi *stripego.PaymentIntent
		pi, err = c.sc.V1PaymentIntents.Retrieve(ctx, req.PaymentRef, nil)
		if err == nil {
			captured, currency = pi.AmountReceived, pi.Currency
		}
	} else {
		var ch *stripego.Charge
		ch, err = c.sc.V1Charges.Retrieve(ctx, req.PaymentRef, nil)
		if err == nil {
			captured, currency = ch.AmountCaptured, ch.Currency
		}
	}
	if err != nil {
		return fmt.Errorf("read payment %s: %w", req.PaymentRef, readError(c.scrub(err), "payment"))
	}
	switch {
	case !strings.EqualFold(string(currency), req.Currency):
		return fmt.Errorf("check payment %s: %w", req.PaymentRef, &provider.RejectedError{Code: CodeCurrencyMismatch,
			Reason: fmt.Sprintf("the payment is in %s, the refund in %s; a Stripe refund is always in its payment's currency", strings.ToUpper(string(currency)), strings.ToUpper(req.Currency))})
	case req.AmountMinor > captured:
		return fmt.Errorf("check payment %s: %w", req.PaymentRef, &provider.RejectedError{Code: CodeAmountExceedsPayment,
			Reason: fmt.Sprintf("the refund of %d exceeds the %d the payment captured (minor units)", req.AmountMinor, captured)})
	}
	return nil
}

// The codes of the rejections this client makes itself, before sending.
const (
	CodeCurrencyMismatch     = "fencekit_currency_mismatch"
	CodeAmountExceedsPayment = "fencekit_amount_exceeds_payment"
)

// create sends the refund once and classifies the answer.
func (c *Client) create(ctx context.Context, req provider.RefundRequest, kind paymentKind) (provider.Refund, error) {
	params := &stripego.RefundCreateParams{
		Amount:   stripego.Int64(req.AmountMinor),
		Metadata: map[string]string{MetadataKey: req.OperationKey},
	}
	if kind == paymentIntent {
		params.PaymentIntent = stripego.String(req.PaymentRef)
	} else {
		params.Charge = stripego.String(req.PaymentRef)
	}
	// The operation key, never the attempt: two attempts of one job are one
	// refund to Stripe.
	params.IdempotencyKey = stripego.String(req.OperationKey)
	re, err := c.sc.V1Refunds.Create(ctx, params)
	if err != nil {
		err = c.scrub(err)
		return provider.Refund{Raw: errorBody(err)}, fmt.Errorf("send refund: %w", sendError(err))
	}
	r, err := refundOf(re, kind, rawOf(re))
	if err != nil {
		return provider.Refund{Raw: rawOf(re)}, fmt.Errorf("send refund: %w", err)
	}
	// A replay (Idempotent-Replayed: true) is the first answer again, as it
	// was then: a pending refund replayed stays pending, whatever it became
	// since, and is classified like the first answer.
	if err := provider.Verify(req, r); err != nil {
		return r, fmt.Errorf("send refund: %w", err)
	}
	if r.Status == provider.StatusRejected {
		return r, fmt.Errorf("send refund: %w", &provider.RejectedError{Code: "refund_" + string(re.Status), Reason: r.Reason})
	}
	return r, nil
}

// Lookup implements provider.Client. The question is the operation key: it
// lists the refunds of q's payment (its payment intent or its charge) and
// keeps those whose metadata names q.OperationKey (all of them when the key
// is empty); when that finds nothing, it asks for q.ProviderRefundID, whose
// refund is returned as Stripe reports it, whatever its metadata. A refund
// id therefore never hides the key's own refunds: an id Stripe does not know
// is one more "not found". Any request that fails fails the Lookup: 429 is
// ErrRateLimited, a payment reference of neither kind ErrInvalidRequest, and
// anything else ErrOutcomeUnknown (nothing was learnt).
func (c *Client) Lookup(ctx context.Context, q provider.Query) ([]provider.Refund, error) {
	asked := false
	if q.PaymentRef != "" {
		kind, err := kindOf(q.PaymentRef)
		if err != nil {
			return nil, fmt.Errorf("look up refund: %w", err)
		}
		asked = true
		found, err := c.list(ctx, q, kind)
		if err != nil || len(found) > 0 {
			return found, err
		}
	}
	if q.ProviderRefundID != "" {
		return c.byID(ctx, q.ProviderRefundID)
	}
	if !asked {
		return nil, fmt.Errorf("look up refund: Stripe looks refunds up by payment or refund id, and the query has neither: %w", provider.ErrNoLookup)
	}
	return []provider.Refund{}, nil
}

// list reads the refunds of q's payment, up to maxListed, and keeps q's key's.
func (c *Client) list(ctx context.Context, q provider.Query, kind paymentKind) ([]provider.Refund, error) {
	params := &stripego.RefundListParams{}
	params.Limit = stripego.Int64(listLimit)
	if kind == paymentIntent {
		params.PaymentIntent = stripego.String(q.PaymentRef)
	} else {
		params.Charge = stripego.String(q.PaymentRef)
	}
	found := []provider.Refund{}
	n := 0
	for re, err := range c.sc.V1Refunds.List(ctx, params) {
		if err != nil {
			return nil, fmt.Errorf("look up refunds of %s: %w", q.PaymentRef, readError(c.scrub(err), "refunds"))
		}
		if n++; n > maxListed {
			return nil, fmt.Errorf("look up refunds of %s: more than %d refunds, not read to the end: %w", q.PaymentRef, maxListed, provider.ErrOutcomeUnknown)
		}
		if q.OperationKey != "" && re.Metadata[MetadataKey] != q.OperationKey {
			continue
		}
		r, err := refundOf(re, kind, nil)
		if err != nil {
			return nil, fmt.Errorf("look up refunds of %s: %w", q.PaymentRef, err)
		}
		found = append(found, r)
	}
	return found, nil
}

// byID reads one refund: as reported, or nothing when Stripe has none.
func (c *Client) byID(ctx context.Context, id string) ([]provider.Refund, error) {
	re, err := c.sc.V1Refunds.Retrieve(ctx, id, nil)
	if err != nil {
		if missing(err) {
			return []provider.Refund{}, nil
		}
		return nil, fmt.Errorf("look up refund %s: %w", id, readError(c.scrub(err), "refund"))
	}
	r, err := refundOf(re, anyPayment, rawOf(re))
	if err != nil {
		return nil, fmt.Errorf("look up refund %s: %w", id, err)
	}
	return []provider.Refund{r}, nil
}

// scrub removes the key from a Stripe error's message and body before
// anything reads them: Stripe masks a refused key in its message, but an
// answer that quotes it whole (stripe-mock does) must not carry it into an
// error, a log line, a job's reason or the evidence log.
func (c *Client) scrub(err error) error {
	var se *stripego.Error
	if errors.As(err, &se) {
		se.Msg = strings.ReplaceAll(se.Msg, c.key, redactedKey)
		se.DeveloperMsg = strings.ReplaceAll(se.DeveloperMsg, c.key, redactedKey)
		if se.LastResponse != nil {
			se.LastResponse.RawJSON = bytes.ReplaceAll(se.LastResponse.RawJSON, []byte(c.key), []byte(redactedKey))
		}
	}
	return err
}

// redactedKey stands for the key wherever an answer quoted it.
const redactedKey = "[the API key]"
