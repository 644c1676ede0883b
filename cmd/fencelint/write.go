package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/fencekit/fencekit/analyzer"
	"github.com/fencekit/fencekit/analyzer/baseline"
	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/analysis/checker"
	"golang.org/x/tools/go/packages"
)

// writeMode reports whether the command line asks for -write-baseline.
func writeMode(args []string) bool { return hasFlag(args, "write-baseline") }

const writeUsage = `usage: fencelint -write-baseline FILE [-baseline-add] [-test=false] [analyzer flags] packages...

Runs fencelint over the packages and writes FILE, the baseline of accepted
findings. A new FILE takes every finding. An existing FILE only shrinks:
entries (and parts of counts) that no longer match a finding are removed,
and findings it does not hold are printed and left out (exit status 3)
unless -baseline-add is given. Entries for packages or files the run did
not analyse are kept, unless their file no longer exists.
`

// writeBaseline is the -write-baseline mode; it returns the exit status:
// 0 written, 3 written but findings were left out, 1 an error (nothing
// written).
func writeBaseline(args []string, stderr io.Writer) int {
	fset := flag.NewFlagSet("fencelint", flag.ContinueOnError)
	fset.SetOutput(stderr)
	fset.Usage = func() {
		fmt.Fprint(stderr, writeUsage)
		fset.PrintDefaults()
	}
	analyzer.Analyzer.Flags.VisitAll(func(f *flag.Flag) { fset.Var(f.Value, f.Name, f.Usage) })
	file := fset.String("write-baseline", "", "the baseline file to write")
	add := fset.Bool("baseline-add", false, "add findings that the existing baseline does not hold (new debt, for review)")
	tests := fset.Bool("test", true, "analyse test files too")
	if err := fset.Parse(args); err != nil {
		return 1
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "fencelint -write-baseline: "+format+"\n", a...)
		return 1
	}
	switch {
	case *file == "":
		return fail("needs a file name: -write-baseline FILE")
	case fset.Lookup("baseline").Value.String() != "":
		return fail("-baseline is for checking; -write-baseline reads and rewrites its own file: drop -baseline")
	case fset.NArg() == 0:
		return fail("no packages given (for example ./...)")
	}

	// The run records every finding: no baseline filters it.
	os.Unsetenv(analyzer.BaselineEnv)

	var old *baseline.Baseline
	if _, err := os.Stat(*file); err == nil {
		if old, err = baseline.Read(*file); err != nil {
			return fail("%v", err)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fail("%v", err)
	}

	cfg := &packages.Config{Mode: packages.LoadAllSyntax | packages.NeedModule, Tests: *tests}
	pkgs, err := packages.Load(cfg, fset.Args()...)
	if err != nil {
		return fail("load packages: %v", err)
	}
	if len(pkgs) == 0 {
		return fail("%s matched no packages", strings.Join(fset.Args(), " "))
	}
	if packages.PrintErrors(pkgs) > 0 {
		// A package that does not compile has no findings: its entries
		// would be dropped as fixed.
		return fail("packages have errors: the baseline is not written")
	}
	graph, err := checker.Analyze([]*analysis.Analyzer{analyzer.Analyzer}, pkgs, nil)
	if err != nil {
		return fail("%v", err)
	}

	type fileKey struct{ pkg, file string }
	judged := map[fileKey]bool{}
	pkgDirs := map[string]string{} // package path -> directory
	modules := map[string]string{} // module path -> directory
	seen := map[string]bool{}      // position + message: test variants repeat findings
	var found []baseline.Found
	for _, act := range graph.Roots {
		if act.Err != nil {
			return fail("%s: %v", act.Package.PkgPath, act.Err)
		}
		res, _ := act.Result.(*analyzer.Result)
		if res == nil || act.Package.Types == nil {
			continue
		}
		pkg := act.Package.Types.Path()
		for _, f := range res.Files {
			judged[fileKey{pkg, f}] = true
		}
		if len(act.Package.GoFiles) > 0 {
			pkgDirs[pkg] = filepath.Dir(act.Package.GoFiles[0])
		}
		if m := act.Package.Module; m != nil && m.Path != "" && m.Dir != "" {
			modules[m.Path] = m.Dir
		}
		for _, f := range res.Findings {
			pos := act.Package.Fset.Position(f.Pos)
			id := pos.String() + "\x00" + f.Key.Message
			if seen[id] {
				continue
			}
			seen[id] = true
			found = append(found, baseline.Found{Key: f.Key, Pos: pos})
		}
	}
	// gone: the entry's file no longer exists, in its package's directory
	// if the run saw the package, else under a module the run saw.
	gone := func(k baseline.Key) bool {
		dir, ok := pkgDirs[k.Package]
		if !ok {
			for mpath, mdir := range modules {
				if k.Package == mpath || strings.HasPrefix(k.Package, mpath+"/") {
					dir, ok = filepath.Join(mdir, filepath.FromSlash(strings.TrimPrefix(strings.TrimPrefix(k.Package, mpath), "/"))), true
					break
				}
			}
		}
		if !ok {
			return false
		}
		_, err := os.Stat(filepath.Join(dir, path.Base(k.File)))
		return errors.Is(err, fs.ErrNotExist)
	}
	u := baseline.Rewrite(old, found, func(k baseline.Key) bool { return judged[fileKey{k.Package, k.File}] }, gone, *add)

	tmp := *file + ".tmp"
	if err := os.WriteFile(tmp, baseline.Format(u.Entries), 0o644); err != nil {
		return fail("%v", err)
	}
	if err := os.Rename(tmp, *file); err != nil {
		os.Remove(tmp)
		return fail("%v", err)
	}

	for _, e := range u.Removed {
		fmt.Fprintf(stderr, "fencelint: %s: removed %d fixed: %s\n", *file, e.Count, entryText(e))
	}
	if old != nil {
		for _, f := range u.Added {
			fmt.Fprintf(stderr, "%s: %s (added to %s)\n", f.Pos, f.Message, *file)
		}
	}
	for _, f := range u.NotAdded {
		fmt.Fprintf(stderr, "%s: %s (not in %s: fix it, or accept it with -baseline-add)\n", f.Pos, f.Message, *file)
	}
	total := 0
	for _, e := range u.Entries {
		total += e.Count
	}
	fmt.Fprintf(stderr, "fencelint: wrote %s: %d entries accepting %d findings (removed %d, added %d, left out %d)\n",
		*file, len(u.Entries), total, count(u.Removed), len(u.Added), len(u.NotAdded))
	if len(u.NotAdded) > 0 {
		return 3
	}
	return 0
}

// entryText renders an entry without its count, as it reads in the file.
func entryText(e baseline.Entry) string {
	return strings.Join([]string{e.Package, e.File, e.Func, e.Message}, " ")
}

func count(es []baseline.Entry) int {
	n := 0
	for _, e := range es {
		n += e.Count
	}
	return n
}
