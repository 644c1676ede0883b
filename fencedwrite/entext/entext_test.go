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
	"github.com/fencekit/fencekit/fencedwrite/entext"
	"github.com/fencekit/fencekit/fencedwrite/fencedrt"
)

// generate runs ent's generator, exactly as go generate does, into dir.
func generate(t *testing.T, dir string) {
	t.Helper()
	cmd := exec.Command("go", "run", "entc.go", "-target", dir)
	cmd.Dir = "../../ent"
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go run entc.go: %v\n%s", err, out)
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
// the template and the extension reproduces ent/ exactly. When this fails,
// run `go generate ./ent/...`.
func TestGeneratedCodeIsUpToDate(t *testing.T) {
	tmp := t.TempDir()
	generate(t, tmp)
	want, got := generated(t, tmp), generated(t, "../../ent")
	for name, w := range want {
		g, ok := got[name]
		switch {
		case !ok:
			t.Errorf("ent/%s is missing; run go generate ./ent/...", name)
		case !bytes.Equal(g, w):
			t.Errorf("ent/%s differs from what the generator writes; run go generate ./ent/... (and never edit it by hand)", name)
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("ent/%s is not generated any more; delete it", name)
		}
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
		ent.TranscodeJobFencedTable: {ent.TranscodeJobFencedStateColumn, ent.TranscodeJobFencedTokenColumn, ent.TranscodeJobFencedWriterColumn,
			ent.TranscodeJobFencedLeaseColumn},
	}
	if len(cols) != len(ent.FencedTables) {
		t.Fatalf("%d fenced tables, %d checked here", len(ent.FencedTables), len(cols))
	}
	for _, f := range ent.FencedTables {
		table, ok := fencedrt.Registered(f.Table)
		if !ok {
			t.Fatalf("the generated package declared no fenced table %s", f.Table)
		}
		state, token, writer, lease := cols[f.Table][0], cols[f.Table][1], cols[f.Table][2], cols[f.Table][3]
		spec := table.Spec()
		if spec.State != state || spec.Token != token || spec.Writer != writer {
			t.Fatalf("%s: the table's columns %s/%s/%s differ from the generated constants", f.Table, spec.State, spec.Token, spec.Writer)
		}
		for op, tr := range fencedrt.Transitions {
			s, ok := spec.Stmts[op]
			if !ok {
				t.Errorf("%s: no statement for %s", f.Table, op)
				continue
			}
			fence := fmt.Sprintf(" WHERE `id` = ? AND `%s` = '%s' AND `%s` = ?", state, tr.From, token)
			if !strings.HasSuffix(s.SQL, fence) || !strings.Contains(s.SQL, "`"+writer+"` = ?") {
				t.Errorf("%s: %s is not fenced: %s", f.Table, op, s.SQL)
			}
			if strings.Contains(s.SQL, "`"+lease+"` >") || strings.Contains(s.SQL, "< `"+lease+"`") {
				t.Errorf("%s: %s makes lease expiry revoke write rights: %s", f.Table, op, s.SQL)
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
