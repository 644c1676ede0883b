package fencedwrite

import (
	"fmt"

	"entgo.io/ent"
)

// BypassError is the runtime backstop's refusal of a generic Ent write. It
// matches ErrBypass (and so ErrInvalid).
type BypassError struct {
	Entity string // Ent type, e.g. RefundJob
	Table  string // table, e.g. refund_jobs
	Op     ent.Op // the refused operation
	// Hint says how to write the entity instead; empty for a fenced job
	// table, whose way is the fenced API.
	Hint string
}

func (e *BypassError) Error() string {
	if e.Hint != "" {
		return fmt.Sprintf("%s: %s of %s through Ent's generic builders is refused: %s", e.Table, e.Op, e.Entity, e.Hint)
	}
	return fmt.Sprintf("%s: %s of %s through Ent's generic builders bypasses the fence: "+
		"create jobs with %sClient.Enqueue and change them with a transition of a %sLease (from Claim or Takeover) "+
		"or of a job you read (WakeUp, Resolve*), applied with %sClient.Apply",
		e.Table, e.Op, e.Entity, e.Entity, e.Entity, e.Entity)
}

// Is makes every BypassError match ErrBypass and ErrInvalid.
func (e *BypassError) Is(target error) bool { return target == ErrBypass || target == ErrInvalid }

// CreateOnly marks an Ent schema whose rows Ent's generic builders may
// create but never update or delete: a companion of a fenced job table (the
// ledger, the evidence log) that changes only through its own checked
// statements. The fencedwrite/entext extension installs a hook on the
// generated client that refuses the rest; the database triggers stay the
// last line. Hint says how the entity is changed instead.
type CreateOnly struct {
	Hint string `json:"hint"`
}

// Name implements ent's schema.Annotation.
func (CreateOnly) Name() string { return "FencedCreateOnly" }
