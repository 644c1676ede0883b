// Package generatednames fences a table whose names come only from the
// generated package's constants, with no -tables flag.
package generatednames

import (
	"context"
	"database/sql"

	"example.com/payouts/ent"
)

var _ = ent.PayoutFencedTable

func settle(ctx context.Context, db *sql.DB, id, version int64) {
	db.ExecContext(ctx, "UPDATE payouts SET status = 'paid', declared_version = ? WHERE id = ? AND status = 'sent' AND version = ?", version, id, version)
	db.ExecContext(ctx, "UPDATE payouts SET status = 'sent' WHERE id = ?", id)                                                                     // want `unfenced UPDATE of payouts: WHERE lacks status = \? and version = \?`
	db.ExecContext(ctx, "UPDATE payouts SET declared_version = version WHERE id = ? AND status = 'sent' AND version = ?", id, version)             // want `declared_version`
	db.ExecContext(ctx, "UPDATE payouts SET status = 'paid' WHERE id = ? AND status = 'sent' AND version = ? AND held_until > NOW()", id, version) // want `held_until`
}
