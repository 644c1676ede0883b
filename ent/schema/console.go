package schema

import (
	"entgo.io/ent"
	"entgo.io/ent/dialect"
	"entgo.io/ent/dialect/entsql"
	"entgo.io/ent/schema"
	"entgo.io/ent/schema/field"
	"entgo.io/ent/schema/index"
)

// ConsoleSession is one operator's signed-in session in the console, kept
// in the database so that a restart or a second console process keeps the
// operator signed in (package operator, sessions.go). The table holds the
// SHA-256 of the session token, never the token: whoever reads the table
// cannot sign in with it. A session ends when it expires (idle or at its
// maximum age), on sign-out, or when the operator's roles change: ended_at
// and end_reason record which; rows are never deleted by the application.
type ConsoleSession struct {
	ent.Schema
}

// Fields of the ConsoleSession.
func (ConsoleSession) Fields() []ent.Field {
	return []ent.Field{
		field.Int64("id").
			Positive().
			Immutable(),
		field.String("token_hash").
			Unique().
			Immutable().
			SchemaType(map[string]string{dialect.MySQL: "char(64)"}).
			Comment("Hex SHA-256 of the session token the browser holds."),
		field.String("operator").
			Immutable().
			SchemaType(map[string]string{dialect.MySQL: "varchar(128)"}),
		field.String("roles").
			Immutable().
			SchemaType(map[string]string{dialect.MySQL: "varchar(255)"}).
			Comment("The operator's roles at sign-in: a session whose roles differ from the users file's ends."),
		field.Time("created_at").
			Immutable().
			SchemaType(datetime6),
		field.Time("seen_at").
			SchemaType(datetime6).
			Comment("Last use, at most a minute stale: a session unused for the idle time ends."),
		field.Time("expires_at").
			Immutable().
			SchemaType(datetime6).
			Comment("The session's maximum age: it ends then, used or not."),
		field.Time("ended_at").
			Optional().
			Nillable().
			SchemaType(datetime6),
		field.String("end_reason").
			Optional().
			Nillable().
			SchemaType(map[string]string{dialect.MySQL: "varchar(64)"}),
	}
}

// Indexes of the ConsoleSession.
func (ConsoleSession) Indexes() []ent.Index {
	return []ent.Index{
		// Ending every live session of an operator (sign-out everywhere,
		// roles changed).
		index.Fields("operator", "ended_at").StorageKey("console_sessions_operator"),
	}
}

// Annotations of the ConsoleSession.
func (ConsoleSession) Annotations() []schema.Annotation {
	return []schema.Annotation{entsql.Annotation{Table: "console_sessions"}}
}

// ReviewAssignment is an operator's "I'm on it" on a job in manual review,
// shown to the other operators: one row per job, taken over by the next
// operator who says so, released when the operator lets go. It holds while
// the job is in manual review at the attempt it was taken on.
type ReviewAssignment struct {
	ent.Schema
}

// Fields of the ReviewAssignment.
func (ReviewAssignment) Fields() []ent.Field {
	return []ent.Field{
		field.Int64("id").
			Positive().
			Immutable(),
		field.Int64("job_id").
			Unique().
			Immutable(),
		field.String("operator").
			SchemaType(map[string]string{dialect.MySQL: "varchar(128)"}),
		field.Int64("attempt").
			Comment("The job's attempt when the operator took it: the mark holds only while the job is in manual review at it."),
		field.Time("since").
			SchemaType(datetime6),
		field.Time("released_at").
			Optional().
			Nillable().
			SchemaType(datetime6),
	}
}

// Annotations of the ReviewAssignment.
func (ReviewAssignment) Annotations() []schema.Annotation {
	return []schema.Annotation{entsql.Annotation{Table: "review_assignments"}}
}
