package analyzer

import (
	"fmt"
	"go/ast"
	"go/types"
	"strings"
)

// The sinks unit (sinkUnit): which calls send a query to the database,
// and which argument is the query. It lives in sinks.go and sqlc.go; a
// newcomer can read and change it without the rest of the checker.
//
// What it judges. A call of a named function or method is a sink when fn
// is one of:
//
//   - Methods named Exec…, Query…, Prepare…, MustExec…, NamedExec… or
//     NamedQuery… whose query is the first parameter, or the second after a
//     context.Context: database/sql, Ent's raw ExecContext/QueryContext and
//     dialect.Driver, sqlx, goqu's Database, gorm's DB.Exec, pgx-style
//     interfaces of that shape.
//   - gorm's (*DB).Raw.
//   - sqlx's package functions (sqlx.NamedExec(db, query, arg), …): the
//     first string parameter.
//   - Library entry points that the name shape misses (libSinks): bun's
//     NewRaw, xorm's Exec/Query…/SQL (the query is an any: the first
//     element of sqlOrArgs ...any, or SQL's query any), gocraft/dbr's
//     …BySql.
//   - The names configured with -sinks: the first string parameter.
//
// Functions that pass a string parameter to a sink (wrappers, and their
// facts across packages) are the wrappers unit's, not this one's. The unit
// also recognises sqlc's expansion of a sqlc.slice marker (sqlc.go), which
// keeps a query what it was.
//
// Inputs: the called function (and the call's syntax), the -sinks
// configuration, the package's type information, and, through the narrow
// staticEval interface, the value of constant strings (the SQL text unit).
//
// Outputs: answers only (sinkQueryIndex, directSite, sqlcSlice); no state,
// no findings, no facts.
//
// How it plugs into the checker: newChecker makes one sinkUnit per pass
// (checker.sinks). The walk asks directSite of each call of a named
// function; the SQL text unit (suggested fixes), the checker's
// exportFacts and SSA's call forms ask sinkQueryIndex, the flow unit's
// evaluator sqlcSlice.
type sinkUnit struct {
	info  *types.Info
	sinks []sinkSpec // -sinks
	strs  staticEval
}

// staticEval is what the sinks unit asks of the SQL text unit.
type staticEval interface {
	// static is the value of a constant string expression.
	static(e ast.Expr) (string, bool)
}

func newSinkUnit(info *types.Info, sinks []sinkSpec) *sinkUnit {
	return &sinkUnit{info: info, sinks: sinks}
}

// directSite reports whether fn, called by call, is a sink (see above),
// and returns the index of the query argument when that call sends a
// query the walk must follow: a string that is not a constant (constants
// are the SQL text unit's), else -1.
func (sk *sinkUnit) directSite(call *ast.CallExpr, fn *types.Func) (query int, sink bool) {
	i := sk.sinkQueryIndex(fn)
	if i < 0 {
		return -1, false
	}
	// An any parameter (xorm, bun's variadic any) holds a query only
	// when a string is passed, or as the first element of a spread slice
	// (xorm's Exec(append([]any{q}, args...)...)): the flow unit and SSA
	// follow the slice to its first element.
	if i == len(call.Args)-1 && spreadQuery(call, fn) {
		return i, true
	}
	if i < len(call.Args) && stringish(sk.info.TypeOf(call.Args[i])) {
		if _, ok := sk.strs.static(call.Args[i]); !ok {
			return i, true
		}
	}
	return -1, true
}

// spreadQuery reports whether call passes fn's query as the first
// element of a spread ...any slice.
func spreadQuery(call *ast.CallExpr, fn *types.Func) bool {
	sig := fn.Signature()
	if !call.Ellipsis.IsValid() || !sig.Variadic() || len(call.Args) != sig.Params().Len() {
		return false
	}
	last := sig.Params().At(sig.Params().Len() - 1).Type().(*types.Slice)
	return isEmptyInterface(last.Elem())
}

var sinkPrefixes = []string{"Exec", "Query", "Prepare", "MustExec", "NamedExec", "NamedQuery"}

func sinkName(name string) bool {
	for _, p := range sinkPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

const (
	sqlxPath  = "github.com/jmoiron/sqlx"
	gormPath  = "gorm.io/gorm"
	gorm1Path = "github.com/jinzhu/gorm"
)

// sqlxFuncs are sqlx's package-level functions that run a query.
var sqlxFuncs = map[string]bool{
	"NamedExec": true, "NamedExecContext": true, "MustExec": true, "MustExecContext": true,
	"NamedQuery": true, "NamedQueryContext": true, "Get": true, "GetContext": true,
	"Select": true, "SelectContext": true,
}

// libSinks are functions and methods (any receiver, interfaces included)
// of database libraries that send the query given to them, by package
// path. Their query is the first parameter that is a string or an empty
// interface (xorm's Exec(sqlOrArgs ...any): its first element).
var libSinks = map[string]map[string]bool{
	// uptrace/bun: db.NewRaw(q, args...).Exec(ctx) on DB, Tx, Conn and the
	// IDB interface. Its Exec/Query…(Context) match the name shape.
	"github.com/uptrace/bun": {"NewRaw": true},
	// xorm: Engine, Session, EngineGroup and the Interface interface.
	"xorm.io/xorm":            xormSinks,
	"github.com/go-xorm/xorm": xormSinks,
	// gocraft/dbr: Session, Tx, the SessionRunner interface and the
	// package functions.
	"github.com/gocraft/dbr/v2": dbrSinks,
	"github.com/gocraft/dbr":    dbrSinks,
}

var (
	xormSinks = map[string]bool{"Exec": true, "Query": true, "QueryString": true, "QueryInterface": true, "SQL": true}
	dbrSinks  = map[string]bool{"UpdateBySql": true, "InsertBySql": true, "DeleteBySql": true, "SelectBySql": true}
)

// sinkSpec is one -sinks entry: a bare name, a package function or a
// method.
type sinkSpec struct {
	path, typ, name string // path and typ empty for a bare name
}

func parseSinks(spec string) ([]sinkSpec, error) {
	var out []sinkSpec
	for _, item := range strings.Split(spec, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		slash := strings.LastIndex(item, "/")
		f := strings.Split(item[slash+1:], ".")
		var s sinkSpec
		switch len(f) {
		case 1:
			if slash >= 0 {
				return nil, fmt.Errorf("parse sink %q: want Name, path/to/pkg.Func or path/to/pkg.Type.Method", item)
			}
			s.name = f[0]
		case 2:
			s.path, s.name = item[:slash+1]+f[0], f[1]
		case 3:
			s.path, s.typ, s.name = item[:slash+1]+f[0], strings.TrimPrefix(f[1], "*"), f[2]
		default:
			return nil, fmt.Errorf("parse sink %q: want Name, path/to/pkg.Func or path/to/pkg.Type.Method", item)
		}
		for _, part := range []string{s.path, s.typ, s.name} {
			if strings.ContainsAny(part, " ()*") {
				return nil, fmt.Errorf("parse sink %q: want Name, path/to/pkg.Func or path/to/pkg.Type.Method", item)
			}
		}
		if s.name == "" || s.path == "" && slash >= 0 {
			return nil, fmt.Errorf("parse sink %q: want Name, path/to/pkg.Func or path/to/pkg.Type.Method", item)
		}
		out = append(out, s)
	}
	return out, nil
}

func (s sinkSpec) matches(fn *types.Func) bool {
	if fn.Name() != s.name {
		return false
	}
	if s.path == "" {
		return true
	}
	if fn.Pkg() == nil || fn.Pkg().Path() != s.path {
		return false
	}
	recv := fn.Signature().Recv()
	if s.typ == "" {
		return recv == nil
	}
	if recv == nil {
		return false
	}
	t := recv.Type()
	if p, ok := t.(*types.Pointer); ok {
		t = p.Elem()
	}
	n, ok := t.(*types.Named)
	return ok && n.Obj().Name() == s.typ
}

// sinkQueryIndex returns the index of the query parameter of fn when fn is
// a SQL sink (see above, facts aside), else -1.
func (sk *sinkUnit) sinkQueryIndex(fn *types.Func) int {
	sig := fn.Signature()
	for _, s := range sk.sinks {
		if s.matches(fn) {
			return firstString(sig, 0)
		}
	}
	path := ""
	if fn.Pkg() != nil {
		path = fn.Pkg().Path()
	}
	if libSinks[path][fn.Name()] {
		return firstQuery(sig)
	}
	if sig.Recv() == nil {
		if path == sqlxPath && sqlxFuncs[fn.Name()] {
			return firstString(sig, 0)
		}
		return -1
	}
	if fn.Name() == "Raw" && (path == gormPath || path == gorm1Path) {
		return firstString(sig, 0)
	}
	if !sinkName(fn.Name()) {
		return -1
	}
	params := sig.Params()
	i := 0
	if params.Len() > 0 && isContext(params.At(0).Type()) {
		i = 1
	}
	if params.Len() > i && isString(params.At(i).Type()) && !(sig.Variadic() && i == params.Len()-1) {
		return i
	}
	return -1
}

// firstString returns the index of the first string parameter of sig at or
// after from, not variadic, or -1.
func firstString(sig *types.Signature, from int) int {
	params := sig.Params()
	for i := from; i < params.Len(); i++ {
		if sig.Variadic() && i == params.Len()-1 {
			break
		}
		if isString(params.At(i).Type()) {
			return i
		}
	}
	return -1
}

// firstQuery returns the index of the first parameter of sig that is a
// string or an empty interface, the variadic one included (its first
// element), or -1.
func firstQuery(sig *types.Signature) int {
	params := sig.Params()
	for i := 0; i < params.Len(); i++ {
		t := params.At(i).Type()
		if sig.Variadic() && i == params.Len()-1 {
			if s, ok := t.(*types.Slice); ok {
				t = s.Elem()
			}
		}
		if isString(t) || isEmptyInterface(t) {
			return i
		}
	}
	return -1
}

func isEmptyInterface(t types.Type) bool {
	it, ok := t.Underlying().(*types.Interface)
	return ok && it.Empty()
}

// identityArg returns the index of the argument that fn returns unchanged
// for fencelint's purposes: sqlx's Rebind (placeholders rewritten to $1
// or @p1, which fencelint reads as bound values) and strings.TrimSpace.
func identityArg(fn *types.Func) int {
	if fn.Pkg() == nil {
		return -1
	}
	sig := fn.Signature()
	switch {
	case fn.Pkg().Path() == "strings" && fn.Name() == "TrimSpace" && sig.Recv() == nil:
		return 0
	case fn.Name() == "Rebind" && fn.Pkg().Path() == sqlxPath:
		return firstString(sig, 0)
	}
	return -1
}

// messageCall reports whether fn formats a message rather than SQL: a
// string passed to it that the grammar does not read is not reported by
// its shape ("UPDATE refund_jobs SET state = 'x' failed").
func messageCall(fn types.Object) bool {
	if fn == nil {
		return false
	}
	if b, ok := fn.(*types.Builtin); ok {
		return b.Name() == "panic" || b.Name() == "print" || b.Name() == "println"
	}
	if fn.Pkg() != nil {
		switch fn.Pkg().Path() {
		case "errors", "fmt", "log", "log/slog", "testing":
			return fn.Name() != "Sprintf" && fn.Name() != "Sprint" && fn.Name() != "Sprintln"
		}
	}
	for _, p := range []string{"Error", "Warn", "Info", "Debug", "Fatal", "Panic", "Log", "Print", "Trace"} {
		if strings.HasPrefix(fn.Name(), p) {
			return true
		}
	}
	return false
}
