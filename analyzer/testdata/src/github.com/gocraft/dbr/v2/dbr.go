// Package dbr is a minimal stand-in for github.com/gocraft/dbr/v2 (v2.7.6):
// the raw-SQL statements and the update builder, with the real signatures.
package dbr

import (
	"context"
	"database/sql"
	"time"
)

type EventReceiver interface {
	Event(eventName string)
}

type Dialect interface {
	QuoteIdent(id string) string
}

type Connection struct {
	*sql.DB
	Dialect
	EventReceiver
}

func Open(driver, dsn string, log EventReceiver) (*Connection, error) { return &Connection{}, nil }

func (conn *Connection) NewSession(log EventReceiver) *Session { return &Session{} }

type Session struct {
	*Connection
	EventReceiver
	Timeout time.Duration
}

type Tx struct {
	EventReceiver
	Dialect
	*sql.Tx
	Timeout time.Duration
}

func (sess *Session) Begin() (*Tx, error) { return &Tx{}, nil }
func (sess *Session) BeginTx(ctx context.Context, opts *sql.TxOptions) (*Tx, error) {
	return &Tx{}, nil
}
func (tx *Tx) Commit() error            { return nil }
func (tx *Tx) RollbackUnlessCommitted() {}

type Builder interface{}

func Expr(query string, value ...interface{}) Builder { return nil }

type UpdateStmt struct{}

func Update(table string) *UpdateStmt                            { return &UpdateStmt{} }
func (sess *Session) Update(table string) *UpdateStmt            { return &UpdateStmt{} }
func (tx *Tx) Update(table string) *UpdateStmt                   { return &UpdateStmt{} }
func UpdateBySql(query string, value ...interface{}) *UpdateStmt { return &UpdateStmt{} }
func (sess *Session) UpdateBySql(query string, value ...interface{}) *UpdateStmt {
	return &UpdateStmt{}
}
func (tx *Tx) UpdateBySql(query string, value ...interface{}) *UpdateStmt       { return &UpdateStmt{} }
func (b *UpdateStmt) Where(query interface{}, value ...interface{}) *UpdateStmt { return b }
func (b *UpdateStmt) Set(column string, value interface{}) *UpdateStmt          { return b }
func (b *UpdateStmt) SetMap(m map[string]interface{}) *UpdateStmt               { return b }
func (b *UpdateStmt) Exec() (sql.Result, error)                                 { return nil, nil }
func (b *UpdateStmt) ExecContext(ctx context.Context) (sql.Result, error)       { return nil, nil }

type InsertStmt struct{}

func InsertBySql(query string, value ...interface{}) *InsertStmt { return &InsertStmt{} }
func (sess *Session) InsertBySql(query string, value ...interface{}) *InsertStmt {
	return &InsertStmt{}
}
func (tx *Tx) InsertBySql(query string, value ...interface{}) *InsertStmt { return &InsertStmt{} }
func (b *InsertStmt) Exec() (sql.Result, error)                           { return nil, nil }
func (b *InsertStmt) ExecContext(ctx context.Context) (sql.Result, error) { return nil, nil }

type DeleteStmt struct{}

func DeleteBySql(query string, value ...interface{}) *DeleteStmt { return &DeleteStmt{} }
func (sess *Session) DeleteBySql(query string, value ...interface{}) *DeleteStmt {
	return &DeleteStmt{}
}
func (tx *Tx) DeleteBySql(query string, value ...interface{}) *DeleteStmt { return &DeleteStmt{} }
func (b *DeleteStmt) Exec() (sql.Result, error)                           { return nil, nil }

type SelectStmt struct{}

func SelectBySql(query string, value ...interface{}) *SelectStmt { return &SelectStmt{} }
func (sess *Session) SelectBySql(query string, value ...interface{}) *SelectStmt {
	return &SelectStmt{}
}
func (tx *Tx) SelectBySql(query string, value ...interface{}) *SelectStmt { return &SelectStmt{} }
func (b *SelectStmt) LoadOne(value interface{}) error                     { return nil }

// SessionRunner can do anything that a Session can except start a transaction.
type SessionRunner interface {
	SelectBySql(query string, value ...interface{}) *SelectStmt
	InsertBySql(query string, value ...interface{}) *InsertStmt
	Update(table string) *UpdateStmt
	UpdateBySql(query string, value ...interface{}) *UpdateStmt
	DeleteBySql(query string, value ...interface{}) *DeleteStmt
}

var (
	_ SessionRunner = (*Session)(nil)
	_ SessionRunner = (*Tx)(nil)
)

func And(cond ...Builder) Builder                                               { return nil }
func Or(cond ...Builder) Builder                                                { return nil }
func Eq(column string, value interface{}) Builder                               { return nil }
func Neq(column string, value interface{}) Builder                              { return nil }
func Gt(column string, value interface{}) Builder                               { return nil }
func Gte(column string, value interface{}) Builder                              { return nil }
func Lt(column string, value interface{}) Builder                               { return nil }
func Lte(column string, value interface{}) Builder                              { return nil }
func DeleteFrom(table string) *DeleteStmt                                       { return &DeleteStmt{} }
func (sess *Session) DeleteFrom(table string) *DeleteStmt                       { return &DeleteStmt{} }
func (tx *Tx) DeleteFrom(table string) *DeleteStmt                              { return &DeleteStmt{} }
func (b *DeleteStmt) Where(query interface{}, value ...interface{}) *DeleteStmt { return b }
func (b *UpdateStmt) Returning(column ...string) *UpdateStmt                    { return b }

type UpdateBuilder = UpdateStmt
