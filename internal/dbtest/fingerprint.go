package dbtest

import (
	"database/sql"
	"regexp"
	"strings"
	"testing"
)

var autoIncrement = regexp.MustCompile(` AUTO_INCREMENT=\d+`)

// Fingerprint describes everything of the database db is connected to that
// a test compares before and after a change: each table's definition
// (SHOW CREATE TABLE, without its AUTO_INCREMENT counter) and its rows
// (CHECKSUM TABLE), each trigger's and procedure's body. Keys are
// "table NAME", "rows NAME", "trigger NAME" and "procedure NAME".
func Fingerprint(t testing.TB, db *sql.DB) map[string]string {
	t.Helper()
	conn, err := db.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	out := map[string]string{}
	var tables []string
	rows, err := conn.QueryContext(t.Context(), "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_TYPE = 'BASE TABLE'")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, n)
	}
	rows.Close()
	for _, n := range tables {
		q := "`" + strings.ReplaceAll(n, "`", "``") + "`"
		var name, create string
		if err := conn.QueryRowContext(t.Context(), "SHOW CREATE TABLE "+q).Scan(&name, &create); err != nil {
			t.Fatal(err)
		}
		out["table "+n] = autoIncrement.ReplaceAllString(create, "")
		var sum sql.NullString
		if err := conn.QueryRowContext(t.Context(), "CHECKSUM TABLE "+q).Scan(&name, &sum); err != nil {
			t.Fatal(err)
		}
		out["rows "+n] = sum.String
	}
	rows, err = conn.QueryContext(t.Context(), "SELECT CONCAT('trigger ', TRIGGER_NAME), ACTION_STATEMENT FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = DATABASE() "+
		"UNION ALL SELECT CONCAT('procedure ', ROUTINE_NAME), ROUTINE_DEFINITION FROM information_schema.ROUTINES WHERE ROUTINE_SCHEMA = DATABASE()")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var k string
		var v sql.NullString
		if err := rows.Scan(&k, &v); err != nil {
			t.Fatal(err)
		}
		out[k] = v.String
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// FingerprintDiff lists the keys whose values differ between a and b.
func FingerprintDiff(a, b map[string]string) []string {
	var out []string
	for k, v := range a {
		if w, ok := b[k]; !ok {
			out = append(out, "gone: "+k)
		} else if v != w {
			out = append(out, "changed: "+k)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			out = append(out, "new: "+k)
		}
	}
	return out
}
