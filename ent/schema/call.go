package schema

import (
	"entgo.io/ent"
	"entgo.io/ent/dialect"
	"entgo.io/ent/dialect/entsql"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"

	"github.com/fencekit/fencekit/fencedwrite"
)

// RefundJobCall is the provider call of one attempt of a refund job, as the
// worker that held the attempt wrote it back: what it asked (a send or a
// lookup), and what came back, or the fault (a timeout, a cut connection, a
// 5xx). A worker makes one call per claim, and records it in the
// transaction of its write-back, so a write-back that lands always has its
// call; a write-back the fence refused keeps its answer as evidence
// instead (refund_observations). The operators' timeline reads it: every
// provider call with its answer or fault. The log is append-only: a
// trigger refuses every UPDATE and DELETE, and the application's account
// holds INSERT and SELECT only.
type RefundJobCall struct {
	ent.Schema
}

// Fields of the RefundJobCall.
func (RefundJobCall) Fields() []ent.Field {
	return []ent.Field{
		field.Int64("id").
			Positive().
			Immutable(),
		field.Int64("job_id").
			Immutable(),
		field.Int64("attempt").
			Immutable().
			Positive().
			Comment("The attempt whose holder made the call."),
		field.Enum("kind").
			Values("send", "lookup").
			Immutable().
			Comment("send: the refund request (the operation key as its idempotency key); lookup: a reconcile."),
		field.String("outcome").
			Immutable().
			SchemaType(map[string]string{dialect.MySQL: "varchar(32)"}).
			Comment("What came back, in one word: succeeded, pending, rejected, not_found, conflict, rate_limited, already_refunded, unknown (a fault: the outcome is not known), refused (the client's own checks), no_lookup (nothing could be asked)."),
		field.String("provider_refund_id").
			Optional().
			Nillable().
			Immutable().
			SchemaType(map[string]string{dialect.MySQL: "varchar(255)"}),
		field.String("detail").
			Immutable().
			SchemaType(map[string]string{dialect.MySQL: "varchar(1024)"}).
			Comment("The answer or the fault in words, as the provider's text said it (attacker-controlled: shown inert)."),
		field.Time("answered_at").
			Immutable().
			SchemaType(datetime6).
			Comment("Database UTC time of the write-back that recorded the call: when the answer was in."),
	}
}

// Indexes of the RefundJobCall.
func (RefundJobCall) Indexes() []ent.Index {
	return []ent.Index{
		// A job's timeline; one call per attempt.
		index.Fields("job_id", "attempt").Unique().StorageKey("refund_job_calls_job"),
	}
}

// Annotations of the RefundJobCall.
func (RefundJobCall) Annotations() []schema.Annotation {
	return []schema.Annotation{
		entsql.Annotation{Table: "refund_job_calls"},
		fencedwrite.CreateOnly{Hint: "the calls log is append-only and written by the worker's write-backs only"},
	}
}
