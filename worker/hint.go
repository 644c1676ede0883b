package worker

import (
	"context"
	"errors"
	"fmt"

	"github.com/fencekit/fencekit/ent"
	"github.com/fencekit/fencekit/fencedwrite"
)

// ErrHintNotTried is what a Hint's Done receives when the worker stopped
// before it tried the hint's claim: nothing was claimed for it, and a
// broker may deliver the message again (to another worker).
var ErrHintNotTried = errors.New("hint not tried: the worker is stopping")

// A Hint is a job id that a dispatcher says may be due: a broker's message,
// say (package dispatch/rabbitmq). It is a hint, never a right: the worker
// claims the job through the same fenced claim as its scan
// (ent.RefundJobClient.Claim, by id), which claims nothing for a job that is
// not ready and due. A duplicated, redelivered, reordered or stale hint can
// therefore at worst make a claim find nothing to do.
type Hint struct {
	// ID is the job's id.
	ID int64
	// Done, when set, is called once the hint's claim was tried: claimed
	// says whether this worker now holds the job's lease. err is nil when it
	// did; otherwise it matches one of the claim's outcomes
	// (fencedwrite.ErrNotFound or ErrNotClaimable: nothing to do; or
	// ErrRolledBack, ErrCommitUnknown: the scan reads the truth), or
	// ErrHintNotTried when the worker stopped first. Done runs on the
	// scheduler's goroutine: it must not block.
	Done func(claimed bool, err error)
}

// Hint hands h to the scheduler and wakes it. The scheduler tries hints
// only with the tokens a pass may spend on sends, after the expired leases
// and the due reconciles it claims first (a hint never lets a send jump
// ahead of an unknown outcome) and before the scan of due sends: a hint
// that cannot be tried yet (no free slot, no token above the reserve) waits
// for a later pass. Hints given before Start wait for its first pass. Hint
// returns false, and never calls Done, once the worker is stopping.
//
// The hints waiting are held in memory: whoever delivers them bounds how
// many (a broker consumer's prefetch, sized on HintCapacity).
func (c *Client) Hint(h Hint) bool {
	c.mu.Lock()
	ok := !c.stopping()
	if ok {
		c.hints = append(c.hints, h)
	}
	c.mu.Unlock()
	if ok {
		c.Wake()
	}
	return ok
}

// HintCapacity is how many hints this worker can try at once: its slots,
// bounded by the fleet budget's burst. A broker consumer sizes its prefetch
// on it, so that no more messages wait unacknowledged than one pass can
// claim.
func (c *Client) HintCapacity() int {
	return max(1, min(c.cfg.Workers, c.cfg.BudgetBurst, fencedwrite.MaxBatch))
}

// claimHints tries the waiting hints in the order they came until limit
// jobs are claimed or none is left: a hint whose claim finds nothing to do
// costs no token. It returns the leases and the first error that was not
// "nothing to do" (the pass stops claiming on it, as after a batch's error).
func (c *Client) claimHints(ctx context.Context, limit int) ([]*ent.RefundJobLease, error) {
	var leases []*ent.RefundJobLease
	for len(leases) < limit {
		c.mu.Lock()
		if len(c.hints) == 0 {
			c.mu.Unlock()
			break
		}
		h := c.hints[0]
		c.hints[0] = Hint{}
		c.hints = c.hints[1:]
		c.mu.Unlock()

		got, err := c.claimBatch(ctx, "claim", func(ctx context.Context, _ int, o fencedwrite.ClaimOptions) ([]*ent.RefundJobLease, error) {
			l, err := c.ent.RefundJob.Claim(ctx, h.ID, o)
			if err != nil {
				return nil, err
			}
			return []*ent.RefundJobLease{l}, nil
		}, 1)
		switch {
		case len(got) == 1:
			c.m.Hint(HintClaimed)
		case nothingToDo(err):
			c.m.Hint(HintNothingToDo)
		default:
			c.m.Hint(HintFailed)
		}
		if h.Done != nil {
			h.Done(len(got) == 1, err)
		}
		leases = append(leases, got...)
		if err != nil && !nothingToDo(err) {
			return leases, err
		}
	}
	return leases, nil
}

// nothingToDo reports whether a claim by id found the job gone, settled,
// held or not yet due: what a stale or duplicated hint finds.
func nothingToDo(err error) bool {
	return errors.Is(err, fencedwrite.ErrNotFound) || errors.Is(err, fencedwrite.ErrNotClaimable)
}

// dropHints calls Done of every hint still waiting when the worker stops.
func (c *Client) dropHints() {
	c.mu.Lock()
	hs := c.hints
	c.hints = nil
	c.mu.Unlock()
	for _, h := range hs {
		c.m.Hint(HintNotTried)
		if h.Done != nil {
			h.Done(false, fmt.Errorf("hint for job %d: %w", h.ID, ErrHintNotTried))
		}
	}
}
