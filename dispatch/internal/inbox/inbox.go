// Package inbox hands values to a consumer's goroutine from goroutines
// that must not block: the worker's scheduler, which calls a hint's Done
// (worker.Hint), and timers. Both broker consumers act on the worker's
// verdicts this way, on their own goroutine.
package inbox

import "sync"

// An Inbox holds the values put and not taken yet.
type Inbox[T any] struct {
	mu    sync.Mutex
	items []T
	ready chan struct{}
}

// New is an empty Inbox.
func New[T any]() *Inbox[T] { return &Inbox[T]{ready: make(chan struct{}, 1)} }

// Put adds v and wakes the receiver. It never blocks.
func (b *Inbox[T]) Put(v T) {
	b.mu.Lock()
	b.items = append(b.items, v)
	b.mu.Unlock()
	select {
	case b.ready <- struct{}{}:
	default:
	}
}

// Ready receives once something was put since the last receive: then Take.
func (b *Inbox[T]) Ready() <-chan struct{} { return b.ready }

// Take returns every value put and not taken yet, the oldest first.
func (b *Inbox[T]) Take() []T {
	b.mu.Lock()
	defer b.mu.Unlock()
	v := b.items
	b.items = nil
	return v
}
