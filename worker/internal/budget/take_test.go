package budget

import (
	"math"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// The arithmetic of a take, over any row and any clock: it never grants
// more than asked or than the whole tokens the row holds after its refill,
// leaves the row within [0, capacity], never moves refilled_at back, and
// says when to retry exactly when it grants less than asked.
func TestTakeArithmeticIsSound(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		capacity := float64(rapid.IntRange(1, 1000).Draw(t, "capacity"))
		r := row{
			capacity:   capacity,
			tokens:     rapid.Float64Range(0, capacity).Draw(t, "tokens"),
			rate:       rapid.SampledFrom([]float64{1e-9, 0.001, 0.5, 1, 3, 1000, 1e6, 1e12}).Draw(t, "rate"),
			refilledAt: rapid.Int64Range(0, 1e15).Draw(t, "refilledAt"),
		}
		r.now = r.refilledAt + rapid.Int64Range(-1e10, 1e12).Draw(t, "elapsed")
		n := rapid.IntRange(1, 2000).Draw(t, "n")
		g := r.take(n)

		elapsed := max(0, r.now-r.refilledAt)
		avail := math.Min(r.capacity, r.tokens+float64(elapsed)*r.rate/1e6)
		switch {
		case g.granted < 0 || g.granted > n || float64(g.granted) > math.Floor(avail):
			t.Fatalf("granted %d of %d with %v available", g.granted, n, avail)
		case g.granted < n && g.granted != int(math.Floor(avail)):
			t.Fatalf("granted %d of %d, although %v were available", g.granted, n, avail)
		case g.tokens < 0 || g.tokens > r.capacity:
			t.Fatalf("left %v tokens, capacity %v", g.tokens, r.capacity)
		case math.Abs(g.tokens+float64(g.granted)-avail) > 1e-9*math.Max(1, avail):
			t.Fatalf("granted %d and left %v of %v: tokens appeared or vanished", g.granted, g.tokens, avail)
		case g.refilledAt != max(r.refilledAt, r.now):
			t.Fatalf("refilled_at %d -> %d at %d", r.refilledAt, g.refilledAt, r.now)
		case g.granted == n && g.retryIn != 0:
			t.Fatalf("granted all, retry in %v", g.retryIn)
		case g.granted < n && g.retryIn <= 0:
			t.Fatalf("granted %d of %d, retry in %v", g.granted, n, g.retryIn)
		}
		if g.granted < n && g.retryIn < maxRetry {
			// After retryIn, the row holds a whole token, and not a
			// microsecond earlier.
			at := r.now + int64(g.retryIn/time.Microsecond)
			next := row{tokens: g.tokens, capacity: r.capacity, rate: r.rate, refilledAt: g.refilledAt, now: at}
			if got := next.take(1); got.granted != 1 {
				t.Fatalf("retry in %v grants nothing: %v tokens", g.retryIn, got.tokens)
			}
			// A token sooner than the rounding slack before would have
			// been a whole microsecond's worth of refill earlier.
			next.now = at - 1 - int64(roundingSlack(r.rate))
			if got := next.take(1); got.granted != 0 && r.rate < 1e5 {
				t.Fatalf("a token came before retryIn %v", g.retryIn)
			}
		}
	})
}
