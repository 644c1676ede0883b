package stripe_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencekit/fencekit/provider"
	"github.com/fencekit/fencekit/provider/fakeprovider"
	"github.com/fencekit/fencekit/provider/stripe"
)

const testKey = "sk_test_fencekit0123456789"

// wantOnly fails unless err matches target and no other sentinel (nil:
// no error).
func wantOnly(t *testing.T, err, target error) {
	t.Helper()
	for _, s := range provider.Sentinels() {
		if is := errors.Is(err, s); is != (s == target) {
			t.Errorf("error %v: errors.Is(%v) = %v", err, s, is)
		}
	}
	if target == nil && err != nil {
		t.Errorf("error %v, want nil", err)
	}
}

// fake starts the fake provider speaking Stripe's API, with a payment
// pi_<key> of 10.00 EUR for each key.
func fake(t *testing.T, cfg fakeprovider.Config, keys ...string) *fakeprovider.Server {
	t.Helper()
	cfg.API = fakeprovider.APIStripe
	s := fakeprovider.StartWith(cfg)
	t.Cleanup(s.Close)
	for _, k := range keys {
		s.AddPayment("pi_"+k, 1000, "EUR")
	}
	return s
}

func client(t *testing.T, base string) *stripe.Client {
	t.Helper()
	c, err := stripe.New(stripe.Config{Key: testKey, URL: base})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func request(key string) provider.RefundRequest {
	return provider.RefundRequest{OperationKey: key, PaymentRef: "pi_" + key, AmountMinor: 300, Currency: "EUR"}
}

// posts returns the refund creations the fake received for key.
func posts(s *fakeprovider.Server, key string) []fakeprovider.Request {
	var out []fakeprovider.Request
	for _, r := range s.Requests() {
		if r.Method == http.MethodPost && r.Key == key {
			out = append(out, r)
		}
	}
	return out
}

func TestRefundRequestShape(t *testing.T) {
	t.Run("the idempotency key and the metadata are the operation key; the payment is read first", func(t *testing.T) {
		s := fake(t, fakeprovider.Config{}, "op-1")
		r, err := client(t, s.URL()).Refund(context.Background(), request("op-1"))
		wantOnly(t, err, nil)
		if r.Status != provider.StatusSucceeded || r.ProviderRefundID == "" || r.Reference != "op-1" {
			t.Fatalf("answer %+v, want op-1's refund succeeded", r)
		}
		reqs := s.Requests()
		if len(reqs) != 2 || reqs[0].Method != http.MethodGet || reqs[0].Path != "/v1/payment_intents/pi_op-1" {
			t.Fatalf("requests %+v, want the payment read, then the refund", reqs)
		}
		post := reqs[1]
		form, err := url.ParseQuery(string(post.Body))
		if err != nil {
			t.Fatal(err)
		}
		want := url.Values{"payment_intent": {"pi_op-1"}, "amount": {"300"}, "metadata[fencekit_operation_key]": {"op-1"}}
		if post.Path != "/v1/refunds" || post.Key != "op-1" || form.Encode() != want.Encode() {
			t.Fatalf("POST %s key %q body %v, want /v1/refunds key op-1 body %v", post.Path, post.Key, form, want)
		}
		if got := post.Header.Get("Authorization"); got != "Bearer "+testKey {
			t.Fatalf("Authorization %q", got)
		}
	})
	t.Run("a charge is refunded by its charge id", func(t *testing.T) {
		s := fake(t, fakeprovider.Config{})
		s.AddPayment("ch_1", 1000, "EUR")
		req := provider.RefundRequest{OperationKey: "op-ch", PaymentRef: "ch_1", AmountMinor: 300, Currency: "EUR"}
		r, err := client(t, s.URL()).Refund(context.Background(), req)
		wantOnly(t, err, nil)
		p := posts(s, "op-ch")
		if len(p) != 1 || !strings.Contains(string(p[0].Body), "charge=ch_1") || r.PaymentRef != "ch_1" {
			t.Fatalf("posts %+v, answer %+v; want a refund of charge ch_1", p, r)
		}
	})
	t.Run("a request Stripe cannot take is not sent, and says which field", func(t *testing.T) {
		s := fake(t, fakeprovider.Config{}, "op-1")
		for _, tc := range []struct {
			field string
			edit  func(*provider.RefundRequest)
		}{
			{"operation key", func(r *provider.RefundRequest) { r.OperationKey = "" }},
			{"operation key", func(r *provider.RefundRequest) { r.OperationKey = strings.Repeat("k", 256) }},
			{"amount", func(r *provider.RefundRequest) { r.AmountMinor = 0 }},
			{"currency", func(r *provider.RefundRequest) { r.Currency = "EURO" }},
			{"payment", func(r *provider.RefundRequest) { r.PaymentRef = "pay_1" }},
		} {
			req := request("op-1")
			tc.edit(&req)
			_, err := client(t, s.URL()).Refund(context.Background(), req)
			wantOnly(t, err, provider.ErrInvalidRequest)
			if err == nil || !strings.Contains(err.Error(), tc.field) {
				t.Errorf("error %v does not name the %s", err, tc.field)
			}
		}
		if n := len(s.Requests()); n != 0 {
			t.Fatalf("%d requests sent", n)
		}
	})
}

func TestPaymentIsCheckedBeforeTheFirstSend(t *testing.T) {
	cases := []struct {
		name, code string
		edit       func(*provider.RefundRequest)
	}{
		// The fake, like Stripe, refunds in the payment's currency whatever
		// the job says: only this check keeps a USD job from refunding EUR.
		{"another currency is refused, never sent", stripe.CodeCurrencyMismatch, func(r *provider.RefundRequest) { r.Currency = "USD" }},
		{"more than the payment captured is refused, never sent", stripe.CodeAmountExceedsPayment, func(r *provider.RefundRequest) { r.AmountMinor = 1001 }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := fake(t, fakeprovider.Config{}, "op-1")
			req := request("op-1")
			tc.edit(&req)
			_, err := client(t, s.URL()).Refund(context.Background(), req)
			wantOnly(t, err, provider.ErrRejected)
			var rej *provider.RejectedError
			if !errors.As(err, &rej) || rej.Code != tc.code {
				t.Fatalf("error %v, want a rejection %s", err, tc.code)
			}
			if p := posts(s, "op-1"); len(p) != 0 || s.Executions("op-1") != 0 {
				t.Fatalf("%d refunds sent, %d executed; want none", len(p), s.Executions("op-1"))
			}
		})
	}
	t.Run("a payment the account does not know is never sent, and never a rejection", func(t *testing.T) {
		// A key of another account on a resend: the first send may have
		// executed under the right one, so the job must not be failed.
		s := fake(t, fakeprovider.Config{}, "op-1")
		req := request("op-1")
		req.PaymentRef = "pi_nobody"
		_, err := client(t, s.URL()).Refund(context.Background(), req)
		wantOnly(t, err, provider.ErrInvalidRequest)
		if !strings.Contains(err.Error(), "not known to this Stripe account") {
			t.Fatalf("error %v does not say the account does not know the payment", err)
		}
		if p := posts(s, "op-1"); len(p) != 0 || s.Executions("op-1") != 0 {
			t.Fatalf("%d refunds sent, %d executed; want none", len(p), s.Executions("op-1"))
		}
	})
	t.Run("the currency's case does not matter", func(t *testing.T) {
		s := fake(t, fakeprovider.Config{}, "op-1")
		req := request("op-1")
		req.Currency = "eur"
		_, err := client(t, s.URL()).Refund(context.Background(), req)
		wantOnly(t, err, nil)
	})
	t.Run("a rate-limited payment read sends nothing and says so", func(t *testing.T) {
		srv := stripeStub(t, 429, `{"error":{"type":"invalid_request_error","code":"rate_limit","message":"slow down"}}`)
		_, err := client(t, srv.URL).Refund(context.Background(), request("op-1"))
		wantOnly(t, err, provider.ErrRateLimited)
	})
	t.Run("a payment read that fails sends nothing and learns nothing", func(t *testing.T) {
		srv := stripeStub(t, 500, `{"error":{"type":"api_error","message":"boom"}}`)
		_, err := client(t, srv.URL).Refund(context.Background(), request("op-1"))
		wantOnly(t, err, provider.ErrOutcomeUnknown)
	})
}

// stripeStub answers every request with code and body, in Stripe's way.
func stripeStub(t *testing.T, code int, body string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestRefundExecutesOncePerKey(t *testing.T) {
	t.Run("a resend replays the first answer: one refund", func(t *testing.T) {
		s := fake(t, fakeprovider.Config{}, "op-1")
		c := client(t, s.URL())
		first, err := c.Refund(context.Background(), request("op-1"))
		wantOnly(t, err, nil)
		again, err := c.Refund(context.Background(), request("op-1"))
		wantOnly(t, err, nil)
		if again.ProviderRefundID != first.ProviderRefundID || s.Executions("op-1") != 1 {
			t.Fatalf("refunds %s and %s, %d executions; want one refund", first.ProviderRefundID, again.ProviderRefundID, s.Executions("op-1"))
		}
	})
	t.Run("a replayed pending answer stays pending after the refund settled", func(t *testing.T) {
		s := fake(t, fakeprovider.Config{}, "op-1")
		s.Script("op-1", fakeprovider.Fault{Pending: true})
		c := client(t, s.URL())
		if r, err := c.Refund(context.Background(), request("op-1")); err != nil || r.Status != provider.StatusPending {
			t.Fatalf("first answer %+v, %v; want pending", r, err)
		}
		s.Settle("op-1")
		r, err := c.Refund(context.Background(), request("op-1"))
		wantOnly(t, err, nil)
		if r.Status != provider.StatusPending {
			t.Fatalf("replayed answer %s, want the first answer (pending): a replay is never news", r.Status)
		}
		found, err := c.Lookup(context.Background(), provider.Query{OperationKey: "op-1", PaymentRef: "pi_op-1"})
		if err != nil || len(found) != 1 || found[0].Status != provider.StatusSucceeded {
			t.Fatalf("lookup %+v, %v; want the refund succeeded", found, err)
		}
	})
	t.Run("the same key with other parameters goes to manual review", func(t *testing.T) {
		s := fake(t, fakeprovider.Config{}, "op-1")
		c := client(t, s.URL())
		other := request("op-1")
		other.AmountMinor = 299
		if _, err := c.Refund(context.Background(), other); err != nil {
			t.Fatal(err)
		}
		_, err := c.Refund(context.Background(), request("op-1"))
		wantOnly(t, err, provider.ErrKeyParamsMismatch)
		if s.Executions("op-1") != 1 {
			t.Fatalf("%d executions, want the first request's only", s.Executions("op-1"))
		}
	})
	t.Run("a concurrent request with the key in flight is not processed", func(t *testing.T) {
		s := fake(t, fakeprovider.Config{}, "op-1")
		hold := make(chan struct{})
		s.Script("op-1", fakeprovider.Fault{Hold: hold})
		c := client(t, s.URL())
		done := make(chan error, 1)
		go func() { _, err := c.Refund(context.Background(), request("op-1")); done <- err }()
		<-s.Executed("op-1", 1)
		_, err := c.Refund(context.Background(), request("op-1"))
		wantOnly(t, err, provider.ErrKeyInUse)
		close(hold)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if s.Executions("op-1") != 1 {
			t.Fatalf("%d executions, want 1", s.Executions("op-1"))
		}
	})
	t.Run("once Stripe forgot the key, a resend executes again: the window the worker keeps", func(t *testing.T) {
		s := fake(t, fakeprovider.Config{}, "op-1")
		c := client(t, s.URL())
		if _, err := c.Refund(context.Background(), request("op-1")); err != nil {
			t.Fatal(err)
		}
		s.ForgetKey("op-1")
		_, err := c.Refund(context.Background(), request("op-1"))
		wantOnly(t, err, nil)
		if s.Executions("op-1") != 2 {
			t.Fatalf("%d executions, want 2: the fake forgets keys as Stripe does", s.Executions("op-1"))
		}
	})
}

func TestRefundAnswers(t *testing.T) {
	cases := []struct {
		name   string
		fault  fakeprovider.Fault
		want   error
		status provider.Status
	}{
		{"succeeded completes", fakeprovider.Fault{}, nil, provider.StatusSucceeded},
		{"pending is pending", fakeprovider.Fault{Pending: true}, nil, provider.StatusPending},
		{"requires_action is pending", fakeprovider.Fault{Pending: true, RequiresAction: true}, nil, provider.StatusPending},
		{"429 before processing: the same key later", fakeprovider.Fault{Refuse: 429}, provider.ErrRateLimited, ""},
		{"503 before processing is an unknown outcome", fakeprovider.Fault{Refuse: 503}, provider.ErrOutcomeUnknown, ""},
		{"a cut answer is an unknown outcome", fakeprovider.Fault{After: fakeprovider.Cut}, provider.ErrOutcomeUnknown, ""},
		{"a truncated answer is an unknown outcome", fakeprovider.Fault{After: fakeprovider.Truncate}, provider.ErrOutcomeUnknown, ""},
		{"a 500 after processing is an unknown outcome", fakeprovider.Fault{After: fakeprovider.ServerError}, provider.ErrOutcomeUnknown, ""},
		{"a refusal with Stripe's reason fails", fakeprovider.Fault{Reject: "charge_disputed"}, provider.ErrRejected, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := fake(t, fakeprovider.Config{}, "op-1")
			s.Script("op-1", tc.fault)
			r, err := client(t, s.URL()).Refund(context.Background(), request("op-1"))
			wantOnly(t, err, tc.want)
			if r.Status != tc.status {
				t.Fatalf("status %q, want %q", r.Status, tc.status)
			}
		})
	}
	for _, tc := range []struct {
		name  string
		other int64  // what another key refunded first, of the payment's 1000
		raw   string // what Stripe's answer says
	}{
		{"a payment refunded in full by another key: already refunded", 1000, "charge_already_refunded"},
		{"more than is left to refund: already refunded", 800, `"param":"amount"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := fake(t, fakeprovider.Config{}, "op-1")
			c := client(t, s.URL())
			other := provider.RefundRequest{OperationKey: "other", PaymentRef: "pi_op-1", AmountMinor: tc.other, Currency: "EUR"}
			if _, err := c.Refund(context.Background(), other); err != nil {
				t.Fatal(err)
			}
			r, err := c.Refund(context.Background(), request("op-1"))
			wantOnly(t, err, provider.ErrAlreadyRefunded)
			if !strings.Contains(string(r.Raw), tc.raw) {
				t.Fatalf("raw %s, want Stripe's error (%s) kept for the evidence log", r.Raw, tc.raw)
			}
		})
	}
	t.Run("an answer about another amount is a mismatch", func(t *testing.T) {
		srv := stripeAnswers(t, `{"id":"re_1","object":"refund","amount":299,"currency":"eur","payment_intent":"pi_op-1","metadata":{"fencekit_operation_key":"op-1"},"status":"succeeded"}`)
		_, err := client(t, srv.URL).Refund(context.Background(), request("op-1"))
		wantOnly(t, err, provider.ErrMismatch)
	})
	t.Run("an answer without the key's metadata is a mismatch", func(t *testing.T) {
		srv := stripeAnswers(t, `{"id":"re_1","object":"refund","amount":300,"currency":"eur","payment_intent":"pi_op-1","metadata":{},"status":"succeeded"}`)
		_, err := client(t, srv.URL).Refund(context.Background(), request("op-1"))
		wantOnly(t, err, provider.ErrMismatch)
	})
	t.Run("failed and canceled are definitive", func(t *testing.T) {
		for _, st := range []string{"failed", "canceled"} {
			srv := stripeAnswers(t, `{"id":"re_1","object":"refund","amount":300,"currency":"eur","payment_intent":"pi_op-1","metadata":{"fencekit_operation_key":"op-1"},"status":"`+st+`","failure_reason":"lost_or_stolen_card"}`)
			r, err := client(t, srv.URL).Refund(context.Background(), request("op-1"))
			wantOnly(t, err, provider.ErrRejected)
			if r.Status != provider.StatusRejected || !strings.Contains(r.Reason, st) {
				t.Errorf("%s: %+v", st, r)
			}
		}
	})
}

// stripeAnswers serves a payment intent pi_op-1 of 10.00 EUR and answers a
// refund's creation with refund.
func stripeAnswers(t *testing.T, refund string) *httptest.Server {
	t.Helper()
	return paymentThen(t, func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, refund) })
}

// paymentThen serves a payment intent pi_op-1 of 10.00 EUR, and answers
// every other request with answer.
func paymentThen(t *testing.T, answer http.HandlerFunc) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.Method == http.MethodGet {
			io.WriteString(w, `{"id":"pi_op-1","object":"payment_intent","amount":1000,"amount_received":1000,"currency":"eur"}`)
			return
		}
		answer(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestRefundIsSentOnce(t *testing.T) {
	t.Run("a cut answer on a reused connection is not resent by net/http or stripe-go", func(t *testing.T) {
		s := fake(t, fakeprovider.Config{}, "op-0", "op-1")
		c := client(t, s.URL())
		if _, err := c.Refund(context.Background(), request("op-0")); err != nil {
			t.Fatal(err)
		}
		s.Script("op-1", fakeprovider.Fault{After: fakeprovider.Cut})
		_, err := c.Refund(context.Background(), request("op-1"))
		wantOnly(t, err, provider.ErrOutcomeUnknown)
		if p := posts(s, "op-1"); len(p) != 1 || s.Executions("op-1") != 1 {
			t.Fatalf("op-1 sent %d times and executed %d times, want once", len(p), s.Executions("op-1"))
		}
	})
	t.Run("a 500 is not retried", func(t *testing.T) {
		var n atomic.Int32
		srv := paymentThen(t, func(w http.ResponseWriter, _ *http.Request) {
			n.Add(1)
			w.Header().Set("Stripe-Should-Retry", "true")
			w.WriteHeader(500)
			io.WriteString(w, `{"error":{"type":"api_error","message":"boom"}}`)
		})
		_, err := client(t, srv.URL).Refund(context.Background(), request("op-1"))
		wantOnly(t, err, provider.ErrOutcomeUnknown)
		if n.Load() != 1 {
			t.Fatalf("%d POSTs, want 1", n.Load())
		}
	})
	t.Run("the provider timeout ends a hung call as an unknown outcome", func(t *testing.T) {
		s := fake(t, fakeprovider.Config{}, "op-1")
		s.Script("op-1", fakeprovider.Fault{Hold: make(chan struct{})}) // never released
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		_, err := client(t, s.URL()).Refund(ctx, request("op-1"))
		wantOnly(t, err, provider.ErrOutcomeUnknown)
	})
}

func TestLookup(t *testing.T) {
	t.Run("the payment's refunds, matched by the metadata's operation key", func(t *testing.T) {
		s := fake(t, fakeprovider.Config{}, "op-1")
		c := client(t, s.URL())
		other := provider.RefundRequest{OperationKey: "other", PaymentRef: "pi_op-1", AmountMinor: 100, Currency: "EUR"}
		for _, req := range []provider.RefundRequest{other, request("op-1")} {
			if _, err := c.Refund(context.Background(), req); err != nil {
				t.Fatal(err)
			}
		}
		found, err := c.Lookup(context.Background(), provider.Query{OperationKey: "op-1", PaymentRef: "pi_op-1"})
		if err != nil || len(found) != 1 || found[0].Reference != "op-1" || provider.Verify(request("op-1"), found[0]) != nil {
			t.Fatalf("found %+v, %v; want op-1's refund, verified", found, err)
		}
		if q := s.Requests()[len(s.Requests())-1].Query; q.Get("payment_intent") != "pi_op-1" || q.Get("limit") != "100" {
			t.Fatalf("list query %v", q)
		}
	})
	t.Run("a key's refund on a later page is found", func(t *testing.T) {
		s := fake(t, fakeprovider.Config{})
		s.AddPayment("pi_big", 1000, "EUR")
		c := client(t, s.URL())
		for i := range 130 {
			req := provider.RefundRequest{OperationKey: fmt.Sprintf("k-%03d", i), PaymentRef: "pi_big", AmountMinor: 1, Currency: "EUR"}
			if _, err := c.Refund(context.Background(), req); err != nil {
				t.Fatal(err)
			}
		}
		found, err := c.Lookup(context.Background(), provider.Query{OperationKey: "k-000", PaymentRef: "pi_big"}) // the oldest: the last page
		if err != nil || len(found) != 1 || found[0].Reference != "k-000" {
			t.Fatalf("found %+v, %v; want k-000's refund", found, err)
		}
	})
	t.Run("a lagging refund is not found, then found: not found is not proof", func(t *testing.T) {
		s := fake(t, fakeprovider.Config{LookupLag: time.Minute}, "op-1")
		s.Script("op-1", fakeprovider.Fault{Unpublished: true, After: fakeprovider.Cut})
		c := client(t, s.URL())
		_, err := c.Refund(context.Background(), request("op-1"))
		wantOnly(t, err, provider.ErrOutcomeUnknown)
		q := provider.Query{OperationKey: "op-1", PaymentRef: "pi_op-1"}
		if found, err := c.Lookup(context.Background(), q); err != nil || len(found) != 0 {
			t.Fatalf("found %+v, %v; want nothing yet", found, err)
		}
		s.Publish("op-1")
		if found, err := c.Lookup(context.Background(), q); err != nil || len(found) != 1 || found[0].Status != provider.StatusSucceeded {
			t.Fatalf("found %+v, %v; want the refund", found, err)
		}
	})
	t.Run("statuses move later: declined is rejected, a reversal is failed", func(t *testing.T) {
		s := fake(t, fakeprovider.Config{}, "op-1", "op-2")
		s.Script("op-1", fakeprovider.Fault{Pending: true})
		c := client(t, s.URL())
		for _, k := range []string{"op-1", "op-2"} {
			if _, err := c.Refund(context.Background(), request(k)); err != nil {
				t.Fatal(err)
			}
		}
		s.Decline("op-1", fakeprovider.AsyncDeclineReason)
		s.Reverse("op-2")
		for _, k := range []string{"op-1", "op-2"} {
			found, err := c.Lookup(context.Background(), provider.Query{OperationKey: k, PaymentRef: "pi_" + k})
			if err != nil || len(found) != 1 || found[0].Status != provider.StatusRejected || !strings.HasPrefix(found[0].Reason, "failed: ") {
				t.Fatalf("%s: found %+v, %v; want it failed with Stripe's reason", k, found, err)
			}
		}
	})
	t.Run("the refund id is asked when the payment shows nothing for the key", func(t *testing.T) {
		s := fake(t, fakeprovider.Config{}, "op-1")
		c := client(t, s.URL())
		r, err := c.Refund(context.Background(), request("op-1"))
		if err != nil {
			t.Fatal(err)
		}
		found, err := c.Lookup(context.Background(), provider.Query{OperationKey: "op-1", PaymentRef: "pi_elsewhere", ProviderRefundID: r.ProviderRefundID})
		if err != nil || len(found) != 1 || found[0].ProviderRefundID != r.ProviderRefundID {
			t.Fatalf("found %+v, %v", found, err)
		}
		none, err := c.Lookup(context.Background(), provider.Query{OperationKey: "op-1", ProviderRefundID: "re_nobody"})
		if err != nil || len(none) != 0 {
			t.Fatalf("unknown id: %+v, %v; want nothing", none, err)
		}
	})
	t.Run("no payment and no refund id: no lookup", func(t *testing.T) {
		_, err := client(t, "http://127.0.0.1:1").Lookup(context.Background(), provider.Query{OperationKey: "op-1"})
		wantOnly(t, err, provider.ErrNoLookup)
	})
	t.Run("a failed lookup learns nothing", func(t *testing.T) {
		for code, want := range map[int]error{429: provider.ErrRateLimited, 500: provider.ErrOutcomeUnknown, 401: provider.ErrOutcomeUnknown} {
			srv := stripeStub(t, code, `{"error":{"type":"api_error","message":"no"}}`)
			_, err := client(t, srv.URL).Lookup(context.Background(), provider.Query{OperationKey: "op-1", PaymentRef: "pi_op-1"})
			wantOnly(t, err, want)
		}
	})
}

func TestContract(t *testing.T) {
	c := client(t, "")
	got := c.Capabilities()
	want := provider.Capabilities{SafeResend: true, KeyRetention: 24 * time.Hour, LookupByReference: false,
		ListByPayment: true, LookupByRefundID: true, LookupLag: stripe.DefaultLookupLag}
	if got != want {
		t.Fatalf("capabilities %+v, want Stripe's %+v", got, want)
	}
	short, err := stripe.New(stripe.Config{Key: testKey, KeyRetention: 20 * time.Second, LookupLag: time.Second})
	if err != nil || short.Capabilities().KeyRetention != 20*time.Second || short.Capabilities().LookupLag != time.Second {
		t.Fatalf("a test double's retention and lag: %v", err)
	}
}

func TestConfigIsChecked(t *testing.T) {
	for _, tc := range []struct {
		cfg   stripe.Config
		field string
	}{
		{stripe.Config{}, "Key"},
		{stripe.Config{Key: "sk_test 1"}, "Key"},
		{stripe.Config{Key: testKey, URL: "api.stripe.com"}, "URL"},
		{stripe.Config{Key: testKey, URL: "https://user:pw@api.stripe.com"}, "URL"},
		{stripe.Config{Key: testKey, KeyRetention: 48 * time.Hour}, "KeyRetention"},
		{stripe.Config{Key: testKey, LookupLag: -time.Second}, "LookupLag"},
	} {
		_, err := stripe.New(tc.cfg)
		if !errors.Is(err, stripe.ErrConfig) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%+v: %v, want an error naming %s", tc.cfg, err, tc.field)
		}
		if tc.cfg.Key != "" && strings.Contains(err.Error(), tc.cfg.Key) {
			t.Errorf("the error %q shows the key", err)
		}
	}
}

// The key never shows in an error, whatever Stripe answers.
func TestKeyNeverInErrors(t *testing.T) {
	for _, code := range []int{401, 403, 500} {
		// Stripe masks a refused key; an answer that quotes it whole
		// (stripe-mock's does) must not carry it anywhere either.
		srv := stripeStub(t, code, `{"error":{"type":"invalid_request_error","message":"Invalid API Key provided: `+testKey+`"}}`)
		c := client(t, srv.URL)
		r, err := c.Refund(context.Background(), request("op-1"))
		_, lerr := c.Lookup(context.Background(), provider.Query{OperationKey: "op-1", PaymentRef: "pi_op-1"})
		for _, e := range []error{err, lerr} {
			if e == nil || strings.Contains(e.Error(), testKey) {
				t.Errorf("%d: error %v", code, e)
			}
		}
		if strings.Contains(string(r.Raw), testKey) {
			t.Errorf("%d: raw answer %s", code, r.Raw)
		}
	}
	// The refund's creation too: its error and the raw answer kept for
	// the evidence log.
	srv := paymentThen(t, func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusUnauthorized)
		io.WriteString(w, `{"error":{"type":"invalid_request_error","message":"Invalid API Key provided: `+testKey+`"}}`)
	})
	r, err := client(t, srv.URL).Refund(context.Background(), request("op-1"))
	if err == nil || strings.Contains(err.Error(), testKey) || strings.Contains(string(r.Raw), testKey) || len(r.Raw) == 0 {
		t.Errorf("the refund's creation: %v, raw %s", err, r.Raw)
	}
	_, err = client(t, "http://127.0.0.1:1").Refund(context.Background(), request("op-1"))
	if err == nil || strings.Contains(err.Error(), testKey) {
		t.Errorf("a refused connection: %v", err)
	}
}
