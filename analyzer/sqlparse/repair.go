package sqlparse

import (
	"strings"

	"github.com/fencekit/fencekit/analyzer/internal/sqlcheck"
)

// repairMySQL rewrites the MySQL constructs that the TiDB parser does not
// read into ones it reads, with the same tables, SET list and WHERE
// conjuncts, so that such a statement is judged rather than unprovable:
//
//   - a SOUNDS LIKE b → a LIKE b (a predicate either way);
//   - JSON_TABLE(…) → (SELECT 1): a derived table of values, read only, whose
//     alias the statement keeps;
//   - JSON_VALUE(doc, path RETURNING type …) → JSON_VALUE(doc, path): a value;
//   - MATCH (cols) AGAINST (…) → 1: a full-text predicate, never a fence;
//   - MariaDB's LIMIT [n] ROWS EXAMINED m → LIMIT n (or nothing): a bound on
//     the rows read.
//
// Quoted text and comments are left alone. It reports whether it changed s.
func repairMySQL(s string) (string, bool) {
	var b strings.Builder
	changed := false
	last := 0
	for i := 0; i < len(s); {
		if j, ok := sqlcheck.SkipNonCode(s, i); ok {
			i = j
			continue
		}
		if !sqlcheck.IsNameStart(s[i]) || i > 0 && sqlcheck.IsWordByte(s[i-1]) {
			i++
			continue
		}
		j := i
		for j < len(s) && sqlcheck.IsWordByte(s[j]) {
			j++
		}
		word := strings.ToUpper(s[i:j])
		switch word {
		case "SOUNDS":
			k := skipSpace(s, j)
			if k > j && k+4 <= len(s) && strings.EqualFold(s[k:k+4], "LIKE") && (k+4 == len(s) || !sqlcheck.IsWordByte(s[k+4])) {
				b.WriteString(s[last:i])
				last, changed = k, true // keep LIKE
				i = k + 4
				continue
			}
		case "MATCH":
			open := skipSpace(s, j)
			if open < len(s) && s[open] == '(' {
				end, _ := closeParen(s, open)
				if end < 0 {
					break
				}
				k := skipSpace(s, end+1)
				if !hasWordAt(s, k, "AGAINST") {
					break
				}
				open2 := skipSpace(s, k+len("AGAINST"))
				if open2 >= len(s) || s[open2] != '(' {
					break
				}
				end2, _ := closeParen(s, open2)
				if end2 < 0 {
					break
				}
				b.WriteString(s[last:i])
				b.WriteString("1")
				last, changed = end2+1, true
				i = end2 + 1
				continue
			}
		case "LIMIT", "ROWS":
			// LIMIT ROWS EXAMINED m: drop it all; n ROWS EXAMINED m: keep n.
			k := j
			if word == "LIMIT" {
				k = skipSpace(s, j)
				if !hasWordAt(s, k, "ROWS") {
					break
				}
				k += len("ROWS")
			}
			k = skipSpace(s, k)
			if !hasWordAt(s, k, "EXAMINED") {
				break
			}
			k = skipSpace(s, k+len("EXAMINED"))
			n := k
			for n < len(s) && (sqlcheck.IsDigit(s[n]) || s[n] == '?') {
				n++
			}
			if n == k {
				break
			}
			b.WriteString(s[last:i])
			last, changed = n, true
			i = n
			continue
		case "JSON_TABLE", "JSON_VALUE":
			open := skipSpace(s, j)
			if open < len(s) && s[open] == '(' {
				end, ret := closeParen(s, open)
				if end < 0 {
					break
				}
				if word == "JSON_TABLE" {
					b.WriteString(s[last:i])
					b.WriteString("(SELECT 1)")
					last, changed = end+1, true
				} else if ret >= 0 {
					b.WriteString(s[last:ret])
					last, changed = end, true // keep ")"
				}
				i = end + 1
				continue
			}
		}
		i = j
	}
	if !changed {
		return s, false
	}
	b.WriteString(s[last:])
	return b.String(), true
}

// hasWordAt reports whether the keyword w (upper case) stands at s[i] as a
// whole word, in any case.
func hasWordAt(s string, i int, w string) bool {
	return i+len(w) <= len(s) && strings.EqualFold(s[i:i+len(w)], w) && (i+len(w) == len(s) || !sqlcheck.IsWordByte(s[i+len(w)]))
}

func skipSpace(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
		i++
	}
	return i
}

// closeParen returns the index of the parenthesis that closes the one at
// s[open] (outside quotes and comments), or -1, and the index of the first
// RETURNING keyword at its depth (or -1).
func closeParen(s string, open int) (end, returning int) {
	depth := 0
	returning = -1
	for i := open; i < len(s); {
		if j, ok := sqlcheck.SkipNonCode(s, i); ok {
			i = j
			continue
		}
		switch c := s[i]; {
		case c == '(':
			depth++
		case c == ')':
			depth--
			if depth == 0 {
				return i, returning
			}
		case depth == 1 && returning < 0 && (c == 'r' || c == 'R') && (i == 0 || !sqlcheck.IsWordByte(s[i-1])) &&
			i+9 <= len(s) && strings.EqualFold(s[i:i+9], "RETURNING") && (i+9 == len(s) || !sqlcheck.IsWordByte(s[i+9])):
			returning = i
		}
		i++
	}
	return -1, -1
}
