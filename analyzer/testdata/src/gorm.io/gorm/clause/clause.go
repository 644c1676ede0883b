// Package clause is a stand-in for gorm.io/gorm/clause.
package clause

// Expression is a clause of a statement.
type Expression interface{ Build(Builder) }

// Builder builds SQL.
type Builder interface{ WriteString(string) (int, error) }

// Expr is raw SQL with its arguments.
type Expr struct {
	SQL  string
	Vars []any
}

func (Expr) Build(Builder) {}

// Column names a column.
type Column struct {
	Table string
	Name  string
}

// Assignment is one SET of an upsert.
type Assignment struct {
	Column Column
	Value  any
}

// Set is a list of assignments.
type Set []Assignment

// OnConflict is INSERT … ON CONFLICT / ON DUPLICATE KEY UPDATE.
type OnConflict struct {
	Columns      []Column
	DoNothing    bool
	DoUpdates    Set
	UpdateAll    bool
	OnConstraint string
}

func (OnConflict) Build(Builder) {}

// AssignmentColumns updates the named columns from the inserted values.
func AssignmentColumns(values []string) Set { return nil }

// Assignments updates columns to values.
func Assignments(values map[string]any) Set { return nil }

// Returning is RETURNING.
type Returning struct{ Columns []Column }

func (Returning) Build(Builder) {}
