package budget

import (
	"context"
	"database/sql"
)

// WithBeforeCommit returns ctx with f to run right before Take sends its
// COMMIT.
func WithBeforeCommit(ctx context.Context, f func()) context.Context {
	return withHooks(ctx, hooks{beforeCommit: f})
}

// Attach returns the Bucket of an existing budget on db without sending
// anything, so that a test can count or cut Take's bytes alone.
func Attach(db *sql.DB, name string) *Bucket {
	return &Bucket{db: db, name: name}
}
