package kafka

import (
	"testing"

	"pgregory.net/rapid"
)

// Whatever order the hints are judged in, a partition's commit point never
// passes a record that was not judged, never moves back, and reaches the
// end once every record was judged.
func TestTrackCommitsTheJudgedPrefixOnly(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		tr := &track{owned: true}
		first := rapid.Int64Range(0, 1000).Draw(t, "first offset")
		n := rapid.IntRange(1, 50).Draw(t, "records")
		var entries []*entry
		offset := first
		for i := range n {
			offset += rapid.Int64Range(1, 3).Draw(t, "gap") // compacted or transaction-marker offsets leave gaps
			entries = append(entries, tr.add(offset, int32(i/10)))
		}
		order := rapid.Permutation(entries).Draw(t, "judging order")
		judged := map[*entry]bool{}
		var at int64 = -1
		for _, e := range order {
			judged[e] = true
			got, moved := tr.judge(e)
			if !moved {
				continue
			}
			if got.Offset <= at {
				t.Fatalf("the commit point moved back or stayed: %d after %d", got.Offset, at)
			}
			at = got.Offset
			for _, p := range entries {
				if p.offset < at && !judged[p] {
					t.Fatalf("commit point %d passes offset %d, not judged", at, p.offset)
				}
			}
		}
		if last := entries[len(entries)-1]; at != last.offset+1 {
			t.Fatalf("every record judged, commit point %d, want %d", at, last.offset+1)
		}
		if len(tr.pending) != 0 {
			t.Fatalf("%d records still pending", len(tr.pending))
		}
	})
}
