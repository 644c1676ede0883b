package fakeprovider

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"

	"github.com/fencekit/fencekit/provider"
)

// Defaults for the webhook fields of Config left zero.
const (
	// DefaultWebhookAttempts bounds the POSTs of one sending of an event.
	DefaultWebhookAttempts = 3
	// DefaultWebhookTimeout bounds one POST.
	DefaultWebhookTimeout = 5 * time.Second
)

// WebhookDelivery is one webhook POST the server made.
type WebhookDelivery struct {
	EventID string
	Key     string // the refund's operation key
	Type    provider.EventType
	Attempt int    // 1 for the first POST of a sending, more for its retries
	Header  string // the signature header's value sent (provider.WebhookSignatureHeader, or Stripe-Signature with APIStripe)
	Body    []byte
	Status  int   // the receiver's HTTP status; 0 when none arrived
	Err     error // why no status arrived
}

// OK reports whether the receiver acknowledged the POST with a 2xx.
func (d WebhookDelivery) OK() bool { return d.Status/100 == 2 }

// event is a webhook event and its key.
type event struct {
	key string
	ev  provider.WebhookEvent
}

// emit records the change c of r as the events its API makes of it, and
// routes each: held, late, duplicated or queued in order. s.mu is held.
func (s *Server) emit(r *refund, c change) {
	for _, k := range s.wire.events(r, c) {
		s.emitOne(r, k)
	}
}

func (s *Server) emitOne(r *refund, k eventKind) {
	id, created := fmt.Sprintf("evt_%d", len(s.events)+1), time.Unix(s.cfg.Now().Unix(), 0).UTC()
	pay := s.payments[r.Payment]
	e := &event{key: r.Reference, ev: provider.WebhookEvent{
		ID:      id,
		Type:    k.typ,
		Created: created,
		Raw:     s.wire.eventBody(s, id, created, k, r, pay),
	}}
	if k.payment {
		e.ev.Payments = paymentRefs(r.Payment)
	} else {
		e.ev.Refund = provider.Refund{
			ProviderRefundID: r.ID,
			Reference:        r.Reference,
			PaymentRef:       r.Payment,
			AmountMinor:      r.Amount,
			Currency:         r.Currency,
			Status:           r.Status,
			Reason:           r.Reason,
			Raw:              s.wire.refund(s, r),
		}
	}
	s.events = append(s.events, e)
	s.eventByID[e.ev.ID] = e
	d := drawEvent(s.eventRand)
	switch {
	case s.cfg.WebhookURL == "":
	case s.holding[e.key]:
		s.held[e.key] = append(s.held[e.key], e)
	default:
		n := 1
		if d.duplicate < s.cfg.Random.WebhookDuplicate {
			n = 2
			s.injected.WebhookDuplicate++
		}
		if d.late < s.cfg.Random.WebhookLate {
			s.injected.WebhookLate++
			s.schedule(upTo(s.cfg.Random.MaxWebhookDelay, d.lateAmount), func() {
				if s.holding[e.key] { // held meanwhile: the test decides
					s.held[e.key] = append(s.held[e.key], e)
					return
				}
				s.enqueue(e, n)
			})
			return
		}
		s.enqueue(e, n)
	}
}

// enqueue queues n sendings of e for the sender. s.mu is held.
func (s *Server) enqueue(e *event, n int) {
	for range n {
		s.outbox = append(s.outbox, e)
	}
	select {
	case s.outboxReady <- struct{}{}:
	default:
	}
}

// sender sends queued events one at a time, in the order they were queued,
// until Close.
func (s *Server) sender() {
	defer s.bg.Done()
	for {
		select {
		case <-s.done:
			return // what is left in the outbox is abandoned
		default:
		}
		s.mu.Lock()
		var e *event
		if len(s.outbox) > 0 {
			e, s.outbox = s.outbox[0], s.outbox[1:]
		}
		s.mu.Unlock()
		if e == nil {
			select {
			case <-s.done:
				return
			case <-s.outboxReady:
			}
			continue
		}
		s.send(e)
	}
}

// send POSTs e to the webhook URL, signed afresh for each POST, until the
// receiver answers 2xx or Config.WebhookAttempts POSTs have been made, and
// records every POST. Retries are immediate: the bound, not a backoff, is
// what keeps them finite. It counts one sending of e's key (WebhooksSent).
func (s *Server) send(e *event) []WebhookDelivery {
	var out []WebhookDelivery
	for attempt := 1; attempt <= s.cfg.WebhookAttempts; attempt++ {
		d := s.post(e, attempt)
		s.mu.Lock()
		s.deliveries = append(s.deliveries, d)
		s.mu.Unlock()
		out = append(out, d)
		if d.OK() || s.ctx.Err() != nil {
			break
		}
	}
	s.mu.Lock()
	s.sent.add(e.key)
	s.mu.Unlock()
	return out
}

func (s *Server) post(e *event, attempt int) WebhookDelivery {
	name, header := s.wire.sign(s.cfg.WebhookSecret, s.cfg.Now(), e.ev.Raw)
	d := WebhookDelivery{EventID: e.ev.ID, Key: e.key, Type: e.ev.Type, Attempt: attempt, Header: header, Body: e.ev.Raw}
	req, err := http.NewRequestWithContext(s.ctx, http.MethodPost, s.cfg.WebhookURL, bytes.NewReader(e.ev.Raw))
	if err != nil {
		d.Err = fmt.Errorf("build webhook: %w", err)
		return d
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(name, header)
	resp, err := s.hooks.Do(req)
	if err != nil {
		d.Err = fmt.Errorf("post webhook: %w", err)
		return d
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	d.Status = resp.StatusCode
	return d
}

// HoldWebhooks stops sending key's events by themselves: those queued and
// not yet being sent, and every later one, wait until ReleaseWebhooks (late
// delivery) or UnholdWebhooks.
func (s *Server) HoldWebhooks(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.holding[key] = true
	kept := s.outbox[:0]
	for _, e := range s.outbox {
		if e.key == key {
			s.held[key] = append(s.held[key], e)
		} else {
			kept = append(kept, e)
		}
	}
	s.outbox = kept
}

// HeldWebhooks returns key's held events, in the order they happened.
func (s *Server) HeldWebhooks(key string) []provider.WebhookEvent {
	s.mu.Lock()
	defer s.mu.Unlock()
	var evs []provider.WebhookEvent
	for _, e := range s.held[key] {
		evs = append(evs, e.ev)
	}
	return evs
}

// ReleaseWebhooks sends key's held events with the given ids now, in the
// given order, on the caller's goroutine, and returns once the receiver has
// answered each (or the attempts ran out). An id given twice is sent twice:
// a duplicate. Without ids it sends every held event in the order they
// happened. Released events leave the hold; key stays held for later ones.
// It panics if an id is not held for key or no WebhookURL is configured.
func (s *Server) ReleaseWebhooks(key string, ids ...string) []WebhookDelivery {
	s.mu.Lock()
	if s.cfg.WebhookURL == "" {
		s.mu.Unlock()
		panic("fakeprovider: ReleaseWebhooks without a WebhookURL")
	}
	held := s.held[key]
	var order []*event
	if len(ids) == 0 {
		order = held
	}
	for _, id := range ids {
		i := slices.IndexFunc(held, func(e *event) bool { return e.ev.ID == id })
		if i < 0 {
			s.mu.Unlock()
			panic(fmt.Sprintf("fakeprovider: event %q is not held for key %q", id, key))
		}
		order = append(order, held[i])
	}
	s.held[key] = slices.DeleteFunc(slices.Clone(held), func(e *event) bool { return slices.Contains(order, e) })
	s.mu.Unlock()
	var out []WebhookDelivery
	for _, e := range order {
		out = append(out, s.send(e)...)
	}
	return out
}

// UnholdWebhooks lets key's events be sent by themselves again: the held
// ones are queued, in the order they happened, then every later one.
func (s *Server) UnholdWebhooks(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.holding, key)
	for _, e := range s.held[key] {
		s.enqueue(e, 1)
	}
	delete(s.held, key)
}

// Redeliver sends the event with id again, now, on the caller's goroutine,
// signed afresh, and returns once the receiver has answered (or the attempts
// ran out): a provider's redelivery, with the same event id and body. It
// panics if there is no such event or no WebhookURL is configured.
func (s *Server) Redeliver(id string) []WebhookDelivery {
	s.mu.Lock()
	e := s.eventByID[id]
	url := s.cfg.WebhookURL
	s.mu.Unlock()
	switch {
	case url == "":
		panic("fakeprovider: Redeliver without a WebhookURL")
	case e == nil:
		panic(fmt.Sprintf("fakeprovider: no event %q", id))
	}
	return s.send(e)
}

// Events returns the events of key's refunds, in the order they happened,
// whether or not they were sent.
func (s *Server) Events(key string) []provider.WebhookEvent {
	s.mu.Lock()
	defer s.mu.Unlock()
	var evs []provider.WebhookEvent
	for _, e := range s.events {
		if e.key == key {
			evs = append(evs, e.ev)
		}
	}
	return evs
}

// WebhookDeliveries returns every webhook POST made so far, in order, with
// the receiver's status.
func (s *Server) WebhookDeliveries() []WebhookDelivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.deliveries)
}

// WebhooksSent returns a channel closed once n sendings of key's events
// have finished, each with its retries, whatever the receiver answered. A
// duplicate is two sendings. Tests wait on it instead of sleeping.
func (s *Server) WebhooksSent(key string, n int) <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sent.wait(key, n)
}
