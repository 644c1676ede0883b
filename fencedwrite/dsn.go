package fencedwrite

import (
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
)

// Session defaults. A worker that vanished mid-transaction must not freeze a
// row for long, and a dead server must not hang a worker forever.
const (
	DefaultLockWaitTimeout = 5 * time.Second
	DefaultDialTimeout     = 5 * time.Second
	DefaultReadTimeout     = 30 * time.Second
	DefaultWriteTimeout    = 30 * time.Second
	DefaultWaitTimeout     = 10 * time.Minute
)

// DSNOptions are the session settings the fenced layer relies on. A zero
// field takes its default.
type DSNOptions struct {
	// LockWaitTimeout is the session's innodb_lock_wait_timeout, in whole
	// seconds. Claims and fenced writes wait at most this long for a row lock.
	LockWaitTimeout time.Duration
	// DialTimeout, ReadTimeout and WriteTimeout are the driver's network
	// timeouts. ReadTimeout must exceed LockWaitTimeout.
	DialTimeout  time.Duration
	ReadTimeout  time.Duration
	WriteTimeout time.Duration
	// WaitTimeout is the server's idle timeout for the session (wait_timeout).
	WaitTimeout time.Duration
}

func (o DSNOptions) withDefaults() DSNOptions {
	if o.LockWaitTimeout == 0 {
		o.LockWaitTimeout = DefaultLockWaitTimeout
	}
	if o.DialTimeout == 0 {
		o.DialTimeout = DefaultDialTimeout
	}
	if o.ReadTimeout == 0 {
		o.ReadTimeout = DefaultReadTimeout
	}
	if o.WriteTimeout == 0 {
		o.WriteTimeout = DefaultWriteTimeout
	}
	if o.WaitTimeout == 0 {
		o.WaitTimeout = DefaultWaitTimeout
	}
	return o
}

func (o DSNOptions) validate() error {
	var errs []error
	if o.LockWaitTimeout < time.Second || o.LockWaitTimeout%time.Second != 0 {
		errs = append(errs, fieldErr("DSNOptions.LockWaitTimeout", "must be a whole number of seconds, at least 1s, got %v", o.LockWaitTimeout))
	}
	if o.WaitTimeout < time.Second || o.WaitTimeout%time.Second != 0 {
		errs = append(errs, fieldErr("DSNOptions.WaitTimeout", "must be a whole number of seconds, at least 1s, got %v", o.WaitTimeout))
	}
	for name, d := range map[string]time.Duration{"DialTimeout": o.DialTimeout, "WriteTimeout": o.WriteTimeout} {
		if d < 0 {
			errs = append(errs, fieldErr("DSNOptions."+name, "must not be negative, got %v", d))
		}
	}
	if o.ReadTimeout <= o.LockWaitTimeout {
		errs = append(errs, fieldErr("DSNOptions.ReadTimeout", "must exceed LockWaitTimeout (%v), got %v", o.LockWaitTimeout, o.ReadTimeout))
	}
	return errors.Join(errs...)
}

// DSN rewrites a go-sql-driver/mysql DSN with the settings the fenced layer
// needs, whatever the input says:
//
//   - parseTime=true, loc=UTC and time_zone='+00:00': times are UTC, as the
//     database's UTC_TIMESTAMP(6) writes them;
//   - clientFoundRows=true: a fenced write reports matched rows, so a write
//     that sets an unchanged value is not mistaken for a stale one;
//   - interpolateParams=true: one round trip per statement instead of three;
//   - timeTruncate=1us: MySQL rounds and MariaDB truncates sub-microsecond
//     parts; truncating first makes both store the same value;
//   - short innodb_lock_wait_timeout, a sane wait_timeout and network
//     timeouts, from o.
//
// A DSN that carries a setting the fence relies on being left alone (a
// session clock such as timestamp=…, a time_zone, autocommit,
// unique_checks, multiStatements=true; see refusedParams) is refused with an
// error naming each parameter and matching ErrInvalid.
func DSN(dsn string, o DSNOptions) (string, error) {
	cfg, err := Config(dsn, o)
	if err != nil {
		return "", err
	}
	return cfg.FormatDSN(), nil
}

// refusedParams are the session settings a DSN may not carry, because they
// change what the fence relies on. Each says why.
var refusedParams = map[string]string{
	"timestamp":                "moves the session clock (NOW(), UTC_TIMESTAMP()); leases and key windows are measured on the database's own clock",
	"time_zone":                "the fenced layer sets time_zone to '+00:00' itself",
	"autocommit":               "the fenced layer owns its transactions; autocommit=0 would leave single statements uncommitted",
	"innodb_lock_wait_timeout": "set DSNOptions.LockWaitTimeout instead",
	"wait_timeout":             "set DSNOptions.WaitTimeout instead",
	"unique_checks":            "unique_checks=0 lets InnoDB accept a duplicate operation key",
	"pseudo_thread_id":         "changes the session's identity",
	"tidb_sysdate_is_now":      "on TiDB, makes SYSDATE() follow the session clock, which leases and key windows must not",
}

// Config is DSN returning the driver's parsed configuration, for callers that
// connect through mysql.NewConnector (to set a custom dialer, say).
func Config(dsn string, o DSNOptions) (*mysql.Config, error) {
	o = o.withDefaults()
	if err := o.validate(); err != nil {
		return nil, fmt.Errorf("fenced dsn: %w", err)
	}
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("fenced dsn: parse: %w", err)
	}
	var errs []error
	for name := range cfg.Params {
		if why, ok := refusedParams[strings.ToLower(strings.TrimPrefix(strings.TrimPrefix(name, "@@"), "session."))]; ok {
			errs = append(errs, fieldErr("dsn parameter "+name, "refused: %s", why))
		}
	}
	if cfg.MultiStatements {
		errs = append(errs, fieldErr("dsn parameter multiStatements", "refused: one statement per call lets the fenced runner check each one"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("fenced dsn: %w", err)
	}
	cfg.ParseTime = true
	cfg.Loc = time.UTC
	cfg.ClientFoundRows = true
	cfg.InterpolateParams = true
	if err := cfg.Apply(mysql.TimeTruncate(time.Microsecond)); err != nil {
		return nil, fmt.Errorf("fenced dsn: %w", err)
	}
	cfg.Timeout = o.DialTimeout
	cfg.ReadTimeout = o.ReadTimeout
	cfg.WriteTimeout = o.WriteTimeout
	if cfg.Params == nil {
		cfg.Params = map[string]string{}
	}
	cfg.Params["time_zone"] = "'+00:00'"
	cfg.Params["innodb_lock_wait_timeout"] = fmt.Sprint(int64(o.LockWaitTimeout / time.Second))
	cfg.Params["wait_timeout"] = fmt.Sprint(int64(o.WaitTimeout / time.Second))
	return cfg, nil
}

// OpenDB opens a pool with DSN's settings. Idle connections are recycled
// before the server's wait_timeout closes them.
func OpenDB(dsn string, o DSNOptions) (*sql.DB, error) {
	cfg, err := Config(dsn, o)
	if err != nil {
		return nil, err
	}
	conn, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	db := sql.OpenDB(conn)
	db.SetConnMaxIdleTime(o.withDefaults().WaitTimeout / 2)
	return db, nil
}
