package schema

import (
	"time"

	"entgo.io/ent"
	"entgo.io/ent/dialect"
	"entgo.io/ent/dialect/entsql"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/field"

	"github.com/fencekit/fencekit/fencedwrite"
)

// Refund is the business ledger: one row per approved refund request. The
// job's completion updates it in the same transaction.
type Refund struct {
	ent.Schema
}

// Fields of the Refund.
func (Refund) Fields() []ent.Field {
	now := func() time.Time { return time.Now().UTC() }
	return []ent.Field{
		field.Int64("id").
			Positive().
			Immutable(),
		field.String("operation_key").
			Unique().
			Immutable().
			SchemaType(keyType).
			Validate(identifier),
		field.String("payment_ref").
			Immutable().
			SchemaType(keyType).
			Validate(identifier),
		field.Int64("amount_minor").
			Immutable().
			Validate(amountMinor),
		field.String("currency").
			Immutable().
			SchemaType(map[string]string{dialect.MySQL: "char(3)"}).
			Validate(currencyCode),
		field.Enum("status").
			Values("requested", "refunded", "failed").
			Default("requested"),
		field.String("provider_refund_id").
			Optional().
			Nillable().
			MaxLen(255),
		field.Time("settled_at").
			Optional().
			Nillable().
			SchemaType(datetime6),
		field.Time("created_at").
			Immutable().
			Default(now).
			SchemaType(datetime6),
		field.Time("updated_at").
			Default(now).
			UpdateDefault(now).
			SchemaType(datetime6),
	}
}

// Annotations of the Refund.
func (Refund) Annotations() []schema.Annotation {
	return []schema.Annotation{
		entsql.Annotation{Table: "refunds"},
		fencedwrite.CreateOnly{Hint: "a ledger row settles only with its job: use ledger.Refunded or ledger.Failed in the job's Apply"},
	}
}
