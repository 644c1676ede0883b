package fakeprovider

import (
	"errors"
	"fmt"
	"time"
)

// Fault scripts how the server treats one refund request (POST). Script
// queues faults per key; each request with that key takes the next one, and
// requests beyond the queue are served normally (or with a random fault, see
// RandomFaults). The zero Fault is normal service.
//
// The timed fields (SettleAfter, DeclineAfter, PublishAfter, ReverseAfter,
// Latency) are measured on the server's clock, Config.Now, and carried out
// by RunDue (or the Config.Background loop) once they are due: tests move
// their clock and call RunDue instead of sleeping. All but Latency apply only
// to a request that executes a refund.
type Fault struct {
	// Refuse answers with this status, 429 or a 5xx, before processing:
	// nothing executes and the key is not taken.
	Refuse int
	// Reject rejects the refund definitively with this code (422): nothing
	// executes, and the rejection is kept under the key like any result.
	Reject string
	// Pending accepts the refund as pending: it counts as an execution and
	// against the payment, and Settle or Decline decides it later (or the
	// server itself, with SettleAfter or DeclineAfter).
	Pending bool
	// RequiresAction, with Pending, shows the pending refund as Stripe's
	// requires_action (APIStripe; fencekit's API has no such status).
	RequiresAction bool
	// SettleAfter, with Pending, has the server settle the refund by itself
	// this long after it executed. DeclineAfter declines it instead, with
	// the reason AsyncDeclineReason. At most one of the two.
	SettleAfter  time.Duration
	DeclineAfter time.Duration
	// Unpublished keeps the executed refund out of every lookup until
	// Publish: a real provider's lookup lag.
	Unpublished bool
	// PublishAfter, with Unpublished, has the server publish the refund by
	// itself this long after it executed.
	PublishAfter time.Duration
	// ReverseAfter has the server reverse the refund this long after it
	// succeeded (when it executes, or when a pending refund is settled). A
	// declined refund is never reversed.
	ReverseAfter time.Duration
	// Hold, when set, holds the answer after processing until the channel is
	// closed; Close cuts it instead. The key stays in flight meanwhile, so a
	// concurrent request with it gets idempotency_key_in_use.
	Hold <-chan struct{}
	// Latency holds the answer after processing, like Hold, until this much
	// time has passed on the server's clock. Not with Hold.
	Latency time.Duration
	// After decides what becomes of the answer once it is due. Whatever it
	// is, the request was processed (executed, or rejected) all the same.
	After Delivery
}

// AsyncDeclineReason is the reason the server gives when it declines a
// pending refund by itself (Fault.DeclineAfter, RandomFaults.Decline).
const AsyncDeclineReason = "declined by the bank"

// Delivery is what happens to an answer on its way back.
type Delivery int

const (
	// Deliver sends the answer.
	Deliver Delivery = iota
	// Cut closes the connection without a byte of the answer.
	Cut
	// Truncate sends the status line, the headers (with the full
	// Content-Length) and half the body, then closes the connection.
	Truncate
	// ServerError answers 500 instead.
	ServerError
)

func (f Fault) validate() error {
	var errs []error
	if f.Refuse != 0 && f.Refuse != 429 && (f.Refuse < 500 || f.Refuse > 599) {
		errs = append(errs, fmt.Errorf("Refuse must be 429 or a 5xx status, got %d", f.Refuse))
	}
	if f.After < Deliver || f.After > ServerError {
		errs = append(errs, fmt.Errorf("After %d is not a Delivery", f.After))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"SettleAfter", f.SettleAfter}, {"DeclineAfter", f.DeclineAfter}, {"PublishAfter", f.PublishAfter}, {"ReverseAfter", f.ReverseAfter}, {"Latency", f.Latency}} {
		if d.v < 0 {
			errs = append(errs, fmt.Errorf("%s must not be negative, got %v", d.name, d.v))
		}
	}
	if (f.SettleAfter != 0 || f.DeclineAfter != 0) && !f.Pending {
		errs = append(errs, errors.New("SettleAfter and DeclineAfter need Pending"))
	}
	if f.RequiresAction && !f.Pending {
		errs = append(errs, errors.New("RequiresAction needs Pending"))
	}
	if f.SettleAfter != 0 && f.DeclineAfter != 0 {
		errs = append(errs, errors.New("SettleAfter and DeclineAfter are exclusive"))
	}
	if f.PublishAfter != 0 && !f.Unpublished {
		errs = append(errs, errors.New("PublishAfter needs Unpublished"))
	}
	if f.Latency != 0 && f.Hold != nil {
		errs = append(errs, errors.New("Latency and Hold are exclusive"))
	}
	return errors.Join(errs...)
}
