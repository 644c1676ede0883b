//go:build fencekit_broken_fence

package fencedrt

import "strings"

// This file is compiled only with the build tag fencekit_broken_fence, into
// the deliberately broken refundd that TestChaosCatchesABrokenFence runs:
// its complete forgets the attempt it holds, the way a careless hand-written
// UPDATE would. It drops the attempt predicate and declares whatever attempt
// the row is at, so the database trigger sees a well-formed declaration and
// lets a zombie's completion through. Never build it otherwise.
func init() {
	breakFence = func(op Op, query string, params []Param) (string, []Param) {
		if op != OpComplete && op != OpCompleteMany {
			return query, params
		}
		query = strings.Replace(query, "`writer_attempt` = ?", "`writer_attempt` = `attempt`", 1)
		query = strings.TrimSuffix(query, " AND `attempt` = ?")
		var kept []Param
		for _, p := range params {
			if p != ParamWriter && p != ParamAttempt {
				kept = append(kept, p)
			}
		}
		return query, kept
	}
}
