package schema

import (
	"entgo.io/ent"
	"entgo.io/ent/dialect/entsql"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"

	"github.com/fencekit/fencekit/fencedwrite"
)

// Observation is one piece of external evidence about a refund: a provider
// response (including one that arrived too late for its worker to write), a
// webhook, a reconcile result, an operator's finding. The log is append-only
// (a trigger refuses every change but marking a row processed, and every
// delete) and de-duplicated by dedup_key.
type Observation struct {
	ent.Schema
}

// Fields of the Observation.
func (Observation) Fields() []ent.Field {
	return []ent.Field{
		field.Int64("id").
			Positive().
			Immutable(),
		field.String("dedup_key").
			Unique().
			Immutable().
			MaxLen(191).
			NotEmpty().
			Comment("Identity of the evidence: the provider's event id, or a digest of its content."),
		field.String("operation_key").
			Immutable().
			SchemaType(keyType).
			Validate(identifier),
		field.Int64("job_id").
			Optional().
			Nillable().
			Immutable(),
		field.Int64("attempt").
			Optional().
			Nillable().
			Immutable().
			Comment("The attempt of the worker that saw it; NULL for webhooks and operators."),
		field.Enum("source").
			Values("provider_response", "webhook", "reconcile", "operator").
			Immutable(),
		field.String("provider_refund_id").
			Optional().
			Nillable().
			Immutable().
			MaxLen(255),
		field.Enum("provider_status").
			Values("succeeded", "pending", "rejected", "not_found", "conflict", "reversed").
			Immutable(),
		field.Text("payload").
			Immutable().
			Comment("The raw evidence as received."),
		field.Time("received_at").
			Immutable().
			SchemaType(datetime6).
			Comment("Database UTC time of arrival."),
		field.Time("processed_at").
			Optional().
			Nillable().
			SchemaType(datetime6).
			Comment("When a reconciler acted on it; the only column that may change, once."),
	}
}

// Indexes of the Observation.
func (Observation) Indexes() []ent.Index {
	return []ent.Index{
		index.Fields("processed_at", "id").StorageKey("refund_observations_unprocessed"),
		index.Fields("operation_key", "id").StorageKey("refund_observations_key"),
	}
}

// Annotations of the Observation.
func (Observation) Annotations() []schema.Annotation {
	return []schema.Annotation{
		entsql.Annotation{Table: "refund_observations"},
		fencedwrite.CreateOnly{Hint: "the evidence log is append-only: record with evidence.Record, mark with evidence.MarkProcessed"},
	}
}
