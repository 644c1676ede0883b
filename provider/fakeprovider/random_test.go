package fakeprovider_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fencekit/fencekit/provider"
	"github.com/fencekit/fencekit/provider/fakeprovider"
)

// advanceToDue moves clock to the next due work and runs it.
func advanceToDue(t *testing.T, s *fakeprovider.Server, clock *fakeClock) {
	t.Helper()
	at, ok := s.NextDue()
	if !ok {
		t.Fatal("nothing due")
	}
	clock.Advance(at.Sub(clock.Now()))
	if s.RunDue() == 0 {
		t.Fatal("RunDue carried out nothing at the due time")
	}
}

func TestRandomFaultKinds(t *testing.T) {
	cases := []struct {
		name     string
		random   fakeprovider.RandomFaults
		lag      time.Duration
		check    func(t *testing.T, s *fakeprovider.Server, c provider.Client, clock *fakeClock)
		injected fakeprovider.Injected
	}{
		{"RateLimit answers 429 before processing", fakeprovider.RandomFaults{RateLimit: 1}, 0,
			func(t *testing.T, s *fakeprovider.Server, c provider.Client, _ *fakeClock) {
				_, err := c.Refund(context.Background(), refundOf("op-1", 300))
				wantErr(t, err, provider.ErrRateLimited)
				wantExecutions(t, s, "op-1", 0)
			}, fakeprovider.Injected{RateLimit: 1}},
		{"ServerError answers 503 before processing", fakeprovider.RandomFaults{ServerError: 1}, 0,
			func(t *testing.T, s *fakeprovider.Server, c provider.Client, _ *fakeClock) {
				_, err := c.Refund(context.Background(), refundOf("op-1", 300))
				wantErr(t, err, provider.ErrOutcomeUnknown)
				if !strings.Contains(err.Error(), "503") {
					t.Errorf("error %v does not name 503", err)
				}
				wantExecutions(t, s, "op-1", 0)
			}, fakeprovider.Injected{ServerError: 1}},
		{"Cut executes the refund and loses the answer", fakeprovider.RandomFaults{Cut: 1}, 0,
			func(t *testing.T, s *fakeprovider.Server, c provider.Client, _ *fakeClock) {
				_, err := c.Refund(context.Background(), refundOf("op-1", 300))
				wantErr(t, err, provider.ErrOutcomeUnknown)
				wantExecutions(t, s, "op-1", 1)
			}, fakeprovider.Injected{Cut: 1}},
		{"Latency holds the answer until RunDue at a time within MaxLatency", fakeprovider.RandomFaults{Latency: 1, MaxLatency: 10 * time.Second}, 0,
			func(t *testing.T, s *fakeprovider.Server, c provider.Client, clock *fakeClock) {
				answer := make(chan error, 1)
				go func() {
					_, err := c.Refund(context.Background(), refundOf("op-1", 300))
					answer <- err
				}()
				<-s.Executed("op-1", 1)
				if at, ok := s.NextDue(); !ok || !at.After(clock.Now()) || at.After(clock.Now().Add(10*time.Second)) {
					t.Errorf("answer due at %v %v, want within 10s", at, ok)
				}
				advanceToDue(t, s, clock)
				if err := <-answer; err != nil {
					t.Error(err)
				}
			}, fakeprovider.Injected{Latency: 1}},
		{"Pending is settled by the server after PendingDelay", fakeprovider.RandomFaults{Pending: 1, PendingDelay: time.Minute}, 0,
			func(t *testing.T, s *fakeprovider.Server, c provider.Client, clock *fakeClock) {
				mustRefund(t, c, refundOf("op-1", 300), provider.StatusPending)
				clock.Advance(time.Minute)
				wantRunDue(t, s, 1)
				if got := lookup(t, c, provider.Query{OperationKey: "op-1"}); len(got) != 1 || got[0] != provider.StatusSucceeded {
					t.Errorf("lookup found %v, want succeeded", got)
				}
			}, fakeprovider.Injected{Pending: 1}},
		{"Decline has the server decline the pending refund", fakeprovider.RandomFaults{Pending: 1, Decline: 1}, 0,
			func(t *testing.T, s *fakeprovider.Server, c provider.Client, clock *fakeClock) {
				mustRefund(t, c, refundOf("op-1", 300), provider.StatusPending)
				clock.Advance(fakeprovider.DefaultPendingDelay)
				wantRunDue(t, s, 1)
				if got := lookup(t, c, provider.Query{OperationKey: "op-1"}); len(got) != 1 || got[0] != provider.StatusRejected {
					t.Errorf("lookup found %v, want rejected", got)
				}
			}, fakeprovider.Injected{Pending: 1, Declined: 1}},
		{"LookupLag hides the refund for the declared lag", fakeprovider.RandomFaults{LookupLag: 1}, time.Minute,
			func(t *testing.T, s *fakeprovider.Server, c provider.Client, clock *fakeClock) {
				mustRefund(t, c, refundOf("op-1", 300), provider.StatusSucceeded)
				if got := lookup(t, c, provider.Query{OperationKey: "op-1"}); len(got) != 0 {
					t.Errorf("lookup inside the lag found %v", got)
				}
				clock.Advance(time.Minute)
				wantRunDue(t, s, 1)
				if got := lookup(t, c, provider.Query{OperationKey: "op-1"}); len(got) != 1 {
					t.Errorf("lookup after the lag found %v", got)
				}
			}, fakeprovider.Injected{LookupLag: 1}},
		{"Reverse reverses the refund after ReverseDelay", fakeprovider.RandomFaults{Reverse: 1, ReverseDelay: time.Hour}, 0,
			func(t *testing.T, s *fakeprovider.Server, c provider.Client, clock *fakeClock) {
				mustRefund(t, c, refundOf("op-1", 300), provider.StatusSucceeded)
				clock.Advance(time.Hour)
				wantRunDue(t, s, 1)
				if got := lookup(t, c, provider.Query{OperationKey: "op-1"}); len(got) != 1 || got[0] != provider.StatusReversed {
					t.Errorf("lookup found %v, want reversed", got)
				}
			}, fakeprovider.Injected{Reversal: 1}},
		{"a refund's faults are not counted when nothing executes", fakeprovider.RandomFaults{Pending: 1, Reverse: 1}, 0,
			func(t *testing.T, s *fakeprovider.Server, c provider.Client, _ *fakeClock) {
				_, err := c.Refund(context.Background(), provider.RefundRequest{OperationKey: "op-1", PaymentRef: "pay_x", AmountMinor: 1, Currency: "EUR"})
				wantErr(t, err, provider.ErrRejected)
			}, fakeprovider.Injected{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clock := newClock()
			s, c := start(t, fakeprovider.Config{Now: clock.Now, LookupLag: tc.lag, Random: tc.random})
			tc.check(t, s, c, clock)
			if got := s.Injected(); got != tc.injected {
				t.Errorf("injected %+v, want %+v", got, tc.injected)
			}
		})
	}
}

func TestRandomWebhookFaults(t *testing.T) {
	t.Run("WebhookDuplicate sends each event twice", func(t *testing.T) {
		s, c, rc := startHooked(t, newClock(), fakeprovider.Config{Random: fakeprovider.RandomFaults{WebhookDuplicate: 1}})
		mustRefund(t, c, refundOf("op-1", 300), provider.StatusSucceeded)
		<-s.WebhooksSent("op-1", 2)
		if evs := rc.events(t, "op-1"); len(evs) != 2 || evs[0].ID != evs[1].ID {
			t.Errorf("received %v, want one event twice", ids(evs))
		}
		if got := s.Injected(); got != (fakeprovider.Injected{WebhookDuplicate: 1}) {
			t.Errorf("injected %+v, want one duplicate", got)
		}
	})

	t.Run("WebhookLate holds events until RunDue, so that later ones overtake them", func(t *testing.T) {
		clock := newClock()
		s, c, rc := startHooked(t, clock, fakeprovider.Config{Random: fakeprovider.RandomFaults{Seed: 3, WebhookLate: 0.5, MaxWebhookDelay: time.Minute}})
		// Find, for this seed, a pending refund whose first event is late
		// and whose second is not: the receiver then sees them reversed.
		late := func() int { return s.Injected().WebhookLate }
		key := ""
		for i := 0; key == "" && i < 20; i++ {
			k := fmt.Sprintf("op-%d", i)
			s.Script(k, fakeprovider.Fault{Pending: true})
			before := late()
			mustRefund(t, c, refundOf(k, 10), provider.StatusPending)
			pendingLate := late() > before
			before = late()
			s.Settle(k)
			if pendingLate && late() == before {
				key = k
			}
		}
		if key == "" {
			t.Fatal("seed 3 made no pending event late with its success on time")
		}
		<-s.WebhooksSent(key, 1)
		wantTypes(t, rc.events(t, key), provider.EventRefundSucceeded)
		for {
			if _, ok := s.NextDue(); !ok {
				break
			}
			advanceToDue(t, s, clock)
		}
		<-s.WebhooksSent(key, 2)
		wantTypes(t, rc.events(t, key), provider.EventRefundSucceeded, provider.EventRefundPending)
		if s.Injected().WebhookLate == 0 {
			t.Error("no late webhook counted")
		}
	})
}

// outcome names what a refund request got, for comparing runs.
func outcome(s *fakeprovider.Server, key string, r provider.Refund, err error) string {
	switch {
	case err == nil:
		return string(r.Status)
	case errors.Is(err, provider.ErrRateLimited):
		return "429"
	case errors.Is(err, provider.ErrOutcomeUnknown):
		return fmt.Sprintf("unknown, executed %d", s.Executions(key))
	}
	return err.Error()
}

// run sends n refunds with keys op-0… one after the other to a new server
// with random, and returns what each got, what was injected and the events.
func run(t *testing.T, random fakeprovider.RandomFaults, n int, script map[string]fakeprovider.Fault) ([]string, fakeprovider.Injected, []provider.EventType) {
	t.Helper()
	s, c := start(t, fakeprovider.Config{Now: newClock().Now, LookupLag: time.Minute, Random: random})
	s.AddPayment("pay_big", math.MaxInt32, "EUR")
	var got []string
	var evs []provider.EventType
	for i := range n {
		key := fmt.Sprintf("op-%d", i)
		if f, ok := script[key]; ok {
			s.Script(key, f)
		}
		req := provider.RefundRequest{OperationKey: key, PaymentRef: "pay_big", AmountMinor: 10, Currency: "EUR"}
		r, err := c.Refund(context.Background(), req)
		got = append(got, outcome(s, key, r, err))
		evs = append(evs, types(s.Events(key))...)
	}
	return got, s.Injected(), evs
}

func TestRandomFaultsReproducible(t *testing.T) {
	mixed := fakeprovider.RandomFaults{Seed: 42, RateLimit: 0.1, ServerError: 0.1, Cut: 0.15, Pending: 0.3, Decline: 0.5, LookupLag: 0.2, Reverse: 0.1}

	t.Run("the same seed and the same requests inject the same faults", func(t *testing.T) {
		first, injected, events := run(t, mixed, 200, nil)
		again, injectedAgain, eventsAgain := run(t, mixed, 200, nil)
		if !slices.Equal(first, again) || injected != injectedAgain || !slices.Equal(events, eventsAgain) {
			t.Errorf("two runs with seed 42 differ:\n%v %+v\n%v %+v", first, injected, again, injectedAgain)
		}
		other := mixed
		other.Seed = 43
		if third, _, _ := run(t, other, 200, nil); slices.Equal(first, third) {
			t.Error("seeds 42 and 43 injected the same faults")
		}
	})

	t.Run("the counters agree with what the client saw", func(t *testing.T) {
		got, injected, events := run(t, mixed, 200, nil)
		count := func(o string) int {
			n := 0
			for _, g := range got {
				if g == o {
					n++
				}
			}
			return n
		}
		countEvents := func(typ provider.EventType) int {
			n := 0
			for _, e := range events {
				if e == typ {
					n++
				}
			}
			return n
		}
		if count("429") != injected.RateLimit || count("unknown, executed 0") != injected.ServerError ||
			count("unknown, executed 1") != injected.Cut || countEvents(provider.EventRefundPending) != injected.Pending {
			t.Errorf("outcomes %v do not match injected %+v", got, injected)
		}
		if injected.RateLimit == 0 || injected.ServerError == 0 || injected.Cut == 0 || injected.Pending == 0 ||
			injected.Declined == 0 || injected.LookupLag == 0 || injected.Reversal == 0 {
			t.Errorf("200 requests at these rates injected %+v, want every kind", injected)
		}
	})

	t.Run("a scripted fault takes precedence and leaves the other requests' faults alone", func(t *testing.T) {
		plain, _, _ := run(t, mixed, 50, nil)
		i := slices.Index(plain, "429")
		if i < 0 {
			t.Fatal("no 429 in 50 requests")
		}
		scripted, _, _ := run(t, mixed, 50, map[string]fakeprovider.Fault{fmt.Sprintf("op-%d", i): {}})
		if scripted[i] != "succeeded" {
			t.Errorf("scripted normal service got %s", scripted[i])
		}
		scripted[i] = plain[i]
		if !slices.Equal(plain, scripted) {
			t.Errorf("a scripted fault changed other requests' faults:\n%v\n%v", plain, scripted)
		}
	})
}

func TestConfigValidation(t *testing.T) {
	cases := []struct {
		name  string
		cfg   fakeprovider.Config
		field string
	}{
		{"a negative KeyRetention", fakeprovider.Config{KeyRetention: -1}, "KeyRetention"},
		{"a negative LookupLag", fakeprovider.Config{LookupLag: -1}, "LookupLag"},
		{"a WebhookURL that is not http", fakeprovider.Config{WebhookURL: "ftp://example.com/hooks", WebhookSecret: hookSecret}, "WebhookURL"},
		{"a WebhookURL without a secret", fakeprovider.Config{WebhookURL: "http://127.0.0.1:1/hooks"}, "WebhookSecret"},
		{"negative WebhookAttempts", fakeprovider.Config{WebhookAttempts: -1}, "WebhookAttempts"},
		{"a negative WebhookTimeout", fakeprovider.Config{WebhookTimeout: -1}, "WebhookTimeout"},
		{"a rate above 1", fakeprovider.Config{Random: fakeprovider.RandomFaults{Cut: 1.5}}, "Random.Cut"},
		{"a negative rate", fakeprovider.Config{Random: fakeprovider.RandomFaults{RateLimit: -0.1}}, "Random.RateLimit"},
		{"a NaN rate", fakeprovider.Config{Random: fakeprovider.RandomFaults{Latency: math.NaN()}}, "Random.Latency"},
		{"a negative MaxLatency", fakeprovider.Config{Random: fakeprovider.RandomFaults{MaxLatency: -1}}, "Random.MaxLatency"},
		{"a negative PendingDelay", fakeprovider.Config{Random: fakeprovider.RandomFaults{PendingDelay: -1}}, "Random.PendingDelay"},
		{"random lookup lag without a declared lag", fakeprovider.Config{Random: fakeprovider.RandomFaults{LookupLag: 0.5}}, "Random.LookupLag"},
		{"an API it does not speak", fakeprovider.Config{API: "adyen"}, "API"},
		{"a PaymentCurrency that is no ISO code", fakeprovider.Config{PaymentCurrency: "euro"}, "PaymentCurrency"},
	}
	for _, tc := range cases {
		t.Run(tc.name+" is refused, naming the field", func(t *testing.T) {
			defer func() {
				msg, _ := recover().(string)
				if !strings.Contains(msg, tc.field) {
					t.Errorf("StartWith panicked with %q, want it to name %s", msg, tc.field)
				}
			}()
			s := fakeprovider.StartWith(tc.cfg)
			s.Close()
		})
	}
}
