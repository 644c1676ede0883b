package history

import (
	"slices"
	"testing"
)

// inBatch is e written back in a transaction with n write-backs.
func inBatch(e Event, n int) Event {
	e.Batch = n
	return e
}

func TestZombies(t *testing.T) {
	// w1.1 claims job 1 at attempt 1 and is frozen; w2.1 takes the job over
	// (attempt 2), and its takeover returns at 2010 ms.
	frozen := func() *script {
		return new(script).
			add("w1.1", 0, 10, claim(1, 1), ResultOK).
			add("w2.1", 2000, 2010, takeover(1, 2), ResultOK)
	}
	for _, tc := range []struct {
		name string
		s    *script
		want ZombieWrites
	}{
		{"a completion sent alone after the takeover returned and refused counts as a zombie completion alone",
			frozen().add("w1.1", 2020, 2030, inBatch(write(1, 1, "succeeded"), 1), ResultSuperseded),
			ZombieWrites{Complete: ZombieCount{Single: 1}}},
		{"a write-back applied outside any batch counts as alone",
			frozen().add("w1.1", 2020, 2030, write(1, 1, "succeeded"), ResultSuperseded),
			ZombieWrites{Complete: ZombieCount{Single: 1}}},
		{"a completion refused in a batch of three counts as batched",
			frozen().add("w1.1", 2020, 2030, inBatch(write(1, 1, "succeeded"), 3), ResultSuperseded),
			ZombieWrites{Complete: ZombieCount{Batched: 1}}},
		{"each target state counts as its kind of write-back",
			new(script).
				add("w1.1", 0, 10, claim(1, 1), ResultOK).
				add("w1.1", 0, 10, claim(2, 1), ResultOK).
				add("w1.1", 0, 10, claim(3, 1), ResultOK).
				add("w2.1", 2000, 2010, takeover(1, 2), ResultOK).
				add("w2.1", 2000, 2010, takeover(2, 2), ResultOK).
				add("w2.1", 2000, 2010, takeover(3, 2), ResultOK).
				add("w1.1", 2020, 2030, inBatch(write(1, 1, "ready"), 3), ResultSuperseded).
				add("w1.1", 2020, 2030, inBatch(write(2, 1, "manual_review"), 3), ResultSuperseded).
				add("w1.1", 2020, 2030, inBatch(write(3, 1, "failed"), 1), ResultSuperseded),
			ZombieWrites{Reschedule: ZombieCount{Batched: 1}, ManualReview: ZombieCount{Batched: 1}, Fail: ZombieCount{Single: 1}}},
		{"a write-back sent before the takeover returned does not count: the history cannot show it came after",
			frozen().add("w1.1", 2005, 2030, inBatch(write(1, 1, "succeeded"), 1), ResultSuperseded),
			ZombieWrites{}},
		{"a zombie write-back that landed does not count",
			frozen().add("w1.1", 2020, 2030, inBatch(write(1, 1, "succeeded"), 1), ResultOK),
			ZombieWrites{}},
		{"a write-back whose outcome is unknown does not count",
			frozen().add("w1.1", 2020, 2030, inBatch(write(1, 1, "succeeded"), 1), ResultUnknown),
			ZombieWrites{}},
		{"a takeover whose COMMIT reply was lost does not count as committed",
			new(script).
				add("w1.1", 0, 10, claim(1, 1), ResultOK).
				add("w2.1", 2000, 2010, takeover(1, 2), ResultUnknown).
				add("w1.1", 2020, 2030, inBatch(write(1, 1, "succeeded"), 1), ResultSuperseded),
			ZombieWrites{}},
		{"a write-back of a lease its process was never granted does not count",
			new(script).
				add("w1.1", 0, 10, claim(1, 1), ResultUnknown).
				add("w2.1", 2000, 2010, takeover(1, 2), ResultOK).
				add("w1.1", 2020, 2030, inBatch(write(1, 1, "succeeded"), 1), ResultSuperseded),
			ZombieWrites{}},
		{"only a takeover to a later attempt than the write-back's supersedes it",
			new(script).
				add("w2.1", 0, 10, claim(1, 1), ResultOK).
				add("w1.1", 2000, 2010, takeover(1, 2), ResultOK).
				add("w1.1", 2020, 2030, inBatch(write(1, 2, "succeeded"), 1), ResultSuperseded),
			ZombieWrites{}},
		{"another job's takeover does not supersede a write-back",
			new(script).
				add("w1.1", 0, 10, claim(1, 1), ResultOK).
				add("w2.1", 2000, 2010, takeover(2, 2), ResultOK).
				add("w1.1", 2020, 2030, inBatch(write(1, 1, "succeeded"), 1), ResultSuperseded),
			ZombieWrites{}},
		{"a takeover by the zombie's own process counts: its frozen goroutine still holds the old lease",
			new(script).
				add("w1.1", 0, 10, claim(1, 1), ResultOK).
				add("w1.1", 2000, 2010, takeover(1, 2), ResultOK).
				add("w1.1", 2020, 2030, inBatch(write(1, 1, "succeeded"), 2), ResultSuperseded),
			ZombieWrites{Complete: ZombieCount{Batched: 1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Zombies(tc.s.events); got != tc.want {
				t.Errorf("Zombies = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestZombieWritesMissing(t *testing.T) {
	for _, tc := range []struct {
		name string
		z    ZombieWrites
		want []string
	}{
		{"nothing exercised misses every kind alone and in a batch", ZombieWrites{},
			[]string{"complete alone", "complete in a batch", "reschedule alone", "reschedule in a batch",
				"manual_review alone", "manual_review in a batch", "fail alone", "fail in a batch"}},
		{"every kind exercised both ways misses nothing", ZombieWrites{
			Complete: ZombieCount{1, 1}, Reschedule: ZombieCount{2, 1}, ManualReview: ZombieCount{1, 3}, Fail: ZombieCount{1, 1}}, nil},
		{"a kind exercised only alone misses it in a batch", ZombieWrites{
			Complete: ZombieCount{1, 1}, Reschedule: ZombieCount{1, 1}, ManualReview: ZombieCount{1, 0}, Fail: ZombieCount{1, 1}},
			[]string{"manual_review in a batch"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.z.Missing(); !slices.Equal(got, tc.want) {
				t.Errorf("Missing() = %q, want %q", got, tc.want)
			}
			if got := tc.z.Total(); (got == 0) != (tc.z == ZombieWrites{}) {
				t.Errorf("Total() = %d for %+v", got, tc.z)
			}
		})
	}
}
