package main

import (
	"go/ast"
	"go/types"
	"slices"
	"strings"
	"testing"

	"golang.org/x/tools/go/packages"
)

const module = "github.com/fencekit/fencekit"

// Operators decide through the operator API only: the console and the
// CLI's operator commands (jobs, resolve, approve, the console's set-up)
// never write a job, a ledger row or evidence by themselves (issue 19). The
// test reads their code: from each root it follows every function of the
// same package they refer to (a call, a method value, a closure, go or
// defer alike: any reference counts), and reports every reference to a
// function that writes outside the operator API. It is proved to see such
// writes on testdata/rogueops, and to see both front ends reach the API's
// decisions.
func TestOperatorsWriteOnlyThroughTheOperatorAPI(t *testing.T) {
	cfg := &packages.Config{Mode: packages.NeedName | packages.NeedTypes | packages.NeedSyntax | packages.NeedTypesInfo}
	pkgs, err := packages.Load(cfg, module+"/internal/console", module+"/cmd/refundd", module+"/cmd/refundd/testdata/rogueops")
	if err != nil {
		t.Fatal(err)
	}
	if packages.PrintErrors(pkgs) > 0 || len(pkgs) != 3 {
		t.Fatalf("loading: %d packages, errors above", len(pkgs))
	}
	byPath := map[string]*packages.Package{}
	for _, p := range pkgs {
		byPath[p.PkgPath] = p
	}

	console := walkRefs(byPath[module+"/internal/console"], nil)
	cli := walkRefs(byPath[module+"/cmd/refundd"], []string{"jobs", "resolve", "approve", "openOperator", "newConsole"})
	for name, refs := range map[string]refs{"internal/console": console, "cmd/refundd (operator commands)": cli} {
		for _, w := range refs.writes {
			t.Errorf("%s writes outside the operator API: %s", name, w)
		}
		for _, m := range []string{"Resolve", "RequestApproval", "Approve", "Decline"} {
			if !refs.api[m] {
				t.Errorf("%s never reaches the operator API's %s: the walk is blind or the front end bypasses the API", name, m)
			}
		}
	}

	rogue := walkRefs(byPath[module+"/cmd/refundd/testdata/rogueops"], nil)
	var got []string
	for _, w := range rogue.writes {
		got = append(got, w[strings.LastIndex(w, " ")+1:])
	}
	want := []string{"(*database/sql.DB).ExecContext", "(*github.com/fencekit/fencekit/ent.RefundJobClient).UpdateOneID",
		"(*github.com/fencekit/fencekit/ent.RefundJobUpdateOne).Exec", "github.com/fencekit/fencekit/evidence.Record"}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("on testdata/rogueops the walk found\n\t%s\nwant\n\t%s", strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
	}
	if !rogue.api["Resolve"] {
		t.Error("on testdata/rogueops the walk did not see the operator API's Resolve")
	}
}

// refs is what a walk found: references to writes ("file:line: function"),
// and the operator API's methods reached.
type refs struct {
	writes []string
	api    map[string]bool
}

// walkRefs follows the functions of pkg from roots (names of functions or
// methods; every function of pkg when nil).
func walkRefs(pkg *packages.Package, roots []string) refs {
	decls := map[*types.Func]*ast.FuncDecl{}
	var todo []*types.Func
	for _, f := range pkg.Syntax {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok {
				continue
			}
			fn := pkg.TypesInfo.Defs[fd.Name].(*types.Func)
			decls[fn] = fd
			if roots == nil || slices.Contains(roots, fn.Name()) {
				todo = append(todo, fn)
			}
		}
	}
	r := refs{api: map[string]bool{}}
	seen := map[*types.Func]bool{}
	for len(todo) > 0 {
		fn := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		if seen[fn] {
			continue
		}
		seen[fn] = true
		ast.Inspect(decls[fn], func(n ast.Node) bool {
			id, ok := n.(*ast.Ident)
			if !ok {
				return true
			}
			callee, ok := pkg.TypesInfo.Uses[id].(*types.Func)
			if !ok || callee.Pkg() == nil {
				return true
			}
			callee = callee.Origin()
			switch {
			case callee.Pkg() == pkg.Types:
				if decls[callee] != nil {
					todo = append(todo, callee)
				}
			case callee.Pkg().Path() == module+"/operator":
				r.api[callee.Name()] = true
			case writes(callee):
				r.writes = append(r.writes, pkg.Fset.Position(id.Pos()).String()+": "+callee.FullName())
			}
			return true
		})
	}
	slices.Sort(r.writes)
	return r
}

// writeVerbs are the names under which the data layer, Ent and
// database/sql change rows or open a transaction to.
var writeVerbs = map[string]bool{
	"Exec": true, "ExecX": true, "ExecContext": true, "Begin": true, "BeginTx": true, "Tx": true,
	"Save": true, "SaveX": true, "Create": true, "CreateBulk": true, "MapCreateBulk": true,
	"Update": true, "UpdateOne": true, "UpdateOneID": true, "Delete": true, "DeleteOne": true, "DeleteOneID": true,
	"Claim": true, "Takeover": true, "ClaimDue": true, "ClaimDueReconciles": true, "TakeoverExpired": true,
	"Complete": true, "Reschedule": true, "ManualReview": true, "Fail": true, "WakeUp": true,
	"ResolveSucceeded": true, "ResolveReconcile": true, "ResolveRefund": true,
	"Apply": true, "ApplyBatch": true, "Run": true, "Fence": true, "DeferRow": true, "Enqueue": true,
}

// writes reports whether fn may write a row outside the operator API: any
// function of the packages that write jobs, the ledger or evidence, and the
// write verbs of Ent, its SQL dialect and database/sql.
func writes(fn *types.Func) bool {
	path := fn.Pkg().Path()
	switch {
	case path == module+"/ledger", path == module+"/evidence", path == module+"/worker",
		strings.HasPrefix(path, module+"/fencedwrite/fencedrt"):
		return true
	case path == module+"/ent", strings.HasPrefix(path, module+"/ent/"),
		path == "database/sql", strings.HasPrefix(path, "entgo.io/ent/dialect"):
		return writeVerbs[fn.Name()]
	}
	return false
}
