// Package sql is a stand-in for entgo.io/ent/dialect/sql: the builders
// fencelint models, no behaviour.
package sql

type Querier interface{ Query() (string, []any) }

type expr struct{}

func (expr) Query() (string, []any) { return "", nil }

func Expr(exr string, args ...any) Querier { return expr{} }

type Predicate struct{}

func P(fns ...func()) *Predicate               { return &Predicate{} }
func ExprP(exr string, args ...any) *Predicate { return &Predicate{} }
func EQ(col string, value any) *Predicate      { return &Predicate{} }
func NEQ(col string, value any) *Predicate     { return &Predicate{} }
func GT(col string, value any) *Predicate      { return &Predicate{} }
func LT(col string, value any) *Predicate      { return &Predicate{} }
func And(preds ...*Predicate) *Predicate       { return &Predicate{} }
func Or(preds ...*Predicate) *Predicate        { return &Predicate{} }
func Not(pred *Predicate) *Predicate           { return &Predicate{} }
func IsNull(col string) *Predicate             { return &Predicate{} }

type UpdateBuilder struct{}

func Update(table string) *UpdateBuilder                         { return &UpdateBuilder{} }
func (u *UpdateBuilder) Set(column string, v any) *UpdateBuilder { return u }
func (u *UpdateBuilder) Add(column string, v any) *UpdateBuilder { return u }
func (u *UpdateBuilder) SetNull(column string) *UpdateBuilder    { return u }
func (u *UpdateBuilder) Where(p *Predicate) *UpdateBuilder       { return u }
func (u *UpdateBuilder) Schema(name string) *UpdateBuilder       { return u }
func (u *UpdateBuilder) Query() (string, []any)                  { return "", nil }

type ConflictOption func()

func ConflictColumns(names ...string) ConflictOption { return nil }
func ResolveWithNewValues() ConflictOption           { return nil }
func ResolveWithIgnore() ConflictOption              { return nil }
func DoNothing() ConflictOption                      { return nil }

type InsertBuilder struct{}

func Insert(table string) *InsertBuilder                                  { return &InsertBuilder{} }
func (i *InsertBuilder) Columns(columns ...string) *InsertBuilder         { return i }
func (i *InsertBuilder) Values(values ...any) *InsertBuilder              { return i }
func (i *InsertBuilder) OnConflict(opts ...ConflictOption) *InsertBuilder { return i }
func (i *InsertBuilder) Query() (string, []any)                           { return "", nil }

type DialectBuilder struct{}

func Dialect(name string) *DialectBuilder                    { return &DialectBuilder{} }
func (d *DialectBuilder) Update(table string) *UpdateBuilder { return &UpdateBuilder{} }
