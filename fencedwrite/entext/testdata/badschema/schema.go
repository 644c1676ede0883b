// Package badschema is a fenced schema with mistakes, for the extension's
// tests.
package badschema

import (
	"entgo.io/ent"
	"entgo.io/ent/dialect/entsql"
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
	a := fencedwrite.Job("operation_key", "amount_minor")
	a.Attempts = "job_attempts"
	return []schema.Annotation{a}
}

// JobAttempt is Job's attempts log, with mistakes.
type JobAttempt struct {
	ent.Schema
}

// Fields of the JobAttempt.
func (JobAttempt) Fields() []ent.Field {
	return []ent.Field{
		field.Int64("job_id").Immutable(),
		field.Int64("attempt").Immutable(),
		field.Enum("op").Values("claim", "takeover").Immutable(), // no resolution
		field.String("holder"),                                   // mutable
		field.Time("claimed_at").Immutable(),
		// no lease_until
	}
}

// Annotations of the JobAttempt.
func (JobAttempt) Annotations() []schema.Annotation {
	return []schema.Annotation{entsql.Annotation{Table: "job_attempts"}}
}

// Upload names a send action its next_action enum lacks.
type Upload struct {
	ent.Schema
}

// Fields of the Upload.
func (Upload) Fields() []ent.Field {
	return []ent.Field{
		field.Int64("id"),
		field.Enum("next_action").Values("refund", "reconcile"), // no upload
	}
}

// Annotations of the Upload.
func (Upload) Annotations() []schema.Annotation {
	a := fencedwrite.Job("operation_key", "amount_minor")
	a.Send = "upload"
	return []schema.Annotation{a}
}

// Echo names reconcile as the action that sends.
type Echo struct {
	ent.Schema
}

// Fields of the Echo.
func (Echo) Fields() []ent.Field {
	return []ent.Field{field.Int64("id")}
}

// Annotations of the Echo.
func (Echo) Annotations() []schema.Annotation {
	a := fencedwrite.Job("operation_key", "amount_minor")
	a.Send = fencedwrite.ActionReconcile
	return []schema.Annotation{a}
}
