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

// datetime6 stores a UTC time with microseconds; Ent's default on MySQL is a
// whole-second timestamp.
var datetime6 = map[string]string{dialect.MySQL: "datetime(6)"}

// RefundJob is one refund request's job: the queue row that workers claim,
// take over, and settle. Only the generated fenced API writes it; see
// fencedwrite.Annotation for the role of each column.
type RefundJob struct {
	ent.Schema
}

// Fields of the RefundJob.
func (RefundJob) Fields() []ent.Field {
	return []ent.Field{
		field.Int64("id").
			Positive().
			Immutable(),
		field.String("operation_key").
			Unique().
			Immutable().
			SchemaType(keyType).
			Validate(identifier).
			Comment("Business identity of the refund request; sent to the provider as the idempotency key. Never changes, never carries the attempt."),
		field.String("payment_ref").
			Immutable().
			SchemaType(keyType).
			Validate(identifier).
			Comment("The payment being refunded."),
		field.Int64("amount_minor").
			Immutable().
			Validate(amountMinor).
			Comment("Refund amount in the currency's minor units."),
		field.String("currency").
			Immutable().
			SchemaType(map[string]string{dialect.MySQL: "char(3)"}).
			Validate(currencyCode).
			Comment("ISO 4217 code."),
		field.Enum("state").
			Values(fencedwrite.StateReady, fencedwrite.StateRunning, fencedwrite.StateSucceeded,
				fencedwrite.StateManualReview, fencedwrite.StateFailed).
			Default(fencedwrite.StateReady),
		field.Int64("attempt").
			Default(0).
			NonNegative().
			Comment("Fencing token: +1 on every claim, takeover and operator resolution, under the row lock."),
		field.Int64("writer_attempt").
			Optional().
			Nillable().
			Comment("The attempt an UPDATE declares it holds; checked and cleared by the trigger, so always NULL at rest."),
		field.Time("lease_until").
			Optional().
			Nillable().
			SchemaType(datetime6).
			Comment("Database UTC time after which another worker may take over; NULL when not leased."),
		field.Enum("next_action").
			Values(fencedwrite.ActionRefund, fencedwrite.ActionReconcile).
			Default(fencedwrite.ActionRefund),
		field.Time("next_run_at").
			SchemaType(datetime6).
			Comment("When a ready job becomes due (database UTC time)."),
		field.String("provider_refund_id").
			Optional().
			Nillable().
			MaxLen(255).
			Comment("The provider's id for the refund, saved as soon as it is revealed, even on a pending answer."),
		field.Time("key_first_used_at").
			Optional().
			Nillable().
			SchemaType(datetime6).
			Comment("When the idempotency key was first sent; the key's window is measured from it."),
		field.Time("last_send_at").
			Optional().
			Nillable().
			SchemaType(datetime6).
			Comment("When the latest claim that may have sent a refund request committed; the lookup-lag window is measured from it."),
		field.Text("last_error").
			Optional().
			Nillable(),
		field.Text("review_reason").
			Optional().
			Nillable(),
		field.Text("review_evidence").
			Optional().
			Nillable(),
		field.Time("created_at").
			Immutable().
			SchemaType(datetime6),
		field.Time("updated_at").
			SchemaType(datetime6),
	}
}

// Indexes of the RefundJob: one for each scheduler scan, and the
// operators' views and searches.
func (RefundJob) Indexes() []ent.Index {
	return []ent.Index{
		// Due ready jobs: state = 'ready' AND next_run_at <= now.
		index.Fields("state", "next_run_at").StorageKey("refund_jobs_pending"),
		// Due reconciles, claimed before fresh sends:
		// state = 'ready' AND next_action = 'reconcile' AND next_run_at <= now.
		index.Fields("state", "next_action", "next_run_at").StorageKey("refund_jobs_reconcile_due"),
		// Expired leases: state = 'running' AND lease_until < now.
		index.Fields("state", "lease_until").StorageKey("refund_jobs_lease"),
		// The operators' views (package operator): the manual review queue
		// and a state's jobs, least recently changed first,
		// state = ? ORDER BY updated_at, id (InnoDB appends the id).
		index.Fields("state", "updated_at").StorageKey("refund_jobs_state_changed"),
		// Search by payment and by the provider's refund id.
		index.Fields("payment_ref").StorageKey("refund_jobs_payment"),
		index.Fields("provider_refund_id").StorageKey("refund_jobs_provider_refund"),
	}
}

// Annotations of the RefundJob.
func (RefundJob) Annotations() []schema.Annotation {
	return []schema.Annotation{
		entsql.Annotation{Table: "refund_jobs"},
		fenced(),
	}
}

// fenced is the job table's annotation: the conventional names, and the
// attempts log (RefundJobAttempt).
func fenced() fencedwrite.Annotation {
	a := fencedwrite.Job("operation_key", "payment_ref", "amount_minor", "currency")
	a.Attempts = "refund_job_attempts"
	return a
}
