// Package bun is a minimal stand-in for github.com/uptrace/bun (v1.3.0):
// the raw-SQL entry points and the update builder, with the real
// signatures.
package bun

import (
	"context"
	"database/sql"

	"github.com/uptrace/bun/schema"
)

type DB struct {
	*sql.DB
}

func NewDB(sqldb *sql.DB, dialect any) *DB { return &DB{DB: sqldb} }

func (db *DB) NewUpdate() *UpdateQuery                    { return &UpdateQuery{} }
func (db *DB) NewRaw(query string, args ...any) *RawQuery { return &RawQuery{} }
func (db *DB) Exec(query string, args ...any) (sql.Result, error) {
	return db.ExecContext(context.Background(), query, args...)
}

func (db *DB) ExecContext(
	ctx context.Context, query string, args ...any,
) (sql.Result, error) {
	return nil, nil
}

func (db *DB) Query(query string, args ...any) (*sql.Rows, error) { return nil, nil }

func (db *DB) QueryContext(
	ctx context.Context, query string, args ...any,
) (*sql.Rows, error) {
	return nil, nil
}

func (db *DB) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	return nil
}

func (db *DB) RunInTx(
	ctx context.Context, opts *sql.TxOptions, fn func(ctx context.Context, tx Tx) error,
) error {
	return nil
}

func (db *DB) BeginTx(ctx context.Context, opts *sql.TxOptions) (Tx, error) { return Tx{}, nil }

type Conn struct {
	db *DB
	*sql.Conn
}

func (c Conn) NewRaw(query string, args ...any) *RawQuery { return &RawQuery{} }

func (c Conn) ExecContext(
	ctx context.Context, query string, args ...any,
) (sql.Result, error) {
	return nil, nil
}

type Tx struct {
	ctx context.Context
	db  *DB
	// name is the name of a savepoint
	name string
	*sql.Tx
}

func (tx Tx) Commit() error                                      { return nil }
func (tx Tx) Rollback() error                                    { return nil }
func (tx Tx) NewUpdate() *UpdateQuery                            { return &UpdateQuery{} }
func (tx Tx) NewRaw(query string, args ...any) *RawQuery         { return &RawQuery{} }
func (tx Tx) Exec(query string, args ...any) (sql.Result, error) { return nil, nil }

func (tx Tx) ExecContext(
	ctx context.Context, query string, args ...any,
) (sql.Result, error) {
	return nil, nil
}

func (tx Tx) QueryContext(
	ctx context.Context, query string, args ...any,
) (*sql.Rows, error) {
	return nil, nil
}

func (tx Tx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	return nil
}

type IConn interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

type IDB interface {
	IConn

	NewUpdate() *UpdateQuery
	NewRaw(query string, args ...any) *RawQuery

	BeginTx(ctx context.Context, opts *sql.TxOptions) (Tx, error)
	RunInTx(ctx context.Context, opts *sql.TxOptions, f func(ctx context.Context, tx Tx) error) error
}

var (
	_ IDB = (*DB)(nil)
	_ IDB = (*Tx)(nil)
)

type RawQuery struct{}

func (q *RawQuery) Conn(db IConn) *RawQuery                                   { return q }
func (q *RawQuery) Exec(ctx context.Context, dest ...any) (sql.Result, error) { return nil, nil }
func (q *RawQuery) Scan(ctx context.Context, dest ...any) error               { return nil }

type UpdateQuery struct{}

func (q *UpdateQuery) Model(model any) *UpdateQuery                                    { return q }
func (q *UpdateQuery) Table(tables ...string) *UpdateQuery                             { return q }
func (q *UpdateQuery) Column(columns ...string) *UpdateQuery                           { return q }
func (q *UpdateQuery) Set(query string, args ...any) *UpdateQuery                      { return q }
func (q *UpdateQuery) SetColumn(column string, query string, args ...any) *UpdateQuery { return q }
func (q *UpdateQuery) WherePK(cols ...string) *UpdateQuery                             { return q }
func (q *UpdateQuery) Where(query string, args ...any) *UpdateQuery                    { return q }
func (q *UpdateQuery) WhereOr(query string, args ...any) *UpdateQuery                  { return q }
func (q *UpdateQuery) Returning(query string, args ...any) *UpdateQuery                { return q }
func (q *UpdateQuery) Exec(ctx context.Context, dest ...any) (sql.Result, error)       { return nil, nil }

func (tx Tx) BeginTx(ctx context.Context, _ *sql.TxOptions) (Tx, error) { return tx, nil }

func (tx Tx) RunInTx(
	ctx context.Context, _ *sql.TxOptions, fn func(ctx context.Context, tx Tx) error,
) error {
	return nil
}

func (db *DB) Conn(ctx context.Context) (Conn, error) { return Conn{db: db}, nil }

type (
	// BaseModel provides default metadata embedded into user models.
	BaseModel = schema.BaseModel
)

type Ident string

func (q *UpdateQuery) Value(column string, query string, args ...any) *UpdateQuery { return q }
func (q *UpdateQuery) OmitZero() *UpdateQuery                                      { return q }
func (q *UpdateQuery) Bulk() *UpdateQuery                                          { return q }
func (q *UpdateQuery) WhereGroup(sep string, fn func(*UpdateQuery) *UpdateQuery) *UpdateQuery {
	return q
}
func (q *UpdateQuery) TableExpr(query string, args ...any) *UpdateQuery { return q }
