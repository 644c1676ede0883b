package dbtest

import (
	"context"
	"database/sql"
	"regexp"
	"strings"
	"testing"
)

// Access is one way a statement's plan reaches a table.
type Access struct {
	Table string
	// Key is the index it reads: "PRIMARY" for the primary key, an index's
	// name, or "" for a full scan.
	Key string
	// PossibleKeys lists the indexes the optimizer considered, as MySQL's
	// EXPLAIN shows them. TiDB's EXPLAIN shows only the path it chose: there
	// it is Key.
	PossibleKeys string
}

var (
	tidbTable = regexp.MustCompile(`\btable:([^,\s]+)`)
	tidbIndex = regexp.MustCompile(`\bindex:([^,\s(]+)`)
)

// Explain returns how query (with args) reaches its tables, in plan order,
// reading EXPLAIN in the server's format (Engine.ExplainFormat). On TiDB a
// point get or a range on the row's handle reads the primary key, and the
// row lookups that follow an index scan are not listed: they read the rows
// the index found, by primary key.
func Explain(t testing.TB, db *sql.DB, query string, args ...any) []Access {
	t.Helper()
	engine, err := engineOf(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	var out []Access
	for _, row := range ExplainRows(t, db, query, args...) {
		if engine.ExplainFormat != "tidb" {
			out = append(out, Access{Table: row["table"], Key: row["key"], PossibleKeys: row["possible_keys"]})
			continue
		}
		object := row["access object"]
		table := tidbTable.FindStringSubmatch(object)
		if table == nil {
			continue // an operator that reads no table itself
		}
		op := strings.TrimLeft(row["id"], "└├│─ ")
		a := Access{Table: table[1]}
		switch index := tidbIndex.FindStringSubmatch(object); {
		case index != nil:
			a.Key = index[1]
		case strings.HasPrefix(op, "Point_Get"), strings.HasPrefix(op, "Batch_Point_Get"), strings.HasPrefix(op, "TableRangeScan"):
			a.Key = "PRIMARY"
		case strings.HasPrefix(op, "TableRowIDScan"):
			continue
		}
		a.PossibleKeys = a.Key
		out = append(out, a)
	}
	if len(out) == 0 {
		t.Fatalf("EXPLAIN %s: no table access in the plan", query)
	}
	return out
}

// ExplainRows returns every row of the plan of query (with args), each
// column by name, as the server's EXPLAIN prints it.
func ExplainRows(t testing.TB, db *sql.DB, query string, args ...any) []map[string]string {
	t.Helper()
	rows, err := db.QueryContext(context.Background(), "EXPLAIN "+query, args...)
	if err != nil {
		t.Fatalf("EXPLAIN %s: %v", query, err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		t.Fatal(err)
	}
	var plan []map[string]string
	for rows.Next() {
		vals := make([]sql.NullString, len(cols))
		dest := make([]any, len(cols))
		for i := range vals {
			dest[i] = &vals[i]
		}
		if err := rows.Scan(dest...); err != nil {
			t.Fatal(err)
		}
		row := map[string]string{}
		for i, c := range cols {
			row[c] = vals[i].String
		}
		plan = append(plan, row)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("EXPLAIN %s: %v", query, err)
	}
	return plan
}
