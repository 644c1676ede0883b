// Package sqlcheck is what fencelint's analyzer knows of SQL without
// linking a parser: the fenced tables, the problems a statement can have,
// the lexical filters run before any parse, and the way to the judge that
// parses (package analyzer/sqlparse, with the TiDB parser's MySQL grammar),
// in this process when it is linked in, else in the fencelint-sql helper.
package sqlcheck

import (
	"fmt"
	"strings"
)

// Defaults of a fenced table's columns.
const (
	DefaultTable        = "refund_jobs"
	DefaultStateColumn  = "state"
	DefaultTokenColumn  = "attempt"
	DefaultLeaseColumn  = "lease_until"
	DefaultWriterColumn = "writer_attempt"
)

// DefaultTables is the default value of the -tables flag.
const DefaultTables = DefaultTable + ":" + DefaultStateColumn + ":" + DefaultTokenColumn + ":" +
	DefaultLeaseColumn + ":" + DefaultWriterColumn

// Table is a fenced table: every write of an existing row must hold
// State = <value> AND Token = <value> in its WHERE clause, must not
// require Lease to be in the future, and must not set Writer (the column
// in which a writer declares the attempt it holds, checked by the
// database's trigger) from the row's own Token.
type Table struct {
	Name   string // lower case
	State  string // lower case
	Token  string // lower case
	Lease  string // lower case
	Writer string // lower case
}

// Config says which tables are fenced and whether DELETE is judged.
type Config struct {
	Tables []Table
	Delete bool
}

// ParseTables parses a comma-separated list of
// table[:state[:token[:lease[:writer]]]] specifications. Omitted columns
// take their defaults.
func ParseTables(spec string) ([]Table, error) {
	var tables []Table
	seen := map[string]bool{}
	for _, item := range strings.Split(spec, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		f := strings.Split(item, ":")
		if len(f) > 5 {
			return nil, fmt.Errorf("parse table %q: want table[:state[:token[:lease[:writer]]]]", item)
		}
		t := Table{State: DefaultStateColumn, Token: DefaultTokenColumn, Lease: DefaultLeaseColumn, Writer: DefaultWriterColumn}
		dst := []*string{&t.Name, &t.State, &t.Token, &t.Lease, &t.Writer}
		for i, v := range f {
			v = strings.ToLower(strings.TrimSpace(v))
			if !isIdent(v) {
				return nil, fmt.Errorf("parse table %q: %q is not a plain SQL identifier", item, v)
			}
			*dst[i] = v
		}
		cols := map[string]string{}
		for _, c := range [...]struct{ role, name string }{
			{"state", t.State}, {"token", t.Token}, {"lease", t.Lease}, {"writer", t.Writer},
		} {
			if other, ok := cols[c.name]; ok {
				return nil, fmt.Errorf("parse table %q: the %s and %s columns must differ", item, other, c.role)
			}
			cols[c.name] = c.role
		}
		if seen[t.Name] {
			return nil, fmt.Errorf("parse table %q: table listed twice", item)
		}
		seen[t.Name] = true
		tables = append(tables, t)
	}
	if len(tables) == 0 {
		return nil, fmt.Errorf("parse tables %q: no table given", spec)
	}
	return tables, nil
}

func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c == '$' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// Table returns the fenced table named name (any case), or nil.
func (c *Config) Table(name string) *Table {
	for i := range c.Tables {
		if strings.EqualFold(c.Tables[i].Name, name) {
			return &c.Tables[i]
		}
	}
	return nil
}

// Mentions reports whether s contains the name of a fenced table, ignoring
// case. It is the cheap lexical filter run before any parse.
func (c *Config) Mentions(s string) bool {
	for i := range c.Tables {
		if containsFold(s, c.Tables[i].Name) {
			return true
		}
	}
	return false
}

// containsFold reports whether s contains the lower-case ASCII word sub,
// ignoring the case of s.
func containsFold(s, sub string) bool {
	n := len(sub)
	if n == 0 {
		return true
	}
	first := sub[0]
	for i := 0; i+n <= len(s); i++ {
		if lower(s[i]) != first {
			continue
		}
		j := 1
		for j < n && lower(s[i+j]) == sub[j] {
			j++
		}
		if j == n {
			return true
		}
	}
	return false
}

func lower(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// MentionsWrite reports whether s contains, as a word and ignoring case, a
// keyword that starts a write judged by the checker (UPDATE, REPLACE, and
// DELETE when enabled). INSERT … ON DUPLICATE KEY UPDATE contains UPDATE.
func (c *Config) MentionsWrite(s string) bool {
	return hasWord(s, "update") || hasWord(s, "replace") || c.Delete && hasWord(s, "delete")
}

func hasWord(s, w string) bool {
	n := len(w)
	for i := 0; i+n <= len(s); i++ {
		if lower(s[i]) != w[0] {
			continue
		}
		j := 1
		for j < n && lower(s[i+j]) == w[j] {
			j++
		}
		if j < n {
			continue
		}
		if i > 0 && IsWordByte(s[i-1]) || i+n < len(s) && IsWordByte(s[i+n]) {
			continue
		}
		return true
	}
	return false
}

func IsWordByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}
