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

// RefundJobAttempt is one attempt of a refund job: which process claimed or
// took it over (or which operator's resolution moved it on), when, and the
// lease it got. The fenced runtime writes it in the claim's own transaction,
// so a committed attempt always has its row and a rolled-back claim never
// does. The log is append-only: a trigger refuses every UPDATE and DELETE,
// and the application's account holds INSERT and SELECT only.
//
// Ent needs a single-column primary key without edges, so id is the
// primary key and (job_id, attempt) is unique.
type RefundJobAttempt struct {
	ent.Schema
}

// Fields of the RefundJobAttempt.
func (RefundJobAttempt) Fields() []ent.Field {
	return []ent.Field{
		field.Int64("id").
			Positive().
			Immutable(),
		field.Int64("job_id").
			Immutable(),
		field.Int64("attempt").
			Immutable().
			Positive().
			Comment("The attempt this claim, takeover or resolution took: the job's fencing token from then on."),
		field.Enum("op").
			Values(fencedwrite.AttemptClaim, fencedwrite.AttemptTakeover, fencedwrite.AttemptResolution).
			Immutable(),
		field.String("holder").
			Immutable().
			SchemaType(map[string]string{dialect.MySQL: "varchar(255)"}).
			Validate(fencedwrite.ValidHolder).
			Comment("The process that took the attempt (fencedwrite.ClaimOptions.Holder), or the operator who resolved."),
		field.Time("claimed_at").
			Immutable().
			SchemaType(datetime6).
			Comment("Database UTC time of the claim, takeover or resolution."),
		field.Time("lease_until").
			Optional().
			Nillable().
			Immutable().
			SchemaType(datetime6).
			Comment("The lease the attempt got; NULL for a resolution."),
	}
}

// Indexes of the RefundJobAttempt.
func (RefundJobAttempt) Indexes() []ent.Index {
	return []ent.Index{
		// A job's timeline, and one row per attempt.
		index.Fields("job_id", "attempt").Unique().StorageKey("refund_job_attempts_job"),
		// The dashboard's fleet-wide takeovers over a window:
		// op = 'takeover' AND claimed_at >= ?.
		index.Fields("op", "claimed_at").StorageKey("refund_job_attempts_op"),
	}
}

// Annotations of the RefundJobAttempt.
func (RefundJobAttempt) Annotations() []schema.Annotation {
	return []schema.Annotation{
		entsql.Annotation{Table: "refund_job_attempts"},
		fencedwrite.CreateOnly{Hint: "the attempts log is append-only and written by the fenced claims and resolutions only"},
	}
}
