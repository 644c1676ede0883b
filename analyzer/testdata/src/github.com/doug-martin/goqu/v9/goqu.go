// Package goqu is a stand-in for github.com/doug-martin/goqu/v9: the
// signatures fencelint relies on, no behaviour.
package goqu

import (
	"context"
	"database/sql"

	"github.com/doug-martin/goqu/v9/exp"
)

type (
	Ex     = exp.Ex
	ExOr   = exp.ExOr
	Op     = exp.Op
	Record = exp.Record
)

func C(col string) exp.IdentifierExpression                             { return nil }
func I(ident string) exp.IdentifierExpression                           { return nil }
func T(table string) exp.IdentifierExpression                           { return nil }
func L(sql string, args ...interface{}) exp.LiteralExpression           { return nil }
func And(e ...exp.Expression) exp.ExpressionList                        { return nil }
func Or(e ...exp.Expression) exp.ExpressionList                         { return nil }
func DoNothing() exp.ConflictExpression                                 { return nil }
func DoUpdate(target string, update interface{}) exp.ConflictExpression { return nil }

type QueryExecutor struct{}

func (q QueryExecutor) Exec() (sql.Result, error)                           { return nil, nil }
func (q QueryExecutor) ExecContext(ctx context.Context) (sql.Result, error) { return nil, nil }

type UpdateDataset struct{}

func Update(table interface{}) *UpdateDataset { return &UpdateDataset{} }

func (u *UpdateDataset) Set(values interface{}) *UpdateDataset    { return u }
func (u *UpdateDataset) Where(e ...exp.Expression) *UpdateDataset { return u }
func (u *UpdateDataset) ClearWhere() *UpdateDataset               { return u }
func (u *UpdateDataset) Limit(n uint) *UpdateDataset              { return u }
func (u *UpdateDataset) Executor() QueryExecutor                  { return QueryExecutor{} }
func (u *UpdateDataset) ToSQL() (string, []interface{}, error)    { return "", nil, nil }

type InsertDataset struct{}

func Insert(table interface{}) *InsertDataset { return &InsertDataset{} }

func (i *InsertDataset) Rows(rows ...interface{}) *InsertDataset            { return i }
func (i *InsertDataset) OnConflict(c exp.ConflictExpression) *InsertDataset { return i }
func (i *InsertDataset) Executor() QueryExecutor                            { return QueryExecutor{} }

type DeleteDataset struct{}

func Delete(table interface{}) *DeleteDataset                     { return &DeleteDataset{} }
func (d *DeleteDataset) Where(e ...exp.Expression) *DeleteDataset { return d }
func (d *DeleteDataset) Executor() QueryExecutor                  { return QueryExecutor{} }

type SelectDataset struct{}

func From(table ...interface{}) *SelectDataset                    { return &SelectDataset{} }
func (s *SelectDataset) Where(e ...exp.Expression) *SelectDataset { return s }
func (s *SelectDataset) Update() *UpdateDataset                   { return &UpdateDataset{} }

type Database struct{}

func New(dialect string, db *sql.DB) *Database                                 { return &Database{} }
func (d *Database) Update(table interface{}) *UpdateDataset                    { return &UpdateDataset{} }
func (d *Database) From(table ...interface{}) *SelectDataset                   { return &SelectDataset{} }
func (d *Database) Exec(query string, args ...interface{}) (sql.Result, error) { return nil, nil }

type DialectWrapper struct{}

func Dialect(name string) DialectWrapper                         { return DialectWrapper{} }
func (d DialectWrapper) Update(table interface{}) *UpdateDataset { return &UpdateDataset{} }
