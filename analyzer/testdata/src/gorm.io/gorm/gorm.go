// Package gorm is a stand-in for gorm.io/gorm: the signatures fencelint
// relies on, no behaviour.
package gorm

import (
	"context"

	"gorm.io/gorm/clause"
)

// DB is gorm's chainable handle.
type DB struct {
	Error        error
	RowsAffected int64
}

func (db *DB) WithContext(ctx context.Context) *DB                  { return db }
func (db *DB) Debug() *DB                                           { return db }
func (db *DB) Session(*Session) *DB                                 { return db }
func (db *DB) Table(name string, args ...any) *DB                   { return db }
func (db *DB) Model(value any) *DB                                  { return db }
func (db *DB) Where(query any, args ...any) *DB                     { return db }
func (db *DB) Or(query any, args ...any) *DB                        { return db }
func (db *DB) Not(query any, args ...any) *DB                       { return db }
func (db *DB) Select(query any, args ...any) *DB                    { return db }
func (db *DB) Omit(columns ...string) *DB                           { return db }
func (db *DB) Limit(limit int) *DB                                  { return db }
func (db *DB) Clauses(conds ...clause.Expression) *DB               { return db }
func (db *DB) Scopes(funcs ...func(*DB) *DB) *DB                    { return db }
func (db *DB) Exec(sql string, values ...any) *DB                   { return db }
func (db *DB) Raw(sql string, values ...any) *DB                    { return db }
func (db *DB) Scan(dest any) *DB                                    { return db }
func (db *DB) First(dest any, conds ...any) *DB                     { return db }
func (db *DB) Find(dest any, conds ...any) *DB                      { return db }
func (db *DB) Create(value any) *DB                                 { return db }
func (db *DB) CreateInBatches(value any, batchSize int) *DB         { return db }
func (db *DB) Save(value any) *DB                                   { return db }
func (db *DB) Update(column string, value any) *DB                  { return db }
func (db *DB) Updates(values any) *DB                               { return db }
func (db *DB) UpdateColumn(column string, value any) *DB            { return db }
func (db *DB) UpdateColumns(values any) *DB                         { return db }
func (db *DB) Delete(value any, conds ...any) *DB                   { return db }
func (db *DB) Transaction(fc func(tx *DB) error, opts ...any) error { return nil }

// Session configures a session.
type Session struct{ DryRun bool }

// Expr is a raw SQL expression.
func Expr(expr string, args ...any) clause.Expr { return clause.Expr{SQL: expr, Vars: args} }
