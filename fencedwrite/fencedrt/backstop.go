package fencedrt

import (
	"context"

	"entgo.io/ent"

	"github.com/fencekit/fencekit/fencedwrite"
)

// Backstop returns the hook that the generated client installs for every
// fenced entity, in its own constructor: it refuses every mutation that goes
// through Ent's generic builders (Create, Update, UpdateOne, Delete, ...).
// The fenced layer writes with its own statements and never reaches it. The
// database trigger stays the last line of defence for writes that bypass Ent
// altogether.
func Backstop(entity, table string) ent.Hook {
	return func(ent.Mutator) ent.Mutator {
		return ent.MutateFunc(func(_ context.Context, m ent.Mutation) (ent.Value, error) {
			return nil, &fencedwrite.BypassError{Entity: entity, Table: table, Op: m.Op()}
		})
	}
}

// CreateOnly returns the hook that the generated client installs for an
// entity annotated fencedwrite.CreateOnly: creates go through, every update
// and delete is refused.
func CreateOnly(entity, table, hint string) ent.Hook {
	return func(next ent.Mutator) ent.Mutator {
		return ent.MutateFunc(func(ctx context.Context, m ent.Mutation) (ent.Value, error) {
			if m.Op().Is(ent.OpCreate) {
				return next.Mutate(ctx, m)
			}
			return nil, &fencedwrite.BypassError{Entity: entity, Table: table, Op: m.Op(), Hint: hint}
		})
	}
}
