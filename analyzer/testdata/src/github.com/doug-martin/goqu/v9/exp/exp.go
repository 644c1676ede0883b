// Package exp is a stand-in for github.com/doug-martin/goqu/v9/exp.
package exp

type Expression interface{ Expression() Expression }

type (
	Ex     map[string]interface{}
	ExOr   map[string]interface{}
	Op     map[string]interface{}
	Record map[string]interface{}
)

func (Ex) Expression() Expression   { return nil }
func (ExOr) Expression() Expression { return nil }

type BooleanExpression interface{ Expression }

type IdentifierExpression interface {
	Expression
	Eq(interface{}) BooleanExpression
	Neq(interface{}) BooleanExpression
	Gt(interface{}) BooleanExpression
	Gte(interface{}) BooleanExpression
	Lt(interface{}) BooleanExpression
	Lte(interface{}) BooleanExpression
	In(...interface{}) BooleanExpression
	IsNull() BooleanExpression
}

type LiteralExpression interface{ Expression }

type ExpressionList interface{ Expression }

type ConflictExpression interface{ Expression }
