package inbox

import (
	"slices"
	"testing"
)

// Puts never block, however many come before the receiver wakes, and the
// receiver takes them all, in the order they came.
func TestPutsWakeTheReceiverAndTakeKeepsTheirOrder(t *testing.T) {
	b := New[int]()
	var want []int
	for i := range 100 {
		b.Put(i)
		want = append(want, i)
	}
	<-b.Ready()
	if got := b.Take(); !slices.Equal(got, want) {
		t.Fatalf("took %v, want 0 to 99 in order", got)
	}
	select {
	case <-b.Ready():
		t.Fatal("ready again with nothing put since")
	default:
	}
	if got := b.Take(); len(got) != 0 {
		t.Fatalf("took %v from an empty inbox", got)
	}
	b.Put(7)
	<-b.Ready()
	if got := b.Take(); !slices.Equal(got, []int{7}) {
		t.Fatalf("took %v, want [7]", got)
	}
}
