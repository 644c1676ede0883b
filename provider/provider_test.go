package provider_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fencekit/fencekit/provider"
	"github.com/fencekit/fencekit/provider/fakeprovider"
)

var req = provider.RefundRequest{OperationKey: "op-1", PaymentRef: "pay_1", AmountMinor: 300, Currency: "EUR"}

var sentinels = provider.Sentinels()

// wantOnly fails unless err matches target and no other sentinel.
func wantOnly(t *testing.T, err, target error) {
	t.Helper()
	for _, s := range sentinels {
		if is := errors.Is(err, s); is != (s == target) {
			t.Errorf("error %v: errors.Is(%v) = %v", err, s, is)
		}
	}
	if target == nil && err != nil {
		t.Errorf("error %v, want nil", err)
	}
}

// stub serves every request with code and body, and counts them.
func stub(t *testing.T, code int, body string) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

var allLookups = provider.Capabilities{LookupByReference: true, LookupByRefundID: true, ListByPayment: true}

func TestVerify(t *testing.T) {
	ok := provider.Refund{Reference: "op-1", PaymentRef: "pay_1", AmountMinor: 300, Currency: "EUR"}
	cases := []struct {
		name string
		edit func(*provider.Refund)
		want error
	}{
		{"the same refund matches", func(*provider.Refund) {}, nil},
		{"currency case does not matter", func(r *provider.Refund) { r.Currency = "eur" }, nil},
		{"another reference does not match", func(r *provider.Refund) { r.Reference = "op-1-8" }, provider.ErrMismatch},
		{"another payment does not match", func(r *provider.Refund) { r.PaymentRef = "pay_2" }, provider.ErrMismatch},
		{"another amount does not match", func(r *provider.Refund) { r.AmountMinor = 299 }, provider.ErrMismatch},
		{"another currency does not match", func(r *provider.Refund) { r.Currency = "USD" }, provider.ErrMismatch},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := ok
			tc.edit(&r)
			wantOnly(t, provider.Verify(req, r), tc.want)
		})
	}
}

func TestRefundAnswers(t *testing.T) {
	const ok = `{"id":"re_1","payment":"pay_1","amount":300,"currency":"EUR","reference":"op-1","status":"succeeded"}`
	cases := []struct {
		name   string
		code   int
		body   string
		want   error
		status provider.Status
	}{
		{"a verified success completes", 200, ok, nil, provider.StatusSucceeded},
		{"a 201 with a verified refund completes", 201, ok, nil, provider.StatusSucceeded},
		{"a lower-case currency is the same currency", 200, `{"id":"re_1","payment":"pay_1","amount":300,"currency":"eur","reference":"op-1","status":"succeeded"}`, nil, provider.StatusSucceeded},
		{"pending is an answer, not a success", 200, `{"id":"re_1","payment":"pay_1","amount":300,"currency":"EUR","reference":"op-1","status":"pending"}`, nil, provider.StatusPending},
		{"a rejected refund in a 200 is a rejection", 200, `{"id":"re_1","payment":"pay_1","amount":300,"currency":"EUR","reference":"op-1","status":"rejected","reason":"closed account"}`, provider.ErrRejected, provider.StatusRejected},
		{"a reversed refund executed, then came back: reconcile, do not complete", 200, `{"id":"re_1","payment":"pay_1","amount":300,"currency":"EUR","reference":"op-1","status":"reversed"}`, provider.ErrAlreadyRefunded, provider.StatusReversed},
		{"success with another amount is a mismatch", 200, `{"id":"re_1","payment":"pay_1","amount":299,"currency":"EUR","reference":"op-1","status":"succeeded"}`, provider.ErrMismatch, provider.StatusSucceeded},
		{"success with another reference is a mismatch", 200, `{"id":"re_1","payment":"pay_1","amount":300,"currency":"EUR","reference":"op-2","status":"succeeded"}`, provider.ErrMismatch, provider.StatusSucceeded},
		{"an unknown status is an unknown outcome", 200, `{"id":"re_1","payment":"pay_1","amount":300,"currency":"EUR","reference":"op-1","status":"processing"}`, provider.ErrOutcomeUnknown, ""},
		{"an unreadable 200 is an unknown outcome", 200, `<html>ok</html>`, provider.ErrOutcomeUnknown, ""},
		{"500 is an unknown outcome", 500, `{"error":{"code":"internal_error","message":"boom"}}`, provider.ErrOutcomeUnknown, ""},
		{"502 without a body is an unknown outcome", 502, ``, provider.ErrOutcomeUnknown, ""},
		{"429 is rate limited", 429, `{"error":{"code":"rate_limited"}}`, provider.ErrRateLimited, ""},
		{"409 params mismatch", 409, `{"error":{"code":"idempotency_params_mismatch"}}`, provider.ErrKeyParamsMismatch, ""},
		{"409 key in use", 409, `{"error":{"code":"idempotency_key_in_use"}}`, provider.ErrKeyInUse, ""},
		{"an unknown 409 is an unknown outcome", 409, `{"error":{"code":"conflict"}}`, provider.ErrOutcomeUnknown, ""},
		{"422 with a code is a rejection", 422, `{"error":{"code":"charge_disputed","message":"disputed"}}`, provider.ErrRejected, ""},
		{"400 with a code is a rejection", 400, `{"error":{"code":"invalid_amount","message":"bad"}}`, provider.ErrRejected, ""},
		{"already refunded is evidence, not a failure", 422, `{"error":{"code":"already_refunded"}}`, provider.ErrAlreadyRefunded, ""},
		{"exceeds refundable amount is evidence, not a failure", 422, `{"error":{"code":"exceeds_refundable_amount"}}`, provider.ErrAlreadyRefunded, ""},
		{"422 without a code is an unknown outcome", 422, `{}`, provider.ErrOutcomeUnknown, ""},
		{"404 is an unknown outcome", 404, `not found`, provider.ErrOutcomeUnknown, ""},
		{"401 is an unknown outcome", 401, `{"error":{"code":"unauthorized"}}`, provider.ErrOutcomeUnknown, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv, _ := stub(t, tc.code, tc.body)
			r, err := provider.NewHTTPClient(srv.URL, nil, allLookups).Refund(context.Background(), req)
			wantOnly(t, err, tc.want)
			if r.Status != tc.status {
				t.Errorf("status %q, want %q", r.Status, tc.status)
			}
			if string(r.Raw) != tc.body {
				t.Errorf("raw %q, want the response body %q", r.Raw, tc.body)
			}
		})
	}

	t.Run("a rejection carries the provider's code and reason", func(t *testing.T) {
		srv, _ := stub(t, 422, `{"error":{"code":"charge_disputed","message":"disputed"}}`)
		_, err := provider.NewHTTPClient(srv.URL, nil, allLookups).Refund(context.Background(), req)
		var rej *provider.RejectedError
		if !errors.As(err, &rej) || rej.Code != "charge_disputed" || rej.Reason != "disputed" {
			t.Errorf("error %v, want a RejectedError charge_disputed: disputed", err)
		}
	})
}

func TestRefundSending(t *testing.T) {
	invalid := []struct {
		name string
		edit func(*provider.RefundRequest)
	}{
		{"no operation key", func(r *provider.RefundRequest) { r.OperationKey = "" }},
		{"no payment", func(r *provider.RefundRequest) { r.PaymentRef = "" }},
		{"no amount", func(r *provider.RefundRequest) { r.AmountMinor = 0 }},
		{"no currency", func(r *provider.RefundRequest) { r.Currency = "" }},
	}
	for _, tc := range invalid {
		t.Run("a request with "+tc.name+" is not sent", func(t *testing.T) {
			srv, n := stub(t, 200, `{}`)
			r := req
			tc.edit(&r)
			_, err := provider.NewHTTPClient(srv.URL, nil, allLookups).Refund(context.Background(), r)
			wantOnly(t, err, provider.ErrInvalidRequest)
			if n.Load() != 0 {
				t.Errorf("%d requests sent", n.Load())
			}
		})
	}

	t.Run("a bad base URL sends nothing", func(t *testing.T) {
		_, err := provider.NewHTTPClient("http://bad host", nil, allLookups).Refund(context.Background(), req)
		wantOnly(t, err, provider.ErrInvalidRequest)
	})

	t.Run("a cut response on a reused connection is not resent", func(t *testing.T) {
		s := fakeprovider.Start()
		t.Cleanup(s.Close)
		s.AddPayment("pay_1", 1000, "EUR")
		c := s.Client()
		warm := req
		warm.OperationKey = "op-0"
		if _, err := c.Refund(context.Background(), warm); err != nil {
			t.Fatal(err)
		}
		s.Script("op-1", fakeprovider.Fault{After: fakeprovider.Cut})
		_, err := c.Refund(context.Background(), req)
		wantOnly(t, err, provider.ErrOutcomeUnknown)
		sent := 0
		for _, r := range s.Requests() {
			if r.Key == "op-1" {
				sent++
			}
		}
		if sent != 1 || s.Executions("op-1") != 1 {
			t.Errorf("op-1 sent %d times and executed %d times, want once", sent, s.Executions("op-1"))
		}
	})

	t.Run("the provider timeout ends a hung call as an unknown outcome", func(t *testing.T) {
		s := fakeprovider.Start()
		t.Cleanup(s.Close)
		s.AddPayment("pay_1", 1000, "EUR")
		s.Script("op-1", fakeprovider.Fault{Hold: make(chan struct{})}) // never released
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		_, err := s.Client().Refund(ctx, req)
		wantOnly(t, err, provider.ErrOutcomeUnknown)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("error %v, want it to name the deadline", err)
		}
		if s.Executions("op-1") != 1 {
			t.Errorf("executions %d, want 1: the hung refund went through", s.Executions("op-1"))
		}
	})

	t.Run("a caller that gives up mid-call has an unknown outcome", func(t *testing.T) {
		s := fakeprovider.Start()
		t.Cleanup(s.Close)
		s.AddPayment("pay_1", 1000, "EUR")
		s.Script("op-1", fakeprovider.Fault{Hold: make(chan struct{})}) // never released
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			<-s.Executed("op-1", 1)
			cancel()
		}()
		_, err := s.Client().Refund(ctx, req)
		wantOnly(t, err, provider.ErrOutcomeUnknown)
		if !errors.Is(err, context.Canceled) {
			t.Errorf("error %v, want it to name the cancellation", err)
		}
	})
}

func TestLookup(t *testing.T) {
	// withRefunds runs a fake with op-1 and op-2 refunded from pay_1.
	withRefunds := func(t *testing.T) (*fakeprovider.Server, provider.Refund) {
		t.Helper()
		s := fakeprovider.Start()
		t.Cleanup(s.Close)
		s.AddPayment("pay_1", 1000, "EUR")
		r, err := s.Client().Refund(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		other := req
		other.OperationKey = "op-2"
		if _, err := s.Client().Refund(context.Background(), other); err != nil {
			t.Fatal(err)
		}
		return s, r
	}
	// lookups are the paths and queries of the lookups s received, in order.
	lookups := func(s *fakeprovider.Server) []string {
		var asked []string
		for _, r := range s.Requests() {
			if r.Method == http.MethodGet {
				asked = append(asked, r.Path+"?"+r.Query.Encode())
			}
		}
		return asked
	}

	cases := []struct {
		name string
		caps provider.Capabilities
		id   string // the refund id the query names; "want" is the one that executed
		path string
	}{
		{"by reference, even when the refund id is known", allLookups, "want", "/v1/refunds?reference=op-1"},
		{"by reference, whatever refund id the query names", allLookups, "re_unknown", "/v1/refunds?reference=op-1"},
		{"by listing the payment when that is all the provider offers", provider.Capabilities{ListByPayment: true}, "want",
			"/v1/refunds?payment=pay_1"},
		{"by refund id when that is all the provider offers", provider.Capabilities{LookupByRefundID: true}, "want", "/v1/refunds/re_1?"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, want := withRefunds(t)
			c := provider.NewHTTPClient(s.URL(), nil, tc.caps)
			q := provider.Query{OperationKey: "op-1", ProviderRefundID: tc.id, PaymentRef: "pay_1"}
			if tc.id == "want" {
				q.ProviderRefundID = want.ProviderRefundID
			}
			got, err := c.Lookup(context.Background(), q)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 || got[0].ProviderRefundID != want.ProviderRefundID || provider.Verify(req, got[0]) != nil {
				t.Errorf("found %+v, want only %+v", got, want)
			}
			if asked := lookups(s); len(asked) != 1 || asked[0] != tc.path {
				t.Errorf("asked %v, want only %s", asked, tc.path)
			}
		})
	}

	// routed serves each lookup's path and query from answers (404
	// resource_missing for the others) and records what was asked.
	routed := func(t *testing.T, answers map[string]string) (*httptest.Server, func() []string) {
		t.Helper()
		var (
			mu    sync.Mutex
			asked []string
		)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			asked = append(asked, r.URL.RequestURI())
			mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			body, ok := answers[r.URL.RequestURI()]
			if !ok {
				w.WriteHeader(http.StatusNotFound)
				body = `{"error":{"code":"resource_missing"}}`
			}
			io.WriteString(w, body)
		}))
		t.Cleanup(srv.Close)
		return srv, func() []string { mu.Lock(); defer mu.Unlock(); return slices.Clone(asked) }
	}
	const (
		op1 = `{"id":"re_1","payment":"pay_1","amount":300,"currency":"EUR","reference":"op-1","status":"succeeded"}`
		op2 = `{"id":"re_2","payment":"pay_1","amount":300,"currency":"EUR","reference":"op-2","status":"succeeded"}`
	)
	t.Run("each lookup is asked in turn until one finds the key's refund", func(t *testing.T) {
		srv, asked := routed(t, map[string]string{
			"/v1/refunds?reference=op-1": `{"data":[]}`,
			"/v1/refunds?payment=pay_1":  `{"data":[` + op2 + `]}`, // another key's refund of the payment
			"/v1/refunds/re_1":           op1,
		})
		got, err := provider.NewHTTPClient(srv.URL, nil, allLookups).Lookup(context.Background(),
			provider.Query{OperationKey: "op-1", PaymentRef: "pay_1", ProviderRefundID: "re_1"})
		if err != nil || len(got) != 1 || got[0].ProviderRefundID != "re_1" {
			t.Fatalf("found %+v, %v; want re_1", got, err)
		}
		if want := []string{"/v1/refunds?reference=op-1", "/v1/refunds?payment=pay_1", "/v1/refunds/re_1"}; !slices.Equal(asked(), want) {
			t.Fatalf("asked %v, want %v", asked(), want)
		}
	})
	t.Run("the payment's list answers when the reference finds nothing", func(t *testing.T) {
		srv, asked := routed(t, map[string]string{
			"/v1/refunds?reference=op-1": `{"data":[]}`,
			"/v1/refunds?payment=pay_1":  `{"data":[` + op2 + `,` + op1 + `]}`,
		})
		got, err := provider.NewHTTPClient(srv.URL, nil, allLookups).Lookup(context.Background(),
			provider.Query{OperationKey: "op-1", PaymentRef: "pay_1", ProviderRefundID: "re_unknown"})
		if err != nil || len(got) != 1 || got[0].ProviderRefundID != "re_1" {
			t.Fatalf("found %+v, %v; want only re_1", got, err)
		}
		if len(asked()) != 2 {
			t.Fatalf("asked %v, want the reference, then the payment's list", asked())
		}
	})
	t.Run("nothing found by any lookup is an empty answer", func(t *testing.T) {
		srv, asked := routed(t, map[string]string{
			"/v1/refunds?reference=op-1": `{"data":[]}`,
			"/v1/refunds?payment=pay_1":  `{"data":[]}`,
		})
		got, err := provider.NewHTTPClient(srv.URL, nil, allLookups).Lookup(context.Background(),
			provider.Query{OperationKey: "op-1", PaymentRef: "pay_1", ProviderRefundID: "re_unknown"})
		if err != nil || got == nil || len(got) != 0 {
			t.Fatalf("found %+v, %v; want an empty answer", got, err)
		}
		if len(asked()) != 3 {
			t.Fatalf("asked %v, want all three lookups", asked())
		}
	})

	t.Run("an unknown refund id finds nothing", func(t *testing.T) {
		s, _ := withRefunds(t)
		got, err := s.Client().Lookup(context.Background(), provider.Query{ProviderRefundID: "re_9"})
		if err != nil || len(got) != 0 {
			t.Errorf("found %+v, %v; want nothing", got, err)
		}
	})

	t.Run("without a lookup for the query nothing is asked", func(t *testing.T) {
		srv, n := stub(t, 200, `{"data":[]}`)
		c := provider.NewHTTPClient(srv.URL, nil, provider.Capabilities{LookupByRefundID: true})
		_, err := c.Lookup(context.Background(), provider.Query{OperationKey: "op-1", PaymentRef: "pay_1"})
		wantOnly(t, err, provider.ErrNoLookup)
		if n.Load() != 0 {
			t.Errorf("%d requests sent", n.Load())
		}
	})

	t.Run("results come back as reported, for Verify to judge", func(t *testing.T) {
		srv, _ := stub(t, 200, `{"id":"re_1","payment":"pay_1","amount":300,"currency":"EUR","reference":"op-7","status":"succeeded"}`)
		got, err := provider.NewHTTPClient(srv.URL, nil, allLookups).Lookup(context.Background(), provider.Query{ProviderRefundID: "re_1"})
		if err != nil || len(got) != 1 {
			t.Fatalf("found %+v, %v; want the reported refund", got, err)
		}
		wantOnly(t, provider.Verify(req, got[0]), provider.ErrMismatch)
	})

	t.Run("a reversed refund is reported as reversed", func(t *testing.T) {
		srv, _ := stub(t, 200, `{"data":[{"id":"re_1","payment":"pay_1","amount":300,"currency":"EUR","reference":"op-1","status":"reversed"}]}`)
		got, err := provider.NewHTTPClient(srv.URL, nil, allLookups).Lookup(context.Background(), provider.Query{OperationKey: "op-1"})
		if err != nil || len(got) != 1 || got[0].Status != provider.StatusReversed {
			t.Errorf("found %+v, %v; want one reversed refund", got, err)
		}
	})

	failures := []struct {
		name string
		code int
		body string
		want error
	}{
		{"a 404 that does not say the refund is missing teaches nothing", 404, `not found`, provider.ErrOutcomeUnknown},
		{"a 500 teaches nothing", 500, `{"error":{"code":"internal_error"}}`, provider.ErrOutcomeUnknown},
		{"a rejected lookup teaches nothing", 400, `{"error":{"code":"invalid_request"}}`, provider.ErrOutcomeUnknown},
		{"an unreadable list teaches nothing", 200, `{"data":[{"status":"processing"}]}`, provider.ErrOutcomeUnknown},
		{"a rate-limited lookup may be retried", 429, ``, provider.ErrRateLimited},
	}
	for _, tc := range failures {
		t.Run(tc.name, func(t *testing.T) {
			srv, _ := stub(t, tc.code, tc.body)
			got, err := provider.NewHTTPClient(srv.URL, nil, allLookups).Lookup(context.Background(), provider.Query{OperationKey: "op-1"})
			wantOnly(t, err, tc.want)
			if got != nil {
				t.Errorf("found %+v with an error", got)
			}
		})
	}

	t.Run("an unreachable provider teaches nothing", func(t *testing.T) {
		s := fakeprovider.Start()
		c := s.Client()
		s.Close()
		_, err := c.Lookup(context.Background(), provider.Query{OperationKey: "op-1"})
		wantOnly(t, err, provider.ErrOutcomeUnknown)
	})
}
