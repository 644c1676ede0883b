package fakeprovider_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fencekit/fencekit/provider"
	"github.com/fencekit/fencekit/provider/fakeprovider"
)

// wantRunDue runs what is due and fails unless n things were.
func wantRunDue(t *testing.T, s *fakeprovider.Server, n int) {
	t.Helper()
	if got := s.RunDue(); got != n {
		t.Fatalf("RunDue carried out %d, want %d", got, n)
	}
}

func TestAsync(t *testing.T) {
	t.Run("a pending refund settles by itself once its delay has passed on the server's clock", func(t *testing.T) {
		clock := newClock()
		s, c, rc := startHooked(t, clock, fakeprovider.Config{})
		s.Script("op-1", fakeprovider.Fault{Pending: true, SettleAfter: time.Minute})
		r := mustRefund(t, c, refundOf("op-1", 300), provider.StatusPending)
		if at, ok := s.NextDue(); !ok || !at.Equal(clock.Now().Add(time.Minute)) {
			t.Errorf("next due %v %v, want in a minute", at, ok)
		}
		clock.Advance(time.Minute - time.Nanosecond)
		wantRunDue(t, s, 0)
		if got := lookup(t, c, provider.Query{ProviderRefundID: r.ProviderRefundID}); len(got) != 1 || got[0] != provider.StatusPending {
			t.Fatalf("lookup before the delay found %v, want pending", got)
		}
		clock.Advance(time.Nanosecond)
		wantRunDue(t, s, 1)
		if got := lookup(t, c, provider.Query{ProviderRefundID: r.ProviderRefundID}); len(got) != 1 || got[0] != provider.StatusSucceeded {
			t.Errorf("lookup after the delay found %v, want succeeded", got)
		}
		if _, ok := s.NextDue(); ok {
			t.Error("work still due after settling")
		}
		<-s.WebhooksSent("op-1", 2)
		wantTypes(t, rc.events(t, "op-1"), provider.EventRefundPending, provider.EventRefundSucceeded)
		wantExecutions(t, s, "op-1", 1)
	})

	t.Run("a pending refund is declined by itself and its amount is refundable again", func(t *testing.T) {
		clock := newClock()
		s, c, rc := startHooked(t, clock, fakeprovider.Config{})
		s.Script("op-1", fakeprovider.Fault{Pending: true, DeclineAfter: time.Hour})
		mustRefund(t, c, refundOf("op-1", 1000), provider.StatusPending)
		<-s.WebhooksSent("op-1", 1) // signed on the clock: send it before moving the clock past the receiver's tolerance
		clock.Advance(time.Hour)
		wantRunDue(t, s, 1)
		rs, err := c.Lookup(context.Background(), provider.Query{OperationKey: "op-1"})
		if err != nil || len(rs) != 1 || rs[0].Status != provider.StatusRejected || rs[0].Reason != fakeprovider.AsyncDeclineReason {
			t.Errorf("lookup: %+v, %v; want one rejected refund with the reason", rs, err)
		}
		if got := s.Refunded("pay_1"); got != 0 {
			t.Errorf("refunded %d after the decline, want 0", got)
		}
		<-s.WebhooksSent("op-1", 2)
		wantTypes(t, rc.events(t, "op-1"), provider.EventRefundPending, provider.EventRefundFailed)
	})

	t.Run("a refund decided by hand is not decided again when its delay passes", func(t *testing.T) {
		clock := newClock()
		s, c, _ := startHooked(t, clock, fakeprovider.Config{})
		s.Script("op-1", fakeprovider.Fault{Pending: true, DeclineAfter: time.Minute})
		mustRefund(t, c, refundOf("op-1", 300), provider.StatusPending)
		s.Settle("op-1")
		clock.Advance(time.Minute)
		wantRunDue(t, s, 1)
		if got := lookup(t, c, provider.Query{OperationKey: "op-1"}); len(got) != 1 || got[0] != provider.StatusSucceeded {
			t.Errorf("lookup found %v, want still succeeded", got)
		}
		wantTypes(t, s.Events("op-1"), provider.EventRefundPending, provider.EventRefundSucceeded)
	})

	t.Run("a lagging refund appears in lookups by itself", func(t *testing.T) {
		clock := newClock()
		s, c := start(t, fakeprovider.Config{Now: clock.Now, LookupLag: 30 * time.Second})
		s.Script("op-1", fakeprovider.Fault{Unpublished: true, PublishAfter: 30 * time.Second, After: fakeprovider.Cut})
		_, err := c.Refund(context.Background(), refundOf("op-1", 300))
		wantErr(t, err, provider.ErrOutcomeUnknown)
		if got := lookup(t, c, provider.Query{OperationKey: "op-1"}); len(got) != 0 {
			t.Fatalf("lookup inside the lag found %v", got)
		}
		clock.Advance(30 * time.Second)
		wantRunDue(t, s, 1)
		if got := lookup(t, c, provider.Query{OperationKey: "op-1"}); len(got) != 1 {
			t.Errorf("lookup after the lag found %v, want the refund", got)
		}
	})

	t.Run("a slow answer arrives once its latency has passed on the server's clock", func(t *testing.T) {
		clock := newClock()
		s, c := start(t, fakeprovider.Config{Now: clock.Now})
		s.Script("op-1", fakeprovider.Fault{Latency: 4 * time.Second})
		answer := make(chan error, 1)
		go func() {
			_, err := c.Refund(context.Background(), refundOf("op-1", 300))
			answer <- err
		}()
		<-s.Executed("op-1", 1)
		clock.Advance(3 * time.Second)
		wantRunDue(t, s, 0)
		select {
		case err := <-answer:
			t.Fatalf("answer arrived before its latency: %v", err)
		default:
		}
		_, err := c.Refund(context.Background(), refundOf("op-1", 300))
		wantErr(t, err, provider.ErrKeyInUse) // still in flight
		clock.Advance(time.Second)
		wantRunDue(t, s, 1)
		if err := <-answer; err != nil {
			t.Errorf("slow answer: %v", err)
		}
	})

	t.Run("Close cuts an answer held by latency", func(t *testing.T) {
		s := fakeprovider.StartWith(fakeprovider.Config{Now: newClock().Now})
		s.AddPayment("pay_1", 1000, "EUR")
		s.Script("op-1", fakeprovider.Fault{Latency: time.Hour})
		answer := make(chan error, 1)
		go func() {
			_, err := s.Client().Refund(context.Background(), refundOf("op-1", 300))
			answer <- err
		}()
		<-s.Executed("op-1", 1)
		s.Close()
		wantErr(t, <-answer, provider.ErrOutcomeUnknown)
	})
}

func TestReversal(t *testing.T) {
	t.Run("Reverse turns a succeeded refund into a reversed one and announces it", func(t *testing.T) {
		s, c, rc := startHooked(t, newClock(), fakeprovider.Config{})
		r := mustRefund(t, c, refundOf("op-1", 300), provider.StatusSucceeded)
		s.Reverse("op-1")
		found, err := c.Lookup(context.Background(), provider.Query{ProviderRefundID: r.ProviderRefundID})
		if err != nil || len(found) != 1 || found[0].Status != provider.StatusReversed {
			t.Errorf("lookup %+v, %v; want the refund reversed", found, err)
		}
		if got := s.Refunded("pay_1"); got != 0 {
			t.Errorf("refunded %d after the reversal, want 0", got)
		}
		wantExecutions(t, s, "op-1", 1)
		<-s.WebhooksSent("op-1", 2)
		evs := rc.events(t, "op-1")
		wantTypes(t, evs, provider.EventRefundSucceeded, provider.EventRefundReversed)
		if len(evs) == 2 && evs[1].Refund.ProviderRefundID != r.ProviderRefundID {
			t.Errorf("reversal names refund %s, want %s", evs[1].Refund.ProviderRefundID, r.ProviderRefundID)
		}
		// The key's stored answer is the one it gave: a resend replays it.
		mustRefund(t, c, refundOf("op-1", 300), provider.StatusSucceeded)
		wantExecutions(t, s, "op-1", 1)
	})

	t.Run("a scripted reversal comes due after the refund succeeded", func(t *testing.T) {
		clock := newClock()
		s, c, rc := startHooked(t, clock, fakeprovider.Config{})
		s.Script("op-1", fakeprovider.Fault{Pending: true, SettleAfter: time.Minute, ReverseAfter: time.Hour})
		mustRefund(t, c, refundOf("op-1", 300), provider.StatusPending)
		<-s.WebhooksSent("op-1", 1)
		clock.Advance(time.Hour) // settled; the reversal is measured from now
		wantRunDue(t, s, 1)
		<-s.WebhooksSent("op-1", 2)
		clock.Advance(time.Hour - time.Nanosecond)
		wantRunDue(t, s, 0)
		clock.Advance(time.Nanosecond)
		wantRunDue(t, s, 1)
		<-s.WebhooksSent("op-1", 3)
		wantTypes(t, rc.events(t, "op-1"), provider.EventRefundPending, provider.EventRefundSucceeded, provider.EventRefundReversed)
	})

	t.Run("a declined refund is never reversed", func(t *testing.T) {
		clock := newClock()
		s, c := start(t, fakeprovider.Config{Now: clock.Now})
		s.Script("op-1", fakeprovider.Fault{Pending: true, DeclineAfter: time.Minute, ReverseAfter: time.Minute})
		mustRefund(t, c, refundOf("op-1", 300), provider.StatusPending)
		clock.Advance(time.Hour)
		wantRunDue(t, s, 1)
		wantTypes(t, s.Events("op-1"), provider.EventRefundPending, provider.EventRefundFailed)
	})

	t.Run("Reverse panics without a succeeded refund", func(t *testing.T) {
		s, c := start(t, fakeprovider.Config{})
		s.Script("op-1", fakeprovider.Fault{Pending: true})
		mustRefund(t, c, refundOf("op-1", 300), provider.StatusPending)
		defer func() {
			if recover() == nil {
				t.Error("Reverse of a pending refund did not panic")
			}
		}()
		s.Reverse("op-1")
	})

	t.Run("the HTTP client reads a reversed refund from a lookup", func(t *testing.T) {
		s, c := start(t, fakeprovider.Config{})
		mustRefund(t, c, refundOf("op-1", 300), provider.StatusSucceeded)
		s.Reverse("op-1")
		for _, q := range []provider.Query{{OperationKey: "op-1"}, {ProviderRefundID: "re_1"}, {PaymentRef: "pay_1"}} {
			if got := lookup(t, c, q); len(got) != 1 || got[0] != provider.StatusReversed {
				t.Errorf("lookup %+v found %v, want reversed", q, got)
			}
		}
	})
}

func TestBackground(t *testing.T) {
	t.Run("the background loop settles pending refunds in real time, and Close stops it", func(t *testing.T) {
		rc := newReceiver(t, time.Now)
		s := fakeprovider.StartWith(fakeprovider.Config{Background: true, WebhookURL: rc.url, WebhookSecret: hookSecret})
		s.AddPayment("pay_1", 1000, "EUR")
		s.Script("op-1", fakeprovider.Fault{Pending: true, SettleAfter: time.Millisecond})
		mustRefund(t, s.Client(), refundOf("op-1", 300), provider.StatusPending)
		select {
		case <-s.WebhooksSent("op-1", 2):
		case <-time.After(30 * time.Second):
			t.Fatal("the background loop did not settle the refund")
		}
		wantTypes(t, rc.events(t, "op-1"), provider.EventRefundPending, provider.EventRefundSucceeded)
		s.Close() // returns only once the loop and the sender have stopped
	})
}

func TestFaultValidation(t *testing.T) {
	cases := []struct {
		name  string
		fault fakeprovider.Fault
		field string
	}{
		{"SettleAfter without Pending", fakeprovider.Fault{SettleAfter: time.Second}, "SettleAfter"},
		{"DeclineAfter without Pending", fakeprovider.Fault{DeclineAfter: time.Second}, "DeclineAfter"},
		{"both SettleAfter and DeclineAfter", fakeprovider.Fault{Pending: true, SettleAfter: 1, DeclineAfter: 1}, "exclusive"},
		{"PublishAfter without Unpublished", fakeprovider.Fault{PublishAfter: time.Second}, "PublishAfter"},
		{"a negative ReverseAfter", fakeprovider.Fault{ReverseAfter: -1}, "ReverseAfter"},
		{"a negative Latency", fakeprovider.Fault{Latency: -1}, "Latency"},
		{"Latency with Hold", fakeprovider.Fault{Latency: 1, Hold: make(chan struct{})}, "Latency and Hold"},
		{"Refuse 404", fakeprovider.Fault{Refuse: http.StatusNotFound}, "Refuse"},
		{"RequiresAction without Pending", fakeprovider.Fault{RequiresAction: true}, "RequiresAction"},
	}
	for _, tc := range cases {
		t.Run(tc.name+" is refused, naming the field", func(t *testing.T) {
			s, _ := start(t, fakeprovider.Config{})
			defer func() {
				msg, _ := recover().(string)
				if !strings.Contains(msg, tc.field) {
					t.Errorf("Script panicked with %q, want it to name %s", msg, tc.field)
				}
			}()
			s.Script("op-1", tc.fault)
		})
	}
}
