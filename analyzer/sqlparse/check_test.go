package sqlparse

import (
	"strings"
	"testing"

	"github.com/fencekit/fencekit/analyzer/internal/sqlcheck"
)

func defaultConfig(t testing.TB) *sqlcheck.Config {
	tables, err := sqlcheck.ParseTables(sqlcheck.DefaultTables)
	if err != nil {
		t.Fatal(err)
	}
	return &sqlcheck.Config{Tables: tables}
}

// summary renders problems compactly: kind/table/missing columns.
func summary(ps []sqlcheck.Problem) string {
	var parts []string
	for _, p := range ps {
		s := [...]string{"", "unfenced", "lease", "unfenceable", "dynamic", "selfdeclared", "unprovable"}[p.Kind] + ":" + p.Table.Name
		if len(p.Missing) > 0 {
			s += ":" + strings.Join(p.Missing, "+")
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ",")
}

// checkCases holds one case a line: "sql  =>  want" (want empty when
// nothing is reported; \n stands for a newline and ^ for a back quote). The cases are one text
// constant, which is not SQL, so that fencelint linting this repository
// does not report the unfenced statements under test.
const checkCases = `
UPDATE refund_jobs SET state = 'ready' WHERE id = ?  =>  unfenced:refund_jobs:state+attempt
UPDATE refund_jobs SET state = ? WHERE id = ? AND state = ? AND attempt = ?  =>
update ^fk^.^refund_jobs^ AS r SET r.state = :next WHERE r.id = :id AND r.state = :state AND r.attempt = :attempt  =>
UPDATE refund_jobs SET state=? WHERE id=? AND (state=? AND (attempt=?))  =>
UPDATE refund_jobs SET state=? WHERE id=? AND (state=? OR attempt=?)  =>  unfenced:refund_jobs:state+attempt
UPDATE refund_jobs SET state=? WHERE id=? AND state=? AND NOT attempt<>?  =>  unfenced:refund_jobs:attempt
UPDATE refund_jobs SET state=? WHERE id=? AND ? = state AND 7 = attempt  =>
UPDATE refund_jobs SET state=? WHERE (id, state, attempt) = (?, ?, ?)  =>
UPDATE refund_jobs SET state=? WHERE id = ? AND (state, attempt) <=> (?, 3)  =>
UPDATE refund_jobs SET state=? WHERE (id, (state, attempt)) = (?, (?, ?))  =>
UPDATE refund_jobs SET state=? WHERE (id, state) = (?, ?)  =>  unfenced:refund_jobs:attempt
UPDATE refund_jobs SET state=? WHERE (id, state, attempt) IN ((?, ?, ?))  =>  unfenced:refund_jobs:state+attempt
UPDATE refund_jobs SET state=? WHERE (id, state, attempt) = (?, ?, attempt)  =>  unfenced:refund_jobs:attempt
UPDATE refund_jobs j JOIN refunds r ON r.job_id = j.id SET j.state = 'x' WHERE (j.id, j.state, j.attempt) = (?, ?, ?)  =>
UPDATE refund_jobs j JOIN refunds r ON r.job_id = j.id SET j.state = 'x' WHERE (j.id, r.state, r.attempt) = (?, ?, ?)  =>  unfenced:refund_jobs:state+attempt
UPDATE refund_jobs SET state=? WHERE id=? AND state=? AND attempt>=?  =>  unfenced:refund_jobs:attempt
UPDATE refund_jobs SET state=? WHERE id=? AND state=state AND attempt=?  =>  unfenced:refund_jobs:state
UPDATE refund_jobs SET state=? WHERE id=? AND state=? AND attempt=attempt+0  =>  unfenced:refund_jobs:attempt
UPDATE refund_jobs SET state=? WHERE id=? AND state=? /* AND attempt=? */  =>  unfenced:refund_jobs:attempt
UPDATE refund_jobs SET state=? WHERE id=? AND state=? -- AND attempt=?\n  =>  unfenced:refund_jobs:attempt
UPDATE refund_jobs SET state=? WHERE id IN (SELECT id FROM refund_jobs WHERE state=? AND attempt=?)  =>  unfenced:refund_jobs:state+attempt
UPDATE refund_jobs j JOIN refunds r ON r.job_id = j.id SET r.status = 'paid' WHERE j.id = ?  =>
UPDATE refund_jobs j JOIN refunds r ON r.job_id = j.id SET j.state = 'x' WHERE j.id = ? AND r.state = ? AND r.attempt = ?  =>  unfenced:refund_jobs:state+attempt
UPDATE refund_jobs j JOIN refunds r ON r.job_id = j.id SET j.state = 'x', r.status='y' WHERE j.id = ? AND j.state = ? AND j.attempt = ?  =>
UPDATE refunds r, refund_jobs j SET state = 'x' WHERE j.state = ? AND j.attempt = ?  =>
UPDATE refunds r, refund_jobs j SET state = 'x' WHERE state = ? AND attempt = ?  =>  unfenced:refund_jobs:state+attempt
UPDATE refund_jobs SET state=? WHERE id=? AND state=? AND attempt=? AND lease_until > NOW()  =>  lease:refund_jobs
UPDATE refund_jobs SET state=? WHERE id=? AND state=? AND attempt=? AND UTC_TIMESTAMP(6) < lease_until  =>  lease:refund_jobs
UPDATE refund_jobs SET state=? WHERE id=? AND state=? AND attempt=? AND lease_until >= CURRENT_TIMESTAMP  =>  lease:refund_jobs
UPDATE refund_jobs SET attempt=attempt+1 WHERE id=? AND state='running' AND attempt=? AND lease_until < UTC_TIMESTAMP(6)  =>
INSERT INTO refund_jobs (operation_key, state) VALUES (?, 'ready')  =>
INSERT INTO refund_jobs (operation_key, state) VALUES (?, 'ready') ON DUPLICATE KEY UPDATE state = 'ready'  =>  unfenceable:refund_jobs
REPLACE INTO refund_jobs (id, state) VALUES (?, ?)  =>  unfenceable:refund_jobs
SELECT * FROM refund_jobs WHERE id = ? FOR UPDATE  =>
DELETE FROM refund_jobs WHERE id = ?  =>
UPDATE refund_jobs failed: no rows  =>
SELECT 1; UPDATE refund_jobs SET state = 'x' WHERE id = 1  =>  unfenced:refund_jobs:state+attempt
UPDATE ^REFUND_JOBS^ SET ^state^ = ? WHERE ^id^ = ? AND ^state^ = ? AND ^attempt^ = ?  =>
UPDATE other SET state = ? WHERE id = ?  =>
UPDATE refund_jobs SET state = $1 WHERE id = $2 AND state = $3 AND attempt = $4  =>
UPDATE refund_jobs SET state = $1 WHERE id = $2 AND state = $3  =>  unfenced:refund_jobs:attempt
UPDATE refund_jobs SET state = 'x' WHERE a$1 = ? AND state = ? AND attempt = ?  =>
UPDATE refund_jobs SET state = @state WHERE id = @id AND state = @old AND attempt = @attempt  =>
UPDATE refund_jobs SET state = ? WHERE id = ? AND state = @@session.x AND attempt = ?  =>  unfenced:refund_jobs:state
UPDATE refund_jobs SET writer_attempt = attempt WHERE id = ? AND state = ? AND attempt = ?  =>  selfdeclared:refund_jobs
UPDATE refund_jobs SET state = ?, writer_attempt = refund_jobs.attempt WHERE id = ? AND state = ? AND attempt = ?  =>  selfdeclared:refund_jobs
UPDATE refund_jobs j SET j.writer_attempt = j.attempt WHERE j.id = ? AND j.state = ? AND j.attempt = ?  =>  selfdeclared:refund_jobs
UPDATE refund_jobs SET writer_attempt = attempt + 0 WHERE id = ? AND state = ? AND attempt = ?  =>  selfdeclared:refund_jobs
UPDATE refund_jobs SET writer_attempt = COALESCE(?, attempt) WHERE id = ? AND state = ? AND attempt = ?  =>  selfdeclared:refund_jobs
UPDATE refund_jobs SET writer_attempt = (SELECT attempt FROM refund_jobs WHERE id = 1) WHERE id = ? AND state = ? AND attempt = ?  =>  selfdeclared:refund_jobs
UPDATE refund_jobs SET writer_attempt = ? WHERE id = ? AND state = ? AND attempt = ?  =>
UPDATE refund_jobs j JOIN refunds r ON r.job_id = j.id SET j.writer_attempt = r.attempt WHERE j.id = ? AND j.state = ? AND j.attempt = ?  =>
UPDATE refund_jobs SET attempt = attempt + 1, writer_attempt = ? WHERE id = ? AND state = ? AND attempt = ?  =>
INSERT INTO refund_jobs (id, state) VALUES (?, ?) AS new ON DUPLICATE KEY UPDATE state = new.state  =>  unfenceable:refund_jobs
INSERT INTO refund_jobs (id, state) VALUES (?, ?) AS new(i, s) ON DUPLICATE KEY UPDATE state = s  =>  unfenceable:refund_jobs
INSERT INTO refund_jobs SET id = ?, state = ? AS new ON DUPLICATE KEY UPDATE state = new.state  =>  unfenceable:refund_jobs
REPLACE INTO refund_jobs (id, state) VALUES (1, 'a') RETURNING id  =>  unfenceable:refund_jobs
LOAD DATA LOCAL INFILE '/tmp/jobs.csv' REPLACE INTO TABLE refund_jobs FIELDS TERMINATED BY ',' (id, state)  =>  unfenceable:refund_jobs
LOAD DATA INFILE 'x' REPLACE INTO TABLE fk.^refund_jobs^ CHARACTER SET utf8mb4 FIELDS TERMINATED BY ',' OPTIONALLY ENCLOSED BY '"' LINES TERMINATED BY '\n' IGNORE 1 LINES (id, @s) SET state = @s  =>  unfenceable:refund_jobs
load data low_priority local infile 'x' replace into table refund_jobs  =>  unfenceable:refund_jobs
LOAD DATA LOCAL INFILE '/tmp/jobs.csv' IGNORE INTO TABLE refund_jobs (id, state)  =>
LOAD DATA INFILE '/tmp/jobs.csv' INTO TABLE refund_jobs  =>
LOAD DATA LOCAL INFILE '/tmp/jobs.csv' REPLACE INTO TABLE refund_audit  =>
UPDATE refund_jobs SET state = ? WHERE id = (SELECT id FROM (SELECT id, ROW_NUMBER() OVER (PARTITION BY merchant ORDER BY id) rn FROM refund_jobs) x WHERE rn = 1) AND state = ? AND attempt = ?  =>
UPDATE refund_jobs SET state = ? WHERE id IN (SELECT id FROM (SELECT id, RANK() OVER w AS r FROM refund_jobs WINDOW w AS (ORDER BY id)) x) AND state = ? AND attempt = ?  =>
WITH c AS (SELECT id FROM refund_jobs WHERE state = 'x') UPDATE refund_jobs j JOIN c ON c.id = j.id SET j.state = ? WHERE j.state = ? AND j.attempt = ?  =>
WITH c AS (SELECT id FROM refund_jobs WHERE state = 'x') UPDATE refund_jobs SET state = ? WHERE id IN (SELECT id FROM c)  =>  unfenced:refund_jobs:state+attempt
WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n+1 FROM c WHERE n < 5) UPDATE refund_jobs SET state = ? WHERE id IN (SELECT n FROM c) AND state = ? AND attempt = ?  =>
UPDATE refund_jobs SET state = ? WHERE state = ? AND attempt = ? ORDER BY id LIMIT 10  =>
UPDATE IGNORE refund_jobs SET state = ? WHERE id = ? AND state = ? AND attempt = ? ORDER BY id DESC LIMIT ?  =>
UPDATE refund_jobs j JOIN merchants m ON m.id = j.merchant_id SET j.state = ? WHERE j.state = ? AND j.attempt = ? AND m.active = 1  =>
UPDATE /*+ MAX_EXECUTION_TIME(1000) NO_RANGE_OPTIMIZATION(refund_jobs) */ refund_jobs SET state = ? WHERE id = ? AND state = ? AND attempt = ?  =>
UPDATE LOW_PRIORITY IGNORE refund_jobs SET state = ? WHERE id = ? AND state = ? AND attempt = ?  =>
UPDATE refund_jobs FORCE INDEX (PRIMARY) SET state = ? WHERE id = ? AND state = ? AND attempt = ?  =>
UPDATE refund_jobs SET state = ? WHERE meta->>'$.k' = 'v' AND meta->'$.n' = 1 AND state = ? AND attempt = ?  =>
UPDATE refund_jobs SET state = _utf8mb4'ready' COLLATE utf8mb4_bin WHERE state = _utf8mb4'claimed' AND attempt = ?  =>
UPDATE refund_jobs SET token = X'0A0B', bits = b'101', h = 0xff, n = N'x' WHERE state = ? AND attempt = ?  =>
UPDATE refund_jobs SET note = 'it\'s', n2 = "a\"b", n3 = 'a''b' WHERE state = ? AND attempt = ?  =>
UPDATE refund_jobs SET state = ? # the new state\nWHERE state = ? AND attempt = ? -- fenced\n  =>
SET @a := 5; UPDATE refund_jobs SET state = ?, n = (@b := n + 1) WHERE id = @a AND state = ? AND attempt = ?  =>
INSERT INTO refund_jobs (id, state) VALUES (?, ?) ON DUPLICATE KEY UPDATE state = VALUES(state)  =>  unfenceable:refund_jobs
UPDATE refund_jobs SET state = ? WHERE id = ? AND state = ? AND attempt = ? /*!50000 AND 1 */  =>
UPDATE refund_jobs SET lease_until = NOW() + INTERVAL 5 MINUTE, w = CAST(x AS JSON), v = CONVERT(y USING utf8mb4) WHERE state = ? AND attempt = ?  =>
UPDATE refund_jobs SET w = x SOUNDS LIKE 'y' WHERE state = ? AND attempt = ?  =>
UPDATE refund_jobs SET w = 1 WHERE payee sounds  like ? AND state = 'sounds like' AND attempt = ?  =>
UPDATE refund_jobs SET w = 1 WHERE payee SOUNDS LIKE ?  =>  unfenced:refund_jobs:state+attempt
UPDATE refund_jobs SET w = 1 WHERE id IN (SELECT j.id FROM JSON_TABLE(?, '$[*]' COLUMNS(id INT PATH '$', n VARCHAR(9) PATH '$.n' DEFAULT '"x)"' ON EMPTY)) AS j) AND state = ? AND attempt = ?  =>
UPDATE refund_jobs r JOIN json_table(?, '$[*]' COLUMNS(id INT PATH '$')) jt ON jt.id = r.id SET r.state = 'x' WHERE r.state = ? AND r.attempt = ?  =>
UPDATE refund_jobs r JOIN JSON_TABLE(?, '$[*]' COLUMNS(id INT PATH '$')) jt ON jt.id = r.id SET r.state = 'x' WHERE jt.state = ? AND jt.attempt = ?  =>  unfenced:refund_jobs:state+attempt
UPDATE refund_jobs SET w = ? WHERE state = ? AND attempt = ? AND x = JSON_VALUE(meta, '$.a' RETURNING DECIMAL(10,2) DEFAULT 0 ON EMPTY)  =>
UPDATE refund_jobs SET w = JSON_VALUE(meta, '$.a' RETURNING UNSIGNED) WHERE id = ?  =>  unfenced:refund_jobs:state+attempt
UPDATE refund_jobs SET hit = 1 WHERE MATCH (note, reason) AGAINST ('chargeback' IN BOOLEAN MODE) AND state = ? AND attempt = ?  =>
UPDATE refund_jobs SET hit = 1 WHERE match(note) against(?)  =>  unfenced:refund_jobs:state+attempt
UPDATE refund_jobs SET c = ? WHERE id = ? AND state = ? AND attempt = ? LIMIT ROWS EXAMINED 100  =>
UPDATE refund_jobs SET c = ? WHERE id = ? LIMIT 10 ROWS EXAMINED 1000  =>  unfenced:refund_jobs:state+attempt
UPDATE refund_jobs SET state = $1 WHERE id = $2 AND state = $3 AND attempt = $4 RETURNING id  =>  unprovable:refund_jobs
UPDATE refund_jobs SET state = ? WHERE id = $1::bigint AND state = ? AND attempt = ?  =>  unprovable:refund_jobs
INSERT INTO refund_jobs (a) VALUES ($1) ON CONFLICT (a) DO UPDATE SET state = excluded.state  =>  unprovable:refund_jobs
INSERT INTO refund_jobs (a) VALUES ($1) ON CONFLICT (a) DO NOTHING  =>
SELECT id FROM refund_jobs WHERE id = $1::bigint  =>
UPDATE refund_jobs SET state for job %d failed: %v  =>
UPDATE refund_jobs SET state = %q: %w  =>
UPDATE refund_jobs SET state = 'x' WHERE name LIKE '%s' RETURNING id  =>  unprovable:refund_jobs
UPDATE refund_jobs SET state = ? WHERE id = ? AND state = ? AND attempt = ?; UPDATE refunds SET x = ? RETURNING id  =>
UPDATE refund_jobs SET state = ? WHERE id = ?; SELECT 1 FROM dual RETURNING x  =>  unfenced:refund_jobs:state+attempt
`

type checkCase struct{ sql, want string }

func parseCases(t testing.TB) []checkCase {
	var cases []checkCase
	for _, line := range strings.Split(strings.TrimSpace(checkCases), "\n") {
		sql, want, ok := strings.Cut(line, "  =>")
		if !ok {
			t.Fatalf("bad case line %q", line)
		}
		sql = strings.NewReplacer(`\n`, "\n", "^", "`").Replace(sql)
		cases = append(cases, checkCase{sql, strings.TrimSpace(want)})
	}
	return cases
}

func TestCheck(t *testing.T) {
	cfg := defaultConfig(t)
	for _, tc := range parseCases(t) {
		if got := summary(check(tc.sql, cfg)); got != tc.want {
			t.Errorf("check(%q) = %q, want %q", tc.sql, got, tc.want)
		}
	}
}

// unreadCases: "sql  =>  text the message must contain", one a line (one
// text constant, so that fencelint linting this repository does not report
// the statements under test).
const unreadCases = `
UPDATE refund_jobs SET w = x SOUNDS LIKE WHERE state = ? AND attempt = ?  =>  cannot read (SOUNDS LIKE at offset 29)
UPDATE refund_jobs SET state = $1 WHERE id = $2 AND state = $3 AND attempt = $4 RETURNING id  =>  cannot read (RETURNING, PostgreSQL or MariaDB syntax, at offset 80)
UPDATE refund_jobs SET state = ? WHERE id = $1::bigint AND state = ? AND attempt = ?  =>  cannot read (a PostgreSQL :: cast at offset 46)
INSERT INTO refund_jobs (a) VALUES ($1) ON CONFLICT (a) DO UPDATE SET state = excluded.state  =>  cannot read (ON CONFLICT, PostgreSQL syntax, at offset 40)
UPDATE refund_jobs SET state = 'x' FROM other o WHERE o.id = refund_jobs.id  =>  cannot read (UPDATE … FROM, PostgreSQL syntax, at offset 35)
SELECT 1; UPDATE refund_jobs SET state = 'x' WHERE id = 1 AND state = ? AND attempt = ?, 2  =>  cannot read (near ", 2" at offset 87)
`

// TestUnreadableNamesConstruct: where the parser stops, the message names
// the construct and its offset in the string, and never blames the MySQL
// grammar.
func TestUnreadableNamesConstruct(t *testing.T) {
	cfg := defaultConfig(t)
	for _, line := range strings.Split(strings.TrimSpace(unreadCases), "\n") {
		sql, want, _ := strings.Cut(line, "  =>  ")
		tc := checkCase{sql, want}
		ps := check(tc.sql, cfg)
		if len(ps) != 1 || ps[0].Kind != sqlcheck.Unprovable {
			t.Errorf("check(%q) = %q, want one unprovable", tc.sql, summary(ps))
			continue
		}
		msg := ps[0].String()
		if !strings.Contains(msg, tc.want) || strings.Contains(msg, "MySQL grammar") {
			t.Errorf("check(%q): %s\nwant it to contain %q, and not blame the MySQL grammar", tc.sql, msg, tc.want)
		}
	}
}

func TestCheckTemplate(t *testing.T) {
	cfg := defaultConfig(t)
	for _, tc := range []struct {
		parts []sqlcheck.Part
		want  string
	}{
		//fencelint:allow the head of a statement under test, completed by a hole
		{[]sqlcheck.Part{{Text: "UPDATE refund_jobs SET state = ? WHERE id = "}, {Hole: true}}, "dynamic:refund_jobs"},
		{[]sqlcheck.Part{{Text: "UPDATE refund_jobs SET "}, {Hole: true}, {Text: " WHERE id = ?"}}, "unfenced:refund_jobs:state+attempt"},
		// A run-time SET list before a constant WHERE: the WHERE is judged
		// (issue 20).
		{[]sqlcheck.Part{{Text: "UPDATE refund_jobs SET "}, {Hole: true}, {Text: " WHERE id = ? AND state = ? AND attempt = ?"}}, ""},
		{[]sqlcheck.Part{{Text: "UPDATE refund_jobs SET state = 'ready', "}, {Hole: true}, {Text: " WHERE (id, state, attempt) = (?, ?, ?) LIMIT 1"}}, ""}, //fencelint:allow a statement head under test, completed by a hole
		{[]sqlcheck.Part{{Text: "UPDATE refund_jobs SET last_error = "}, {Hole: true}, {Text: " WHERE id = ? AND state = ? AND attempt = ?"}}, ""},         //fencelint:allow a statement head under test, completed by a hole
		{[]sqlcheck.Part{{Text: "UPDATE refund_jobs SET "}, {Hole: true}, {Text: " WHERE id = ? AND state = ? AND attempt = ? AND lease_until > NOW()"}}, "lease:refund_jobs"},
		{[]sqlcheck.Part{{Text: "UPDATE refund_jobs SET "}, {Hole: true}, {Text: " WHERE id = ? AND state = ? AND attempt = ? AND "}, {Hole: true}}, "dynamic:refund_jobs"},
		{[]sqlcheck.Part{{Text: "UPDATE refund_jobs SET state = ? WHERE id = ? AND state = ? AND attempt = ? LIMIT "}, {Hole: true}}, "dynamic:refund_jobs"}, //fencelint:allow a statement head under test, completed by a hole
		{[]sqlcheck.Part{{Text: "UPDATE refund_jobs SET "}, {Hole: true}, {Text: " WHERE id IN (SELECT id FROM x WHERE state = ?) AND state = ? AND attempt = ?; DELETE FROM t"}}, "dynamic:refund_jobs"},
		{[]sqlcheck.Part{{Text: "SELECT * FROM refund_jobs WHERE id = "}, {Hole: true}}, ""},
		{[]sqlcheck.Part{{Text: "INSERT INTO refund_jobs (a, b) VALUES "}, {Hole: true}}, ""},
		{[]sqlcheck.Part{{Text: "UPDATE "}, {Hole: true}, {Text: " SET state = ?"}}, ""},
		{[]sqlcheck.Part{{Text: "INSERT INTO refund_jobs (a) VALUES (?) ON DUPLICATE KEY UPDATE "}, {Hole: true}}, "dynamic:refund_jobs"},
	} {
		if got := summary(checkTemplate(tc.parts, cfg)); got != tc.want {
			t.Errorf("checkTemplate(%+v) = %q, want %q", tc.parts, got, tc.want)
		}
	}
}

// TestUnprovableNamesClause (issue 32): a sqlcheck.Dynamic UPDATE or DELETE whose
// hole has a name says which clause the hole completes and what it is;
// a hole without a name (a builder's, a template's) keeps the general
// message, and so does a hole no clause holds.
func TestUnprovableNamesClause(t *testing.T) {
	cfg := defaultConfig(t)
	cfg.Delete = true
	const head = "the fence of this "
	for _, tc := range []struct {
		parts []sqlcheck.Part
		want  string // the message's start; "" for the general message
	}{
		{[]sqlcheck.Part{{Text: "UPDATE refund_jobs SET state = 'failed' WHERE "}, {Hole: true, Param: 3, Name: "cond"}}, "UPDATE cannot be proven: its WHERE is built at run time from cond;"},             //fencelint:allow a statement head under test, completed by a hole
		{[]sqlcheck.Part{{Text: "UPDATE refund_jobs SET state = ? WHERE id = "}, {Hole: true, Name: "strconv.Itoa(id)"}}, "UPDATE cannot be proven: its WHERE is built at run time from strconv.Itoa(id);"}, //fencelint:allow a statement head under test, completed by a hole
		// The WHERE's hole is named, not the SET list's.
		{[]sqlcheck.Part{{Text: "UPDATE refund_jobs SET "}, {Hole: true, Name: "sets"}, {Text: " WHERE id = ? AND "}, {Hole: true, Name: "cond"}}, "UPDATE cannot be proven: its WHERE is built at run time from cond;"},
		// A hole inside quotes is in the clause the quotes are in.
		{[]sqlcheck.Part{{Text: "UPDATE refund_jobs SET note = '"}, {Hole: true, Name: "note"}, {Text: "' WHERE id = ? AND x = '"}, {Hole: true, Name: "x"}, {Text: "'"}}, "UPDATE cannot be proven: its WHERE is built at run time from x;"}, //fencelint:allow a statement head under test, completed by a hole
		{[]sqlcheck.Part{{Text: "UPDATE refund_jobs SET "}, {Hole: true, Name: "sets"}}, "UPDATE cannot be proven: its SET list and WHERE are built at run time from sets;"},
		{[]sqlcheck.Part{{Text: "/* job */ DELETE FROM refund_jobs WHERE "}, {Hole: true, Name: "where"}}, "DELETE cannot be proven: its WHERE is built at run time from where;"},
		// The general message: no name, or no clause to name.
		{[]sqlcheck.Part{{Text: "UPDATE refund_jobs SET state = ? WHERE id = "}, {Hole: true}}, ""},                                                  //fencelint:allow a statement head under test, completed by a hole
		{[]sqlcheck.Part{{Text: "UPDATE refund_jobs SET state = ? WHERE id = ? AND state = ? AND attempt = ? LIMIT "}, {Hole: true, Name: "n"}}, ""}, //fencelint:allow a statement head under test, completed by a hole
		{[]sqlcheck.Part{{Text: "INSERT INTO refund_jobs (a) VALUES (?) ON DUPLICATE KEY UPDATE "}, {Hole: true, Name: "set"}}, ""},
	} {
		ps := checkTemplate(tc.parts, cfg)
		if len(ps) != 1 {
			t.Errorf("checkTemplate(%+v) = %v, want one problem", tc.parts, ps)
			continue
		}
		got := ps[0].String()
		if tc.want == "" {
			if !strings.HasPrefix(got, "query built at run time writes refund_jobs") {
				t.Errorf("checkTemplate(%+v) = %q, want the general message", tc.parts, got)
			}
			continue
		}
		if !strings.HasPrefix(got, head+tc.want) || !strings.Contains(got, "a write of refund_jobs must hold AND state = ? AND attempt = ?") {
			t.Errorf("checkTemplate(%+v) = %q, want %q…, naming the table and the fence", tc.parts, got, head+tc.want)
		}
	}
}

func FuzzCheck(f *testing.F) {
	// Seeds: every TestCheck case, and inputs that stress the scanners.
	for _, tc := range parseCases(f) {
		f.Add(tc.sql, true)
	}
	f.Add("refund_jobs ':x '\\' /* -- # \"", false)
	f.Add("update `refund_jobs` r join x on x.a=r.b set r.state=:s where r.state=:s and r.attempt=:a", false)
	cfg := defaultConfig(f)
	f.Fuzz(func(t *testing.T, s string, del bool) {
		c := *cfg
		c.Delete = del
		for _, p := range check(s, &c) {
			_ = p.String()
		}
		mid := len(s) / 2
		for _, p := range checkTemplate([]sqlcheck.Part{{Text: s[:mid]}, {Hole: true}, {Text: s[mid:]}}, &c) {
			_ = p.String()
		}
		_ = sqlcheck.ReplaceNamedParams(s)
	})
}

// TestCheckConcurrently guards the parser pool: the driver analyses
// packages in parallel (run with -race).
func TestCheckConcurrently(t *testing.T) {
	cfg := defaultConfig(t)
	cases := parseCases(t)
	done := make(chan struct{})
	for g := 0; g < 4; g++ {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := 0; i < 20; i++ {
				for _, tc := range cases {
					if got := summary(check(tc.sql, cfg)); got != tc.want {
						t.Errorf("check(%q) = %q, want %q", tc.sql, got, tc.want)
						return
					}
				}
			}
		}()
	}
	for g := 0; g < 4; g++ {
		<-done
	}
}

// splitStatements skips quotes and comments as sqlcheck.ReplaceNamedParams does:
// "--" starts a comment only before whitespace, as in MySQL.
func TestSplitStatements(t *testing.T) {
	for in, want := range map[string][]string{
		"a; b":           {"a", " b"},
		"a = 'x;y'; b":   {"a = 'x;y'", " b"},
		"a /* ; */; b":   {"a /* ; */", " b"},
		"a -- ; c\n; b":  {"a -- ; c\n", " b"},
		"a # ;\n; b":     {"a # ;\n", " b"},
		"a = a--1; b":    {"a = a--1", " b"},
		"a = `x;`; b --": {"a = `x;`", " b --"},
	} {
		if got := splitStatements(in); strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("splitStatements(%q) = %q, want %q", in, got, want)
		}
	}
}
