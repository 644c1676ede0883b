package sqlcheck

import (
	"sync"
)

// A Judge decides whether SQL text writes a fenced table without the
// fence: the TiDB parser's, linked in by package analyzer/sqlparse. Check
// and CheckTemplate only ask it about text that names a fenced table.
type Judge interface {
	// Check judges the SQL text s.
	Check(s string, cfg *Config) []Problem
	// CheckTemplate judges a query built at run time from constant
	// fragments and holes.
	CheckTemplate(parts []Part, cfg *Config) []Problem
}

var (
	judgeMu sync.Mutex
	judge   Judge
)

// Use makes j the judge of this process. Package analyzer/sqlparse calls
// it when it is linked in; without it, the fencelint-sql helper judges
// (see Helper).
func Use(j Judge) {
	judgeMu.Lock()
	defer judgeMu.Unlock()
	judge = j
}

// current is the judge of this process: the one given to Use, else the
// helper, started at the first question.
func current() Judge {
	judgeMu.Lock()
	defer judgeMu.Unlock()
	if judge == nil {
		judge = &helperJudge{}
	}
	return judge
}

// Check judges the SQL text s. It returns nil when s is not SQL, reads only,
// inserts new rows only, writes no fenced table, or writes them fenced.
// Text that names no fenced table is not parsed.
func Check(s string, cfg *Config) []Problem {
	if !cfg.Mentions(s) {
		return nil
	}
	return current().Check(s, cfg)
}

// CheckTemplate judges a query built at run time from constant fragments and
// holes: a Dynamic problem for each write of a fenced table that the
// constant fragments reveal. A template none of whose fragments names a
// fenced table is not parsed.
func CheckTemplate(parts []Part, cfg *Config) []Problem {
	for _, p := range parts {
		if !p.Hole && cfg.Mentions(p.Text) {
			return current().CheckTemplate(parts, cfg)
		}
	}
	return nil
}

// Failure is the error that stopped the helper, if any: the analyzer
// reports it as the analysis's error, so that a run whose SQL went
// unjudged fails.
func Failure() error {
	if h := running(); h != nil {
		return h.failure()
	}
	return nil
}

// running is the helper's judge, when the helper judges in this process.
func running() *helperJudge {
	judgeMu.Lock()
	defer judgeMu.Unlock()
	h, _ := judge.(*helperJudge)
	return h
}

// Stop ends the helper, if one runs, and waits for it; a later question
// starts another. go vet analyses one package per process: fencelint
// stops the helper at the end of the package, so that the helper's CPU
// time is counted as fencelint's (a child waited for), not lost.
func Stop() {
	if h := running(); h != nil {
		h.stop()
	}
}
