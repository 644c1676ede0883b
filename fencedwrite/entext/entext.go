// Package entext is the Ent extension that generates fenced mutators.
//
// For every schema annotated with fencedwrite.Annotation it generates, in the
// Ent package: the lease type (fields settable only there), Claim and
// Takeover, every other transition of the state machine built from a lease
// or from an attempt the caller read, the transaction runner (Apply, Run,
// Fence), Enqueue, and the runtime backstop that the generated client
// installs on itself. All statements are generated as constant SQL that
// carries `WHERE id AND state AND attempt` and declares the writer attempt,
// so fencelint can check them like any other code.
//
// Use it from entc:
//
//	entc.Generate("./schema", &gen.Config{...}, entc.Extensions(entext.New()))
package entext

import (
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"text/template"

	"entgo.io/ent/entc"
	"entgo.io/ent/entc/gen"
	"entgo.io/ent/schema/field"

	"github.com/fencekit/fencekit/fencedwrite"
	"github.com/fencekit/fencekit/fencedwrite/fencedrt"
)

//go:embed template/*.tmpl
var templateFS embed.FS

// Extension generates the fenced layer. Create it with New.
type Extension struct {
	entc.DefaultExtension
}

// New returns the extension.
func New() *Extension { return &Extension{} }

// Templates returns the fenced layer's templates.
func (*Extension) Templates() []*gen.Template {
	return []*gen.Template{
		gen.MustParse(gen.NewTemplate("fencedwrite").
			Funcs(template.FuncMap{"fenced": fenced, "goOp": goOp, "goParam": goParam, "createOnly": createOnly,
				"keysTable": KeysTable, "archiveTable": ArchiveTable}).
			ParseFS(templateFS, "template/*.tmpl")),
	}
}

// Hooks returns a hook that checks every fenced schema before generation.
func (*Extension) Hooks() []gen.Hook {
	return []gen.Hook{func(next gen.Generator) gen.Generator {
		return gen.GenerateFunc(func(g *gen.Graph) error {
			var errs []error
			for _, n := range g.Nodes {
				if _, err := fenced(n); err != nil {
					errs = append(errs, err)
				}
				if table := attemptsOf(n); table != "" {
					errs = append(errs, checkAttempts(g, n, table)...)
				}
			}
			if err := errors.Join(errs...); err != nil {
				return err
			}
			return next.Generate(g)
		})
	}}
}

// Spec is what the templates need to know about one fenced entity: its
// columns by role and its statements.
type Spec struct {
	Node        *gen.Type
	Table       string
	IDColumn    string
	Annotation  fencedwrite.Annotation
	Key         *gen.Field
	ProviderRef *gen.Field   // the provider's id for the request: its accessor on the lease is named after it
	Params      []*gen.Field // the key first, then the other request parameters
	Others      []*gen.Field // the request parameters but the key
	Stmts       []Stmt
	Compared    []string // the columns a re-read compares
	Fences      string   // the database fence: triggers and archival, see fences.go
}

// fenced returns the Spec of n, nil when n is not fenced, or an error naming
// the annotation field and the problem.
func fenced(n *gen.Type) (*Spec, error) {
	raw, ok := n.Annotations[fencedwrite.Annotation{}.Name()]
	if !ok || raw == nil {
		return nil, nil
	}
	var a fencedwrite.Annotation
	buf, err := json.Marshal(raw)
	if err != nil {
		return nil, fmt.Errorf("fencedwrite: %s: decode annotation: %w", n.Name, err)
	}
	if err := json.Unmarshal(buf, &a); err != nil {
		return nil, fmt.Errorf("fencedwrite: %s: decode annotation: %w", n.Name, err)
	}
	c := checker{n: n}
	if n.ID == nil || !n.ID.IsInt64() {
		c.errf("ID", "the id field must be int64")
	}
	c.enum("State", a.State, fencedwrite.StateReady, fencedwrite.StateRunning, fencedwrite.StateSucceeded,
		fencedwrite.StateManualReview, fencedwrite.StateFailed)
	c.int64("Token", a.Token, false)
	c.int64("Writer", a.Writer, true)
	c.time("LeaseUntil", a.LeaseUntil, true)
	c.time("NextRunAt", a.NextRunAt, false)
	if a.Send == fencedwrite.ActionReconcile {
		c.errf("Send", "%q is the reconcile action; name the value that sends the request", a.Send)
	}
	c.enum("NextAction", a.NextAction, a.SendAction(), fencedwrite.ActionReconcile)
	c.time("KeyFirstUsedAt", a.KeyFirstUsedAt, true)
	c.time("LastSendAt", a.LastSendAt, true)
	c.str("ProviderRef", a.ProviderRef, true)
	c.str("LastError", a.LastError, true)
	c.str("ReviewReason", a.ReviewReason, true)
	c.str("ReviewEvidence", a.ReviewEvidence, true)
	c.time("CreatedAt", a.CreatedAt, false)
	c.time("UpdatedAt", a.UpdatedAt, false)
	key := c.field("Key", a.Key)
	if key != nil && (!key.IsString() || !key.Unique || !key.Immutable) {
		c.errf("Key", "column %q must be a unique, immutable string", a.Key)
	}
	if len(a.Params) == 0 {
		c.errf("Params", "list the request parameters bound to the key")
	}
	// The key is the first parameter: it is inserted like the others.
	params := []*gen.Field{key}
	for _, p := range a.Params {
		f := c.field("Params", p)
		if f == nil {
			continue
		}
		if !f.Immutable || f.Optional {
			c.errf("Params", "column %q must be required and immutable", p)
		}
		if !f.IsString() && !f.IsInt() && !f.IsInt64() {
			c.errf("Params", "column %q must be a string or an integer", p)
		}
		params = append(params, f)
	}
	if err := errors.Join(c.errs...); err != nil {
		return nil, err
	}
	stmts, compared := statements(n.Table(), n.ID.StorageKey(), a, params)
	spec := &Spec{
		Node:        n,
		Table:       n.Table(),
		IDColumn:    n.ID.StorageKey(),
		Annotation:  a,
		Key:         key,
		ProviderRef: c.field("ProviderRef", a.ProviderRef),
		Params:      params,
		Others:      params[1:],
		Stmts:       stmts,
		Compared:    compared,
	}
	fences, err := renderFences(spec)
	if err != nil {
		return nil, fmt.Errorf("fencedwrite: %s: render the database fence: %w", n.Name, err)
	}
	spec.Fences = fences
	return spec, nil
}

// attemptsOf returns the attempts log that n's Fenced annotation names,
// or "".
func attemptsOf(n *gen.Type) string {
	raw, ok := n.Annotations[fencedwrite.Annotation{}.Name()]
	if !ok || raw == nil {
		return ""
	}
	var a struct {
		Attempts string `json:"attempts"`
	}
	if buf, err := json.Marshal(raw); err == nil && json.Unmarshal(buf, &a) == nil {
		return a.Attempts
	}
	return "" // fenced reports the undecodable annotation
}

// attemptsColumns are the attempts log's columns and their types.
var attemptsColumns = []struct {
	name     string
	typ      field.Type
	nullable bool
}{
	{"job_id", field.TypeInt64, false},
	{"attempt", field.TypeInt64, false},
	{"op", field.TypeEnum, false},
	{"holder", field.TypeString, false},
	{"claimed_at", field.TypeTime, false},
	{"lease_until", field.TypeTime, true},
}

// checkAttempts checks that the attempts log named by fenced node n is an
// entity of the graph with the log's columns, each immutable, and an op
// enum that holds every operation.
func checkAttempts(g *gen.Graph, n *gen.Type, table string) []error {
	c := checker{n: n}
	var log *gen.Type
	for _, m := range g.Nodes {
		if m.Table() == table {
			log = m
		}
	}
	if log == nil {
		c.errf("Attempts", "names table %q, which no schema of the graph has", table)
		return c.errs
	}
	for _, want := range attemptsColumns {
		var f *gen.Field
		for _, g := range log.Fields {
			if g.StorageKey() == want.name {
				f = g
			}
		}
		switch {
		case f == nil:
			c.errf("Attempts", "table %q lacks the column %q", table, want.name)
		case f.Type.Type != want.typ:
			c.errf("Attempts", "column %q of %q must be a %s", want.name, table, want.typ)
		case !f.Immutable:
			c.errf("Attempts", "column %q of %q must be immutable: the log is append-only", want.name, table)
		case f.Optional != want.nullable:
			c.errf("Attempts", "column %q of %q must be %s", want.name, table, map[bool]string{true: "Optional", false: "required"}[want.nullable])
		case want.typ == field.TypeEnum:
			for _, v := range []string{fencedwrite.AttemptClaim, fencedwrite.AttemptTakeover, fencedwrite.AttemptResolution} {
				if !slices.Contains(f.EnumValues(), v) {
					c.errf("Attempts", "enum %q of %q lacks the value %q", want.name, table, v)
				}
			}
		}
	}
	return c.errs
}

type checker struct {
	n    *gen.Type
	errs []error
}

func (c *checker) errf(field, format string, args ...any) {
	c.errs = append(c.errs, fmt.Errorf("fencedwrite: %s: annotation field %s: %s", c.n.Name, field, fmt.Sprintf(format, args...)))
}

func (c *checker) field(role, name string) *gen.Field {
	if name == "" {
		c.errf(role, "no column named; use fencedwrite.Job for the conventional names")
		return nil
	}
	for _, f := range c.n.Fields {
		if f.Name == name {
			return f
		}
	}
	c.errf(role, "names column %q, which the schema does not have", name)
	return nil
}

func (c *checker) nullable(role string, f *gen.Field, nullable bool) {
	if nullable && !(f.Optional && f.Nillable) {
		c.errf(role, "column %q must be Optional and Nillable", f.Name)
	}
	if !nullable && f.Optional {
		c.errf(role, "column %q must be required", f.Name)
	}
}

func (c *checker) enum(role, name string, values ...string) {
	f := c.field(role, name)
	if f == nil {
		return
	}
	if !f.IsEnum() {
		c.errf(role, "column %q must be an enum", name)
		return
	}
	for _, v := range values {
		if !slices.Contains(f.EnumValues(), v) {
			c.errf(role, "enum %q lacks the value %q (needs %s)", name, v, strings.Join(values, ", "))
		}
	}
	c.nullable(role, f, false)
}

func (c *checker) int64(role, name string, nullable bool) {
	if f := c.field(role, name); f != nil {
		if f.Type.Type != field.TypeInt64 {
			c.errf(role, "column %q must be int64", name)
		}
		c.nullable(role, f, nullable)
	}
}

func (c *checker) time(role, name string, nullable bool) {
	if f := c.field(role, name); f != nil {
		if !f.IsTime() {
			c.errf(role, "column %q must be a time", name)
		}
		c.nullable(role, f, nullable)
	}
}

func (c *checker) str(role, name string, nullable bool) {
	if f := c.field(role, name); f != nil {
		if !f.IsString() {
			c.errf(role, "column %q must be a string", name)
		}
		c.nullable(role, f, nullable)
	}
}

// goOp is the Go expression of op in generated code.
func goOp(op fencedrt.Op) string {
	for name, o := range map[string]fencedrt.Op{
		"OpRead": fencedrt.OpRead, "OpReadLocked": fencedrt.OpReadLocked, "OpClaimLock": fencedrt.OpClaimLock,
		"OpRegisterKey": fencedrt.OpRegisterKey, "OpReadKey": fencedrt.OpReadKey, "OpInsert": fencedrt.OpInsert,
		"OpDue": fencedrt.OpDue, "OpDueReconcile": fencedrt.OpDueReconcile, "OpExpired": fencedrt.OpExpired,
		"OpClaimSend": fencedrt.OpClaimSend, "OpClaimReconcile": fencedrt.OpClaimReconcile, "OpTakeover": fencedrt.OpTakeover,
		"OpComplete": fencedrt.OpComplete, "OpReschedule": fencedrt.OpReschedule, "OpManualReview": fencedrt.OpManualReview,
		"OpFail": fencedrt.OpFail, "OpWakeUp": fencedrt.OpWakeUp, "OpResolveSucceeded": fencedrt.OpResolveSucceeded,
		"OpResolveReconcile": fencedrt.OpResolveReconcile, "OpResolveRefund": fencedrt.OpResolveRefund,
		"OpClaimSendMany": fencedrt.OpClaimSendMany, "OpClaimReconcileMany": fencedrt.OpClaimReconcileMany, "OpTakeoverMany": fencedrt.OpTakeoverMany,
		"OpCompleteMany": fencedrt.OpCompleteMany, "OpRecordClaims": fencedrt.OpRecordClaims, "OpRecordResolution": fencedrt.OpRecordResolution,
	} {
		if o == op {
			return "fencedrt." + name
		}
	}
	panic(fmt.Sprintf("entext: no Go name for op %q", op))
}

// goParam is the Go expression of p in generated code.
func goParam(p fencedrt.Param) string {
	if col, ok := strings.CutPrefix(string(p), "request "); ok {
		return fmt.Sprintf("fencedrt.RequestParam(%q)", col)
	}
	if one, ok := strings.CutPrefix(string(p), "each "); ok {
		return fmt.Sprintf("fencedrt.Each(%s)", goParam(fencedrt.Param(one)))
	}
	for name, q := range map[string]fencedrt.Param{
		"ParamID": fencedrt.ParamID, "ParamIDs": fencedrt.ParamIDs, "ParamAttempt": fencedrt.ParamAttempt, "ParamWriter": fencedrt.ParamWriter,
		"ParamNewAttempt": fencedrt.ParamNewAttempt, "ParamLeaseUntil": fencedrt.ParamLeaseUntil, "ParamNow": fencedrt.ParamNow,
		"ParamKeyWindow": fencedrt.ParamKeyWindow, "ParamProviderRef": fencedrt.ParamProviderRef, "ParamNextAction": fencedrt.ParamNextAction,
		"ParamDelay": fencedrt.ParamDelay, "ParamLastError": fencedrt.ParamLastError, "ParamReason": fencedrt.ParamReason,
		"ParamEvidence": fencedrt.ParamEvidence, "ParamKey": fencedrt.ParamKey, "ParamLimit": fencedrt.ParamLimit,
		"ParamAttemptOp": fencedrt.ParamAttemptOp, "ParamHolder": fencedrt.ParamHolder,
	} {
		if q == p {
			return "fencedrt." + name
		}
	}
	panic(fmt.Sprintf("entext: no Go name for argument %q", p))
}

// createOnly returns n's CreateOnly annotation, or nil.
func createOnly(n *gen.Type) (*fencedwrite.CreateOnly, error) {
	raw, ok := n.Annotations[fencedwrite.CreateOnly{}.Name()]
	if !ok || raw == nil {
		return nil, nil
	}
	var a fencedwrite.CreateOnly
	buf, err := json.Marshal(raw)
	if err != nil {
		return nil, fmt.Errorf("fencedwrite: %s: decode CreateOnly: %w", n.Name, err)
	}
	if err := json.Unmarshal(buf, &a); err != nil {
		return nil, fmt.Errorf("fencedwrite: %s: decode CreateOnly: %w", n.Name, err)
	}
	return &a, nil
}
