package migrations_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// atlas.hcl is what CLI users run; the CLI cannot be installed here, so this
// checks what can be checked: it parses, and its local environment points at
// this directory and at MySQL URLs.
func TestAtlasHCLDescribesThisDirectory(t *testing.T) {
	src, err := os.ReadFile("../atlas.hcl")
	if err != nil {
		t.Fatal(err)
	}
	f, diags := hclsyntax.ParseConfig(src, "atlas.hcl", hcl.InitialPos)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	content, diags := f.Body.Content(&hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{
		{Type: "variable", LabelNames: []string{"name"}},
		{Type: "env", LabelNames: []string{"name"}},
	}})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	var local *hcl.Block
	defaults := map[string]string{}
	for _, b := range content.Blocks {
		switch b.Type {
		case "env":
			if b.Labels[0] == "local" {
				local = b
			}
		case "variable":
			attrs, _ := b.Body.JustAttributes()
			if d, ok := attrs["default"]; ok {
				v, diags := d.Expr.Value(nil)
				if !diags.HasErrors() {
					defaults[b.Labels[0]] = v.AsString()
				}
			}
		}
	}
	if local == nil {
		t.Fatal(`atlas.hcl has no env "local"`)
	}
	body, diags := local.Body.Content(&hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{{Name: "url", Required: true}, {Name: "dev", Required: true}, {Name: "src"}},
		Blocks:     []hcl.BlockHeaderSchema{{Type: "migration"}},
	})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if len(body.Blocks) != 1 {
		t.Fatal("env local needs one migration block")
	}
	mig, diags := body.Blocks[0].Body.JustAttributes()
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	dir, diags := mig["dir"].Expr.Value(nil)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	path, ok := strings.CutPrefix(dir.AsString(), "file://")
	if !ok {
		t.Fatalf("migration dir %q is not a file:// URL", dir.AsString())
	}
	if _, err := os.Stat(filepath.Join("..", path, "atlas.sum")); err != nil {
		t.Fatalf("migration dir %q: %v", path, err)
	}
	for _, name := range []string{"url", "dev"} {
		if !strings.HasPrefix(defaults[name], "mysql://") {
			t.Errorf("variable %q defaults to %q, want a mysql:// URL", name, defaults[name])
		}
	}
}
