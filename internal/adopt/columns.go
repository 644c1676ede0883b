package adopt

import (
	"fmt"
	"strings"

	atlasmysql "ariga.io/atlas/sql/mysql"
	"ariga.io/atlas/sql/schema"
)

// keepOnUpdate is the assignments that keep the table's ON UPDATE columns
// as they are in adopt's own UPDATEs (a column the statement assigns is
// not stamped): rewriting a row's names or backfilling fencekit's columns
// is not a change of the team's row. set are assignments the statement
// makes already.
func (pl *planner) keepOnUpdate(set ...string) string {
	var out string
	for _, c := range pl.legacy.Columns {
		if onUpdate(c) == "" {
			continue
		}
		assigned := false
		for _, a := range set {
			assigned = assigned || strings.HasPrefix(a, quote(c.Name)+" ")
		}
		if !assigned {
			out += ", " + quote(c.Name) + " = " + quote(c.Name)
		}
	}
	return out
}

// onUpdate is c's ON UPDATE expression, "" when it has none.
func onUpdate(c *schema.Column) string {
	for _, a := range c.Attrs {
		if u, ok := a.(*atlasmysql.OnUpdate); ok {
			return u.A
		}
	}
	return ""
}

// text reports whether c holds text (a collation applies to it).
func text(c *schema.Column) bool {
	switch c.Type.Type.(type) {
	case *schema.StringType, *schema.EnumType:
		return true
	}
	return false
}

// keptDefault is the team's default d for a column of fencekit's type to:
// CURRENT_TIMESTAMP gains the type's fractional digits (MySQL refuses a
// DATETIME(6) whose default has another precision).
func keptDefault(d schema.Expr, to schema.Type) schema.Expr {
	t, ok := to.(*schema.TimeType)
	if r, isRaw := d.(*schema.RawExpr); ok && isRaw && strings.HasPrefix(strings.ToLower(r.X), "current_timestamp") && precision(t) > 0 {
		return &schema.RawExpr{X: fmt.Sprintf("CURRENT_TIMESTAMP(%d)", precision(t))}
	}
	return d
}

func exprString(e schema.Expr) string {
	switch e := e.(type) {
	case *schema.Literal:
		return e.V
	case *schema.RawExpr:
		return e.X
	}
	return fmt.Sprint(e)
}

func hasAutoIncrement(c *schema.Column) bool {
	for _, a := range c.Attrs {
		if _, ok := a.(*atlasmysql.AutoIncrement); ok {
			return true
		}
	}
	return false
}

// unquote is a string literal's value as Atlas's inspection shows it
// (quoted, a quote in it doubled or escaped with a backslash).
func unquote(v string) string {
	if len(v) >= 2 && v[0] == '\'' && v[len(v)-1] == '\'' {
		v = strings.NewReplacer(`''`, `'`, `\'`, `'`, `\\`, `\`).Replace(v[1 : len(v)-1])
	}
	return v
}

func sameDefault(a, b schema.Expr) bool {
	str := func(e schema.Expr) string {
		var v string
		switch e := e.(type) {
		case nil:
			return ""
		case *schema.Literal:
			v = strings.Trim(e.V, "'")
		case *schema.RawExpr:
			v = strings.Trim(e.X, "'")
		default:
			v = fmt.Sprint(e)
		}
		// '1970-01-01 00:00:00.000000' is '1970-01-01 00:00:00'.
		if i := strings.LastIndex(v, "."); i > 0 && strings.Count(v, ":") == 2 && strings.Trim(v[i+1:], "0") == "" {
			v = v[:i]
		}
		return v
	}
	return str(a) == str(b)
}

// collation is a column's collation (attrs), or its table's (table) when
// the column names none.
func collation(attrs, table []schema.Attr) string {
	for _, list := range [][]schema.Attr{attrs, table} {
		for _, a := range list {
			if c, ok := a.(*schema.Collation); ok {
				return c.V
			}
		}
	}
	return ""
}

func charset(attrs []schema.Attr) (string, bool) {
	for _, a := range attrs {
		if c, ok := a.(*schema.Charset); ok {
			return c.V, true
		}
	}
	return "utf8mb4", false
}
