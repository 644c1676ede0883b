package fakeprovider

import (
	"time"
)

// dueItem is work the server does by itself once its clock reaches at.
type dueItem struct {
	at  time.Time
	seq uint64 // creation order, to break ties
	run func() // runs with s.mu held
}

// schedule queues run for when the server's clock reaches now+d. s.mu is
// held.
func (s *Server) schedule(d time.Duration, run func()) {
	s.dueSeq++
	s.due = append(s.due, dueItem{at: s.cfg.Now().Add(d), seq: s.dueSeq, run: run})
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// RunDue carries out everything due at the server's clock (Config.Now):
// pending refunds to settle or decline, refunds to publish or reverse, held
// answers to release (Fault.Latency), late webhooks to queue for sending. It
// returns how many it carried out, in the order they fell due. Work that
// falls due because of it (a reversal due at once after a settlement) is
// carried out too.
//
// Tests call it after moving their clock, so that nothing happens behind
// their back; the Config.Background loop calls it in real time. The
// webhooks it causes are sent by the server's sender: wait for them with
// WebhooksSent.
func (s *Server) RunDue() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for {
		now := s.cfg.Now()
		i := s.nextDueIndex()
		if i < 0 || s.due[i].at.After(now) {
			return n
		}
		item := s.due[i]
		s.due = append(s.due[:i], s.due[i+1:]...)
		item.run()
		n++
	}
}

// NextDue returns when the earliest work RunDue would carry out falls due,
// and false when none is waiting. Tests advance their clock to it.
func (s *Server) NextDue() (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i := s.nextDueIndex(); i >= 0 {
		return s.due[i].at, true
	}
	return time.Time{}, false
}

// nextDueIndex is the index of the earliest due item, -1 when there is
// none. s.mu is held.
func (s *Server) nextDueIndex() int {
	best := -1
	for i, it := range s.due {
		if best < 0 || it.at.Before(s.due[best].at) || (it.at.Equal(s.due[best].at) && it.seq < s.due[best].seq) {
			best = i
		}
	}
	return best
}

// background runs RunDue whenever work falls due, in real time, until
// Close. It wakes at least once a second in case Config.Now is not
// time.Now.
func (s *Server) background() {
	defer s.bg.Done()
	timer := time.NewTimer(time.Second)
	defer timer.Stop()
	for {
		wait := time.Second
		if next, ok := s.NextDue(); ok {
			wait = min(max(next.Sub(s.cfg.Now()), 0), time.Second)
		}
		timer.Reset(wait)
		select {
		case <-s.done:
			return
		case <-s.wake:
		case <-timer.C:
		}
		s.RunDue()
	}
}
