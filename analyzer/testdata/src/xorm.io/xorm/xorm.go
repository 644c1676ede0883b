// Package xorm is a minimal stand-in for xorm.io/xorm (v1.4.3): the raw-SQL
// entry points and the update chain, with the real signatures.
package xorm

import (
	"context"
	"database/sql"
)

type Engine struct{}

func NewEngine(driverName string, dataSourceName string) (*Engine, error) { return &Engine{}, nil }

func (engine *Engine) NewSession() *Session                      { return &Session{} }
func (engine *Engine) Context(ctx context.Context) *Session      { return &Session{} }
func (engine *Engine) SQL(query any, args ...any) *Session       { return &Session{} }
func (engine *Engine) Where(query any, args ...any) *Session     { return &Session{} }
func (engine *Engine) ID(id any) *Session                        { return &Session{} }
func (engine *Engine) Table(tableNameOrBean any) *Session        { return &Session{} }
func (engine *Engine) Exec(sqlOrArgs ...any) (sql.Result, error) { return nil, nil }
func (engine *Engine) Query(sqlOrArgs ...any) (resultsSlice []map[string][]byte, err error) {
	return nil, nil
}
func (engine *Engine) QueryString(sqlOrArgs ...any) ([]map[string]string, error) { return nil, nil }
func (engine *Engine) Update(bean any, condiBeans ...any) (int64, error)         { return 0, nil }
func (engine *Engine) Transaction(f func(*Session) (any, error)) (any, error)    { return nil, nil }

type EngineGroup struct {
	*Engine
}

type Session struct{}

func (session *Session) Close() error                                      { return nil }
func (session *Session) Begin() error                                      { return nil }
func (session *Session) Commit() error                                     { return nil }
func (session *Session) Rollback() error                                   { return nil }
func (session *Session) Context(ctx context.Context) *Session              { return session }
func (session *Session) SQL(query any, args ...any) *Session               { return session }
func (session *Session) Where(query any, args ...any) *Session             { return session }
func (session *Session) And(query any, args ...any) *Session               { return session }
func (session *Session) ID(id any) *Session                                { return session }
func (session *Session) Table(tableNameOrBean any) *Session                { return session }
func (session *Session) Cols(columns ...string) *Session                   { return session }
func (session *Session) Exec(sqlOrArgs ...any) (sql.Result, error)         { return nil, nil }
func (session *Session) Update(bean any, condiBeans ...any) (int64, error) { return 0, nil }
func (session *Session) Get(beans ...any) (bool, error)                    { return false, nil }
func (session *Session) Find(rowsSlicePtr any, condiBean ...any) error     { return nil }
func (session *Session) Query(sqlOrArgs ...any) (resultsSlice []map[string][]byte, err error) {
	return nil, nil
}

// Interface defines the interface which Engine, EngineGroup and Session will implementate.
type Interface interface {
	Exec(sqlOrArgs ...any) (sql.Result, error)
	ID(any) *Session
	Query(sqlOrArgs ...any) (resultsSlice []map[string][]byte, err error)
	SQL(any, ...any) *Session
	Table(tableNameOrBean any) *Session
	Update(bean any, condiBeans ...any) (int64, error)
	Where(any, ...any) *Session
}

var (
	_ Interface = (*Engine)(nil)
	_ Interface = (*Session)(nil)
)

func (session *Session) Or(query any, args ...any) *Session             { return session }
func (session *Session) In(column string, args ...any) *Session         { return session }
func (session *Session) Incr(column string, arg ...any) *Session        { return session }
func (session *Session) Decr(column string, arg ...any) *Session        { return session }
func (session *Session) SetExpr(column string, expression any) *Session { return session }
func (session *Session) MustCols(columns ...string) *Session            { return session }
func (session *Session) Delete(beans ...any) (int64, error)             { return 0, nil }
func (engine *Engine) Cols(columns ...string) *Session                  { return &Session{} }
func (engine *Engine) In(column string, args ...any) *Session           { return &Session{} }
func (engine *Engine) Incr(column string, arg ...any) *Session          { return &Session{} }
