package fencedrt_test

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/fencekit/fencekit/fencedwrite"
	"github.com/fencekit/fencekit/fencedwrite/fencedrt"
)

// NewTable refuses any statement that does not carry the fence, whose
// arguments and placeholders disagree, or that writes outside a transition:
// the runtime cannot be used to run an arbitrary UPDATE.
func TestTableRefusesUnfencedOrMisboundStatements(t *testing.T) {
	good := refundJobs(t).Spec()
	if _, err := fencedrt.NewTable(good); err != nil {
		t.Fatalf("the generated table does not check: %v", err)
	}
	edit := func(op fencedrt.Op, f func(*fencedrt.Stmt)) fencedrt.TableSpec {
		spec := good
		spec.Stmts = maps.Clone(good.Stmts)
		s := spec.Stmts[op]
		s.Params = slices.Clone(s.Params)
		f(&s)
		spec.Stmts[op] = s
		return spec
	}
	// Mutations that break a single-row statement and its many-row form
	// alike.
	noAttemptPredicate := func(s *fencedrt.Stmt) {
		s.SQL = strings.Replace(s.SQL, " AND `attempt` = ?", "", 1)
		s.Params = s.Params[:len(s.Params)-1]
	}
	noAttemptPlusOne := func(s *fencedrt.Stmt) {
		s.SQL = strings.Replace(s.SQL, "`attempt` = ?, ", "", 1)
		s.Params = s.Params[1:]
	}
	selfDeclaredWriter := func(s *fencedrt.Stmt) {
		s.SQL = strings.Replace(s.SQL, "`writer_attempt` = ?", "`writer_attempt` = `attempt`", 1)
		s.Params = slices.DeleteFunc(s.Params, func(p fencedrt.Param) bool { return p == fencedrt.ParamWriter })
	}
	for name, tc := range map[string]struct {
		spec fencedrt.TableSpec
		want string
	}{
		"an argument too few": {edit(fencedrt.OpComplete, func(s *fencedrt.Stmt) { s.Params = s.Params[1:] }),
			"placeholders but"},
		"two arguments swapped": {edit(fencedrt.OpReschedule, func(s *fencedrt.Stmt) {
			n := len(s.Params)
			s.Params[n-1], s.Params[n-2] = s.Params[n-2], s.Params[n-1]
		}), "the fence's arguments must be"},
		"the writer bound to the wrong value": {edit(fencedrt.OpFail, func(s *fencedrt.Stmt) {
			i := slices.Index(s.Params, fencedrt.ParamWriter)
			s.Params[i] = fencedrt.ParamNewAttempt
		}), "must declare the writer attempt"},
		"no attempt predicate": {edit(fencedrt.OpWakeUp, noAttemptPredicate), "must end with the fence"},
		"the lease as a fence": {edit(fencedrt.OpComplete, func(s *fencedrt.Stmt) {
			s.SQL += " AND `lease_until` > UTC_TIMESTAMP(6)"
		}), "must end with the fence"},
		"no FORCE INDEX (PRIMARY)": {edit(fencedrt.OpComplete, func(s *fencedrt.Stmt) {
			s.SQL = strings.Replace(s.SQL, " FORCE INDEX (PRIMARY)", "", 1)
		}), "lock by primary key only"},
		"a claim without attempt+1":                  {edit(fencedrt.OpClaimSend, noAttemptPlusOne), "attempt+1 is true in the state machine but false"},
		"the writer declaring the row's own attempt": {edit(fencedrt.OpComplete, selfDeclaredWriter), "declare the writer attempt"},
		"an UPDATE hidden in a read": {edit(fencedrt.OpRead, func(s *fencedrt.Stmt) {
			//fencelint:allow proves the runtime refuses a table that smuggles an unfenced UPDATE
			s.SQL = "UPDATE `refund_jobs` SET `state` = 'ready' WHERE `id` = ?"
		}), "only transitions may write"},
		"an unknown argument":                            {edit(fencedrt.OpFail, func(s *fencedrt.Stmt) { s.Params[0] = "amount" }), "unknown argument"},
		"a many-row claim without the attempt predicate": {edit(fencedrt.OpClaimSendMany, noAttemptPredicate), "must end with the fence"},
		"a many-row claim fenced on one id": {edit(fencedrt.OpTakeoverMany, func(s *fencedrt.Stmt) {
			s.SQL = strings.Replace(s.SQL, "`id` IN (?)", "`id` = ?", 1)
			s.Params[len(s.Params)-2] = fencedrt.ParamID
		}), "only the many-row statements take lists"},
		"a list of ids in a single claim": {edit(fencedrt.OpClaimReconcile, func(s *fencedrt.Stmt) {
			s.SQL = strings.Replace(s.SQL, "`id` = ?", "`id` IN (?)", 1)
			s.Params[len(s.Params)-2] = fencedrt.ParamIDs
		}), "only the many-row statements take lists"},
		"a many-row completion whose value is not picked per row": {edit(fencedrt.OpCompleteMany, func(s *fencedrt.Stmt) {
			s.SQL = strings.Replace(s.SQL, "ELT(FIELD(`id`, ?), ?)", "ELT(1, ?)", 1)
			s.Params = s.Params[1:]
		}), "must set provider_refund_id per row"},
		"a many-row completion with its lists swapped": {edit(fencedrt.OpCompleteMany, func(s *fencedrt.Stmt) {
			s.Params[0], s.Params[1] = s.Params[1], s.Params[0]
		}), "must set provider_refund_id per row"},
		"a many-row claim without attempt+1":               {edit(fencedrt.OpClaimSendMany, noAttemptPlusOne), "attempt+1 is true in the state machine but false"},
		"a many-row claim declaring the row's own attempt": {edit(fencedrt.OpClaimReconcileMany, selfDeclaredWriter), "declare the writer attempt"},
		"attempts recorded into another table": {edit(fencedrt.OpRecordClaims, func(s *fencedrt.Stmt) {
			s.SQL = strings.Replace(s.SQL, "INSERT INTO `refund_job_attempts` ", "INSERT INTO `refund_audit` ", 1)
		}), "must insert into the attempts log refund_job_attempts"},
		"the claims' attempts recorded one job only": {edit(fencedrt.OpRecordClaims, func(s *fencedrt.Stmt) {
			s.SQL = strings.Replace(s.SQL, "IN (?)", "= ?", 1)
			s.Params[len(s.Params)-1] = fencedrt.ParamID
		}), "only the many-row statements take lists"},
		"an attempts log without its statements": {func() fencedrt.TableSpec {
			spec := good
			spec.Stmts = maps.Clone(good.Stmts)
			delete(spec.Stmts, fencedrt.OpRecordResolution)
			return spec
		}(), `statement "record resolution" is missing`},
		"attempts statements without a log": {func() fencedrt.TableSpec {
			spec := good
			spec.Attempts = ""
			return spec
		}(), "without an attempts log"},
	} {
		_, err := fencedrt.NewTable(tc.spec)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error containing %q", name, err, tc.want)
		}
	}
}

// Arguments are bound by name: a missing value is an error, never a shifted
// argument list.
func TestBindByName(t *testing.T) {
	table := refundJobs(t)
	if _, _, err := table.Bind(fencedrt.OpComplete, fencedrt.Values{fencedrt.ParamID: int64(1)}); err == nil {
		t.Fatal("Bind without every value succeeded")
	}
	query, args, err := table.Bind(fencedrt.OpComplete, fencedrt.Values{
		fencedrt.ParamProviderRef: "re_1", fencedrt.ParamWriter: int64(7), fencedrt.ParamID: int64(3), fencedrt.ParamAttempt: int64(7)})
	if err != nil {
		t.Fatal(err)
	}
	if fencedrt.Placeholders(query) != len(args) || !slices.Equal(args, []any{"re_1", int64(7), int64(3), int64(7)}) {
		t.Fatalf("complete binds %v to %s", args, query)
	}
	t.Run("a list of ids takes one placeholder per id", func(t *testing.T) {
		vals := fencedrt.Values{fencedrt.ParamNewAttempt: int64(3), fencedrt.ParamLeaseUntil: "l", fencedrt.ParamNow: "n",
			fencedrt.ParamWriter: int64(2), fencedrt.ParamIDs: []int64{5, 6, 7}, fencedrt.ParamAttempt: int64(2)}
		query, args, err := table.Bind(fencedrt.OpTakeoverMany, vals)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasSuffix(query, " WHERE `id` IN (?, ?, ?) AND `state` = 'running' AND `attempt` = ?") ||
			!slices.Equal(args, []any{int64(3), "l", "n", int64(2), int64(5), int64(6), int64(7), int64(2)}) {
			t.Fatalf("takeover many binds %v to %s", args, query)
		}
		for _, bad := range []any{[]int64{}, int64(5), []string{"5"}, make([]int64, fencedwrite.MaxBatch+1)} {
			vals[fencedrt.ParamIDs] = bad
			if _, _, err := table.Bind(fencedrt.OpTakeoverMany, vals); err == nil || !strings.Contains(err.Error(), `argument "ids" must`) {
				t.Errorf("ids %T: %v, want an error naming the argument", bad, err)
			}
		}
	})
	t.Run("a many-row completion picks each row's value by its id", func(t *testing.T) {
		vals := fencedrt.Values{fencedrt.ParamWriter: int64(1), fencedrt.ParamAttempt: int64(1),
			fencedrt.ParamIDs: []int64{5, 6}, fencedrt.Each(fencedrt.ParamProviderRef): []any{"re_5", "re_6"}}
		query, args, err := table.Bind(fencedrt.OpCompleteMany, vals)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(query, "`provider_refund_id` = ELT(FIELD(`id`, ?, ?), ?, ?)") || !strings.Contains(query, "`id` IN (?, ?) AND") ||
			!slices.Equal(args, []any{int64(5), int64(6), "re_5", "re_6", int64(1), int64(5), int64(6), int64(1)}) {
			t.Fatalf("complete many binds %v to %s", args, query)
		}
		vals[fencedrt.Each(fencedrt.ParamProviderRef)] = []any{"re_5"}
		if _, _, err := table.Bind(fencedrt.OpCompleteMany, vals); err == nil || !strings.Contains(err.Error(), "one per id") {
			t.Errorf("one value for two ids: %v, want an error", err)
		}
	})
	for op, s := range table.Spec().Stmts {
		if n := fencedrt.Placeholders(s.SQL); n != len(s.Params) {
			t.Errorf("%s: %d placeholders, %d arguments", op, n, len(s.Params))
		}
	}
}

// CheckStatement lets a callback's reads and writes through and nothing that
// ends or changes the transaction.
func TestCheckStatement(t *testing.T) {
	for _, ok := range []string{"SELECT 1", "  select 1", "(SELECT 1) UNION (SELECT 2)", "/* note */ INSERT INTO t VALUES (1)",
		"-- note\nUPDATE t SET a = 1", "WITH x AS (SELECT 1) SELECT * FROM x", "DELETE FROM t", "replace into t values (1)",
		"SELECT ';COMMIT'", "SELECT 1;", "SELECT 1 -- ; COMMIT", `SELECT 'a\'; COMMIT'`} {
		if err := fencedrt.CheckStatement(ok); err != nil {
			t.Errorf("%q refused: %v", ok, err)
		}
	}
	for _, bad := range []string{"COMMIT", "rollback", "ROLLBACK TO s", "BEGIN", "START TRANSACTION", "SET autocommit=1", "SET @x = 1",
		"CREATE TEMPORARY TABLE t (a int)", "ALTER TABLE t ADD c int", "CALL p()", "LOCK TABLES t READ", "/*!40101 COMMIT */",
		"/*M!100100 COMMIT */", "# c\nCOMMIT", "XA END 'x'", "KILL CONNECTION_ID()", "SAVEPOINT s", "", "   ",
		"DO 0; COMMIT", "SELECT 1; ROLLBACK", "SELECT 1 /*! ; COMMIT */", "SELECT 1 /*!99999 , 2 */", "SELECT ';' ; SET autocommit = 0",
		"UPDATE t SET a = 1 -- x\n; COMMIT"} {
		if err := fencedrt.CheckStatement(bad); err == nil {
			t.Errorf("%q let through", bad)
		}
	}
}
