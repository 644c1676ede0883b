package budget

import "context"

// hooks are test signals that travel in the context of one call, so that
// concurrent callers each have their own (export_test.go sets them).
type hooks struct {
	// beforeCommit runs right before Take sends its COMMIT.
	beforeCommit func()
}

type hooksKey struct{}

type hook int

const hookBeforeCommit hook = iota

func withHooks(ctx context.Context, h hooks) context.Context {
	return context.WithValue(ctx, hooksKey{}, h)
}

func hooksOf(ctx context.Context) hooks {
	h, _ := ctx.Value(hooksKey{}).(hooks)
	return h
}

func (h hooks) call(which hook) {
	if which == hookBeforeCommit && h.beforeCommit != nil {
		h.beforeCommit()
	}
}
