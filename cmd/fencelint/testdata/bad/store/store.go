// Package store wraps ExecContext with logging, as most teams do: its
// callers in other packages are judged through fencelint's facts.
package store

import (
	"context"
	"database/sql"
	"log"
)

// Exec logs failed statements.
func Exec(ctx context.Context, db *sql.DB, query string, args ...any) error {
	_, err := db.ExecContext(ctx, query, args...)
	if err != nil {
		log.Printf("exec: %v", err)
	}
	return err
}
