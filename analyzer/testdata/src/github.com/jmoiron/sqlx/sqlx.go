// Package sqlx is a stand-in for github.com/jmoiron/sqlx: the signatures
// fencelint relies on, no behaviour.
package sqlx

import (
	"context"
	"database/sql"
)

// Bind types.
const (
	UNKNOWN = iota
	QUESTION
	DOLLAR
	NAMED
	AT
)

type DB struct{ *sql.DB }

type Tx struct{ *sql.Tx }

type Rows struct{ *sql.Rows }

type Ext interface {
	Exec(query string, args ...any) (sql.Result, error)
	Rebind(string) string
}

type ExtContext interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	Rebind(string) string
}

func (db *DB) Rebind(query string) string                                                { return query }
func (db *DB) MustExec(query string, args ...any) sql.Result                             { return nil }
func (db *DB) MustExecContext(ctx context.Context, query string, args ...any) sql.Result { return nil }
func (db *DB) NamedExec(query string, arg any) (sql.Result, error)                       { return nil, nil }
func (db *DB) NamedExecContext(ctx context.Context, query string, arg any) (sql.Result, error) {
	return nil, nil
}
func (db *DB) NamedQuery(query string, arg any) (*Rows, error)     { return nil, nil }
func (db *DB) Get(dest any, query string, args ...any) error       { return nil }
func (db *DB) Select(dest any, query string, args ...any) error    { return nil }
func (tx *Tx) Rebind(query string) string                          { return query }
func (tx *Tx) NamedExec(query string, arg any) (sql.Result, error) { return nil, nil }
func (tx *Tx) MustExec(query string, args ...any) sql.Result       { return nil }

// Rebind rewrites the ? placeholders of query for bindType.
func Rebind(bindType int, query string) string { return query }

func NamedExec(e Ext, query string, arg any) (sql.Result, error) { return nil, nil }
func NamedExecContext(ctx context.Context, e ExtContext, query string, arg any) (sql.Result, error) {
	return nil, nil
}
func MustExec(e Ext, query string, args ...any) sql.Result { return nil }
func MustExecContext(ctx context.Context, e ExtContext, query string, args ...any) sql.Result {
	return nil
}
