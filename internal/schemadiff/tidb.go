package schemadiff

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"ariga.io/atlas/sql/migrate"
)

// routine matches what TiDB cannot run: triggers, stored procedures and
// functions, and the client's DELIMITER that their bodies need.
var routine = regexp.MustCompile(`(?im)^\s*(CREATE|DROP)\s+(TRIGGER|PROCEDURE|FUNCTION)\b|^\s*DELIMITER\b|\bCALL\s`)

// HasRoutine reports whether a migration file holds something TiDB cannot
// run: a trigger, a stored procedure or function, a CALL or a DELIMITER.
func HasRoutine(file []byte) bool { return routine.Match(file) }

// TiDBFollows lists how the TiDB directory tidb fails to follow the MySQL
// and MariaDB directory mysql (none when it follows): every file of mysql
// without triggers or procedures is in tidb, unchanged; no file of tidb
// has any; and for each fence, a file of tidb's own creates the fence's
// tables (the keys table and the archive) with the statements
// generated from the annotation.
func TiDBFollows(mysql, tidb migrate.Dir, fences []Fence) ([]string, error) {
	mysqlFiles, err := mysql.Files()
	if err != nil {
		return nil, fmt.Errorf("read the MySQL directory: %w", err)
	}
	tidbFiles, err := tidb.Files()
	if err != nil {
		return nil, fmt.Errorf("read the TiDB directory: %w", err)
	}
	var problems []string
	inTiDB := map[string]string{}
	for _, f := range tidbFiles {
		inTiDB[f.Name()] = string(f.Bytes())
		if HasRoutine(f.Bytes()) {
			problems = append(problems, fmt.Sprintf("tidb/%s has a trigger, a procedure or a DELIMITER: TiDB has none", f.Name()))
		}
	}
	inMySQL := map[string]bool{}
	for _, f := range mysqlFiles {
		inMySQL[f.Name()] = true
		if HasRoutine(f.Bytes()) {
			continue
		}
		got, ok := inTiDB[f.Name()]
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("%s is not in tidb/: copy it there (it has no trigger) and rehash", f.Name()))
		case got != string(f.Bytes()):
			problems = append(problems, fmt.Sprintf("tidb/%s differs from %[1]s", f.Name()))
		}
	}
	// The fence's tables, as the generator writes them: everything of the
	// generated fence before its triggers.
	for _, f := range fences {
		start := strings.Index(f.SQL, "CREATE TABLE")
		end := strings.Index(f.SQL, "\nDROP ")
		if start < 0 || end < start {
			problems = append(problems, fmt.Sprintf("the generated fence of %s has no tables before its triggers", f.Table))
			continue
		}
		tables := strings.TrimSpace(f.SQL[start:end])
		var own []string
		found := false
		for name, content := range inTiDB {
			if !inMySQL[name] {
				own = append(own, name)
				found = found || strings.Contains(content, tables)
			}
		}
		if !found {
			slices.Sort(own)
			problems = append(problems, fmt.Sprintf("no file of tidb/ of its own (%v) creates the generated fence's tables of %s with:\n%s", own, f.Table, tables))
		}
	}
	return problems, nil
}
