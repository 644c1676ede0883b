package entext

import (
	"fmt"
	"slices"
	"strings"

	"entgo.io/ent/entc/gen"

	"github.com/fencekit/fencekit/fencedwrite"
	"github.com/fencekit/fencekit/fencedwrite/fencedrt"
)

// Stmt is one generated statement: its SQL and, from the same source, the
// names of its arguments in placeholder order and what it writes that a
// re-read can compare. The runtime binds arguments by these names, so the
// SQL text and the argument list cannot drift apart.
type Stmt struct {
	Op     fencedrt.Op
	Name   string // Go name: the generated constant is fenced<Entity><Name>
	SQL    string
	Params []fencedrt.Param
	Sets   []fencedrt.Set
}

// update builds a fenced UPDATE clause by clause.
type update struct {
	sets   []string
	params []fencedrt.Param
	cmp    []fencedrt.Set
}

// set adds `col = expr`, whose placeholders take ps in order.
func (u *update) set(col, expr string, ps ...fencedrt.Param) *update {
	u.sets = append(u.sets, quote(col)+" = "+expr)
	u.params = append(u.params, ps...)
	return u
}

// value adds `col = ?` bound to p; a re-read compares it.
func (u *update) value(col string, p fencedrt.Param) *update {
	u.cmp = append(u.cmp, fencedrt.Set{Column: col, Param: p})
	return u.set(col, "?", p)
}

// valueOrKeep adds `col = COALESCE(?, col)`: a nil value keeps the column.
func (u *update) valueOrKeep(col string, p fencedrt.Param) *update {
	u.cmp = append(u.cmp, fencedrt.Set{Column: col, Param: p, OrKeep: true})
	return u.set(col, fmt.Sprintf("COALESCE(?, %s)", quote(col)), p)
}

// literal adds `col = 'lit'`; a re-read compares it.
func (u *update) literal(col, lit string, compared bool) *update {
	if compared {
		u.cmp = append(u.cmp, fencedrt.Set{Column: col, Literal: lit})
	}
	return u.set(col, "'"+lit+"'")
}

// statements builds the SQL of one fenced table from its annotation. Every
// UPDATE locks by primary key only, carries
// `WHERE id = ? AND state = '<from>' AND attempt = ?`, declares the attempt
// it holds in the writer column, and reads time from the database clock that
// no session can move.
func statements(table, id string, a fencedwrite.Annotation, params []*gen.Field) ([]Stmt, []string) {
	var (
		t     = quote(table)
		pk    = quote(id)
		clock = fencedwrite.ClockUTC
		keys  = quote(KeysTable(table))
	)
	compared := []string{a.ProviderRef, a.NextAction, a.LastError, a.ReviewReason, a.ReviewEvidence}
	read := fmt.Sprintf("SELECT %s, %s", quote(a.State), quote(a.Token))
	for _, c := range compared {
		read += ", " + quote(c)
	}
	read += fmt.Sprintf(" FROM %s WHERE %s = ?", t, pk)

	// locked are the columns a claim reads under the row lock: everything
	// the claim decides on and the lease carries, times as microseconds
	// (never through the driver's loc), and the database clock last.
	locked := strings.Join([]string{pk, quote(a.State), quote(a.Token), quote(a.NextAction),
		fencedwrite.Micros(quote(a.NextRunAt)), fencedwrite.Micros(quote(a.LeaseUntil)), fencedwrite.Micros(quote(a.KeyFirstUsedAt)),
		fencedwrite.Micros(quote(a.LastSendAt)), quote(a.ProviderRef)}, ", ")
	for _, p := range params {
		locked += ", " + quote(p.StorageKey())
	}
	locked += ", " + fencedwrite.ClockMicros

	transition := func(op fencedrt.Op, name string, body func(u *update)) Stmt {
		tr := fencedrt.Transitions[op]
		u := &update{}
		if tr.Bump {
			u.set(a.Token, "?", fencedrt.ParamNewAttempt)
		}
		if tr.To != tr.From {
			u.literal(a.State, tr.To, false)
		}
		body(u)
		u.set(a.Writer, "?", fencedrt.ParamWriter)
		sql := fmt.Sprintf("UPDATE %s FORCE INDEX (PRIMARY) SET %s WHERE %s = ? AND %s = '%s' AND %s = ?",
			t, strings.Join(u.sets, ", "), pk, quote(a.State), tr.From, quote(a.Token))
		return Stmt{Op: op, Name: name, SQL: sql, Params: append(u.params, fencedrt.ParamID, fencedrt.ParamAttempt), Sets: u.cmp}
	}
	// many is s for several jobs at the same attempt: the same
	// assignments, a value of the transition picked per row by its id
	// (`col = ELT(FIELD(id, …ids), …values)`), fenced on `id IN (…)`
	// instead of `id = ?`.
	many := func(s Stmt) Stmt {
		sql := strings.Replace(s.SQL, fmt.Sprintf(" WHERE %s = ? AND", pk), fmt.Sprintf(" WHERE %s IN (?) AND", pk), 1)
		params := append([]fencedrt.Param{}, s.Params...)
		params[len(params)-2] = fencedrt.ParamIDs
		for _, set := range s.Sets {
			if set.Param == "" {
				continue
			}
			one := quote(set.Column) + " = ?"
			i := fencedrt.Placeholders(sql[:strings.Index(sql, one)+len(one)]) - 1
			sql = strings.Replace(sql, one, fmt.Sprintf("%s = ELT(FIELD(%s, ?), ?)", quote(set.Column), pk), 1)
			params = slices.Insert(params, i, fencedrt.ParamIDs)
			params[i+1] = fencedrt.Each(set.Param)
		}
		return Stmt{Op: fencedrt.Many[s.Op], Name: s.Name + "Many", Params: params, Sets: s.Sets, SQL: sql}
	}
	updatedNow := func(u *update) { u.set(a.UpdatedAt, clock) }

	var (
		cols, vals, reqParams, others []string
		reqArgs                       []fencedrt.Param
	)
	for _, p := range params {
		cols = append(cols, quote(p.StorageKey()))
		vals = append(vals, "?")
		reqArgs = append(reqArgs, fencedrt.RequestParam(p.StorageKey()))
		reqParams = append(reqParams, quote(p.StorageKey()))
		if p != params[0] {
			others = append(others, quote(p.StorageKey()))
		}
	}
	insertCols := append(append([]string{}, cols...), quote(a.State), quote(a.Token), quote(a.NextAction), quote(a.NextRunAt), quote(a.CreatedAt), quote(a.UpdatedAt))
	insertVals := append(append([]string{}, vals...), "'"+fencedwrite.StateReady+"'", "0", "'"+a.SendAction()+"'", clock, clock, clock)

	stmts := []Stmt{
		{Op: fencedrt.OpRead, Name: "Read", SQL: read, Params: []fencedrt.Param{fencedrt.ParamID}},
		{Op: fencedrt.OpReadLocked, Name: "ReadLocked", SQL: read + " FOR UPDATE", Params: []fencedrt.Param{fencedrt.ParamID}},
		{Op: fencedrt.OpClaimLock, Name: "ClaimLock", Params: []fencedrt.Param{fencedrt.ParamID},
			SQL: fmt.Sprintf("SELECT %s FROM %s FORCE INDEX (PRIMARY) WHERE %s = ? FOR UPDATE", locked, t, pk)},
		// The batch claims lock what the scheduler's scans find, on the
		// pending and lease indexes, oldest first. SKIP LOCKED only speeds
		// them up (TiDB ignores it): each row still moves with the fenced
		// UPDATE of a single claim. The clock is read once, in a derived
		// table of one row (a constant to the optimizer), so that the scan
		// is a range of the index that ends at the clock: compared with
		// SYSDATE(6) itself, evaluated per row, it read (and, under
		// REPEATABLE READ, locked until the claim committed) every ready
		// or running row, due or not (TestClaimScansReadOnlyTheDueRows).
		{Op: fencedrt.OpDue, Name: "Due", Params: []fencedrt.Param{fencedrt.ParamLimit},
			SQL: fmt.Sprintf("SELECT %s FROM %s, %s WHERE %s = '%s' AND %s <= %s ORDER BY %s, %s LIMIT ? FOR UPDATE SKIP LOCKED",
				locked, t, fencedwrite.ScanClock, quote(a.State), fencedwrite.StateReady, quote(a.NextRunAt), fencedwrite.ScanNow, quote(a.NextRunAt), pk)},
		// The due reconciles alone, on their own index: the unknown
		// outcomes that a scheduler claims before fresh sends.
		{Op: fencedrt.OpDueReconcile, Name: "DueReconcile", Params: []fencedrt.Param{fencedrt.ParamLimit},
			SQL: fmt.Sprintf("SELECT %s FROM %s, %s WHERE %s = '%s' AND %s = '%s' AND %s <= %s ORDER BY %s, %s LIMIT ? FOR UPDATE SKIP LOCKED",
				locked, t, fencedwrite.ScanClock, quote(a.State), fencedwrite.StateReady, quote(a.NextAction), fencedwrite.ActionReconcile,
				quote(a.NextRunAt), fencedwrite.ScanNow, quote(a.NextRunAt), pk)},
		{Op: fencedrt.OpExpired, Name: "Expired", Params: []fencedrt.Param{fencedrt.ParamLimit},
			SQL: fmt.Sprintf("SELECT %s FROM %s, %s WHERE %s = '%s' AND %s < %s ORDER BY %s, %s LIMIT ? FOR UPDATE SKIP LOCKED",
				locked, t, fencedwrite.ScanClock, quote(a.State), fencedwrite.StateRunning, quote(a.LeaseUntil), fencedwrite.ScanNow, quote(a.LeaseUntil), pk)},
		// A job's key is registered after the job, in the same
		// transaction. Where the database's fence runs, the job's insert
		// has registered it already (or taken a registration of the same
		// request that no job holds), and this inserts nothing; without
		// triggers (TiDB) it registers the key here. A key registered for
		// another request, or whose job is archived, is a duplicate key:
		// the enqueue rolls back.
		{Op: fencedrt.OpRegisterKey, Name: "RegisterKey", Params: append(append([]fencedrt.Param{}, reqArgs...), reqArgs...),
			SQL: fmt.Sprintf("INSERT INTO %s (%s, `registered_at`, `job_created_at`) SELECT %s, %s, %s FROM DUAL "+
				"WHERE NOT EXISTS (SELECT 1 FROM %s k WHERE %s AND NOT EXISTS (SELECT 1 FROM %s a WHERE a.%s = k.%s))",
				keys, strings.Join(reqParams, ", "), strings.Join(vals, ", "), clock, clock,
				keys, strings.Join(qualified("k", reqParams, " = ?"), " AND "), quote(ArchiveTable(table)), reqParams[0], reqParams[0])},
		// The parameters a key was registered with, and whether the archive
		// holds its job: a key is archived only then.
		{Op: fencedrt.OpReadKey, Name: "ReadKey", Params: []fencedrt.Param{fencedrt.ParamKey},
			SQL: fmt.Sprintf("SELECT %s, EXISTS (SELECT 1 FROM %s a WHERE a.%s = k.%[3]s) FROM %s k WHERE k.%[3]s = ?",
				strings.Join(qualified("k", others, ""), ", "), quote(ArchiveTable(table)), reqParams[0], keys)},
		{Op: fencedrt.OpInsert, Name: "Insert", Params: reqArgs,
			SQL: fmt.Sprintf("INSERT INTO %s (%s) VALUES (%s)", t, strings.Join(insertCols, ", "), strings.Join(insertVals, ", "))},

		transition(fencedrt.OpClaimSend, "ClaimSend", func(u *update) {
			u.set(a.LeaseUntil, "?", fencedrt.ParamLeaseUntil).literal(a.NextAction, a.SendAction(), false).
				set(a.KeyFirstUsedAt, fmt.Sprintf("COALESCE(%s, ?)", quote(a.KeyFirstUsedAt)), fencedrt.ParamNow).
				set(a.LastSendAt, "?", fencedrt.ParamNow).set(a.UpdatedAt, "?", fencedrt.ParamNow)
		}),
		transition(fencedrt.OpClaimReconcile, "ClaimReconcile", func(u *update) {
			u.set(a.LeaseUntil, "?", fencedrt.ParamLeaseUntil).literal(a.NextAction, fencedwrite.ActionReconcile, false).
				set(a.UpdatedAt, "?", fencedrt.ParamNow)
		}),
		transition(fencedrt.OpTakeover, "Takeover", func(u *update) {
			u.set(a.LeaseUntil, "?", fencedrt.ParamLeaseUntil).literal(a.NextAction, fencedwrite.ActionReconcile, false).
				set(a.UpdatedAt, "?", fencedrt.ParamNow)
		}),
		transition(fencedrt.OpComplete, "Complete", func(u *update) {
			u.value(a.ProviderRef, fencedrt.ParamProviderRef).set(a.LeaseUntil, "NULL").set(a.LastError, "NULL")
			updatedNow(u)
		}),
		transition(fencedrt.OpReschedule, "Reschedule", func(u *update) {
			u.value(a.NextAction, fencedrt.ParamNextAction).
				set(a.NextRunAt, "TIMESTAMPADD(MICROSECOND, ?, "+clock+")", fencedrt.ParamDelay).set(a.LeaseUntil, "NULL").
				valueOrKeep(a.ProviderRef, fencedrt.ParamProviderRef).value(a.LastError, fencedrt.ParamLastError)
			updatedNow(u)
		}),
		transition(fencedrt.OpManualReview, "ManualReview", func(u *update) {
			u.value(a.ReviewReason, fencedrt.ParamReason).value(a.ReviewEvidence, fencedrt.ParamEvidence).
				valueOrKeep(a.ProviderRef, fencedrt.ParamProviderRef).set(a.LeaseUntil, "NULL")
			updatedNow(u)
		}),
		transition(fencedrt.OpFail, "Fail", func(u *update) {
			u.value(a.LastError, fencedrt.ParamLastError).valueOrKeep(a.ProviderRef, fencedrt.ParamProviderRef).set(a.LeaseUntil, "NULL")
			updatedNow(u)
		}),
		transition(fencedrt.OpWakeUp, "WakeUp", func(u *update) {
			u.set(a.NextRunAt, fmt.Sprintf("LEAST(%s, %s)", quote(a.NextRunAt), clock))
		}),
		transition(fencedrt.OpResolveSucceeded, "ResolveSucceeded", func(u *update) {
			u.value(a.ProviderRef, fencedrt.ParamProviderRef).value(a.ReviewEvidence, fencedrt.ParamEvidence)
			updatedNow(u)
		}),
		transition(fencedrt.OpResolveReconcile, "ResolveReconcile", func(u *update) {
			u.literal(a.NextAction, fencedwrite.ActionReconcile, true).set(a.NextRunAt, clock).value(a.ReviewEvidence, fencedrt.ParamEvidence)
			updatedNow(u)
		}),
		transition(fencedrt.OpResolveRefund, "ResolveRefund", func(u *update) {
			u.literal(a.NextAction, a.SendAction(), true).set(a.NextRunAt, clock).value(a.ReviewEvidence, fencedrt.ParamEvidence)
			updatedNow(u)
		}),
	}
	for _, st := range stmts {
		if _, ok := fencedrt.Many[st.Op]; ok {
			stmts = append(stmts, many(st))
		}
	}
	if a.Attempts != "" {
		// The attempts log's rows are written after the fenced UPDATEs, in
		// the same transaction: each reads the attempt back from its job,
		// which the transaction holds locked and has just moved, so the
		// row records exactly the attempt that commits with it.
		cols := "(`job_id`, `attempt`, `op`, `holder`, `claimed_at`, `lease_until`)"
		log := quote(a.Attempts)
		stmts = append(stmts,
			Stmt{Op: fencedrt.OpRecordClaims, Name: "RecordClaims",
				Params: []fencedrt.Param{fencedrt.ParamAttemptOp, fencedrt.ParamHolder, fencedrt.ParamNow, fencedrt.ParamLeaseUntil, fencedrt.ParamIDs},
				SQL: fmt.Sprintf("INSERT INTO %s %s SELECT j.%s, j.%s, ?, ?, ?, ? FROM %s j FORCE INDEX (PRIMARY) WHERE j.%[3]s IN (?) AND j.%[6]s = '%[7]s'",
					log, cols, pk, quote(a.Token), t, quote(a.State), fencedwrite.StateRunning)},
			Stmt{Op: fencedrt.OpRecordResolution, Name: "RecordResolution",
				Params: []fencedrt.Param{fencedrt.ParamHolder, fencedrt.ParamID, fencedrt.ParamNewAttempt},
				SQL: fmt.Sprintf("INSERT INTO %s %s SELECT j.%s, j.%s, '%s', ?, %s, NULL FROM %s j FORCE INDEX (PRIMARY) WHERE j.%[3]s = ? AND j.%[4]s = ?",
					log, cols, pk, quote(a.Token), fencedwrite.AttemptResolution, clock, t)},
		)
	}
	return stmts, compared
}

// KeysTable is the table where every key ever enqueued into table stays
// registered, archived or not.
func KeysTable(table string) string { return table + "_keys" }

// ArchiveTable is the table that holds table's archived jobs.
func ArchiveTable(table string) string { return table + "_archive" }

// FenceModeTable is the table that holds the mode of table's database fence
// (enforce or observe); its changes are recorded in FenceModeTable + "_changes".
func FenceModeTable(table string) string { return table + "_fence_mode" }

// FenceViolationsTable is the table that records the writes table's
// database fence let through in observe mode.
func FenceViolationsTable(table string) string { return table + "_fence_violations" }

// qualified returns each quoted column prefixed by alias, followed by suffix.
func qualified(alias string, cols []string, suffix string) []string {
	out := make([]string, len(cols))
	for i, c := range cols {
		out[i] = alias + "." + c + suffix
	}
	return out
}

func quote(name string) string { return "`" + name + "`" }
