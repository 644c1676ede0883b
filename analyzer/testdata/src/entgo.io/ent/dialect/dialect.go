// Package dialect is a stand-in for entgo.io/ent/dialect.
package dialect

import "context"

// Driver is the shape of Ent's dialect.Driver.
type Driver interface {
	Exec(ctx context.Context, query string, args, v any) error
	Query(ctx context.Context, query string, args, v any) error
	Close() error
}
