// Package store is the legacy codebase's other package.
package store

import (
	"context"
	"database/sql"
)

// Store writes jobs.
type Store struct{ db *sql.DB }

// Fail fences on state only.
func (s *Store) Fail(ctx context.Context, id int64) error {
	_, err := s.db.ExecContext(ctx, "UPDATE refund_jobs SET state = 'failed' WHERE id = ? AND state = 'running'", id)
	return err
}
