package history

import "fmt"

// ZombieWrites counts a run's zombie write-backs by kind of write-back: the
// event fencekit exists for. See Zombies.
type ZombieWrites struct {
	Complete     ZombieCount `json:"complete"`
	Reschedule   ZombieCount `json:"reschedule"`
	ManualReview ZombieCount `json:"manual_review"`
	Fail         ZombieCount `json:"fail"`
}

// ZombieCount splits one kind's zombie write-backs by whether the write-back
// was alone in its transaction or shared it with other write-backs.
type ZombieCount struct {
	Single  int `json:"single"`
	Batched int `json:"batched"`
}

// Zombies counts the zombie write-backs of a run's events. A write counts
// when everything that makes it the article's zombie is in the history:
//
//   - its process was granted the lease it writes back with (its claim or
//     takeover to that attempt returned ok);
//   - a takeover of the job to a later attempt returned ok (it committed)
//     before the write was called: the write was sent after the takeover
//     committed, whichever process took over (a process's own takeover
//     counts too: its frozen goroutine still holds the old lease);
//   - the fence refused it: the write returned superseded.
//
// A write called while the takeover was still in flight, a write whose
// outcome is unknown, and a write that landed (a broken fence) do not count.
// The kind is the write's target state (succeeded: complete, ready:
// reschedule, manual_review, failed: fail); a write that shared its
// transaction with other write-backs (Event.Batch above 1) is batched.
func Zombies(events []Event) ZombieWrites {
	type key struct {
		proc string
		id   int64
	}
	calls := map[key]Event{}
	for _, e := range events {
		if e.Phase == PhaseCall {
			calls[key{e.Proc, e.ID}] = e
		}
	}
	type lease struct {
		proc    string
		job     int64
		attempt int64
	}
	granted := map[lease]bool{}
	takeovers := map[int64][]Event{} // job → its acknowledged takeovers' returns, with the attempt they granted
	var writes []Event               // superseded writes' returns
	for _, e := range events {
		c, ok := calls[key{e.Proc, e.ID}]
		if e.Phase != PhaseReturn || !ok || e.Result != ResultOK && e.Result != ResultSuperseded {
			continue
		}
		switch {
		case (c.Op == OpClaim || c.Op == OpTakeover) && e.Result == ResultOK:
			granted[lease{c.Proc, c.Job, c.Attempt}] = true
			if c.Op == OpTakeover {
				r := e
				r.Job, r.Attempt = c.Job, c.Attempt
				takeovers[c.Job] = append(takeovers[c.Job], r)
			}
		case c.Op == OpWrite && e.Result == ResultSuperseded:
			writes = append(writes, e)
		}
	}
	var z ZombieWrites
	for _, w := range writes {
		c := calls[key{w.Proc, w.ID}]
		if !granted[lease{c.Proc, c.Job, c.Attempt}] {
			continue
		}
		superseded := false
		for _, t := range takeovers[c.Job] {
			if t.Attempt > c.Attempt && t.T < c.T {
				superseded = true
				break
			}
		}
		if !superseded {
			continue
		}
		n := z.of(c.To)
		if n == nil {
			continue
		}
		if w.Batch > 1 {
			n.Batched++
		} else {
			n.Single++
		}
	}
	return z
}

// of is the count of the kind of write-back that moves a job to state, or
// nil for a state no write-back moves a job to.
func (z *ZombieWrites) of(state string) *ZombieCount {
	switch state {
	case "succeeded":
		return &z.Complete
	case "ready":
		return &z.Reschedule
	case "manual_review":
		return &z.ManualReview
	case "failed":
		return &z.Fail
	}
	return nil
}

// Total is how many zombie write-backs were counted.
func (z ZombieWrites) Total() int {
	n := 0
	for _, c := range z.kinds() {
		n += c.count.Single + c.count.Batched
	}
	return n
}

// Missing names each kind of write-back not exercised alone ("fail alone")
// or in a batch ("fail in a batch"), in the order complete, reschedule,
// manual_review, fail; nil when every kind was exercised both ways.
func (z ZombieWrites) Missing() []string {
	var missing []string
	for _, c := range z.kinds() {
		if c.count.Single == 0 {
			missing = append(missing, fmt.Sprintf("%s alone", c.kind))
		}
		if c.count.Batched == 0 {
			missing = append(missing, fmt.Sprintf("%s in a batch", c.kind))
		}
	}
	return missing
}

type kindCount struct {
	kind  string
	count ZombieCount
}

func (z ZombieWrites) kinds() []kindCount {
	return []kindCount{{"complete", z.Complete}, {"reschedule", z.Reschedule}, {"manual_review", z.ManualReview}, {"fail", z.Fail}}
}
