package analyzer

import (
	"fmt"
	"go/token"
	"sort"
	"strings"

	"github.com/fencekit/fencekit/analyzer/internal/sqlcheck"
	"golang.org/x/tools/go/analysis"
)

const doc = `report writes of fenced tables that lack the state + attempt fence

fencelint reports SQL (constant strings, and queries built at run time that
reach a SQL sink) that writes existing rows of a fenced table (default
refund_jobs) without "AND state = ? AND attempt = ?" in the AND chain of its
WHERE clause, writes that require the lease to be still valid, REPLACE and
INSERT … ON DUPLICATE KEY UPDATE of a fenced table, and calls of Ent's generic
update builders of a fenced entity. Suppress a justified exception with
"//fencelint:allow <reason>" on the line or the line above.`

// Analyzer reports unfenced writes of fenced tables. It is configured by
// its flags, -tables and -delete.
var Analyzer = &analysis.Analyzer{
	Name: "fencelint",
	Doc:  doc,
	URL:  "https://pkg.go.dev/github.com/fencekit/fencekit/analyzer",
	Run: func(pass *analysis.Pass) (any, error) {
		cfg, err := config(tablesFlag, deleteFlag)
		if err != nil {
			return nil, err
		}
		return run(pass, cfg)
	},
}

var (
	tablesFlag = sqlcheck.DefaultTables
	deleteFlag bool
)

func init() {
	Analyzer.Flags.StringVar(&tablesFlag, "tables", tablesFlag,
		"comma-separated fenced tables, each table[:state_column[:token_column[:lease_column]]]; omitted columns default to state, attempt, lease_until")
	Analyzer.Flags.BoolVar(&deleteFlag, "delete", false,
		"also report unfenced DELETE statements and Ent delete builders of fenced tables")
}

// New returns a fencelint analyzer with a fixed configuration and no
// flags, for drivers that configure analyzers themselves (the golangci-lint
// plugin). tables has the syntax of the -tables flag; "" means the default.
func New(tables string, delete bool) (*analysis.Analyzer, error) {
	if tables == "" {
		tables = sqlcheck.DefaultTables
	}
	cfg, err := config(tables, delete)
	if err != nil {
		return nil, err
	}
	return &analysis.Analyzer{
		Name: Analyzer.Name,
		Doc:  Analyzer.Doc,
		URL:  Analyzer.URL,
		Run:  func(pass *analysis.Pass) (any, error) { return run(pass, cfg) },
	}, nil
}

func config(tables string, delete bool) (*sqlcheck.Config, error) {
	ts, err := sqlcheck.ParseTables(tables)
	if err != nil {
		return nil, fmt.Errorf("fencelint -tables: %w", err)
	}
	return &sqlcheck.Config{Tables: ts, Delete: delete}, nil
}

// finding is a diagnostic before suppression.
type finding struct {
	pos token.Pos
	msg string
}

func run(pass *analysis.Pass, cfg *sqlcheck.Config) (any, error) {
	c := newChecker(pass, cfg)
	c.walk()
	c.settle()
	report(pass, c.findings)
	return nil, nil
}

// problemsMessage renders the problems of one string as one message, so
// that a string is reported once.
func problemsMessage(ps []sqlcheck.Problem) string {
	msgs := make([]string, 0, len(ps))
	seen := map[string]bool{}
	for _, p := range ps {
		m := p.String()
		if !seen[m] {
			seen[m] = true
			msgs = append(msgs, m)
		}
	}
	return strings.Join(msgs, "; ")
}

// report applies //fencelint:allow directives and reports what remains,
// plus the directives that lack a reason or suppress nothing.
func report(pass *analysis.Pass, fs []finding) {
	dirs := directives(pass)
	var out []analysis.Diagnostic
	seen := map[finding]bool{}
	for _, f := range fs {
		if seen[f] {
			continue
		}
		seen[f] = true
		p := pass.Fset.Position(f.pos)
		suppressed := false
		for _, line := range []int{p.Line, p.Line - 1} {
			if d := dirs[dirKey{p.Filename, line}]; d != nil && d.reason != "" {
				d.used = true
				suppressed = true
			}
		}
		if !suppressed {
			out = append(out, analysis.Diagnostic{Pos: f.pos, Message: f.msg})
		}
	}
	for _, d := range dirs {
		switch {
		case d.reason == "":
			out = append(out, analysis.Diagnostic{Pos: d.pos, Message: "//fencelint:allow needs a reason: write //fencelint:allow <why this write is safe>; without one it suppresses nothing"})
		case !d.used:
			out = append(out, analysis.Diagnostic{Pos: d.pos, Message: "//fencelint:allow suppresses nothing on this line or the next: remove it"})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Pos < out[j].Pos })
	for _, d := range out {
		pass.Report(d)
	}
}

type dirKey struct {
	file string
	line int
}

type directive struct {
	pos    token.Pos
	reason string
	used   bool
}

const directivePrefix = "//fencelint:allow"

func directives(pass *analysis.Pass) map[dirKey]*directive {
	dirs := map[dirKey]*directive{}
	for _, f := range pass.Files {
		for _, cg := range f.Comments {
			for _, c := range cg.List {
				rest, ok := strings.CutPrefix(c.Text, directivePrefix)
				if !ok || rest != "" && rest[0] != ' ' && rest[0] != '\t' {
					continue
				}
				p := pass.Fset.Position(c.Slash)
				dirs[dirKey{p.Filename, p.Line}] = &directive{pos: c.Slash, reason: strings.TrimSpace(rest)}
			}
		}
	}
	return dirs
}
