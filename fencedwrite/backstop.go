package fencedwrite

import (
	"context"
	"fmt"

	"entgo.io/ent"
)

// BypassError is the runtime backstop's refusal of a generic Ent write.
type BypassError struct {
	Entity string // Ent type, e.g. RefundJob
	Table  string // table, e.g. refund_jobs
	Op     ent.Op // the refused operation
}

func (e *BypassError) Error() string {
	return fmt.Sprintf("%s: %s of %s through Ent's generic builders bypasses the fence: "+
		"create jobs with %sClient.Enqueue and change them with a transition of a %sLease (from Claim or Takeover) "+
		"or of a job you read (WakeUp, Resolve*), applied with %sClient.Apply",
		e.Table, e.Op, e.Entity, e.Entity, e.Entity, e.Entity)
}

// Is makes every BypassError match ErrBypass.
func (e *BypassError) Is(target error) bool { return target == ErrBypass }

// Backstop returns the hook that the generated client installs for every
// fenced entity, in its own constructor: it refuses every mutation that goes
// through Ent's generic builders (Create, Update, UpdateOne, Delete, ...).
// The fenced layer writes with its own statements and never reaches it. The
// database trigger stays the last line of defence for writes that bypass Ent
// altogether.
func Backstop(entity, table string) ent.Hook {
	return func(ent.Mutator) ent.Mutator {
		return ent.MutateFunc(func(_ context.Context, m ent.Mutation) (ent.Value, error) {
			return nil, &BypassError{Entity: entity, Table: table, Op: m.Op()}
		})
	}
}
