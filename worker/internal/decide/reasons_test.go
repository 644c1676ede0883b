package decide_test

import (
	"testing"

	"github.com/fencekit/fencekit/operator"
	"github.com/fencekit/fencekit/worker/internal/decide"
)

// Every reason a manual review can have is of a kind the operators' queue
// knows (operator.ReasonKinds), which says in plain words what came back
// and whether the provider may have paid: a reason reworded here without
// its kind would fall into "other" and reach the operator in the worker's
// words only.
func TestReasonKindsKnowTheWorkersReasons(t *testing.T) {
	seen := map[string]bool{}
	for _, table := range [][]row{providerTable, sendRules, reconcileRules, notFoundRules, guards} {
		for _, r := range table {
			d := decide.Decide(r.in)
			if d.Kind != decide.ManualReview {
				continue
			}
			seen[d.Rule] = true
			if k := operator.ReasonKindOf(d.Reason); k.Key == "other" {
				t.Errorf("%s (%s): the operators' queue knows no kind of %q", r.name, d.Rule, d.Reason)
			}
		}
	}
	if len(seen) < 15 {
		t.Fatalf("the tables hold %d manual-review rules: the test is blind", len(seen))
	}
}
