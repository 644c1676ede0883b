package entext_test

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"entgo.io/ent/entc"
	"entgo.io/ent/entc/gen"

	"github.com/fencekit/fencekit/ent"
	transcode "github.com/fencekit/fencekit/examples/transcode/ent"
	"github.com/fencekit/fencekit/fencedwrite/entext"
	"github.com/fencekit/fencekit/fencedwrite/fencedrt"
)

// generate runs the generator of the generated package in pkg (../../ent,
// or an example's), exactly as go generate does, into dir.
func generate(t *testing.T, pkg, dir string) {
	t.Helper()
	cmd := exec.Command("go", "run", "entc.go", "-target", dir)
	cmd.Dir = pkg
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go run entc.go in %s: %v\n%s", pkg, err, out)
	}
}

// generated lists the generated files under root, relative to it: all but
// the schema, the generator's own sources and tests.
func generated(t *testing.T, root string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if rel == "schema" {
				return filepath.SkipDir
			}
			return nil
		}
		if rel == "entc.go" || rel == "generate.go" || strings.HasSuffix(rel, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		files[rel] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// Generated code is never edited by hand: generating again from the schema,
// the template and the extension reproduces ent/ exactly, and the
// transcoding example's examples/transcode/ent. When this fails, run
// `go generate ./ent/... ./examples/transcode/ent/...`.
func TestGeneratedCodeIsUpToDate(t *testing.T) {
	for _, pkg := range []string{"ent", "examples/transcode/ent"} {
		t.Run(pkg, func(t *testing.T) {
			t.Parallel()
			root := filepath.Join("..", "..", pkg)
			tmp := t.TempDir()
			generate(t, root, tmp)
			want, got := generated(t, tmp), generated(t, root)
			for name, w := range want {
				g, ok := got[name]
				switch {
				case !ok:
					t.Errorf("%s/%s is missing; run go generate ./%[1]s/...", pkg, name)
				case !bytes.Equal(g, w):
					t.Errorf("%s/%s differs from what the generator writes; run go generate ./%[1]s/... (and never edit it by hand)", pkg, name)
				}
			}
			for name := range got {
				if _, ok := want[name]; !ok {
					t.Errorf("%s/%s is not generated any more; delete it", pkg, name)
				}
			}
		})
	}
}

// The generated layer writes only through fenced statements: the
// generated package declares its table with fencedrt.MustTable (which
// checks every statement's fence, writer declaration, move and argument
// names at init), and declares one statement for every transition of the
// state machine, fenced on the columns its constants name.
func TestGeneratedStatementsAreFenced(t *testing.T) {
	cols := map[string][4]string{
		ent.RefundJobFencedTable: {ent.RefundJobFencedStateColumn, ent.RefundJobFencedTokenColumn, ent.RefundJobFencedWriterColumn, ent.RefundJobFencedLeaseColumn},
		transcode.TranscodeJobFencedTable: {transcode.TranscodeJobFencedStateColumn, transcode.TranscodeJobFencedTokenColumn,
			transcode.TranscodeJobFencedWriterColumn, transcode.TranscodeJobFencedLeaseColumn},
	}
	var tables []string
	for _, f := range ent.FencedTables {
		tables = append(tables, f.Table)
	}
	for _, f := range transcode.FencedTables {
		tables = append(tables, f.Table)
	}
	if len(cols) != len(tables) {
		t.Fatalf("%d fenced tables, %d checked here", len(tables), len(cols))
	}
	for _, name := range tables {
		table, ok := fencedrt.Registered(name)
		if !ok {
			t.Fatalf("the generated package declared no fenced table %s", name)
		}
		state, token, writer, lease := cols[name][0], cols[name][1], cols[name][2], cols[name][3]
		spec := table.Spec()
		if spec.State != state || spec.Token != token || spec.Writer != writer {
			t.Fatalf("%s: the table's columns %s/%s/%s differ from the generated constants", name, spec.State, spec.Token, spec.Writer)
		}
		for op, tr := range fencedrt.Transitions {
			s, ok := spec.Stmts[op]
			if !ok {
				t.Errorf("%s: no statement for %s", name, op)
				continue
			}
			fence := fmt.Sprintf(" WHERE `id` = ? AND `%s` = '%s' AND `%s` = ?", state, tr.From, token)
			if !strings.HasSuffix(s.SQL, fence) || !strings.Contains(s.SQL, "`"+writer+"` = ?") {
				t.Errorf("%s: %s is not fenced: %s", name, op, s.SQL)
			}
			if strings.Contains(s.SQL, "`"+lease+"` >") || strings.Contains(s.SQL, "< `"+lease+"`") {
				t.Errorf("%s: %s makes lease expiry revoke write rights: %s", name, op, s.SQL)
			}
		}
	}
}

// A wrong annotation fails generation with errors that name the schema, the
// annotation field and the problem.
func TestAnnotationMistakesAreNamed(t *testing.T) {
	graph, err := entc.LoadGraph("./testdata/badschema", &gen.Config{})
	if err != nil {
		t.Fatal(err)
	}
	hook := entext.New().Hooks()[0]
	err = hook(gen.GenerateFunc(func(*gen.Graph) error { return nil })).Generate(graph)
	if err == nil {
		t.Fatal("a schema with wrong roles generated")
	}
	for _, want := range []string{
		`fencedwrite: Job: annotation field State: enum "state" lacks the value "manual_review"`,
		`annotation field State: enum "state" lacks the value "failed"`,
		`annotation field Token: column "attempt" must be int64`,
		`annotation field LeaseUntil: column "lease_until" must be Optional and Nillable`,
		`annotation field Writer: names column "writer_attempt", which the schema does not have`,
		`annotation field Params: names column "amount_minor", which the schema does not have`,
		`annotation field Attempts: enum "op" of "job_attempts" lacks the value "resolution"`,
		`annotation field Attempts: column "holder" of "job_attempts" must be immutable: the log is append-only`,
		`annotation field Attempts: table "job_attempts" lacks the column "lease_until"`,
		`fencedwrite: Upload: annotation field NextAction: enum "next_action" lacks the value "upload" (needs upload, reconcile)`,
		`fencedwrite: Echo: annotation field Send: "reconcile" is the reconcile action; name the value that sends the request`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}
