package operator_test

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/fencekit/fencekit/fencedwrite"
	"github.com/fencekit/fencekit/operator"
)

// sentinels reads errors.go and returns the message of every exported
// Err* variable it declares: the sentinels as written, not as listed by
// hand.
func sentinels(t *testing.T) map[string]string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "errors.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.VAR {
			continue
		}
		for _, spec := range g.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, name := range vs.Names {
				if !name.IsExported() || !strings.HasPrefix(name.Name, "Err") {
					continue
				}
				switch v := vs.Values[i].(type) {
				case *ast.CallExpr: // errors.New("...")
					msg, err := strconv.Unquote(v.Args[0].(*ast.BasicLit).Value)
					if err != nil {
						t.Fatal(err)
					}
					out[name.Name] = msg
				case *ast.SelectorExpr: // another package's sentinel
					if v.X.(*ast.Ident).Name+"."+v.Sel.Name != "fencedwrite.ErrInvalid" {
						t.Fatalf("%s = %s.%s: add it to this test", name.Name, v.X, v.Sel)
					}
					out[name.Name] = fencedwrite.ErrInvalid.Error()
				default:
					t.Fatalf("%s: a sentinel this test cannot read", name.Name)
				}
			}
		}
	}
	if len(out) < 15 {
		t.Fatalf("read %d sentinels from errors.go: the walk is blind", len(out))
	}
	return out
}

// Every error the operator API can return has its row in the one table of
// refusals: a status that is not a server error, and a sentence that says
// what was refused. The console and the CLI show that sentence; an
// audited refusal never becomes "internal error".
func TestEveryRefusalIsASentence(t *testing.T) {
	t.Parallel()
	table := map[string]operator.Refusal{}
	for _, r := range operator.Refusals() {
		if _, dup := table[r.Err.Error()]; dup {
			t.Errorf("%q is in the table twice", r.Err)
		}
		table[r.Err.Error()] = r
	}
	for name, msg := range sentinels(t) {
		r, ok := table[msg]
		if !ok {
			t.Errorf("%s (%q) has no row in the table of refusals", name, msg)
			continue
		}
		delete(table, msg)
		if r.Status < 400 || r.Status >= 500 && r.Status != http.StatusServiceUnavailable {
			t.Errorf("%s answers %d: a refusal is the caller's (4xx) or a service to try again (503)", name, r.Status)
		}
		if !strings.HasSuffix(r.Sentence, ".") || len(r.Sentence) < 40 {
			t.Errorf("%s: %q is not a sentence that says what was refused and why", name, r.Sentence)
		}
		// As an action returns it: wrapped, with details.
		wrapped := fmt.Errorf("approve request 7: %w", fmt.Errorf("resend job 3: %w", r.Err))
		if status, sentence := operator.Explain(wrapped); status != r.Status || sentence != r.Sentence && !errors.Is(r.Err, operator.ErrInvalid) {
			t.Errorf("%s wrapped: %d %q, want %d %q", name, status, sentence, r.Status, r.Sentence)
		}
	}
	for msg := range table {
		t.Errorf("the table has a row for %q, which errors.go does not declare", msg)
	}
	// The typed errors say what they carry.
	status, sentence := operator.Explain(fmt.Errorf("resolve: %w", errors.Join(&fencedwrite.FieldError{Field: "reason", Problem: "is required: say why"},
		&fencedwrite.FieldError{Field: "refund-id", Problem: "is required"})))
	if status != http.StatusUnprocessableEntity || !strings.Contains(sentence, "reason: is required: say why; refund-id: is required") {
		t.Errorf("field errors: %d %q", status, sentence)
	}
	status, sentence = operator.Explain(fmt.Errorf("verify: %w", &operator.MismatchError{RefundID: "re_3", Field: "payment", Got: "pay-5", Want: "pay-1"}))
	if status != http.StatusConflict || !strings.Contains(sentence, "belongs to payment pay-5, not this job's payment pay-1") ||
		!strings.Contains(sentence, "never settle this job, not even by override") || strings.Contains(sentence, "may approve an override") {
		t.Errorf("another payment's refund: %d %q", status, sentence)
	}
	if status, _ := operator.Explain(errors.New("driver: bad connection")); status != http.StatusInternalServerError {
		t.Errorf("an error of no sentinel: %d, want 500", status)
	}
}
