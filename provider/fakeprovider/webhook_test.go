package fakeprovider_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fencekit/fencekit/provider"
	"github.com/fencekit/fencekit/provider/fakeprovider"
)

var hookSecret = []byte("whsec_fake_provider_tests")

// received is one webhook as a receiver saw it.
type received struct {
	ev     provider.WebhookEvent
	err    error // why it was refused
	header string
}

// receiver is a merchant's webhook endpoint: it verifies each POST with
// provider.VerifyWebhook on its clock, answers 400 to what fails, and
// otherwise answers the next scripted status (200 once they run out).
type receiver struct {
	url    string
	now    func() time.Time
	mu     sync.Mutex
	got    []received
	answer []int
	// entered and proceed, when set, make the handler announce each POST and
	// wait before answering: a slow receiver, under the test's control.
	entered chan string
	proceed chan struct{}
}

// script sets the statuses of the next acknowledged POSTs.
func (rc *receiver) script(codes ...int) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.answer = codes
}

// gate makes every later POST announce its event id on entered and wait
// until proceed is closed; ungate stops it.
func (rc *receiver) gate() (entered <-chan string, proceed chan<- struct{}) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.entered, rc.proceed = make(chan string), make(chan struct{})
	return rc.entered, rc.proceed
}

func (rc *receiver) ungate() {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.entered, rc.proceed = nil, nil
}

func newReceiver(t *testing.T, now func() time.Time) *receiver {
	t.Helper()
	rc := &receiver{now: now}
	srv := httptest.NewServer(http.HandlerFunc(rc.serve))
	t.Cleanup(srv.Close)
	rc.url = srv.URL + "/webhooks"
	return rc
}

func (rc *receiver) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	header := r.Header.Get(provider.WebhookSignatureHeader)
	ev, err := provider.VerifyWebhook(hookSecret, header, body, rc.now(), 0)
	rc.mu.Lock()
	entered, proceed := rc.entered, rc.proceed
	rc.mu.Unlock()
	if entered != nil {
		entered <- ev.ID
		<-proceed
	}
	rc.mu.Lock()
	rc.got = append(rc.got, received{ev: ev, err: err, header: header})
	code := http.StatusOK
	if err != nil {
		code = http.StatusBadRequest
	} else if len(rc.answer) > 0 {
		code, rc.answer = rc.answer[0], rc.answer[1:]
	}
	rc.mu.Unlock()
	w.WriteHeader(code)
}

// events returns the verified events received for key, in arrival order,
// and fails the test on any refused one.
func (rc *receiver) events(t *testing.T, key string) []provider.WebhookEvent {
	t.Helper()
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var evs []provider.WebhookEvent
	for _, g := range rc.got {
		if g.err != nil {
			t.Errorf("receiver refused a webhook: %v", g.err)
			continue
		}
		if g.ev.Refund.Reference == key {
			evs = append(evs, g.ev)
		}
	}
	return evs
}

func types(evs []provider.WebhookEvent) []provider.EventType {
	var ts []provider.EventType
	for _, e := range evs {
		ts = append(ts, e.Type)
	}
	return ts
}

func ids(evs []provider.WebhookEvent) []string {
	var s []string
	for _, e := range evs {
		s = append(s, e.ID)
	}
	return s
}

// startHooked runs a server on clock with webhooks to a new receiver on the
// same clock, and one 1000 EUR payment, pay_1.
func startHooked(t *testing.T, clock *fakeClock, cfg fakeprovider.Config) (*fakeprovider.Server, *provider.HTTPClient, *receiver) {
	t.Helper()
	rc := newReceiver(t, clock.Now)
	cfg.Now, cfg.WebhookURL, cfg.WebhookSecret = clock.Now, rc.url, hookSecret
	s, c := start(t, cfg)
	return s, c, rc
}

func newClock() *fakeClock {
	return &fakeClock{now: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
}

func wantTypes(t *testing.T, evs []provider.WebhookEvent, want ...provider.EventType) {
	t.Helper()
	if got := types(evs); !slices.Equal(got, want) {
		t.Errorf("events %v, want %v", got, want)
	}
}

func TestWebhooks(t *testing.T) {
	t.Run("every status change is sent, signed, in order, as Events recorded it", func(t *testing.T) {
		clock := newClock()
		s, c, rc := startHooked(t, clock, fakeprovider.Config{})
		s.Script("op-1", fakeprovider.Fault{Pending: true})
		r := mustRefund(t, c, refundOf("op-1", 300), provider.StatusPending)
		clock.Advance(time.Minute)
		s.Settle("op-1")
		s.Reverse("op-1")
		s.Script("op-2", fakeprovider.Fault{Pending: true})
		mustRefund(t, c, refundOf("op-2", 200), provider.StatusPending)
		s.Decline("op-2", "bank refused")
		<-s.WebhooksSent("op-1", 3)
		<-s.WebhooksSent("op-2", 2)

		got := rc.events(t, "op-1")
		wantTypes(t, got, provider.EventRefundPending, provider.EventRefundSucceeded, provider.EventRefundReversed)
		if len(got) != 3 {
			t.FailNow()
		}
		if want := s.Events("op-1"); !reflect.DeepEqual(got, want) {
			t.Errorf("received %+v,\nwant what Events recorded %+v", got, want)
		}
		for _, ev := range got {
			if ev.Refund.ProviderRefundID != r.ProviderRefundID || provider.Verify(refundOf("op-1", 300), ev.Refund) != nil {
				t.Errorf("event %s carries refund %+v, want %s of op-1", ev.ID, ev.Refund, r.ProviderRefundID)
			}
		}
		if !got[0].Created.Equal(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)) || !got[1].Created.Equal(time.Date(2025, 1, 1, 0, 1, 0, 0, time.UTC)) {
			t.Errorf("created %v and %v, want the times of the changes", got[0].Created, got[1].Created)
		}
		declined := rc.events(t, "op-2")
		wantTypes(t, declined, provider.EventRefundPending, provider.EventRefundFailed)
		if len(declined) == 2 && (declined[1].Refund.Status != provider.StatusRejected || declined[1].Refund.Reason != "bank refused") {
			t.Errorf("failed event carries %+v, want a rejected refund with the reason", declined[1].Refund)
		}
		for _, d := range s.WebhookDeliveries() {
			if d.Status != http.StatusOK || d.Attempt != 1 || d.Err != nil {
				t.Errorf("delivery %+v, want one acknowledged POST", d)
			}
		}
	})

	t.Run("a refund that succeeds at once sends one refund.succeeded; a rejection sends nothing", func(t *testing.T) {
		s, c, rc := startHooked(t, newClock(), fakeprovider.Config{})
		mustRefund(t, c, refundOf("op-1", 300), provider.StatusSucceeded)
		s.Script("op-2", fakeprovider.Fault{Reject: "charge_disputed"})
		_, err := c.Refund(context.Background(), refundOf("op-2", 300))
		wantErr(t, err, provider.ErrRejected)
		<-s.WebhooksSent("op-1", 1)
		wantTypes(t, rc.events(t, "op-1"), provider.EventRefundSucceeded)
		if evs := s.Events("op-2"); len(evs) != 0 {
			t.Errorf("events for a rejected request: %+v", evs)
		}
	})

	t.Run("a replay of the key sends nothing new", func(t *testing.T) {
		s, c, _ := startHooked(t, newClock(), fakeprovider.Config{})
		mustRefund(t, c, refundOf("op-1", 300), provider.StatusSucceeded)
		mustRefund(t, c, refundOf("op-1", 300), provider.StatusSucceeded)
		wantTypes(t, s.Events("op-1"), provider.EventRefundSucceeded)
	})

	t.Run("a held key's webhooks are late and released in the order the test chooses", func(t *testing.T) {
		clock := newClock()
		s, c, rc := startHooked(t, clock, fakeprovider.Config{})
		s.HoldWebhooks("op-1")
		s.Script("op-1", fakeprovider.Fault{Pending: true})
		mustRefund(t, c, refundOf("op-1", 300), provider.StatusPending)
		s.Settle("op-1")
		s.Reverse("op-1")
		mustRefund(t, c, refundOf("op-2", 100), provider.StatusSucceeded)
		<-s.WebhooksSent("op-2", 1) // other keys flow meanwhile

		held := s.HeldWebhooks("op-1")
		wantTypes(t, held, provider.EventRefundPending, provider.EventRefundSucceeded, provider.EventRefundReversed)
		if n := len(rc.events(t, "op-1")); n != 0 {
			t.Fatalf("%d webhooks of a held key arrived", n)
		}
		clock.Advance(time.Hour) // late: signed when released, so still fresh
		ds := s.ReleaseWebhooks("op-1", held[2].ID, held[0].ID)
		if len(ds) != 2 || !ds[0].OK() || !ds[1].OK() {
			t.Errorf("deliveries %+v, want two acknowledged", ds)
		}
		if got := ids(rc.events(t, "op-1")); !slices.Equal(got, []string{held[2].ID, held[0].ID}) {
			t.Errorf("received %v, want reversed then pending", got)
		}
		wantTypes(t, s.HeldWebhooks("op-1"), provider.EventRefundSucceeded)
		s.ReleaseWebhooks("op-1")
		wantTypes(t, rc.events(t, "op-1"), provider.EventRefundReversed, provider.EventRefundPending, provider.EventRefundSucceeded)
		if n := len(s.HeldWebhooks("op-1")); n != 0 {
			t.Errorf("%d events still held after releasing all", n)
		}
	})

	t.Run("an event released twice arrives twice with the same id", func(t *testing.T) {
		s, c, rc := startHooked(t, newClock(), fakeprovider.Config{})
		s.HoldWebhooks("op-1")
		mustRefund(t, c, refundOf("op-1", 300), provider.StatusSucceeded)
		id := s.HeldWebhooks("op-1")[0].ID
		s.ReleaseWebhooks("op-1", id, id)
		if got := ids(rc.events(t, "op-1")); !slices.Equal(got, []string{id, id}) {
			t.Errorf("received %v, want %s twice", got, id)
		}
	})

	t.Run("Redeliver sends the same event again, signed afresh", func(t *testing.T) {
		clock := newClock()
		s, c, rc := startHooked(t, clock, fakeprovider.Config{})
		mustRefund(t, c, refundOf("op-1", 300), provider.StatusSucceeded)
		<-s.WebhooksSent("op-1", 1)
		first := s.WebhookDeliveries()[0]
		clock.Advance(10 * time.Minute)
		again := s.Redeliver(first.EventID)
		if len(again) != 1 || !again[0].OK() || again[0].Header == first.Header || string(again[0].Body) != string(first.Body) {
			t.Errorf("redelivery %+v, want the same body under a new signature, acknowledged", again)
		}
		evs := rc.events(t, "op-1")
		if len(evs) != 2 || evs[0].ID != evs[1].ID || !evs[0].Created.Equal(evs[1].Created) {
			t.Errorf("received %+v, want one event twice", evs)
		}
		<-s.WebhooksSent("op-1", 2)
	})

	t.Run("a recorded delivery replayed later is refused as too old", func(t *testing.T) {
		clock := newClock()
		s, c, rc := startHooked(t, clock, fakeprovider.Config{})
		mustRefund(t, c, refundOf("op-1", 300), provider.StatusSucceeded)
		<-s.WebhooksSent("op-1", 1)
		d := s.WebhookDeliveries()[0]
		clock.Advance(provider.DefaultWebhookTolerance + time.Second)
		req, _ := http.NewRequest(http.MethodPost, rc.url, strings.NewReader(string(d.Body)))
		req.Header.Set(provider.WebhookSignatureHeader, d.Header)
		wantStatus(t, req, http.StatusBadRequest)
		rc.mu.Lock()
		defer rc.mu.Unlock()
		if last := rc.got[len(rc.got)-1]; !errors.Is(last.err, provider.ErrWebhookTooOld) {
			t.Errorf("replay refused with %v, want too old", last.err)
		}
	})

	t.Run("a receiver signing with another secret refuses every webhook", func(t *testing.T) {
		clock := newClock()
		rc := newReceiver(t, clock.Now)
		s, c := start(t, fakeprovider.Config{Now: clock.Now, WebhookURL: rc.url, WebhookSecret: []byte("another secret")})
		mustRefund(t, c, refundOf("op-1", 300), provider.StatusSucceeded)
		<-s.WebhooksSent("op-1", 1)
		rc.mu.Lock()
		defer rc.mu.Unlock()
		if len(rc.got) != fakeprovider.DefaultWebhookAttempts || !errors.Is(rc.got[0].err, provider.ErrWebhookWrongSecret) {
			t.Errorf("received %+v, want %d refusals for the wrong secret", rc.got, fakeprovider.DefaultWebhookAttempts)
		}
	})

	t.Run("a non-2xx answer is retried, a bounded number of times", func(t *testing.T) {
		s, c, rc := startHooked(t, newClock(), fakeprovider.Config{WebhookAttempts: 4})
		rc.script(500, 503, 500, 500, 500, 200)
		mustRefund(t, c, refundOf("op-1", 300), provider.StatusSucceeded)
		<-s.WebhooksSent("op-1", 1)
		var statuses []int
		for _, d := range s.WebhookDeliveries() {
			statuses = append(statuses, d.Status)
		}
		if !slices.Equal(statuses, []int{500, 503, 500, 500}) {
			t.Errorf("statuses %v, want 4 attempts, all refused", statuses)
		}
		ds := s.Redeliver(s.Events("op-1")[0].ID)
		if len(ds) != 2 || ds[0].Status != 500 || ds[1].Status != 200 || ds[1].Attempt != 2 {
			t.Errorf("redelivery %+v, want a 500 then a 200 on the second attempt", ds)
		}
	})

	t.Run("an unreachable receiver is recorded with the error", func(t *testing.T) {
		dead := httptest.NewServer(http.NotFoundHandler())
		dead.Close()
		clock := newClock()
		s, c := start(t, fakeprovider.Config{Now: clock.Now, WebhookURL: dead.URL, WebhookSecret: hookSecret, WebhookAttempts: 2})
		mustRefund(t, c, refundOf("op-1", 300), provider.StatusSucceeded)
		<-s.WebhooksSent("op-1", 1)
		ds := s.WebhookDeliveries()
		if len(ds) != 2 || ds[0].Err == nil || ds[0].Status != 0 || ds[0].OK() {
			t.Errorf("deliveries %+v, want two failed POSTs with their error", ds)
		}
	})

	t.Run("HoldWebhooks also holds events queued behind a slow receiver", func(t *testing.T) {
		s, c, rc := startHooked(t, newClock(), fakeprovider.Config{})
		entered, proceed := rc.gate()
		mustRefund(t, c, refundOf("op-0", 100), provider.StatusSucceeded)
		<-entered // the sender is stuck on op-0's webhook
		s.Script("op-1", fakeprovider.Fault{Pending: true})
		mustRefund(t, c, refundOf("op-1", 300), provider.StatusPending)
		s.Settle("op-1")
		s.HoldWebhooks("op-1")
		rc.ungate()
		close(proceed)
		wantTypes(t, s.HeldWebhooks("op-1"), provider.EventRefundPending, provider.EventRefundSucceeded)

		s.UnholdWebhooks("op-1")
		<-s.WebhooksSent("op-1", 2)
		wantTypes(t, rc.events(t, "op-1"), provider.EventRefundPending, provider.EventRefundSucceeded)
	})

	t.Run("without a WebhookURL events are recorded and nothing is sent", func(t *testing.T) {
		s, c := start(t, fakeprovider.Config{})
		mustRefund(t, c, refundOf("op-1", 300), provider.StatusSucceeded)
		wantTypes(t, s.Events("op-1"), provider.EventRefundSucceeded)
		if ds := s.WebhookDeliveries(); len(ds) != 0 {
			t.Errorf("deliveries %+v without a URL", ds)
		}
		defer func() {
			if recover() == nil {
				t.Error("Redeliver without a URL did not panic")
			}
		}()
		s.Redeliver(s.Events("op-1")[0].ID)
	})

	t.Run("Close abandons queued webhooks", func(t *testing.T) {
		rc := newReceiver(t, time.Now)
		entered, proceed := rc.gate()
		s := fakeprovider.StartWith(fakeprovider.Config{WebhookURL: rc.url, WebhookSecret: hookSecret})
		s.AddPayment("pay_1", 1000, "EUR")
		c := s.Client()
		mustRefund(t, c, refundOf("op-1", 100), provider.StatusSucceeded)
		mustRefund(t, c, refundOf("op-2", 100), provider.StatusSucceeded)
		<-entered
		closed := make(chan struct{})
		go func() { s.Close(); close(closed) }()
		<-s.WebhooksSent("op-1", 1) // Close cancels the POST under way
		close(proceed)
		<-closed
		for _, d := range s.WebhookDeliveries() {
			if d.Key == "op-2" {
				t.Errorf("op-2's webhook was sent after Close: %+v", d)
			}
		}
	})
}
