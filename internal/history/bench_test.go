package history

import (
	"fmt"
	"testing"
)

// syntheticRun is a legal run of jobs jobs, a new one starting every 0.2 ms
// on one of 8 workers, each with 6 operations over 7 ms that overlap their
// neighbours: claim, provider send, reschedule, a claim whose COMMIT reply was
// lost (it landed), a takeover overlapping it, and the write that settles it.
func syntheticRun(jobs int64) ([]Event, map[int64]Final) {
	s := new(script)
	final := make(map[int64]Final, jobs)
	for j := int64(1); j <= jobs; j++ {
		// times in units of 0.1 ms, as the script takes milliseconds
		at := j * 2
		p, q := fmt.Sprintf("w%d.1", j%8), fmt.Sprintf("w%d.1", (j+3)%8)
		s.add(p, at, at+10, claim(j, 1), ResultOK).
			add(p, at+11, at+14, Event{Op: OpProvider, Job: j, Attempt: 1, Detail: "send"}, ResultOK).
			add(p, at+15, at+25, write(j, 1, "ready"), ResultOK).
			add(p, at+30, at+40, claim(j, 2), ResultUnknown).
			add(q, at+35, at+50, takeover(j, 3), ResultOK).
			add(q, at+60, at+70, write(j, 3, "succeeded"), ResultOK)
		final[j] = Final{"succeeded", 3}
	}
	for i := range s.events {
		s.events[i].T = epoch + (s.events[i].T-epoch)/10
	}
	return s.events, final
}

// BenchmarkCheck checks runs of 5,000, 20,000 and 80,000 jobs: the time per
// job should stay flat.
func BenchmarkCheck(b *testing.B) {
	for _, jobs := range []int64{5_000, 20_000, 80_000} {
		b.Run(fmt.Sprintf("jobs=%d", jobs), func(b *testing.B) {
			events, final := syntheticRun(jobs)
			if r := Check(events, final, 0); !r.OK || r.Jobs != int(jobs) || r.Ops != 5*int(jobs) || r.Unknown != int(jobs) {
				b.Fatalf("synthetic run: %s, %d jobs, %d ops, %d unknown", r.Summary(), r.Jobs, r.Ops, r.Unknown)
			}
			for b.Loop() {
				Check(events, final, 0)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(jobs), "ns/job")
		})
	}
}
