package analyzer

import (
	"errors"
	"fmt"
	"go/ast"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/fencekit/fencekit/analyzer/baseline"
	"golang.org/x/tools/go/analysis"
)

// Result is the analyzer's result for a package: its findings after
// //fencelint:allow directives and before the baseline, each with its
// baseline key. fencelint -write-baseline records them; the directives'
// own problems are not findings and are never in a baseline.
type Result struct {
	Findings []Finding
	// Files are the names of the package's files as a baseline records
	// them: an entry of this package for one of them is judged by this
	// pass.
	Files []string
}

// Finding is one finding and the baseline entry that would accept it.
type Finding struct {
	Pos token.Pos
	Key baseline.Key
}

// baselines caches parsed baseline files by path, size and modification
// time: the standalone command checks many packages in one process.
var baselines sync.Map // baselineStamp -> *loadedBaseline

type baselineStamp struct {
	path string
	size int64
	mod  time.Time
}

type loadedBaseline struct {
	once sync.Once
	b    *baseline.Baseline
	err  error
}

// loadBaseline finds and reads the baseline named by flag (the -baseline
// value) for pass. It returns nil, nil when the package lies outside any
// module and flag is relative (a generated test main in the build cache):
// no entry can name its files. A relative path found nowhere above the
// package is not an error but a diagnostic (every finding is reported
// too): a dependency in the module cache, analysed for its facts only,
// does not see the file, and its diagnostics are not shown.
func loadBaseline(pass *analysis.Pass, flag string) (*baseline.Baseline, error) {
	dir := filepath.Dir(pass.Fset.File(pass.Files[0].Pos()).Name())
	if !filepath.IsAbs(flag) && baseline.ModuleRoot(dir) == "" {
		return nil, nil
	}
	path, err := baseline.Locate(flag, dir)
	if errors.Is(err, fs.ErrNotExist) && !filepath.IsAbs(flag) {
		pass.Report(analysis.Diagnostic{Pos: pass.Files[0].Package, Message: fmt.Sprintf(
			"fencelint baseline %s is not in %s or any parent directory: every finding of this package is reported", flag, dir)})
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("read fencelint baseline: %w", err)
	}
	v, _ := baselines.LoadOrStore(baselineStamp{path, st.Size(), st.ModTime()}, &loadedBaseline{})
	l := v.(*loadedBaseline)
	l.once.Do(func() {
		l.b, l.err = baseline.Read(path)
		if l.err == nil {
			l.b.Path = flag // messages name the file as the flag does
		}
	})
	return l.b, l.err
}

// keyOf is the baseline key of a finding.
func keyOf(pass *analysis.Pass, files map[string]*ast.File, f finding) baseline.Key {
	name := pass.Fset.Position(f.pos).Filename
	fn := baseline.PackageLevel
	if file := files[name]; file != nil {
		if d := enclosingDecl(file, f.pos); d != nil {
			fn = declName(d)
		}
	}
	return baseline.Key{Package: pass.Pkg.Path(), File: relFile(pass, name), Func: fn, Message: f.msg}
}

func enclosingDecl(file *ast.File, pos token.Pos) *ast.FuncDecl {
	for _, d := range file.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok && fd.Pos() <= pos && pos < fd.End() {
			return fd
		}
	}
	return nil
}

// declName is Func, or Type.Method whatever the receiver's spelling
// (*T, T[K]).
func declName(d *ast.FuncDecl) string {
	if d.Recv == nil || len(d.Recv.List) == 0 {
		return d.Name.Name
	}
	t := d.Recv.List[0].Type
	for {
		switch x := t.(type) {
		case *ast.StarExpr:
			t = x.X
			continue
		case *ast.ParenExpr:
			t = x.X
			continue
		case *ast.IndexExpr:
			t = x.X
			continue
		case *ast.IndexListExpr:
			t = x.X
			continue
		}
		break
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name + "." + d.Name.Name
	}
	return d.Name.Name
}

// applyBaseline keeps the findings the baseline does not accept, and adds
// a finding for each entry of this package that no longer matches: an
// entry whose findings are fewer than its count (fixed: lower or remove
// it), or whose file no longer exists. An entry whose file exists but is
// not in this pass (a test file in the package's non-test variant, a file
// excluded by build tags) is judged by the pass that holds it. When a key
// has more findings than its entry accepts, all of them are reported,
// each saying so: which one is new cannot be told.
func applyBaseline(pass *analysis.Pass, b *baseline.Baseline, fs []finding, keys []baseline.Key) []finding {
	files := map[string]*ast.File{} // by module-relative name
	for _, f := range pass.Files {
		files[relFile(pass, pass.Fset.File(f.Pos()).Name())] = f
	}
	entries := map[baseline.Key]baseline.Entry{}
	for _, e := range b.Entries {
		if e.Package == pass.Pkg.Path() {
			entries[e.Key] = e
		}
	}
	count := map[baseline.Key]int{}
	for _, k := range keys {
		count[k]++
	}
	var out []finding
	for i, f := range fs {
		e, ok := entries[keys[i]]
		switch {
		case !ok:
			out = append(out, f)
		case count[keys[i]] > e.Count:
			f.msg += fmt.Sprintf(" [baseline %s:%d accepts %d like it in %s, %d found: fix the new one, or accept it with -write-baseline -baseline-add]",
				b.Path, e.Line, e.Count, e.Func, count[keys[i]])
			out = append(out, f)
		}
	}
	for _, e := range b.Entries {
		if e.Package != pass.Pkg.Path() {
			continue
		}
		file := files[e.File]
		if file == nil {
			if !fileGone(pass, e.File) {
				continue // judged where it is analysed
			}
			out = append(out, finding{pos: pass.Files[0].Package, msg: fmt.Sprintf(
				"baseline %s:%d: file %s no longer exists: remove the entry from the baseline: %s", b.Path, e.Line, e.File, e)})
			continue
		}
		n := count[e.Key]
		if n >= e.Count {
			continue
		}
		pos := file.Package
		for _, d := range file.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && declName(fd) == e.Func {
				pos = fd.Name.Pos()
				break
			}
		}
		msg := fmt.Sprintf("baseline %s:%d: fixed: remove the entry from the baseline: %s", b.Path, e.Line, e)
		if n > 0 {
			msg = fmt.Sprintf("baseline %s:%d: fixed %d of %d: lower the entry's count to %d: %s", b.Path, e.Line, e.Count-n, e.Count, n, e)
		}
		out = append(out, finding{pos: pos, msg: msg})
	}
	return out
}

// fileGone reports whether the file rel of the pass's package no longer
// exists. It is in the package's directory: the package's files are.
func fileGone(pass *analysis.Pass, rel string) bool {
	dir := filepath.Dir(pass.Fset.File(pass.Files[0].Pos()).Name())
	_, err := os.Stat(filepath.Join(dir, path.Base(rel)))
	return errors.Is(err, fs.ErrNotExist)
}

// relFile is a file's name as a baseline records it: relative to its
// module's root, in slash form, derived from the package's import path and
// its module's path; its base name outside a module.
func relFile(pass *analysis.Pass, filename string) string {
	base := filepath.Base(filename)
	if pass.Module == nil || pass.Module.Path == "" {
		return base
	}
	dir := filepath.ToSlash(filepath.Dir(filename))
	// An external test package's path ends in _test, its directory does not.
	for _, pkg := range []string{pass.Pkg.Path(), strings.TrimSuffix(pass.Pkg.Path(), "_test")} {
		if pkg == pass.Module.Path {
			return base
		}
		if rel, ok := strings.CutPrefix(pkg, pass.Module.Path+"/"); ok && strings.HasSuffix(dir, "/"+rel) {
			return rel + "/" + base
		}
	}
	return base
}
