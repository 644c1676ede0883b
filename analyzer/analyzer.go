package analyzer

import (
	"fmt"
	"go/ast"
	"go/build"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"

	"github.com/fencekit/fencekit/analyzer/baseline"
	"github.com/fencekit/fencekit/analyzer/internal/sqlcheck"
	"golang.org/x/tools/go/analysis"
)

const doc = `report writes of fenced tables that lack the state + attempt fence

fencelint reports SQL (constant strings, embedded files, queries built at
run time that reach a SQL sink or a wrapper of one, query builders) that
writes existing rows of a fenced table (default refund_jobs) without
"AND state = ? AND attempt = ?" in the AND chain of its WHERE clause, writes
that require the lease to be still valid, writes that declare the row's own
attempt (SET writer_attempt = attempt), REPLACE and upserts of a fenced
table, SQL it cannot read that is shaped like such a write, and calls of
Ent's generic update and upsert builders of a fenced entity. Suppress a
justified exception with "//fencelint:allow <reason>" on the line or the
line above. It also reports imports of the fenced layer's runtime
(default github.com/fencekit/fencekit/fencedwrite/fencedrt) outside generated
code and the fenced layer's own packages.

A legacy codebase accepts today's findings in a baseline file, written by
"fencelint -write-baseline FILE [-baseline-add] ./..." (standalone) and
read with -baseline=FILE or, under go vet, $FENCELINT_BASELINE: accepted
findings are not reported, new ones are, and so is an entry that no longer
matches, so that the file only shrinks. Mechanical fixes are applied by
"fencelint -fix ./...".`

// Analyzer reports unfenced writes of fenced tables, and uses of the fenced
// layer's runtime outside generated code. It is configured by its flags,
// -tables, -delete, -sinks, -runtime and -baseline. Its result is a
// *Result.
var Analyzer = &analysis.Analyzer{
	Name: "fencelint",
	Doc:  doc,
	URL:  "https://pkg.go.dev/github.com/fencekit/fencekit/analyzer",
	Run: func(pass *analysis.Pass) (any, error) {
		b := baselineFlag
		if b == "" {
			b = os.Getenv(BaselineEnv)
		}
		o, err := Options{Tables: tablesFlag, Delete: deleteFlag, Sinks: sinksFlag, Runtime: &runtimeFlag, Baseline: b}.parse()
		if err != nil {
			return nil, err
		}
		return runReported(pass, o)
	},
	FactTypes:  factTypes,
	ResultType: reflect.TypeFor[*Result](),
}

// BaselineEnv names the environment variable that gives the baseline file
// when -baseline is not set. Under go vet, prefer it to the flag: go vet
// caches a package's clean result by the tool's version and its flags,
// not the baseline's content, and fencelint -V=full (which go vet asks
// for) folds the content of the file this variable names into the version.
const BaselineEnv = "FENCELINT_BASELINE"

// SQLHelper is the path of fencelint-sql, the helper that judges SQL text
// for a program that does not link the parser (the fencelint command; a
// program that imports package analyzer/sqlparse judges in its own
// process): $FENCELINT_SQL, else beside the running executable, else one
// built earlier for this executable in the user's cache directory, else on
// PATH, else one built now from the checkout this executable was built
// from (without -trimpath). The error says how to install it.
func SQLHelper() (string, error) { return sqlcheck.Helper() }

// StopSQLHelper ends the fencelint-sql helper, if one runs, and waits for
// it; a later question starts another. The fencelint command calls it at
// the end of each package under go vet (one package a process), so that
// the helper's CPU time is counted in the tool's.
func StopSQLHelper() { sqlcheck.Stop() }

// factTypes are the facts fencelint exports about functions, so that
// wrappers and query helpers are followed across packages.
var factTypes = []analysis.Fact{new(sinkFact), new(returnFact)}

var (
	tablesFlag   = sqlcheck.DefaultTables
	deleteFlag   bool
	sinksFlag    string
	runtimeFlag  = DefaultRuntime
	baselineFlag string
)

func init() {
	Analyzer.Flags.StringVar(&tablesFlag, "tables", tablesFlag,
		"comma-separated fenced tables, each table[:state_column[:token_column[:lease_column[:writer_column]]]]; omitted columns default to state, attempt, lease_until, writer_attempt")
	Analyzer.Flags.BoolVar(&deleteFlag, "delete", false,
		"also report unfenced DELETE statements and Ent delete builders of fenced tables")
	Analyzer.Flags.StringVar(&sinksFlag, "sinks", "",
		"comma-separated extra SQL sinks whose first string parameter is a query: Name (any function or method), path/to/pkg.Func, or path/to/pkg.Type.Method")
	Analyzer.Flags.StringVar(&runtimeFlag, "runtime", runtimeFlag,
		"import path of the fenced layer's runtime, whose use outside generated code (and the fenced layer's own packages) is reported; empty turns the check off")
	Analyzer.Flags.StringVar(&baselineFlag, "baseline", "",
		"baseline file of accepted findings (written by fencelint -write-baseline FILE ./...): they are not reported, and an entry that no longer matches is; a relative path is looked up from each package's directory upwards; default $"+BaselineEnv+" (use that under go vet: see docs/fencelint.md)")
}

// Options configure an analyzer made with [NewWithOptions]. The fields
// have the syntax of the flags of the same names.
type Options struct {
	Tables string // "" means the default, refund_jobs:state:attempt:lease_until:writer_attempt
	Delete bool
	Sinks  string
	// Runtime is the import path of the fenced layer's runtime; nil means
	// DefaultRuntime, and a pointer to "" turns its check off.
	Runtime *string
	// Baseline is the baseline file (the -baseline flag); "" means none.
	Baseline string
}

// New returns a fencelint analyzer with a fixed configuration and no
// flags, for drivers that configure analyzers themselves (the golangci-lint
// plugin). tables has the syntax of the -tables flag; "" means the default.
func New(tables string, delete bool) (*analysis.Analyzer, error) {
	return NewWithOptions(Options{Tables: tables, Delete: delete})
}

// NewWithOptions is [New] with every option.
func NewWithOptions(opts Options) (*analysis.Analyzer, error) {
	o, err := opts.parse()
	if err != nil {
		return nil, err
	}
	return &analysis.Analyzer{
		Name:       Analyzer.Name,
		Doc:        Analyzer.Doc,
		URL:        Analyzer.URL,
		Run:        func(pass *analysis.Pass) (any, error) { return runReported(pass, o) },
		FactTypes:  factTypes,
		ResultType: Analyzer.ResultType,
	}, nil
}

// options is the validated configuration of one analyzer.
type options struct {
	sql      *sqlcheck.Config
	sinks    []sinkSpec
	runtime  string
	baseline string
}

func (opts Options) parse() (*options, error) {
	tables := opts.Tables
	if tables == "" {
		tables = sqlcheck.DefaultTables
	}
	ts, err := sqlcheck.ParseTables(tables)
	if err != nil {
		return nil, fmt.Errorf("fencelint -tables: %w", err)
	}
	sinks, err := parseSinks(opts.Sinks)
	if err != nil {
		return nil, fmt.Errorf("fencelint -sinks: %w", err)
	}
	runtime := DefaultRuntime
	if opts.Runtime != nil {
		runtime = *opts.Runtime
	}
	return &options{sql: &sqlcheck.Config{Tables: ts, Delete: opts.Delete}, sinks: sinks, runtime: runtime, baseline: opts.Baseline}, nil
}

// finding is a diagnostic before suppression.
type finding struct {
	pos   token.Pos
	msg   string
	fixes []analysis.SuggestedFix
}

// runReported is run with its error reported as a diagnostic on the
// package clause. go vet (Go 1.26, which runs its tool with -json) caches a
// package whose analysis returned an error as a clean one, and the next run
// replays nothing: a malformed baseline, or an SQL checker that failed,
// would fail the build once and then pass it. A diagnostic is replayed
// from the cache like any finding.
func runReported(pass *analysis.Pass, o *options) (any, error) {
	res, err := run(pass, o)
	if err == nil {
		return res, nil
	}
	pos := token.NoPos
	if len(pass.Files) > 0 {
		pos = pass.Files[0].Package
	}
	pass.Report(analysis.Diagnostic{Pos: pos, Message: "fencelint cannot judge this package: " + err.Error()})
	return &Result{}, nil
}

func run(pass *analysis.Pass, o *options) (any, error) {
	if inGoroot(pass) {
		return &Result{}, nil // the standard library writes no fenced table
	}
	var b *baseline.Baseline
	if o.baseline != "" {
		var err error
		if b, err = loadBaseline(pass, o.baseline); err != nil {
			return nil, err
		}
	}
	c := newChecker(pass, withGenerated(pass, o))
	c.walk()
	c.settle()
	c.exportFacts()
	if err := sqlcheck.Failure(); err != nil {
		return nil, err
	}
	return report(pass, b, append(c.out.list, runtimeUses(pass, o.runtime)...)), nil
}

// inGoroot reports whether the package is part of the standard library.
// Its functions then have no facts: a call of strings.Replace on a query
// is an edit, whatever strings.Replace returns on some paths.
func inGoroot(pass *analysis.Pass) bool {
	if len(pass.Files) == 0 {
		return true
	}
	root := goroot()
	if root == "" {
		return false
	}
	name := pass.Fset.File(pass.Files[0].Pos()).Name()
	return strings.HasPrefix(name, filepath.Join(root, "src")+string(filepath.Separator))
}

// goroot is the Go installation's root. A fencelint built with -trimpath
// (as release builds are) has none compiled in (build.Default.GOROOT is
// empty), and then read the standard library as user code: facts on
// fmt.Sprintf and strings functions that hid findings (TestAnalyzer failed
// when its binary was built with -trimpath). build.Default.GOROOT reads
// $GOROOT (which go vet sets for its tool); without it, fencelint asks the
// go command on PATH, once.
var goroot = sync.OnceValue(func() string {
	if root := build.Default.GOROOT; root != "" {
		return root
	}
	out, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
})

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

// report applies //fencelint:allow directives, then the baseline b (if
// any), and reports what remains, plus the directives that lack a reason
// or suppress nothing, and the baseline's entries for this package that no
// longer match. It returns the findings that directives left, with their
// baseline keys.
func report(pass *analysis.Pass, b *baseline.Baseline, fs []finding) *Result {
	// Source order (file name, then offset), not token.Pos order: the
	// loader parses a package's files concurrently, so the files' bases in
	// the file set, and Pos order across files, change from run to run.
	before := func(p, q token.Pos) bool {
		a, b := pass.Fset.Position(p), pass.Fset.Position(q)
		if a.Filename != b.Filename {
			return a.Filename < b.Filename
		}
		return a.Offset < b.Offset
	}
	sort.SliceStable(fs, func(i, j int) bool { return before(fs[i].pos, fs[j].pos) })
	dirs := directives(pass)
	var left []finding
	type seenKey struct {
		pos token.Pos
		msg string
	}
	seen := map[seenKey]bool{}
	for _, f := range fs {
		if seen[seenKey{f.pos, f.msg}] {
			continue
		}
		seen[seenKey{f.pos, f.msg}] = true
		p := pass.Fset.Position(f.pos)
		suppressed := false
		for _, line := range []int{p.Line, p.Line - 1} {
			if d := dirs[dirKey{p.Filename, line}]; d != nil && d.reason != "" {
				d.used = true
				suppressed = true
			}
		}
		if !suppressed {
			left = append(left, f)
		}
	}
	res := &Result{}
	files := map[string]*ast.File{}
	for _, f := range pass.Files {
		name := pass.Fset.File(f.Pos()).Name()
		files[name] = f
		res.Files = append(res.Files, relFile(pass, name))
	}
	keys := make([]baseline.Key, len(left))
	for i, f := range left {
		keys[i] = keyOf(pass, files, f)
		res.Findings = append(res.Findings, Finding{Pos: f.pos, Key: keys[i]})
	}
	if b != nil {
		left = applyBaseline(pass, b, left, keys)
	}
	var out []analysis.Diagnostic
	for _, f := range left {
		out = append(out, analysis.Diagnostic{Pos: f.pos, Message: f.msg, SuggestedFixes: f.fixes})
	}
	for _, d := range dirs {
		switch {
		case d.reason == "":
			out = append(out, analysis.Diagnostic{Pos: d.pos, Message: "//fencelint:allow needs a reason: write //fencelint:allow <why this write is safe>; without one it suppresses nothing"})
		case !d.used:
			out = append(out, analysis.Diagnostic{Pos: d.pos, Message: "//fencelint:allow suppresses nothing on this line or the next: remove it"})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return before(out[i].Pos, out[j].Pos) })
	for _, d := range out {
		pass.Report(d)
	}
	return res
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
