package adopt

import (
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/go-sql-driver/mysql"
)

// Step 0 of every plan: what the server and the accounts must allow before
// anything changes, checked by plan itself. A check that fails refuses the
// plan like any other reason (listed with the others); one that only
// matters later is a warning the plan prints first.

// Check is one pre-flight check of a plan: what it looked at, what it found
// and, when it is not ok, what to do.
type Check struct {
	Name   string
	Status CheckStatus
	Found  string
	Fix    string
}

// CheckStatus is what a pre-flight check concluded.
type CheckStatus string

// The statuses of a pre-flight check: ok; warn (apply works, but read the
// fix first); refused (apply cannot work until the fix is done: the plan is
// refused with it).
const (
	CheckOK      CheckStatus = "ok"
	CheckWarn    CheckStatus = "warn"
	CheckRefused CheckStatus = "refused"
)

// neededPrivileges are the privileges apply uses on the database: ALTER,
// CREATE, DROP and INDEX for the table's and the companions' DDL, TRIGGER
// and CREATE ROUTINE / ALTER ROUTINE for the fence, the data privileges for
// the backfills.
var neededPrivileges = []string{"SELECT", "INSERT", "UPDATE", "DELETE", "CREATE", "DROP", "ALTER", "INDEX", "TRIGGER", "CREATE ROUTINE", "ALTER ROUTINE"}

// writePrivileges reach the rows of fencekit's tables.
var writePrivileges = []string{"INSERT", "UPDATE", "DELETE", "ALL PRIVILEGES"}

func (pl *planner) check(c Check) {
	pl.p.Preflight = append(pl.p.Preflight, c)
	if c.Status == CheckRefused {
		pl.refuse("pre-flight, %s: %s. %s", c.Name, c.Found, c.Fix)
	}
}

// preflight runs step 0's checks.
func (pl *planner) preflight() error {
	for _, f := range []func() error{pl.checkGrants, pl.checkBinlog, pl.checkAutoInc, pl.checkPerformanceSchema, pl.checkTimeZone, pl.checkWriters} {
		if err := f(); err != nil {
			return err
		}
	}
	return nil
}

// grantee is the account as information_schema names it: 'user'@'host'.
func (pl *planner) grantee() (user, grantee string, err error) {
	var cur string
	if err := pl.conn.QueryRowContext(pl.ctx, "SELECT CURRENT_USER()").Scan(&cur); err != nil {
		return "", "", fmt.Errorf("adopt: read the account: %w", err)
	}
	user, host, _ := strings.Cut(cur, "@")
	return user, "'" + user + "'@'" + host + "'", nil
}

// privileges returns the privileges information_schema shows the account
// holding on the database (granted on *.* or on a pattern that matches it).
func (pl *planner) privileges(grantee string) (map[string]bool, error) {
	rows, err := pl.conn.QueryContext(pl.ctx, "SELECT PRIVILEGE_TYPE FROM information_schema.USER_PRIVILEGES WHERE GRANTEE = ? "+
		"UNION SELECT PRIVILEGE_TYPE FROM information_schema.SCHEMA_PRIVILEGES WHERE GRANTEE = ? AND DATABASE() LIKE TABLE_SCHEMA", grantee, grantee)
	if err != nil {
		return nil, fmt.Errorf("adopt: read the account's privileges: %w", err)
	}
	defer rows.Close()
	have := map[string]bool{}
	for rows.Next() {
		var p string
		if err := rows.Scan(&p); err != nil {
			return nil, err
		}
		have[strings.ToUpper(p)] = true
	}
	return have, rows.Err()
}

func (pl *planner) checkGrants() error {
	user, grantee, err := pl.grantee()
	if err != nil {
		return err
	}
	have, err := pl.privileges(grantee)
	if err != nil {
		return err
	}
	var role sql.NullString
	if err := pl.conn.QueryRowContext(pl.ctx, "SELECT CURRENT_ROLE()").Scan(&role); err != nil {
		role = sql.NullString{} // a server without roles
	}
	roles := role.Valid && role.String != "" && role.String != "NONE"
	var missing []string
	for _, p := range neededPrivileges {
		if !have[p] {
			missing = append(missing, p)
		}
	}
	c := Check{Name: "the migration account's grants", Status: CheckOK,
		Found: fmt.Sprintf("%s holds %s on %s; the fence's mode will be this account's alone (user %s)", grantee, strings.Join(neededPrivileges, ", "), pl.p.Database, user)}
	switch {
	case len(missing) > 0 && roles:
		c.Status, c.Found = CheckWarn, fmt.Sprintf("%s has the role %s active, whose grants information_schema does not show; without it the account lacks %s", grantee, role.String, strings.Join(missing, ", "))
		c.Fix = "make sure the role grants them, or grant them to the account"
	case len(missing) > 0:
		c.Status, c.Found = CheckRefused, fmt.Sprintf("%s lacks %s on %s", grantee, strings.Join(missing, ", "), pl.p.Database)
		c.Fix = fmt.Sprintf("GRANT %s ON %s.* TO %s (run adopt with the migration account: docs/migrations.md, \"Accounts\")", strings.Join(missing, ", "), quote(pl.p.Database), grantee)
	}
	pl.check(c)
	if !have["LOCK TABLES"] {
		pl.check(Check{Name: "LOCK TABLES", Status: CheckWarn, Found: grantee + " may not LOCK TABLES: the fence's triggers are then created one by one, and a legacy write racing them may fail once (error 1305 on MariaDB)",
			Fix: fmt.Sprintf("GRANT LOCK TABLES ON %s.* TO %s", quote(pl.p.Database), grantee)})
	}
	return pl.checkAccounts(grantee)
}

// checkAccounts lists the other accounts whose grants reach fencekit's
// tables (their rows): the legacy writers the fence will hold, none of
// which may change its mode.
func (pl *planner) checkAccounts(self string) error {
	rows, err := pl.conn.QueryContext(pl.ctx, "SELECT GRANTEE, PRIVILEGE_TYPE, '*' FROM information_schema.USER_PRIVILEGES WHERE PRIVILEGE_TYPE IN ("+accountPrivileges+") "+
		"UNION ALL SELECT GRANTEE, PRIVILEGE_TYPE, TABLE_SCHEMA FROM information_schema.SCHEMA_PRIVILEGES WHERE PRIVILEGE_TYPE IN ("+accountPrivileges+") AND DATABASE() LIKE TABLE_SCHEMA "+
		"UNION ALL SELECT GRANTEE, PRIVILEGE_TYPE, CONCAT(TABLE_SCHEMA, '.', TABLE_NAME) FROM information_schema.TABLE_PRIVILEGES WHERE PRIVILEGE_TYPE IN ("+accountPrivileges+") AND TABLE_SCHEMA = DATABASE()")
	if err != nil {
		return fmt.Errorf("adopt: read the accounts' grants: %w", err)
	}
	defer rows.Close()
	grants, undo := map[string][]string{}, map[string][]string{}
	for rows.Next() {
		var grantee, priv, on string
		if err := rows.Scan(&grantee, &priv, &on); err != nil {
			return err
		}
		if grantee == self {
			continue
		}
		into := grants
		if !slices.Contains([]string{"INSERT", "UPDATE", "DELETE"}, priv) {
			into = undo
		}
		g := priv + " on " + on
		if !slices.Contains(into[grantee], g) {
			into[grantee] = append(into[grantee], g)
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	list := func(m map[string][]string) string {
		var out []string
		for _, g := range slices.Sorted(maps.Keys(m)) {
			out = append(out, g+" ("+strings.Join(m[g], ", ")+")")
		}
		return strings.Join(out, "; ")
	}
	found := "no other account's grants that this account can see reach the tables"
	if len(grants) > 0 {
		found = "accounts whose grants reach refund_jobs and fencekit's tables: " + list(grants)
	}
	pl.check(Check{Name: "the accounts that write the tables", Status: CheckOK, Found: found + ". Each is held by the fence; none may change its mode (the database refuses any account but the migration account). " +
		"information_schema shows another account's grants only to an account that may read the mysql schema"})
	if len(undo) > 0 {
		pl.check(Check{Name: "the accounts that can undo the fence", Status: CheckWarn,
			Found: "other accounts hold privileges that remove or get round the fence for their own writes: " + list(undo) + ". " +
				"TRIGGER, DROP, ALTER and the routine privileges drop or replace its triggers and procedures; CREATE TEMPORARY TABLES lets a session " +
				"shadow refund_jobs_fence_mode with a table of its own, whose mode the fence then reads for that session's writes",
			Fix: "give the applications' accounts their data privileges only (REVOKE the others; migrations.AppGrants lists what fencekit's workers need); " +
				"the fence guards against a writer's bug, not against an account that sets out to remove it"})
	}
	return nil
}

// accountPrivileges are the grants checkAccounts looks for: those that
// write the tables, and those that can remove the fence or get round it.
const accountPrivileges = "'INSERT', 'UPDATE', 'DELETE', 'TRIGGER', 'DROP', 'ALTER', 'CREATE TEMPORARY TABLES', 'CREATE ROUTINE', 'ALTER ROUTINE', 'SUPER'"

// checkBinlog: with the binary log on, creating a trigger needs SUPER (or
// log_bin_trust_function_creators = 1), on MySQL and MariaDB alike: most
// managed servers log.
func (pl *planner) checkBinlog() error {
	var logBin, trust sql.NullString
	if err := pl.conn.QueryRowContext(pl.ctx, "SELECT @@log_bin, @@log_bin_trust_function_creators").Scan(&logBin, &trust); err != nil {
		return fmt.Errorf("adopt: read the binary log settings: %w", err)
	}
	on := func(v sql.NullString) bool { return v.String == "1" || strings.EqualFold(v.String, "ON") }
	super := false
	if on(logBin) && !on(trust) {
		_, grantee, err := pl.grantee()
		if err != nil {
			return err
		}
		have, err := pl.privileges(grantee)
		if err != nil {
			return err
		}
		super = have["SUPER"]
	}
	pl.check(binlogCheck(on(logBin), on(trust), super))
	return nil
}

// binlogCheck is what the binary log's settings allow: the server refuses
// CREATE TRIGGER and CREATE PROCEDURE (error 1419) to an account without
// SUPER while it logs, unless it trusts function creators.
func binlogCheck(logBin, trust, super bool) Check {
	c := Check{Name: "binary logging", Status: CheckOK, Found: "the binary log is off"}
	switch {
	case !logBin:
	case trust:
		c.Found = "the binary log is on and log_bin_trust_function_creators is on: triggers can be created"
	case super:
		c.Found = "the binary log is on, log_bin_trust_function_creators is off, and the account holds SUPER: triggers can be created"
	default:
		c.Status = CheckRefused
		c.Found = "the binary log is on and log_bin_trust_function_creators is off: the server refuses to create the fence's triggers and procedures for an account without SUPER (error 1419)"
		c.Fix = "SET GLOBAL log_bin_trust_function_creators = 1 (on a managed server, its parameter group), then plan again"
	}
	return c
}

func (pl *planner) checkAutoInc() error {
	var mode sql.NullInt64
	if err := pl.conn.QueryRowContext(pl.ctx, "SELECT @@innodb_autoinc_lock_mode").Scan(&mode); err != nil {
		var me *mysql.MySQLError
		if errors.As(err, &me) && me.Number == 1193 { // not InnoDB's AUTO-INC locking
			return nil
		}
		return fmt.Errorf("adopt: read innodb_autoinc_lock_mode: %w", err)
	}
	c := Check{Name: "innodb_autoinc_lock_mode", Status: CheckOK, Found: fmt.Sprintf("%d", mode.Int64)}
	if mode.Int64 != 2 {
		c.Status = CheckWarn
		c.Found = fmt.Sprintf("%d, not 2: while a step copies the table online, a legacy UPDATE of many rows and a legacy INSERT may deadlock on the copy's AUTO-INC lock (error 1213: the writer retries, nothing is lost)", mode.Int64)
		c.Fix = "nothing, if the legacy writers retry deadlocks; innodb_autoinc_lock_mode = 2 (MySQL 8's default; a restart on MariaDB) removes it"
	}
	pl.check(c)
	return nil
}

func (pl *planner) checkPerformanceSchema() error {
	var on sql.NullString
	if err := pl.conn.QueryRowContext(pl.ctx, "SELECT @@performance_schema").Scan(&on); err != nil {
		var me *mysql.MySQLError
		if errors.As(err, &me) && me.Number == 1193 {
			on = sql.NullString{}
		} else {
			return fmt.Errorf("adopt: read performance_schema: %w", err)
		}
	}
	c := Check{Name: "performance_schema", Status: CheckOK, Found: "on: the fence's report names each violation's program and statement"}
	if on.String != "1" && !strings.EqualFold(on.String, "ON") {
		c.Status = CheckWarn
		c.Found = "off: observe mode's report names each violation's account, connection and the columns it changed, but not its program or statement"
		c.Fix = "performance_schema = ON at the server's start (MariaDB's default is off), or give each legacy application an account of its own"
	}
	pl.check(c)
	return nil
}

// checkTimeZone: fencekit's times are UTC; a server whose clock's zone is
// not has legacy DATETIMEs written by NOW() in another zone.
func (pl *planner) checkTimeZone() error {
	var global, system string
	if err := pl.conn.QueryRowContext(pl.ctx, "SELECT @@global.time_zone, @@system_time_zone").Scan(&global, &system); err != nil {
		return fmt.Errorf("adopt: read the time zone: %w", err)
	}
	zone := global
	if strings.EqualFold(global, "SYSTEM") {
		zone = system
	}
	c := Check{Name: "time zone", Status: CheckOK, Found: "the server's time zone is " + zone + ": legacy DATETIMEs written with NOW() are UTC, as fencekit reads them"}
	switch strings.ToUpper(zone) {
	case "UTC", "+00:00", "GMT", "ETC/UTC", "Z":
	default:
		c.Status = CheckWarn
		c.Found = "the server's time zone is " + zone + ": fencekit reads every DATETIME (next_run_at, lease_until, …) as UTC, and legacy writers using NOW() wrote local times"
		c.Fix = "check how the legacy writers write times; a job due at a local time becomes due earlier or later by the offset (fencekit's own writes are UTC)"
	}
	pl.check(c)
	return nil
}

// checkWriters names the team's state and action names the table holds:
// the legacy writers write them, and must write fencekit's before apply.
func (pl *planner) checkWriters() error {
	var names []string
	for _, col := range []struct {
		name  string
		valid []string
	}{{"state", fencekitStates}, {"next_action", fencekitActions}} {
		if _, ok := pl.legacy.Column(col.name); !ok {
			continue
		}
		rows, err := pl.conn.QueryContext(pl.ctx, "SELECT DISTINCT "+binary(col.name)+" FROM "+quote(Table)+" WHERE "+quote(col.name)+" IS NOT NULL")
		if err != nil {
			return fmt.Errorf("adopt: read %s values: %w", col.name, err)
		}
		for rows.Next() {
			var v string
			if err := rows.Scan(&v); err != nil {
				rows.Close()
				return err
			}
			if !contains(col.valid, v) {
				names = append(names, fmt.Sprintf("%s %q", col.name, v))
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
	}
	c := Check{Name: "the legacy writers' names", Status: CheckOK, Found: "every state and next_action in the table is one of fencekit's"}
	if len(names) > 0 {
		slices.Sort(names)
		c.Status = CheckWarn
		c.Found = "the table holds the team's names " + strings.Join(names, ", ") + ": -states / -actions rewrite the rows, but a legacy writer that still writes them " +
			"fails once state and next_action are fencekit's enums (Data truncated)"
		c.Fix = "FIRST change every legacy writer to write fencekit's names (ready, running, succeeded, manual_review, failed; refund, reconcile), deploy it, then apply"
	}
	pl.check(c)
	return nil
}
