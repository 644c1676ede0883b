// Package badschema is a fenced schema with mistakes, for the extension's
// tests.
package badschema

import (
	"entgo.io/ent"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/field"

	"github.com/fencekit/fencekit/fencedwrite"
)

// Job gets several roles wrong.
type Job struct {
	ent.Schema
}

// Fields of the Job.
func (Job) Fields() []ent.Field {
	return []ent.Field{
		field.Int64("id"),
		field.String("operation_key").Unique().Immutable(),
		field.Enum("state").Values("ready", "running", "succeeded"), // no manual_review, no failed
		field.String("attempt"),                                     // not an int64
		field.Time("lease_until"),                                   // not nullable
	}
}

// Annotations of the Job.
func (Job) Annotations() []schema.Annotation {
	return []schema.Annotation{fencedwrite.Job("operation_key", "amount_minor")}
}
