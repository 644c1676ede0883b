package entext_test

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"entgo.io/ent/entc"
	"entgo.io/ent/entc/gen"

	"github.com/fencekit/fencekit/fencedwrite/entext"
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

// The generated layer writes only through fenced statements: every UPDATE
// it declares carries the fence and declares the writer attempt.
func TestGeneratedStatementsAreFenced(t *testing.T) {
	src, err := os.ReadFile("../../ent/fenced.go")
	if err != nil {
		t.Fatal(err)
	}
	var updates int
	for _, line := range strings.Split(string(src), "\n") {
		i := strings.Index(line, `"UPDATE `)
		if i < 0 {
			continue
		}
		updates++
		stmt := line[i:]
		for _, want := range []string{"WHERE `id` = ? AND `state` = '", "' AND `attempt` = ?", "`writer_attempt` = ?"} {
			if !strings.Contains(stmt, want) {
				t.Errorf("generated UPDATE lacks %q: %s", want, stmt)
			}
		}
		if strings.Contains(stmt, "`lease_until` >") || strings.Contains(stmt, "< `lease_until`") {
			t.Errorf("generated UPDATE makes lease expiry revoke write rights: %s", stmt)
		}
	}
	// claim, claim to reconcile, takeover, and eight transitions.
	if updates != 11 {
		t.Fatalf("found %d generated UPDATE statements, want 11", updates)
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
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}
