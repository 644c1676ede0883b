package fencedwrite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"maps"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/fencekit/fencekit/fencedwrite/internal/sqltext"
)

// ErrUntrustedSession means a database session does not have the settings
// the fenced layer relies on (see VerifySession), or a statement would
// change them on a pool that OpenDB opened. Nothing was written. It matches
// ErrInvalid: fix the pool's configuration, or open it with OpenDB.
var ErrUntrustedSession = fmt.Errorf("%w: the database session is not one the fenced layer can trust", ErrInvalid)

// SessionError names a session setting the fenced layer cannot trust.
type SessionError struct {
	Variable string // the session variable, e.g. character_set_client
	Value    string // what the session says
	Want     string // what the fenced layer needs
}

func (e *SessionError) Error() string {
	return fmt.Sprintf("session variable %s is %q, the fenced layer needs %s", e.Variable, e.Value, e.Want)
}

// Is makes a SessionError match ErrUntrustedSession and ErrInvalid.
func (e *SessionError) Is(target error) bool {
	return target == ErrUntrustedSession || target == ErrInvalid
}

// SessionRules are what VerifySession requires of a session beyond the
// rules every session follows.
type SessionRules struct {
	// UTC requires time_zone '+00:00', as a fenced pool sets it; without
	// it, SYSTEM or any numeric offset passes (a named zone repeats an hour
	// when its clocks go back).
	UTC bool
	// Database, when set, is the schema the session must be using.
	Database string
}

// The isolation variable differs by engine: MySQL 8 and TiDB have
// transaction_isolation, MariaDB before 11.1 only tx_isolation.
const (
	isolationMySQL   = "transaction_isolation"
	isolationMariaDB = "tx_isolation"
)

// IsolationVariable returns the name of the session's isolation variable on
// the server whose VERSION() is version.
func IsolationVariable(version string) string {
	if strings.Contains(strings.ToLower(version), "mariadb") {
		return isolationMariaDB
	}
	return isolationMySQL
}

// SessionQuery is the statement that reads what VerifySession checks, for
// a server whose isolation variable is iso (IsolationVariable).
func SessionQuery(iso string) string {
	return "SELECT @@session.character_set_client, @@session.character_set_connection, @@session.collation_connection, " +
		"@@session.sql_mode, @@session.autocommit, @@session.time_zone, @@session." + iso + ", COALESCE(DATABASE(), ''), CONNECTION_ID()"
}

// Session is what SessionQuery read.
type Session struct {
	CharsetClient, CharsetConnection, CollationConnection string
	SQLMode, Autocommit, TimeZone, Isolation, Database    string
	ConnectionID                                          int64
}

// Dest returns the scan destinations of SessionQuery's columns.
func (s *Session) Dest() []any {
	return []any{&s.CharsetClient, &s.CharsetConnection, &s.CollationConnection, &s.SQLMode, &s.Autocommit,
		&s.TimeZone, &s.Isolation, &s.Database, &s.ConnectionID}
}

var numericOffset = regexp.MustCompile(`^[+-][0-9]{1,2}:[0-9]{2}$`)

// Check returns an error naming every setting of s that the fenced layer
// cannot trust, or nil:
//
//   - character_set_client and character_set_connection utf8mb4, and a
//     utf8mb4 collation_connection: arguments are escaped as utf8mb4, and a
//     multi-byte character set whose second byte may be a backslash (gbk,
//     big5, sjis, cp932, gb18030) would let an argument close its string;
//   - an sql_mode without NO_BACKSLASH_ESCAPES or ANSI_QUOTES, which change
//     how the server reads a statement's quotes;
//   - autocommit on: a statement outside the runner's transactions must
//     commit when it returns;
//   - an isolation level that reads committed rows (not READ-UNCOMMITTED);
//   - time_zone as r says, and the schema r names.
func (s Session) Check(r SessionRules) error {
	var errs []error
	bad := func(v, got, want string) { errs = append(errs, &SessionError{Variable: v, Value: got, Want: want}) }
	if !strings.EqualFold(s.CharsetClient, "utf8mb4") {
		bad("character_set_client", s.CharsetClient, "utf8mb4")
	}
	if !strings.EqualFold(s.CharsetConnection, "utf8mb4") {
		bad("character_set_connection", s.CharsetConnection, "utf8mb4")
	}
	if !utf8mb4Collation.MatchString(s.CollationConnection) {
		bad("collation_connection", s.CollationConnection, "a utf8mb4 collation")
	}
	for _, mode := range strings.Split(strings.ToUpper(s.SQLMode), ",") {
		if mode == "NO_BACKSLASH_ESCAPES" || mode == "ANSI_QUOTES" {
			bad("sql_mode", s.SQLMode, "a mode without NO_BACKSLASH_ESCAPES and ANSI_QUOTES")
			break
		}
	}
	if s.Autocommit != "1" {
		bad("autocommit", s.Autocommit, "1")
	}
	if strings.EqualFold(strings.ReplaceAll(s.Isolation, " ", "-"), "READ-UNCOMMITTED") {
		bad("transaction isolation", s.Isolation, "a level that reads committed rows")
	}
	switch {
	case r.UTC && s.TimeZone != "+00:00":
		bad("time_zone", s.TimeZone, "'+00:00'")
	case !r.UTC && s.TimeZone != "SYSTEM" && !numericOffset.MatchString(s.TimeZone):
		bad("time_zone", s.TimeZone, "SYSTEM or a numeric offset (a named zone repeats an hour)")
	}
	if r.Database != "" && s.Database != r.Database {
		bad("database", s.Database, fmt.Sprintf("%q, the DSN's", r.Database))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("verify session: %w", err)
	}
	return nil
}

// NewConnector returns the connector of a fenced pool for cfg, which should
// come from Config (and may have been changed since, to set a dialer, say:
// it is checked again). A pool opened on it with sql.OpenDB is a fenced
// pool:
//
//   - every new connection is verified (VerifySession) before its first
//     use, so a server's init_connect, an account's defaults or a server
//     that ignores the client's character set cannot hand the fenced layer
//     a session it cannot trust;
//   - a statement that would change the session (SET of anything, SET
//     NAMES, SET TRANSACTION, USE, a transaction that reads uncommitted
//     rows) is refused before it is sent, with an error matching
//     ErrUntrustedSession;
//   - after a statement that may change the session behind the text (CALL,
//     EXECUTE, an executable comment), the session is verified again, and a
//     connection that fails is closed and never used again.
//
// The generated client trusts a fenced pool without checking each
// transaction; on any other pool it verifies the session of every
// transaction before its first statement.
func NewConnector(cfg *mysql.Config) (driver.Connector, error) {
	if err := checkConfig(cfg); err != nil {
		return nil, fmt.Errorf("fenced connector: %w", err)
	}
	inner, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("fenced connector: %w", err)
	}
	return &connector{inner: inner, rules: SessionRules{UTC: true, Database: cfg.DBName}}, nil
}

// checkConfig checks a configuration the way Config checks a DSN.
func checkConfig(cfg *mysql.Config) error {
	var errs []error
	bad := func(field, problem string, args ...any) {
		errs = append(errs, fieldErr("config "+field, problem, args...))
	}
	if !cfg.ParseTime || !cfg.ClientFoundRows || cfg.Loc != time.UTC {
		bad("ParseTime, ClientFoundRows, Loc", "must be true, true and UTC, as Config sets them")
	}
	if cfg.MultiStatements {
		bad("MultiStatements", "refused: one statement per call lets the fenced runner judge each one")
	}
	if cfg.AllowAllFiles || cfg.ColumnsWithAlias {
		bad("AllowAllFiles, ColumnsWithAlias", "must be false")
	}
	if cfg.Collation != "" && !utf8mb4Collation.MatchString(cfg.Collation) {
		bad("Collation", "refused: %q is not a utf8mb4 collation", cfg.Collation)
	}
	for _, p := range rawParams(cfg.FormatDSN()) {
		if p.key == "charset" && !onlyValue["charset"].ok(p.value) {
			bad("charset", "refused: %q is not utf8mb4", p.value)
		}
	}
	want := maps.Clone(cfg.Params)
	for k := range sessionParams(DSNOptions{}) {
		delete(want, k)
	}
	for k := range want {
		bad("Params", "refused: %q sets the session variable %s; the fenced layer sets the session itself", k, SessionVariable(k))
	}
	return errors.Join(errs...)
}

type connector struct {
	inner driver.Connector
	rules SessionRules
	iso   atomic.Pointer[string] // the server's isolation variable, once known
}

// Connect opens a connection and verifies its session.
func (c *connector) Connect(ctx context.Context) (driver.Conn, error) {
	dc, err := c.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	conn := &conn{inner: dc, c: c}
	if err := conn.verify(ctx); err != nil {
		_ = dc.Close()
		return nil, err
	}
	return conn, nil
}

// Driver returns the fenced pool's driver: a pool whose driver it is was
// opened on a fenced connector (IsFencedPool).
func (c *connector) Driver() driver.Driver { return fencedDriver{c.inner.Driver()} }

// fencedDriver opens fenced connections from a DSN (sql.Open with a
// registered fencedDriver is not offered; OpenDB is the way in).
type fencedDriver struct{ inner driver.Driver }

func (d fencedDriver) Open(dsn string) (driver.Conn, error) {
	cfg, err := Config(dsn, DSNOptions{})
	if err != nil {
		return nil, err
	}
	c, err := NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	return c.Connect(context.Background())
}

// IsFencedPool reports whether db was opened on a fenced connector (OpenDB,
// NewConnector), whose sessions are verified.
func IsFencedPool(db *sql.DB) (fenced bool) {
	defer func() {
		if recover() != nil {
			fenced = false // a zero sql.DB, which no Open made
		}
	}()
	_, ok := db.Driver().(fencedDriver)
	return ok
}

// conn is a connection of a fenced pool.
type conn struct {
	inner driver.Conn
	c     *connector

	mu  sync.Mutex
	bad error // the session failed verification after a statement: never used again
}

var errDirtyConn = errors.New("fenced pool: the connection's session changed and could not be verified")

func (cn *conn) queryer() driver.QueryerContext { q, _ := cn.inner.(driver.QueryerContext); return q }

// verify reads the session and checks it against the connector's rules.
func (cn *conn) verify(ctx context.Context) error {
	q := cn.queryer()
	if q == nil {
		return fmt.Errorf("%w: the driver's connection cannot run queries", ErrUntrustedSession)
	}
	iso := cn.c.iso.Load()
	if iso == nil {
		var version string
		if err := queryRow(ctx, q, "SELECT VERSION()", &version); err != nil {
			return fmt.Errorf("verify session: read the server's version: %w", err)
		}
		v := IsolationVariable(version)
		iso = &v
		cn.c.iso.Store(iso)
	}
	var s Session
	if err := queryRow(ctx, q, SessionQuery(*iso), s.Dest()...); err != nil {
		return fmt.Errorf("verify session: %w", err)
	}
	return s.Check(cn.c.rules)
}

// queryRow runs query on q and scans its one row into dest (strings or
// int64s).
func queryRow(ctx context.Context, q driver.QueryerContext, query string, dest ...any) error {
	rows, err := q.QueryContext(ctx, query, nil)
	if err != nil {
		return err
	}
	defer rows.Close()
	vals := make([]driver.Value, len(rows.Columns()))
	if err := rows.Next(vals); err != nil {
		if err == io.EOF {
			return errors.New("no row")
		}
		return err
	}
	for i, d := range dest {
		switch d := d.(type) {
		case *string:
			switch v := vals[i].(type) {
			case []byte:
				*d = string(v)
			case string:
				*d = v
			case nil:
				*d = ""
			default:
				*d = fmt.Sprint(v)
			}
		case *int64:
			switch v := vals[i].(type) {
			case int64:
				*d = v
			case uint64:
				*d = int64(v)
			case []byte:
				if _, err := fmt.Sscan(string(v), d); err != nil {
					return fmt.Errorf("column %d: %w", i, err)
				}
			default:
				return fmt.Errorf("column %d: %T is not an integer", i, v)
			}
		}
	}
	return nil
}

// effect is what a statement may do to the session.
type effect int

const (
	keepsSession  effect = iota
	mayChangeIt          // verify the session again afterwards
	changesItOpen        // refused
)

// sessionEffect judges the statement query. A fenced pool never sends
// several statements per call (multiStatements is refused), so the server
// runs query as one statement, whatever semicolons a compound body
// (CREATE TRIGGER … BEGIN … END) holds: its first statement, read through
// an executable comment, is what runs.
func sessionEffect(query string) (effect, string) {
	stmts := sqltext.Split(query)
	if len(stmts) == 0 {
		return keepsSession, ""
	}
	s := stmts[0]
	switch s.Keyword {
	case "SET", "USE":
		return changesItOpen, s.Keyword
	case "CALL", "EXECUTE":
		return mayChangeIt, s.Keyword
	}
	if s.Executable {
		return mayChangeIt, s.Keyword
	}
	return keepsSession, s.Keyword
}

// before judges query: it refuses a statement that changes the session,
// and reports whether the session must be verified after it runs.
func (cn *conn) before(query string) (verifyAfter bool, err error) {
	cn.mu.Lock()
	bad := cn.bad
	cn.mu.Unlock()
	if bad != nil {
		return false, driver.ErrBadConn
	}
	switch e, kw := sessionEffect(query); e {
	case changesItOpen:
		return false, fmt.Errorf("%w: a fenced pool refuses %s statements, which change the session its fence relies on: %.80q", ErrUntrustedSession, kw, query)
	case mayChangeIt:
		return true, nil
	}
	return false, nil
}

// after verifies the session after a statement that may have changed it;
// a connection that fails is marked bad and closed by the pool.
func (cn *conn) after(ctx context.Context, verifyAfter bool, err error) error {
	if !verifyAfter {
		return err
	}
	if verr := cn.verify(ctx); verr != nil {
		cn.mu.Lock()
		cn.bad = verr
		cn.mu.Unlock()
		return errors.Join(err, fmt.Errorf("%w: %w", errDirtyConn, verr))
	}
	return err
}

func (cn *conn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	ex, ok := cn.inner.(driver.ExecerContext)
	if !ok {
		return nil, driver.ErrSkip
	}
	v, err := cn.before(query)
	if err != nil {
		return nil, err
	}
	res, err := ex.ExecContext(ctx, query, args)
	if errors.Is(err, driver.ErrSkip) {
		return nil, err // database/sql prepares it instead: judged again there
	}
	return res, cn.after(ctx, v, err)
}

func (cn *conn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	q := cn.queryer()
	if q == nil {
		return nil, driver.ErrSkip
	}
	v, err := cn.before(query)
	if err != nil {
		return nil, err
	}
	if v {
		// The rows must be read before the session can be read again.
		return nil, fmt.Errorf("%w: run CALL and EXECUTE with Exec on a fenced pool, so that the session can be verified after them", ErrUntrustedSession)
	}
	return q.QueryContext(ctx, query, args)
}

func (cn *conn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	v, err := cn.before(query)
	if err != nil {
		return nil, err
	}
	if v {
		return nil, fmt.Errorf("%w: CALL and EXECUTE are not prepared on a fenced pool; run them with Exec", ErrUntrustedSession)
	}
	if p, ok := cn.inner.(driver.ConnPrepareContext); ok {
		return p.PrepareContext(ctx, query)
	}
	return cn.inner.Prepare(query)
}

func (cn *conn) Prepare(query string) (driver.Stmt, error) {
	return cn.PrepareContext(context.Background(), query)
}

func (cn *conn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	if opts.Isolation == driver.IsolationLevel(sql.LevelReadUncommitted) {
		return nil, fmt.Errorf("%w: a fenced pool refuses transactions that read uncommitted rows", ErrUntrustedSession)
	}
	if _, err := cn.before(""); err != nil {
		return nil, err
	}
	if b, ok := cn.inner.(driver.ConnBeginTx); ok {
		return b.BeginTx(ctx, opts)
	}
	return cn.inner.Begin()
}

func (cn *conn) Begin() (driver.Tx, error) {
	return cn.BeginTx(context.Background(), driver.TxOptions{})
}

func (cn *conn) Close() error { return cn.inner.Close() }

func (cn *conn) Ping(ctx context.Context) error {
	if p, ok := cn.inner.(driver.Pinger); ok {
		return p.Ping(ctx)
	}
	return nil
}

func (cn *conn) CheckNamedValue(nv *driver.NamedValue) error {
	if c, ok := cn.inner.(driver.NamedValueChecker); ok {
		return c.CheckNamedValue(nv)
	}
	return driver.ErrSkip
}

func (cn *conn) ResetSession(ctx context.Context) error {
	cn.mu.Lock()
	bad := cn.bad
	cn.mu.Unlock()
	if bad != nil {
		return driver.ErrBadConn
	}
	if r, ok := cn.inner.(driver.SessionResetter); ok {
		return r.ResetSession(ctx)
	}
	return nil
}

func (cn *conn) IsValid() bool {
	cn.mu.Lock()
	bad := cn.bad
	cn.mu.Unlock()
	if bad != nil {
		return false
	}
	if v, ok := cn.inner.(driver.Validator); ok {
		return v.IsValid()
	}
	return true
}

// OpenDB opens a fenced pool (NewConnector) with DSN's settings. Idle
// connections are recycled before the server's wait_timeout closes them.
func OpenDB(dsn string, o DSNOptions) (*sql.DB, error) {
	cfg, err := Config(dsn, o)
	if err != nil {
		return nil, err
	}
	c, err := NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	db := sql.OpenDB(c)
	db.SetConnMaxIdleTime(o.withDefaults().WaitTimeout / 2)
	return db, nil
}
