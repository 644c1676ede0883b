package fakeprovider_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fencekit/fencekit/provider"
	"github.com/fencekit/fencekit/provider/fakeprovider"
)

// start runs a server with one 1000 EUR payment, pay_1.
func start(t *testing.T, cfg fakeprovider.Config) (*fakeprovider.Server, *provider.HTTPClient) {
	t.Helper()
	s := fakeprovider.StartWith(cfg)
	t.Cleanup(s.Close)
	s.AddPayment("pay_1", 1000, "EUR")
	return s, s.Client()
}

func refundOf(key string, amount int64) provider.RefundRequest {
	return provider.RefundRequest{OperationKey: key, PaymentRef: "pay_1", AmountMinor: amount, Currency: "EUR"}
}

// mustRefund sends req and fails the test unless it comes back with status.
func mustRefund(t *testing.T, c provider.Client, req provider.RefundRequest, status provider.Status) provider.Refund {
	t.Helper()
	r, err := c.Refund(context.Background(), req)
	if err != nil {
		t.Fatalf("refund %s: %v", req.OperationKey, err)
	}
	if r.Status != status {
		t.Fatalf("refund %s: status %q, want %q", req.OperationKey, r.Status, status)
	}
	return r
}

func wantErr(t *testing.T, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("error %v, want %v", err, target)
	}
}

func wantExecutions(t *testing.T, s *fakeprovider.Server, key string, n int) {
	t.Helper()
	if got := s.Executions(key); got != n {
		t.Fatalf("executions of %s: %d, want %d", key, got, n)
	}
}

// lookup returns the statuses of the refunds found for q.
func lookup(t *testing.T, c provider.Client, q provider.Query) []provider.Status {
	t.Helper()
	rs, err := c.Lookup(context.Background(), q)
	if err != nil {
		t.Fatalf("look up %+v: %v", q, err)
	}
	var st []provider.Status
	for _, r := range rs {
		st = append(st, r.Status)
	}
	return st
}

func TestIdempotency(t *testing.T) {
	t.Run("same key and parameters replay the first answer without executing again", func(t *testing.T) {
		s, c := start(t, fakeprovider.Config{})
		first := mustRefund(t, c, refundOf("op-1", 300), provider.StatusSucceeded)
		again := mustRefund(t, c, refundOf("op-1", 300), provider.StatusSucceeded)
		if again.ProviderRefundID != first.ProviderRefundID {
			t.Errorf("replay has refund id %q, want %q", again.ProviderRefundID, first.ProviderRefundID)
		}
		wantExecutions(t, s, "op-1", 1)
		if got := s.Refunded("pay_1"); got != 300 {
			t.Errorf("refunded %d, want 300", got)
		}
	})

	t.Run("same key with other parameters is refused", func(t *testing.T) {
		s, c := start(t, fakeprovider.Config{})
		mustRefund(t, c, refundOf("op-1", 300), provider.StatusSucceeded)
		_, err := c.Refund(context.Background(), refundOf("op-1", 400))
		wantErr(t, err, provider.ErrKeyParamsMismatch)
		wantExecutions(t, s, "op-1", 1)
	})

	t.Run("a request while the key is in flight is refused", func(t *testing.T) {
		s, c := start(t, fakeprovider.Config{})
		hold := make(chan struct{})
		s.Script("op-1", fakeprovider.Fault{Hold: hold})
		first := make(chan error, 1)
		go func() {
			_, err := c.Refund(context.Background(), refundOf("op-1", 300))
			first <- err
		}()
		<-s.Executed("op-1", 1)

		_, err := c.Refund(context.Background(), refundOf("op-1", 300))
		wantErr(t, err, provider.ErrKeyInUse)
		_, err = c.Refund(context.Background(), refundOf("op-1", 400))
		wantErr(t, err, provider.ErrKeyParamsMismatch)

		close(hold)
		if err := <-first; err != nil {
			t.Fatalf("held refund: %v", err)
		}
		mustRefund(t, c, refundOf("op-1", 300), provider.StatusSucceeded)
		wantExecutions(t, s, "op-1", 1)
	})

	t.Run("a forgotten key executes again", func(t *testing.T) {
		s, c := start(t, fakeprovider.Config{})
		first := mustRefund(t, c, refundOf("op-1", 300), provider.StatusSucceeded)
		s.ForgetKey("op-1")
		second := mustRefund(t, c, refundOf("op-1", 300), provider.StatusSucceeded)
		if second.ProviderRefundID == first.ProviderRefundID {
			t.Errorf("second execution reused refund id %q", first.ProviderRefundID)
		}
		wantExecutions(t, s, "op-1", 2)
		if got := s.Refunded("pay_1"); got != 600 {
			t.Errorf("refunded %d, want 600 (paid twice)", got)
		}
		if got := lookup(t, c, provider.Query{OperationKey: "op-1"}); len(got) != 2 {
			t.Errorf("lookup by reference found %v, want both refunds", got)
		}
	})

	t.Run("a forgotten key on a fully refunded payment answers already refunded", func(t *testing.T) {
		s, c := start(t, fakeprovider.Config{})
		mustRefund(t, c, refundOf("op-1", 1000), provider.StatusSucceeded)
		s.ForgetKey("op-1")
		_, err := c.Refund(context.Background(), refundOf("op-1", 1000))
		wantErr(t, err, provider.ErrAlreadyRefunded)
		wantExecutions(t, s, "op-1", 1)
	})

	t.Run("a key expires after its retention", func(t *testing.T) {
		clock := &fakeClock{now: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
		s, c := start(t, fakeprovider.Config{KeyRetention: time.Hour, Now: clock.Now})
		if got := c.Capabilities().KeyRetention; got != time.Hour {
			t.Errorf("declared retention %v, want 1h", got)
		}
		mustRefund(t, c, refundOf("op-1", 300), provider.StatusSucceeded)
		clock.Advance(time.Hour - time.Nanosecond)
		mustRefund(t, c, refundOf("op-1", 300), provider.StatusSucceeded)
		wantExecutions(t, s, "op-1", 1)
		clock.Advance(time.Nanosecond)
		mustRefund(t, c, refundOf("op-1", 300), provider.StatusSucceeded)
		wantExecutions(t, s, "op-1", 2)
	})
}

func TestFaults(t *testing.T) {
	t.Run("429 before processing executes nothing and the same key may be retried", func(t *testing.T) {
		s, c := start(t, fakeprovider.Config{})
		s.Script("op-1", fakeprovider.Fault{Refuse: http.StatusTooManyRequests})
		_, err := c.Refund(context.Background(), refundOf("op-1", 300))
		wantErr(t, err, provider.ErrRateLimited)
		wantExecutions(t, s, "op-1", 0)
		mustRefund(t, c, refundOf("op-1", 300), provider.StatusSucceeded)
		wantExecutions(t, s, "op-1", 1)
	})

	t.Run("500 before processing is an unknown outcome that executed nothing", func(t *testing.T) {
		s, c := start(t, fakeprovider.Config{})
		s.Script("op-1", fakeprovider.Fault{Refuse: http.StatusInternalServerError})
		_, err := c.Refund(context.Background(), refundOf("op-1", 300))
		wantErr(t, err, provider.ErrOutcomeUnknown)
		wantExecutions(t, s, "op-1", 0)
		if got := lookup(t, c, provider.Query{OperationKey: "op-1"}); len(got) != 0 {
			t.Errorf("lookup found %v, want nothing", got)
		}
	})

	t.Run("500 after processing is an unknown outcome that executed", func(t *testing.T) {
		s, c := start(t, fakeprovider.Config{})
		s.Script("op-1", fakeprovider.Fault{After: fakeprovider.ServerError})
		_, err := c.Refund(context.Background(), refundOf("op-1", 300))
		wantErr(t, err, provider.ErrOutcomeUnknown)
		wantExecutions(t, s, "op-1", 1)
		if got := lookup(t, c, provider.Query{OperationKey: "op-1"}); len(got) != 1 || got[0] != provider.StatusSucceeded {
			t.Errorf("lookup found %v, want one succeeded refund", got)
		}
		mustRefund(t, c, refundOf("op-1", 300), provider.StatusSucceeded)
		wantExecutions(t, s, "op-1", 1)
	})

	t.Run("a response cut after executing is an unknown outcome", func(t *testing.T) {
		s, c := start(t, fakeprovider.Config{})
		s.Script("op-1", fakeprovider.Fault{After: fakeprovider.Cut})
		r, err := c.Refund(context.Background(), refundOf("op-1", 300))
		wantErr(t, err, provider.ErrOutcomeUnknown)
		if r.Raw != nil {
			t.Errorf("cut response has body %q", r.Raw)
		}
		wantExecutions(t, s, "op-1", 1)
	})

	t.Run("a response truncated after executing is an unknown outcome", func(t *testing.T) {
		s, c := start(t, fakeprovider.Config{})
		s.Script("op-1", fakeprovider.Fault{After: fakeprovider.Truncate})
		_, err := c.Refund(context.Background(), refundOf("op-1", 300))
		wantErr(t, err, provider.ErrOutcomeUnknown)
		wantErr(t, err, io.ErrUnexpectedEOF)
		wantExecutions(t, s, "op-1", 1)
	})

	t.Run("a held answer is delivered late, after lookups already see the refund", func(t *testing.T) {
		s, c := start(t, fakeprovider.Config{})
		hold := make(chan struct{})
		s.Script("op-1", fakeprovider.Fault{Hold: hold})
		late := make(chan provider.Refund, 1)
		go func() {
			r, _ := c.Refund(context.Background(), refundOf("op-1", 300))
			late <- r
		}()
		<-s.Executed("op-1", 1)
		if got := lookup(t, c, provider.Query{OperationKey: "op-1"}); len(got) != 1 || got[0] != provider.StatusSucceeded {
			t.Fatalf("lookup while held found %v, want one succeeded refund", got)
		}
		close(hold)
		if r := <-late; r.Status != provider.StatusSucceeded {
			t.Errorf("late answer %+v, want succeeded", r)
		}
	})

	t.Run("pending is settled later", func(t *testing.T) {
		s, c := start(t, fakeprovider.Config{})
		s.Script("op-1", fakeprovider.Fault{Pending: true})
		r := mustRefund(t, c, refundOf("op-1", 300), provider.StatusPending)
		if got := s.Refunded("pay_1"); got != 300 {
			t.Errorf("refunded %d while pending, want 300", got)
		}
		s.Settle("op-1")
		if got := lookup(t, c, provider.Query{ProviderRefundID: r.ProviderRefundID}); len(got) != 1 || got[0] != provider.StatusSucceeded {
			t.Errorf("lookup after settle found %v, want succeeded", got)
		}
		// A resend replays the original answer; only lookups tell the news.
		mustRefund(t, c, refundOf("op-1", 300), provider.StatusPending)
		wantExecutions(t, s, "op-1", 1)
	})

	t.Run("pending is declined later and the amount is refundable again", func(t *testing.T) {
		s, c := start(t, fakeprovider.Config{})
		s.Script("op-1", fakeprovider.Fault{Pending: true})
		mustRefund(t, c, refundOf("op-1", 300), provider.StatusPending)
		s.Decline("op-1", "bank refused")
		rs, err := c.Lookup(context.Background(), provider.Query{OperationKey: "op-1"})
		if err != nil || len(rs) != 1 || rs[0].Status != provider.StatusRejected || rs[0].Reason != "bank refused" {
			t.Errorf("lookup after decline: %+v, %v; want one rejected refund with the reason", rs, err)
		}
		if got := s.Refunded("pay_1"); got != 0 {
			t.Errorf("refunded %d after decline, want 0", got)
		}
	})

	t.Run("lookups see nothing until the refund is published", func(t *testing.T) {
		s, c := start(t, fakeprovider.Config{})
		s.Script("op-1", fakeprovider.Fault{Unpublished: true, After: fakeprovider.Cut})
		_, err := c.Refund(context.Background(), refundOf("op-1", 300))
		wantErr(t, err, provider.ErrOutcomeUnknown)
		wantExecutions(t, s, "op-1", 1)
		queries := []provider.Query{
			{OperationKey: "op-1"},
			{ProviderRefundID: "re_1"},
			{PaymentRef: "pay_1"},
		}
		for _, q := range queries {
			if got := lookup(t, c, q); len(got) != 0 {
				t.Errorf("lookup %+v before publish found %v, want nothing", q, got)
			}
		}
		s.Publish("op-1")
		for _, q := range queries {
			if got := lookup(t, c, q); len(got) != 1 {
				t.Errorf("lookup %+v after publish found %v, want the refund", q, got)
			}
		}
	})

	t.Run("a scripted rejection is definitive and replayed", func(t *testing.T) {
		s, c := start(t, fakeprovider.Config{})
		s.Script("op-1", fakeprovider.Fault{Reject: "charge_disputed"})
		for range 2 {
			_, err := c.Refund(context.Background(), refundOf("op-1", 300))
			var rej *provider.RejectedError
			if !errors.As(err, &rej) || rej.Code != "charge_disputed" {
				t.Fatalf("error %v, want rejection charge_disputed", err)
			}
		}
		wantExecutions(t, s, "op-1", 0)
	})

	t.Run("faults apply in order, one per request", func(t *testing.T) {
		s, c := start(t, fakeprovider.Config{})
		s.Script("op-1",
			fakeprovider.Fault{Refuse: http.StatusServiceUnavailable},
			fakeprovider.Fault{Refuse: http.StatusTooManyRequests})
		_, err := c.Refund(context.Background(), refundOf("op-1", 300))
		wantErr(t, err, provider.ErrOutcomeUnknown)
		_, err = c.Refund(context.Background(), refundOf("op-1", 300))
		wantErr(t, err, provider.ErrRateLimited)
		mustRefund(t, c, refundOf("op-1", 300), provider.StatusSucceeded)
		mustRefund(t, c, refundOf("op-2", 300), provider.StatusSucceeded)
	})

	t.Run("an invalid fault is refused when scripted", func(t *testing.T) {
		s, _ := start(t, fakeprovider.Config{})
		defer func() {
			if recover() == nil {
				t.Error("Script accepted Refuse: 404")
			}
		}()
		s.Script("op-1", fakeprovider.Fault{Refuse: http.StatusNotFound})
	})
}

func TestPayments(t *testing.T) {
	cases := []struct {
		name string
		req  provider.RefundRequest
		code string
	}{
		{"unknown payment", provider.RefundRequest{OperationKey: "op-2", PaymentRef: "pay_x", AmountMinor: 100, Currency: "EUR"}, "payment_not_found"},
		{"other currency", provider.RefundRequest{OperationKey: "op-2", PaymentRef: "pay_1", AmountMinor: 100, Currency: "USD"}, "currency_mismatch"},
	}
	for _, tc := range cases {
		t.Run(tc.name+" is rejected", func(t *testing.T) {
			s, c := start(t, fakeprovider.Config{})
			_, err := c.Refund(context.Background(), tc.req)
			var rej *provider.RejectedError
			if !errors.As(err, &rej) || rej.Code != tc.code {
				t.Fatalf("error %v, want rejection %s", err, tc.code)
			}
			wantExecutions(t, s, "op-2", 0)
		})
	}

	t.Run("more than the refundable amount answers already refunded", func(t *testing.T) {
		s, c := start(t, fakeprovider.Config{})
		mustRefund(t, c, refundOf("op-1", 800), provider.StatusSucceeded)
		_, err := c.Refund(context.Background(), refundOf("op-2", 300))
		wantErr(t, err, provider.ErrAlreadyRefunded)
		if !strings.Contains(err.Error(), "exceeds_refundable_amount") {
			t.Errorf("error %v does not name exceeds_refundable_amount", err)
		}
		wantExecutions(t, s, "op-2", 0)
		mustRefund(t, c, refundOf("op-3", 200), provider.StatusSucceeded)
		if got := s.Refunded("pay_1"); got != 1000 {
			t.Errorf("refunded %d, want 1000", got)
		}
	})

	t.Run("listing a payment shows every visible refund of it", func(t *testing.T) {
		s, c := start(t, fakeprovider.Config{})
		s.AddPayment("pay_2", 500, "EUR")
		mustRefund(t, c, refundOf("op-1", 100), provider.StatusSucceeded)
		mustRefund(t, c, refundOf("op-2", 200), provider.StatusSucceeded)
		mustRefund(t, c, provider.RefundRequest{OperationKey: "op-3", PaymentRef: "pay_2", AmountMinor: 100, Currency: "EUR"}, provider.StatusSucceeded)
		if got := lookup(t, c, provider.Query{PaymentRef: "pay_1"}); len(got) != 2 {
			t.Errorf("list of pay_1 found %v, want 2 refunds", got)
		}
	})
}

func TestWire(t *testing.T) {
	t.Run("a refund carries the operation key as idempotency key and reference, and nothing else", func(t *testing.T) {
		s, c := start(t, fakeprovider.Config{})
		mustRefund(t, c, refundOf("op-1", 300), provider.StatusSucceeded)
		reqs := s.Requests()
		if len(reqs) != 1 || reqs[0].Method != http.MethodPost || reqs[0].Path != "/v1/refunds" || reqs[0].Key != "op-1" {
			t.Fatalf("requests %+v, want one POST /v1/refunds with key op-1", reqs)
		}
		var body map[string]any
		if err := json.Unmarshal(reqs[0].Body, &body); err != nil {
			t.Fatal(err)
		}
		want := map[string]any{"payment": "pay_1", "amount": 300.0, "currency": "EUR", "reference": "op-1"}
		if len(body) != len(want) {
			t.Errorf("body %v, want exactly %v", body, want)
		}
		for k, v := range want {
			if body[k] != v {
				t.Errorf("body[%s] = %v, want %v", k, body[k], v)
			}
		}
	})

	cases := []struct {
		name, key, body string
	}{
		{"a body with an attempt is refused", "op-1", `{"payment":"pay_1","amount":300,"currency":"EUR","reference":"op-1","attempt":8}`},
		{"a request without Idempotency-Key is refused", "", `{"payment":"pay_1","amount":300,"currency":"EUR","reference":"op-1"}`},
		{"an Idempotency-Key other than the reference is refused", "op-1-8", `{"payment":"pay_1","amount":300,"currency":"EUR","reference":"op-1"}`},
		{"a refund without an amount is refused", "op-1", `{"payment":"pay_1","currency":"EUR","reference":"op-1"}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := start(t, fakeprovider.Config{})
			req, err := http.NewRequest(http.MethodPost, s.URL()+"/v1/refunds", strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if tc.key != "" {
				req.Header.Set("Idempotency-Key", tc.key)
			}
			wantStatus(t, req, http.StatusBadRequest)
			wantExecutions(t, s, "op-1", 0)
		})
	}

	t.Run("a lookup without reference or payment is refused", func(t *testing.T) {
		s, _ := start(t, fakeprovider.Config{})
		req, err := http.NewRequest(http.MethodGet, s.URL()+"/v1/refunds", nil)
		if err != nil {
			t.Fatal(err)
		}
		wantStatus(t, req, http.StatusBadRequest)
	})
}

func wantStatus(t *testing.T, req *http.Request, code int) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != code {
		t.Errorf("status %d, want %d", resp.StatusCode, code)
	}
}

func TestBarriers(t *testing.T) {
	t.Run("Executed fires once the key has executed n times", func(t *testing.T) {
		s, c := start(t, fakeprovider.Config{})
		first, second := s.Executed("op-1", 1), s.Executed("op-1", 2)
		mustRefund(t, c, refundOf("op-1", 300), provider.StatusSucceeded)
		<-first
		select {
		case <-second:
			t.Fatal("second execution signalled after one")
		default:
		}
		s.ForgetKey("op-1")
		mustRefund(t, c, refundOf("op-1", 300), provider.StatusSucceeded)
		<-second
		<-s.Executed("op-1", 2) // already reached: closed at once
	})

	t.Run("Close cuts held answers", func(t *testing.T) {
		s := fakeprovider.Start()
		s.AddPayment("pay_1", 1000, "EUR")
		s.Script("op-1", fakeprovider.Fault{Hold: make(chan struct{})})
		done := make(chan error, 1)
		go func() {
			_, err := s.Client().Refund(context.Background(), refundOf("op-1", 300))
			done <- err
		}()
		<-s.Executed("op-1", 1)
		s.Close()
		wantErr(t, <-done, provider.ErrOutcomeUnknown)
	})
}

type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}
