// Package sqltext reads the text of a MySQL statement the way the server
// does, as far as the fenced layer needs: where one statement of a packet
// ends and the next begins, and which keyword each starts with. Quoted
// strings and names, comments and executable comments are read by MySQL's
// and MariaDB's rules with the default sql_mode (backslash escapes on,
// double quotes delimit strings), which the fenced layer verifies each
// session has.
package sqltext

import "strings"

// Statement is one statement of a packet.
type Statement struct {
	// Keyword is the statement's first word, upper-cased; inside an
	// executable comment (/*! … */, /*M! … */) when one comes first.
	Keyword string
	// Executable reports whether the statement holds an executable comment
	// anywhere: text the server runs although it looks like a comment.
	Executable bool
	// Text is the statement, without its terminating semicolon.
	Text string
}

// Split returns the statements of query, in order, leaving out empty ones
// (a trailing semicolon, comments alone). Text inside executable comments
// is read as code: the server runs it, so a semicolon there ends a
// statement too. An unterminated string, name or comment ends the last
// statement, as the server would read it before failing.
func Split(query string) []Statement {
	var (
		out   []Statement
		start int
		cur   Statement
		code  bool // the current statement has code outside comments
		exec  bool // inside an executable comment
	)
	flush := func(end int) {
		if code {
			cur.Text = strings.TrimSpace(query[start:end])
			out = append(out, cur)
		}
		cur, code, start = Statement{Executable: exec}, false, end+1
	}
	word := func(i int) {
		if cur.Keyword != "" || code {
			return
		}
		j := i
		for j < len(query) && isWordByte(query[j]) {
			j++
		}
		cur.Keyword = strings.ToUpper(query[i:j])
	}
	for i := 0; i < len(query); i++ {
		c := query[i]
		switch {
		case exec && c == '*' && i+1 < len(query) && query[i+1] == '/':
			exec = false
			i++
		case c == '\'' || c == '"' || c == '`':
			word(i)
			code = true
			i = skipQuoted(query, i)
		case c == '#':
			i = lineEnd(query, i)
		case c == '-' && strings.HasPrefix(query[i:], "--") && (i+2 == len(query) || query[i+2] <= ' '):
			i = lineEnd(query, i)
		case c == '/' && strings.HasPrefix(query[i:], "/*"):
			if n := executablePrefix(query[i:]); n > 0 && !exec {
				cur.Executable, exec = true, true
				i += n - 1
				continue
			}
			end := strings.Index(query[i+2:], "*/")
			if end < 0 {
				i = len(query)
			} else {
				i += 2 + end + 1
			}
		case c == ';':
			flush(i)
		case c <= ' ' || c == '(':
			// white space, or a parenthesis before the first word
		default:
			word(i)
			code = true
		}
	}
	flush(len(query))
	return out
}

// executablePrefix returns the length of the executable comment opener at
// the start of s (/*!, /*!50110, /*M!, /*M!100101), or 0.
func executablePrefix(s string) int {
	n := 0
	switch {
	case strings.HasPrefix(s, "/*!"):
		n = 3
	case strings.HasPrefix(s, "/*M!"):
		n = 4
	default:
		return 0
	}
	for n < len(s) && s[n] >= '0' && s[n] <= '9' {
		n++
	}
	return n
}

func isWordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_'
}

// skipQuoted returns the index of the quote that closes the quoted string
// or name opening at i (doubled quotes, and backslash escapes outside
// names, stay inside), or the last index when it is not closed.
func skipQuoted(q string, i int) int {
	quote := q[i]
	for i++; i < len(q); i++ {
		switch {
		case q[i] == '\\' && quote != '`':
			i++
		case q[i] == quote && i+1 < len(q) && q[i+1] == quote:
			i++
		case q[i] == quote:
			return i
		}
	}
	return len(q) - 1
}

func lineEnd(q string, i int) int {
	end := strings.IndexByte(q[i:], '\n')
	if end < 0 {
		return len(q) - 1
	}
	return i + end
}
