package fencedrt

import "context"

// Hooks are test signals: functions the runtime calls at the moments a test
// needs to order actors around, instead of sleeping. They travel in the
// context of one call, so concurrent workers each have their own.
type Hooks struct {
	// BeforeClaimCommit runs right before a claim's or a takeover's COMMIT
	// is sent.
	BeforeClaimCommit func()
	// ClaimsCommitting runs right before BeforeClaimCommit with the claims
	// the COMMIT is about to make: when its reply is lost, these are the
	// jobs whose claim may or may not have landed.
	ClaimsCommitting func([]Claimed)
	// BeforeCommit runs right before the runner's COMMIT goes through Ent's
	// commit hooks.
	BeforeCommit func()
	// BeforeReRead runs after a COMMIT whose reply was lost, right before
	// the runner's locking re-read.
	BeforeReRead func()
}

type hooksKey struct{}

// WithHooks returns ctx carrying h for the runtime's calls made with it.
func WithHooks(ctx context.Context, h Hooks) context.Context {
	return context.WithValue(ctx, hooksKey{}, h)
}

type hook int

const (
	hookBeforeClaimCommit hook = iota
	hookBeforeCommit
	hookBeforeReRead
)

func hooksOf(ctx context.Context) Hooks {
	h, _ := ctx.Value(hooksKey{}).(Hooks)
	return h
}

func (h Hooks) claimsCommitting(c []Claimed) {
	if h.ClaimsCommitting != nil {
		h.ClaimsCommitting(c)
	}
}

func (h Hooks) call(which hook) {
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
