package fakeprovider

import "fmt"

// Fault scripts how the server treats one refund request (POST). Script
// queues faults per key; each request with that key takes the next one, and
// requests beyond the queue are served normally. The zero Fault is normal
// service.
type Fault struct {
	// Refuse answers with this status, 429 or a 5xx, before processing:
	// nothing executes and the key is not taken.
	Refuse int
	// Reject rejects the refund definitively with this code (422): nothing
	// executes, and the rejection is kept under the key like any result.
	Reject string
	// Pending accepts the refund as pending: it counts as an execution and
	// against the payment, and Settle or Decline decides it later.
	Pending bool
	// Unpublished keeps the executed refund out of every lookup until
	// Publish: a real provider's lookup lag.
	Unpublished bool
	// Hold, when set, holds the answer after processing until the channel is
	// closed; Close cuts it instead. The key stays in flight meanwhile, so a
	// concurrent request with it gets idempotency_key_in_use.
	Hold <-chan struct{}
	// After decides what becomes of the answer once it is due. Whatever it
	// is, the request was processed (executed, or rejected) all the same.
	After Delivery
}

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
	if f.Refuse != 0 && f.Refuse != 429 && (f.Refuse < 500 || f.Refuse > 599) {
		return fmt.Errorf("Refuse must be 429 or a 5xx status, got %d", f.Refuse)
	}
	if f.After < Deliver || f.After > ServerError {
		return fmt.Errorf("After %d is not a Delivery", f.After)
	}
	return nil
}
