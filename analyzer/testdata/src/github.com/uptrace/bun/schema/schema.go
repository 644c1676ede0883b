// Package schema is a minimal stand-in for github.com/uptrace/bun/schema.
package schema

type BaseModel struct{}
