package stripe_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"

	stripego "github.com/stripe/stripe-go/v84"

	"github.com/fencekit/fencekit/provider"
	"github.com/fencekit/fencekit/provider/stripe"
)

// stripe-mock (github.com/stripe/stripe-mock) is Stripe's official mock: it
// validates every request against Stripe's OpenAPI specification and
// answers from fixtures, keeping no state. These tests send every request
// the adapter makes to it and check that it accepts them; what the answers
// mean is tested against the fake provider (client_test.go).

// mockURL is stripe-mock's: $FENCEKIT_TEST_STRIPE_MOCK, or the one
// scripts/ensure-stripe-mock.sh starts. The test fails, never skips, when
// none answers.
func mockURL(t *testing.T) string {
	t.Helper()
	u := os.Getenv("FENCEKIT_TEST_STRIPE_MOCK")
	if u == "" {
		u = "http://127.0.0.1:12111"
	}
	resp, err := http.Get(u + "/v1/charges")
	if err != nil {
		t.Fatalf("no stripe-mock answers at %s (%v): run scripts/ensure-stripe-mock.sh (the README's test command does), or set FENCEKIT_TEST_STRIPE_MOCK", u, err)
	}
	resp.Body.Close()
	if resp.Header.Get("Stripe-Mock-Version") == "" {
		t.Fatalf("%s answers, but it is not stripe-mock (no Stripe-Mock-Version header)", u)
	}
	return u
}

// exchange is one request the adapter sent and stripe-mock's status.
type exchange struct {
	method, path string
	form         url.Values // the query of a GET, the body of a POST
	key          string     // Idempotency-Key
	status       int
	body         []byte
}

// recorder is a transport that keeps every exchange.
type recorder struct {
	mu   sync.Mutex
	seen []exchange
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	x := exchange{method: req.Method, path: req.URL.Path, form: req.URL.Query(), key: req.Header.Get("Idempotency-Key")}
	if req.Method == http.MethodPost && req.Body != nil {
		b, err := io.ReadAll(req.Body)
		if err != nil {
			return nil, err
		}
		req.Body = io.NopCloser(bytes.NewReader(b))
		if x.form, err = url.ParseQuery(string(b)); err != nil {
			return nil, err
		}
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	x.status = resp.StatusCode
	x.body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(x.body))
	r.mu.Lock()
	r.seen = append(r.seen, x)
	r.mu.Unlock()
	return resp, nil
}

func (r *recorder) last() exchange {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.seen[len(r.seen)-1]
}

// mockClient is the adapter, configured as in production, against
// stripe-mock through a recorder.
func mockClient(t *testing.T) (*stripe.Client, *recorder) {
	t.Helper()
	rec := &recorder{}
	c, err := stripe.New(stripe.Config{Key: testKey, URL: mockURL(t), HTTPClient: &http.Client{Transport: rec}})
	if err != nil {
		t.Fatal(err)
	}
	return c, rec
}

// accepted fails unless stripe-mock accepted the exchange: a 2xx, its
// request valid against Stripe's specification.
func accepted(t *testing.T, x exchange, method, path string) {
	t.Helper()
	if x.method != method || x.path != path {
		t.Fatalf("sent %s %s, want %s %s", x.method, x.path, method, path)
	}
	if x.status/100 != 2 {
		t.Fatalf("stripe-mock refused %s %s %v with %d: %s", x.method, x.path, x.form, x.status, x.body)
	}
}

func TestStripeMockAcceptsEveryRequest(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range []struct{ ref, path string }{{"pi_123", "/v1/payment_intents/pi_123"}, {"ch_123", "/v1/charges/ch_123"}} {
		t.Run("the payment "+tc.ref+" is read before a refund of it", func(t *testing.T) {
			c, rec := mockClient(t)
			// stripe-mock's payments have captured nothing, so the check
			// refuses the refund: the read is what is checked here.
			_, err := c.Refund(ctx, provider.RefundRequest{OperationKey: "op-1", PaymentRef: tc.ref, AmountMinor: 300, Currency: "usd"})
			if !errors.Is(err, provider.ErrRejected) {
				t.Fatalf("error %v, want the payment check's rejection", err)
			}
			accepted(t, rec.last(), http.MethodGet, tc.path)
		})
	}
	for _, tc := range []struct{ ref, param string }{{"pi_123", "payment_intent"}, {"ch_123", "charge"}} {
		t.Run("a refund of a "+tc.param+" is created with the operation key as Idempotency-Key and metadata", func(t *testing.T) {
			c, rec := mockClient(t)
			_, _ = c.CreateForTest(ctx, provider.RefundRequest{OperationKey: "op-1", PaymentRef: tc.ref, AmountMinor: 300, Currency: "usd"})
			x := rec.last()
			accepted(t, x, http.MethodPost, "/v1/refunds")
			want := url.Values{tc.param: {tc.ref}, "amount": {"300"}, "metadata[" + stripe.MetadataKey + "]": {"op-1"}}
			if x.form.Encode() != want.Encode() || x.key != "op-1" {
				t.Fatalf("sent %v with key %q, want %v with key op-1", x.form, x.key, want)
			}
		})
	}
	for _, tc := range []struct{ ref, param string }{{"pi_123", "payment_intent"}, {"ch_123", "charge"}} {
		t.Run("the refunds of a "+tc.param+" are listed, 100 a page", func(t *testing.T) {
			c, rec := mockClient(t)
			if _, err := c.Lookup(ctx, provider.Query{OperationKey: "op-1", PaymentRef: tc.ref}); err != nil {
				t.Fatal(err)
			}
			x := rec.last()
			accepted(t, x, http.MethodGet, "/v1/refunds")
			if x.form.Get(tc.param) != tc.ref || x.form.Get("limit") != "100" {
				t.Fatalf("query %v", x.form)
			}
		})
	}
	t.Run("a next page of refunds is asked after the last refund seen", func(t *testing.T) {
		c, rec := mockClient(t)
		// The adapter pages through stripe-go's list iterator: its next
		// request is the same list with starting_after.
		params := &stripego.RefundListParams{PaymentIntent: stripego.String("pi_123")}
		params.Limit = stripego.Int64(100)
		params.StartingAfter = stripego.String("re_123")
		for _, err := range c.StripeForTest().V1Refunds.List(ctx, params) {
			if err != nil {
				t.Fatal(err)
			}
			break
		}
		x := rec.last()
		accepted(t, x, http.MethodGet, "/v1/refunds")
		if x.form.Get("starting_after") != "re_123" {
			t.Fatalf("query %v", x.form)
		}
	})
	t.Run("a refund is read by its id", func(t *testing.T) {
		c, rec := mockClient(t)
		if _, err := c.Lookup(ctx, provider.Query{OperationKey: "op-1", ProviderRefundID: "re_123"}); err != nil {
			t.Fatal(err)
		}
		accepted(t, rec.last(), http.MethodGet, "/v1/refunds/re_123")
	})
	// The control: stripe-mock refuses a shape Stripe does not take, so the
	// checks above have teeth (fencekit's own API's reference field, say).
	t.Run("stripe-mock refuses a refund Stripe would not take", func(t *testing.T) {
		form := url.Values{"payment_intent": {"pi_123"}, "amount": {"300"}, "reference": {"op-1"}}
		req, _ := http.NewRequest(http.MethodPost, mockURL(t)+"/v1/refunds", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Authorization", "Bearer "+testKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("stripe-mock answered %d to an unknown parameter, want 400", resp.StatusCode)
		}
	})
}
