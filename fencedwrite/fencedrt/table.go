package fencedrt

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/fencekit/fencekit/fencedwrite"
)

// Stmt is one statement of a fenced table, with the names of its arguments
// in placeholder order and, for a transition, what it writes that a re-read
// can compare.
type Stmt struct {
	SQL    string
	Params []Param
	Sets   []Set
}

// Set is one comparable assignment of a transition: Column = Param's value
// (OrKeep: COALESCE(value, Column), so a nil value keeps the column), or
// Column = Literal. Assignments of computed values (times) are not listed.
type Set struct {
	Column  string
	Param   Param
	Literal string
	OrKeep  bool
}

// TableSpec declares a fenced table: its name, the columns the fence uses
// and its statements. Generated code declares one per fenced entity.
type TableSpec struct {
	Name   string // table, e.g. refund_jobs
	Entity string // Ent type, e.g. RefundJob
	// Column names of the fence.
	ID, State, Token, Writer string
	// Compared are the columns OpRead and OpReadLocked return after state and
	// attempt, in order: the settled values a re-read compares.
	Compared []string
	// Request are the request's columns, the key first, in the order the
	// claims' locking reads return them.
	Request []string
	// Attempts is the attempts log's table, "" when the table keeps none;
	// then it declares OpRecordClaims and OpRecordResolution.
	Attempts string
	// Send is the next action that sends the request (the annotation's
	// SendAction); "" means fencedwrite.ActionRefund.
	Send  string
	Stmts map[Op]Stmt
}

// Table is a checked TableSpec. Build it with MustTable.
type Table struct {
	spec TableSpec
}

// send is the next action that sends the request.
func (t *Table) send() string {
	if t.spec.Send == "" {
		return fencedwrite.ActionRefund
	}
	return t.spec.Send
}

// Name is the table's name.
func (t *Table) Name() string { return t.spec.Name }

// Stmt returns the statement op, and whether the table declares it.
func (t *Table) Stmt(op Op) (Stmt, bool) {
	s, ok := t.spec.Stmts[op]
	return s, ok
}

// required are the statements every fenced table declares.
var required = []Op{OpRead, OpReadLocked, OpClaimLock, OpDue, OpDueReconcile, OpExpired, OpRegisterKey, OpReadKey, OpInsert}

// MustTable checks spec and returns its Table; it panics, naming the
// statement and the problem, when a statement is missing, its placeholders
// and arguments disagree, or a transition lacks its fence, its declaration
// of the writer attempt or its move of the state machine. Generated code
// calls it at package initialisation, so a bad table never runs.
func MustTable(spec TableSpec) *Table {
	t, err := NewTable(spec)
	if err != nil {
		panic(err)
	}
	registryMu.Lock()
	registry[spec.Name] = t
	registryMu.Unlock()
	return t
}

var (
	registryMu sync.Mutex
	registry   = map[string]*Table{}
)

// Registered returns the table that generated code declared with MustTable
// under name, for tools and tests that inspect the statements. Tables built
// with NewTable are not registered.
func Registered(name string) (*Table, bool) {
	registryMu.Lock()
	defer registryMu.Unlock()
	t, ok := registry[name]
	return t, ok
}

// Spec returns the table's declaration.
func (t *Table) Spec() TableSpec { return t.spec }

// NewTable is MustTable returning the error.
func NewTable(spec TableSpec) (*Table, error) {
	for _, op := range required {
		if _, ok := spec.Stmts[op]; !ok {
			return nil, fmt.Errorf("fenced table %s: statement %q is missing", spec.Name, op)
		}
	}
	for op := range Transitions {
		if _, ok := spec.Stmts[op]; !ok {
			return nil, fmt.Errorf("fenced table %s: transition %q is missing", spec.Name, op)
		}
	}
	for _, op := range Many {
		if _, ok := spec.Stmts[op]; !ok {
			return nil, fmt.Errorf("fenced table %s: statement %q is missing", spec.Name, op)
		}
	}
	for _, op := range []Op{OpRecordClaims, OpRecordResolution} {
		s, ok := spec.Stmts[op]
		switch {
		case spec.Attempts == "" && ok:
			return nil, fmt.Errorf("fenced table %s: statement %q without an attempts log", spec.Name, op)
		case spec.Attempts != "" && !ok:
			return nil, fmt.Errorf("fenced table %s: statement %q is missing", spec.Name, op)
		case ok && !strings.HasPrefix(s.SQL, "INSERT INTO `"+spec.Attempts+"` "):
			return nil, fmt.Errorf("fenced table %s: statement %q must insert into the attempts log %s", spec.Name, op, spec.Attempts)
		}
	}
	for op, s := range spec.Stmts {
		if err := spec.check(op, s); err != nil {
			return nil, fmt.Errorf("fenced table %s: statement %q: %w", spec.Name, op, err)
		}
	}
	return &Table{spec: spec}, nil
}

func (spec TableSpec) check(op Op, s Stmt) error {
	if n := Placeholders(s.SQL); n != len(s.Params) {
		return fmt.Errorf("%d placeholders but %d arguments named", n, len(s.Params))
	}
	for _, p := range s.Params {
		if !knownParam(p) {
			return fmt.Errorf("unknown argument %q", p)
		}
	}
	one, many := single(op)
	if op == OpRecordClaims {
		many = true // one row per job of the claim's transaction
	}
	if slices.ContainsFunc(s.Params, isList) != many {
		return fmt.Errorf("only the many-row statements take lists (%q, %q)", ParamIDs, Each(ParamProviderRef))
	}
	if many && one != "" {
		op = one
	}
	tr, ok := Transitions[op]
	if !ok {
		if strings.HasPrefix(s.SQL, "UPDATE") || strings.Contains(s.SQL, "DELETE") || strings.Contains(s.SQL, "REPLACE") {
			return fmt.Errorf("only transitions may write existing rows")
		}
		return nil
	}
	q := func(c string) string { return "`" + c + "`" }
	prefix := "UPDATE " + q(spec.Name) + " FORCE INDEX (PRIMARY) SET "
	id, idParam := q(spec.ID)+" = ?", ParamID
	if many {
		id, idParam = q(spec.ID)+" IN (?)", ParamIDs
	}
	fence := fmt.Sprintf(" WHERE %s AND %s = '%s' AND %s = ?", id, q(spec.State), tr.From, q(spec.Token))
	switch {
	case !strings.HasPrefix(s.SQL, prefix):
		return fmt.Errorf("must start %q (lock by primary key only)", prefix)
	case !strings.HasSuffix(s.SQL, fence) || strings.Count(s.SQL, " WHERE ") != 1:
		return fmt.Errorf("must end with the fence %q", fence)
	case len(s.Params) < 2 || s.Params[len(s.Params)-2] != idParam || s.Params[len(s.Params)-1] != ParamAttempt:
		return fmt.Errorf("the fence's arguments must be %q and %q", idParam, ParamAttempt)
	case !slices.Equal(paramsOf(s, q(spec.Writer)+" = ?"), []Param{ParamWriter}):
		return fmt.Errorf("must declare the writer attempt: %s = ? bound to %q", q(spec.Writer), ParamWriter)
	case strings.Contains(s.SQL, q(spec.Writer)+" = "+q(spec.Token)):
		return fmt.Errorf("declares the row's own attempt")
	}
	if tr.To != tr.From && !strings.Contains(s.SQL, fmt.Sprintf("%s = '%s'", q(spec.State), tr.To)) {
		return fmt.Errorf("must move the job to %s", tr.To)
	}
	bumps := slices.Equal(paramsOf(s, q(spec.Token)+" = ?"), []Param{ParamNewAttempt, ParamAttempt})
	if tr.Bump != bumps {
		return fmt.Errorf("attempt+1 is %v in the state machine but %v in the statement", tr.Bump, bumps)
	}
	for _, set := range s.Sets {
		if !slices.Contains(spec.Compared, set.Column) {
			return fmt.Errorf("compares %s, which a re-read does not return", set.Column)
		}
		if set.Param == "" {
			continue
		}
		if !many && !slices.Contains(s.Params, set.Param) {
			return fmt.Errorf("compares %s with %q, which is not an argument", set.Column, set.Param)
		}
		// A many-row statement picks each row's own value by its id.
		pick := fmt.Sprintf("%s = ELT(FIELD(%s, ?), ?)", q(set.Column), q(spec.ID))
		if many && (set.OrKeep || !slices.Equal(paramsOf(s, pick), []Param{Each(set.Param)}) ||
			!slices.Equal(paramsOf(s, strings.TrimSuffix(pick, ", ?)")), []Param{ParamIDs})) {
			return fmt.Errorf("must set %s per row: %s bound to %q and %q", set.Column, pick, ParamIDs, Each(set.Param))
		}
	}
	return nil
}

// paramsOf returns the arguments bound to each occurrence of the fragment
// frag (which ends with a placeholder) in s.
func paramsOf(s Stmt, frag string) []Param {
	var out []Param
	for i := 0; ; {
		j := strings.Index(s.SQL[i:], frag)
		if j < 0 {
			return out
		}
		i += j + len(frag)
		if n := Placeholders(s.SQL[:i]); n > 0 && n <= len(s.Params) {
			out = append(out, s.Params[n-1])
		}
	}
}

func knownParam(p Param) bool {
	switch p {
	case ParamID, ParamIDs, ParamAttempt, ParamWriter, ParamNewAttempt, ParamLeaseUntil, ParamNow, ParamKeyWindow,
		ParamProviderRef, ParamNextAction, ParamDelay, ParamLastError, ParamReason, ParamEvidence, ParamKey, ParamLimit,
		ParamAttemptOp, ParamHolder:
		return true
	}
	if one, ok := eachOf(p); ok {
		return knownParam(one) && !isList(one)
	}
	return strings.HasPrefix(string(p), "request ")
}

// isList reports whether p takes a list of values, one placeholder each.
func isList(p Param) bool {
	_, each := eachOf(p)
	return p == ParamIDs || each
}

// Placeholders counts the `?` placeholders of query outside quoted strings
// and quoted names.
func Placeholders(query string) int {
	n := 0
	eachPlaceholder(query, func(int) bool { n++; return true })
	return n
}

// placeholderAt returns the byte offset of placeholder i (from 0) of query,
// or -1.
func placeholderAt(query string, i int) int {
	at := -1
	eachPlaceholder(query, func(off int) bool {
		if i == 0 {
			at = off
			return false
		}
		i--
		return true
	})
	return at
}

// eachPlaceholder calls f with the offset of every placeholder of query
// outside quoted strings and quoted names, until f returns false.
func eachPlaceholder(query string, f func(off int) bool) {
	for i := 0; i < len(query); i++ {
		switch c := query[i]; c {
		case '?':
			if !f(i) {
				return
			}
		case '\'', '"', '`':
			for i++; i < len(query) && query[i] != c; i++ {
				if query[i] == '\\' && c != '`' {
					i++
				}
			}
		}
	}
}

// Values are the named arguments of one statement.
type Values map[Param]any

// breakFence is nil except in the deliberately broken build (build tag
// fencekit_broken_fence), which refundd chaos's test uses to show that its
// checker catches a fence that does not hold.
var breakFence func(op Op, query string, params []Param) (string, []Param)

// Bind returns the arguments of statement op, in placeholder order, looked
// up by name in vals. A name without a value is an error.
func (t *Table) Bind(op Op, vals Values) (string, []any, error) {
	s, ok := t.spec.Stmts[op]
	if !ok {
		return "", nil, fmt.Errorf("fenced table %s declares no statement %q", t.spec.Name, op)
	}
	query, params := s.SQL, s.Params
	if breakFence != nil {
		query, params = breakFence(op, query, params)
	}
	var (
		b    strings.Builder
		args = make([]any, 0, len(params))
		from = 0 // query[from:] is not written yet
		n    = -1
	)
	for i, p := range params {
		v, ok := vals[p]
		if !ok {
			return "", nil, fmt.Errorf("%s %s: no value for argument %q", op, t.spec.Name, p)
		}
		if !isList(p) {
			args = append(args, v)
			continue
		}
		list, err := listOf(p, v)
		if err != nil {
			return "", nil, fmt.Errorf("%s %s: argument %q %w", op, t.spec.Name, p, err)
		}
		switch {
		case n >= 0 && len(list) != n:
			return "", nil, fmt.Errorf("%s %s: argument %q holds %d values, another list %d: one per id", op, t.spec.Name, p, len(list), n)
		case len(list) == 0 || len(list) > fencedwrite.MaxBatch:
			return "", nil, fmt.Errorf("%s %s: argument %q must hold 1 to %d values, got %d", op, t.spec.Name, p, fencedwrite.MaxBatch, len(list))
		}
		n = len(list)
		at := placeholderAt(query, i)
		b.WriteString(query[from:at])
		b.WriteString(strings.Repeat("?, ", n-1) + "?")
		from = at + 1
		args = append(args, list...)
	}
	b.WriteString(query[from:])
	return b.String(), args, nil
}

// listOf returns the values of list argument p.
func listOf(p Param, v any) ([]any, error) {
	if p == ParamIDs {
		ids, ok := v.([]int64)
		if !ok {
			return nil, fmt.Errorf("must be a list of ids ([]int64), got %T", v)
		}
		out := make([]any, len(ids))
		for i, id := range ids {
			out[i] = id
		}
		return out, nil
	}
	list, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("must be a list of values ([]any), got %T", v)
	}
	return list, nil
}
