package fakeprovider

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"time"
)

// Defaults for the durations of RandomFaults left zero.
const (
	// DefaultMaxLatency is longer than the demo's 3 s provider timeout, so
	// that some slow answers come after the caller gave up.
	DefaultMaxLatency = 5 * time.Second
	// DefaultPendingDelay is how long a randomly pending refund waits for
	// the server to decide it.
	DefaultPendingDelay = 2 * time.Second
	// DefaultReverseDelay is how long after its success a refund picked for
	// a random reversal is reversed.
	DefaultReverseDelay = 10 * time.Second
	// DefaultMaxWebhookDelay bounds how long a late webhook is held.
	DefaultMaxWebhookDelay = 10 * time.Second
)

// RandomFaults injects faults at random, each kind at a rate in [0, 1], from
// a generator seeded with Seed. The zero value injects nothing.
//
// Every refund request draws the same numbers, whatever it gets, and so does
// every webhook event (from a second stream), so the faults are a function
// of the seed and of the order in which the server receives requests and
// produces events: the same seed and the same sequence give the same faults.
// A request with a scripted Fault takes that Fault instead; its draws are
// made and ignored. Server.Injected counts what was injected, by kind.
//
// Random faults apply to refund requests (POST) and webhooks; lookups are
// served faithfully, lagging only for refunds picked for LookupLag.
type RandomFaults struct {
	Seed int64

	// Refused before processing: nothing executes, the key is not taken.
	RateLimit   float64 // answer 429
	ServerError float64 // answer 503

	// Processed (executed, replayed or rejected), then the answer suffers.
	Cut        float64       // execute-then-cut: the connection closes without an answer
	Latency    float64       // the answer is held for a random time in (0, MaxLatency] on the server's clock
	MaxLatency time.Duration // DefaultMaxLatency when zero

	// What becomes of a refund that executes.
	Pending      float64       // it is pending (half of them requires_action with APIStripe); the server decides it PendingDelay later
	Decline      float64       // share of those pending refunds it declines rather than settles
	PendingDelay time.Duration // DefaultPendingDelay when zero
	LookupLag    float64       // lookups miss it for Config.LookupLag, which must then be positive
	Reverse      float64       // it is reversed ReverseDelay after it succeeds
	ReverseDelay time.Duration // DefaultReverseDelay when zero

	// What becomes of a webhook event (unless its key is held).
	WebhookDuplicate float64       // it is sent twice
	WebhookLate      float64       // it waits a random time in (0, MaxWebhookDelay] on the server's clock: later events of its refund overtake it
	MaxWebhookDelay  time.Duration // DefaultMaxWebhookDelay when zero
}

// Injected counts the faults RandomFaults injected, by kind. Scripted faults
// are not counted. A refund's kinds (Pending, Declined, LookupLag, Reversal)
// are counted when the refund executes with them: Declined and Reversal say
// what the server will do when they fall due, which a test may pre-empt with
// Settle, Decline or Reverse.
type Injected struct {
	RateLimit   int // 429 before processing
	ServerError int // 503 before processing
	Cut         int // processed, answer lost
	Latency     int // processed, answer late

	Pending   int // executed as pending
	Declined  int // of those, to be declined
	LookupLag int // executed but invisible to lookups for a while
	Reversal  int // to be reversed after success

	WebhookDuplicate int // events sent twice
	WebhookLate      int // events held back
}

func (r RandomFaults) withDefaults() RandomFaults {
	if r.MaxLatency == 0 {
		r.MaxLatency = DefaultMaxLatency
	}
	if r.PendingDelay == 0 {
		r.PendingDelay = DefaultPendingDelay
	}
	if r.ReverseDelay == 0 {
		r.ReverseDelay = DefaultReverseDelay
	}
	if r.MaxWebhookDelay == 0 {
		r.MaxWebhookDelay = DefaultMaxWebhookDelay
	}
	return r
}

func (r RandomFaults) validate(lookupLag time.Duration) error {
	var errs []error
	rates := []struct {
		name string
		v    float64
	}{
		{"RateLimit", r.RateLimit}, {"ServerError", r.ServerError}, {"Cut", r.Cut}, {"Latency", r.Latency},
		{"Pending", r.Pending}, {"Decline", r.Decline}, {"LookupLag", r.LookupLag}, {"Reverse", r.Reverse},
		{"WebhookDuplicate", r.WebhookDuplicate}, {"WebhookLate", r.WebhookLate},
	}
	for _, rate := range rates {
		if math.IsNaN(rate.v) || rate.v < 0 || rate.v > 1 {
			errs = append(errs, fmt.Errorf("Random.%s must be a rate in [0, 1], got %v", rate.name, rate.v))
		}
	}
	durations := []struct {
		name string
		v    time.Duration
	}{
		{"MaxLatency", r.MaxLatency}, {"PendingDelay", r.PendingDelay},
		{"ReverseDelay", r.ReverseDelay}, {"MaxWebhookDelay", r.MaxWebhookDelay},
	}
	for _, d := range durations {
		if d.v < 0 {
			errs = append(errs, fmt.Errorf("Random.%s must not be negative, got %v", d.name, d.v))
		}
	}
	if r.LookupLag > 0 && lookupLag <= 0 {
		errs = append(errs, errors.New("Random.LookupLag needs a positive LookupLag, the lag the server declares"))
	}
	return errors.Join(errs...)
}

// requestDraw is what one refund request drew: one number per decision,
// always all of them.
type requestDraw struct {
	rateLimit, serverError, cut, latency, latencyAmount float64
	pending, decline, lookupLag, reverse                float64
}

func drawRequest(g *rand.Rand) requestDraw {
	return requestDraw{
		rateLimit: g.Float64(), serverError: g.Float64(), cut: g.Float64(),
		latency: g.Float64(), latencyAmount: g.Float64(),
		pending: g.Float64(), decline: g.Float64(), lookupLag: g.Float64(), reverse: g.Float64(),
	}
}

// fault turns a draw into the Fault it stands for.
func (d requestDraw) fault(r RandomFaults, lookupLag time.Duration) Fault {
	var f Fault
	switch {
	case d.rateLimit < r.RateLimit:
		f.Refuse = http.StatusTooManyRequests
		return f
	case d.serverError < r.ServerError:
		f.Refuse = http.StatusServiceUnavailable
		return f
	}
	if d.cut < r.Cut {
		f.After = Cut
	}
	if d.latency < r.Latency {
		f.Latency = upTo(r.MaxLatency, d.latencyAmount)
	}
	if d.pending < r.Pending {
		// Half of them wait for the customer: Stripe's requires_action
		// (APIStripe shows it; the refund is pending all the same).
		f.Pending, f.RequiresAction = true, d.pending < r.Pending/2
		if d.decline < r.Decline {
			f.DeclineAfter = r.PendingDelay
		} else {
			f.SettleAfter = r.PendingDelay
		}
	}
	if d.lookupLag < r.LookupLag {
		f.Unpublished, f.PublishAfter = true, lookupLag
	}
	if d.reverse < r.Reverse {
		f.ReverseAfter = r.ReverseDelay
	}
	return f
}

// eventDraw is what one webhook event drew.
type eventDraw struct {
	duplicate, late, lateAmount float64
}

func drawEvent(g *rand.Rand) eventDraw {
	return eventDraw{duplicate: g.Float64(), late: g.Float64(), lateAmount: g.Float64()}
}

// upTo maps u in [0, 1) to a duration in (0, max].
func upTo(max time.Duration, u float64) time.Duration {
	return time.Duration(math.Max(1, math.Ceil((1-u)*float64(max))))
}

// newGenerators returns the request and event streams of seed.
func newGenerators(seed int64) (requests, events *rand.Rand) {
	return rand.New(rand.NewPCG(uint64(seed), 1)), rand.New(rand.NewPCG(uint64(seed), 2))
}
