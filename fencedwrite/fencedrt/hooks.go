package fencedrt

import (
	"context"

	"github.com/fencekit/fencekit/fencedwrite"
)

// The test signals (fencedwrite.Hooks) travel in the context of one call.

type hook int

const (
	hookBeforeClaimCommit hook = iota
	hookBeforeCommit
	hookBeforeReRead
)

type hooks fencedwrite.Hooks

func hooksOf(ctx context.Context) hooks { return hooks(fencedwrite.HooksOf(ctx)) }

func (h hooks) claimsCommitting(cs []Claimed) {
	if h.ClaimsCommitting == nil {
		return
	}
	out := make([]fencedwrite.Claiming, len(cs))
	for i, c := range cs {
		out[i] = fencedwrite.Claiming{ID: c.ID, Attempt: c.Attempt}
	}
	h.ClaimsCommitting(out)
}

func (h hooks) call(which hook) {
	var f func()
	switch which {
	case hookBeforeClaimCommit:
		f = h.BeforeClaimCommit
	case hookBeforeCommit:
		f = h.BeforeCommit
	case hookBeforeReRead:
		f = h.BeforeReRead
	}
	if f != nil {
		f()
	}
}
