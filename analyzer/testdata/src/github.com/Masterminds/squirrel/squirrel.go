// Package squirrel is a stand-in for github.com/Masterminds/squirrel: the
// signatures fencelint relies on, no behaviour.
package squirrel

import (
	"context"
	"database/sql"
)

type Sqlizer interface {
	ToSql() (string, []interface{}, error)
}

type BaseRunner interface {
	Exec(query string, args ...interface{}) (sql.Result, error)
}

type PlaceholderFormat interface{}

var (
	Question PlaceholderFormat
	Dollar   PlaceholderFormat
)

type expr struct{}

func (expr) ToSql() (string, []interface{}, error) { return "", nil, nil }

func Expr(sql string, args ...interface{}) Sqlizer { return expr{} }

type Eq map[string]interface{}
type NotEq Eq
type Lt map[string]interface{}
type LtOrEq Lt
type Gt Lt
type GtOrEq Lt
type Like map[string]interface{}
type And []Sqlizer
type Or []Sqlizer

func (Eq) ToSql() (string, []interface{}, error)     { return "", nil, nil }
func (NotEq) ToSql() (string, []interface{}, error)  { return "", nil, nil }
func (Lt) ToSql() (string, []interface{}, error)     { return "", nil, nil }
func (Gt) ToSql() (string, []interface{}, error)     { return "", nil, nil }
func (GtOrEq) ToSql() (string, []interface{}, error) { return "", nil, nil }
func (And) ToSql() (string, []interface{}, error)    { return "", nil, nil }
func (Or) ToSql() (string, []interface{}, error)     { return "", nil, nil }

type StatementBuilderType struct{}

var StatementBuilder StatementBuilderType

func (b StatementBuilderType) PlaceholderFormat(f PlaceholderFormat) StatementBuilderType { return b }
func (b StatementBuilderType) RunWith(r BaseRunner) StatementBuilderType                  { return b }
func (b StatementBuilderType) Update(table string) UpdateBuilder                          { return UpdateBuilder{} }
func (b StatementBuilderType) Insert(into string) InsertBuilder                           { return InsertBuilder{} }
func (b StatementBuilderType) Select(columns ...string) SelectBuilder                     { return SelectBuilder{} }

func Update(table string) UpdateBuilder      { return UpdateBuilder{} }
func Insert(into string) InsertBuilder       { return InsertBuilder{} }
func Replace(into string) InsertBuilder      { return InsertBuilder{} }
func Delete(from string) DeleteBuilder       { return DeleteBuilder{} }
func Select(columns ...string) SelectBuilder { return SelectBuilder{} }

type UpdateBuilder struct{}

func (b UpdateBuilder) PlaceholderFormat(f PlaceholderFormat) UpdateBuilder       { return b }
func (b UpdateBuilder) RunWith(r BaseRunner) UpdateBuilder                        { return b }
func (b UpdateBuilder) Table(table string) UpdateBuilder                          { return b }
func (b UpdateBuilder) Set(column string, value interface{}) UpdateBuilder        { return b }
func (b UpdateBuilder) SetMap(clauses map[string]interface{}) UpdateBuilder       { return b }
func (b UpdateBuilder) Where(pred interface{}, args ...interface{}) UpdateBuilder { return b }
func (b UpdateBuilder) Suffix(sql string, args ...interface{}) UpdateBuilder      { return b }
func (b UpdateBuilder) Limit(limit uint64) UpdateBuilder                          { return b }
func (b UpdateBuilder) Exec() (sql.Result, error)                                 { return nil, nil }
func (b UpdateBuilder) ExecContext(ctx context.Context) (sql.Result, error)       { return nil, nil }
func (b UpdateBuilder) ToSql() (string, []interface{}, error)                     { return "", nil, nil }
func (b UpdateBuilder) MustSql() (string, []interface{})                          { return "", nil }

type InsertBuilder struct{}

func (b InsertBuilder) Columns(columns ...string) InsertBuilder              { return b }
func (b InsertBuilder) Values(values ...interface{}) InsertBuilder           { return b }
func (b InsertBuilder) Suffix(sql string, args ...interface{}) InsertBuilder { return b }
func (b InsertBuilder) RunWith(r BaseRunner) InsertBuilder                   { return b }
func (b InsertBuilder) Exec() (sql.Result, error)                            { return nil, nil }
func (b InsertBuilder) ToSql() (string, []interface{}, error)                { return "", nil, nil }

type DeleteBuilder struct{}

func (b DeleteBuilder) Where(pred interface{}, args ...interface{}) DeleteBuilder { return b }
func (b DeleteBuilder) Exec() (sql.Result, error)                                 { return nil, nil }

type SelectBuilder struct{}

func (b SelectBuilder) From(from string) SelectBuilder                            { return b }
func (b SelectBuilder) Where(pred interface{}, args ...interface{}) SelectBuilder { return b }
func (b SelectBuilder) ToSql() (string, []interface{}, error)                     { return "", nil, nil }
