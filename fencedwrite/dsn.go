package fencedwrite

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"slices"
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
	// timeouts. ReadTimeout must exceed LockWaitTimeout. A DSN may set them
	// instead (timeout, readTimeout, writeTimeout), but not both with
	// different values.
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
	for _, d := range []struct {
		name string
		d    time.Duration
	}{{"DialTimeout", o.DialTimeout}, {"WriteTimeout", o.WriteTimeout}} {
		if d.d < 0 {
			errs = append(errs, fieldErr("DSNOptions."+d.name, "must not be negative, got %v", d.d))
		}
	}
	if o.ReadTimeout <= o.LockWaitTimeout {
		errs = append(errs, fieldErr("DSNOptions.ReadTimeout", "must exceed LockWaitTimeout (%v), got %v", o.LockWaitTimeout, o.ReadTimeout))
	}
	return errors.Join(errs...)
}

// DSN checks a go-sql-driver/mysql DSN against the settings the fenced layer
// allows and returns it with the settings the fenced layer needs:
//
//   - parseTime=true, loc=UTC and time_zone='+00:00': times are UTC, as the
//     database's clock writes them;
//   - clientFoundRows=true: a fenced write reports matched rows, so a write
//     that sets an unchanged value is not mistaken for a stale one;
//   - interpolateParams=true unless the DSN says false: one round trip per
//     statement instead of two. Interpolation is safe because the session's
//     character set is utf8mb4, which the DSN cannot change and the pool
//     that OpenDB opens verifies on every connection;
//   - timeTruncate=1us: MySQL rounds and MariaDB truncates sub-microsecond
//     parts; truncating first makes both store the same value;
//   - short innodb_lock_wait_timeout, a sane wait_timeout and network
//     timeouts, from o.
//
// The DSN is read as the driver reads it, and checked against an
// allow-list, not a deny-list: every driver option is either allowed, or
// allowed only with the value the fence needs (parseTime=true,
// clientFoundRows=true, loc=UTC, timeTruncate=1us, charset=utf8mb4, a
// utf8mb4 collation, multiStatements=false), and a session variable (any
// other parameter, which the driver would send as SET name = value) is
// refused however it is spelled: the fenced layer sets the session itself.
// A refused DSN gets an error that names each parameter and matches
// ErrInvalid; nothing is changed behind the caller's back.
//
// A pool that connects with these settings is still not verified: OpenDB
// (or NewConnector) opens one that is.
func DSN(dsn string, o DSNOptions) (string, error) {
	cfg, err := Config(dsn, o)
	if err != nil {
		return "", err
	}
	return cfg.FormatDSN(), nil
}

// Config is DSN returning the driver's parsed configuration, for callers that
// connect through their own connector (a custom dialer, say): pass the
// result, changed or not, to NewConnector, which checks it again.
func Config(dsn string, o DSNOptions) (*mysql.Config, error) {
	params := rawParams(dsn)
	var errs []error
	for _, p := range params {
		if err := checkParam(p.key, p.value, &o); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("fenced dsn: %w", err)
	}
	o = o.withDefaults()
	if err := o.validate(); err != nil {
		return nil, fmt.Errorf("fenced dsn: %w", err)
	}
	cfg, err := ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("fenced dsn: %w", err)
	}
	interpolate := true
	for _, p := range params {
		if p.key == "interpolateParams" {
			interpolate, _ = readBool(p.value)
		}
	}
	cfg.ParseTime = true
	cfg.Loc = time.UTC
	cfg.ClientFoundRows = true
	cfg.InterpolateParams = interpolate
	if err := cfg.Apply(mysql.TimeTruncate(time.Microsecond)); err != nil {
		return nil, fmt.Errorf("fenced dsn: %w", err)
	}
	cfg.Timeout = o.DialTimeout
	cfg.ReadTimeout = o.ReadTimeout
	cfg.WriteTimeout = o.WriteTimeout
	cfg.Params = sessionParams(o)
	return cfg, nil
}

// ParseDSN reads dsn as the driver does and checks where it dials: tcp
// (host:port) or a unix socket. It changes nothing else (the migration
// account's plain pools use it as it is). The driver would otherwise
// answer a typo only at the first query, in the dialer's words ("dial
// foo: unknown network foo"); the driver also dials networks registered
// with RegisterDialContext, and fencekit registers none.
func ParseDSN(dsn string) (*mysql.Config, error) {
	cfg, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fieldErr("dsn", "cannot be read (want user:password@tcp(host:port)/database?params): %v", err)
	}
	if cfg.Net != "tcp" && cfg.Net != "tcp4" && cfg.Net != "tcp6" && cfg.Net != "unix" {
		return nil, fieldErr("dsn network", "must be tcp or unix, not %q", cfg.Net)
	}
	if cfg.Net != "unix" {
		if _, port, err := net.SplitHostPort(cfg.Addr); err != nil || port == "" {
			return nil, fieldErr("dsn address", "must be host:port, not %q", cfg.Addr)
		}
	}
	return cfg, nil
}

// sessionParams are the session variables a fenced pool sets, and the only
// ones its configuration may hold.
func sessionParams(o DSNOptions) map[string]string {
	return map[string]string{
		"time_zone":                "'+00:00'",
		"innodb_lock_wait_timeout": fmt.Sprint(int64(o.LockWaitTimeout / time.Second)),
		"wait_timeout":             fmt.Sprint(int64(o.WaitTimeout / time.Second)),
	}
}

type rawParam struct{ key, value string }

// rawParams returns the parameters of dsn as the driver reads them (see
// mysql.ParseDSN): after the first '?' that follows the last '/', split on
// '&', then on the first '='; a part without '=' is ignored. Keys are taken
// as they are, values are query-unescaped by the driver (checkParam
// unescapes where the driver does).
func rawParams(dsn string) []rawParam {
	slash := strings.LastIndexByte(dsn, '/')
	if slash < 0 {
		return nil
	}
	q := strings.IndexByte(dsn[slash+1:], '?')
	if q < 0 {
		return nil
	}
	var out []rawParam
	for part := range strings.SplitSeq(dsn[slash+1+q+1:], "&") {
		if k, v, ok := strings.Cut(part, "="); ok {
			out = append(out, rawParam{k, v})
		}
	}
	return out
}

// The driver options a fenced DSN may carry, and what each may say.
var (
	// anyValue are the options the fence does not depend on.
	anyValue = []string{
		"tls", "serverPubKey", "allowNativePasswords", "allowCleartextPasswords", "allowFallbackToPlaintext",
		"allowOldPasswords", "checkConnLiveness", "compress", "maxAllowedPacket", "connectionAttributes",
		"rejectReadOnly", "interpolateParams",
	}
	// onlyValue are the options the fence needs at one value; giving
	// another is refused rather than changed.
	onlyValue = map[string]struct {
		ok  func(string) bool
		why string
	}{
		"parseTime":       {isTrue, "the fenced layer reads times as time.Time: parseTime=true"},
		"clientFoundRows": {isTrue, "a fenced write must report matched rows, not changed rows: clientFoundRows=true"},
		"multiStatements": {isFalse, "one statement per call lets the fenced runner judge each one: multiStatements=false"},
		"allowAllFiles":   {isFalse, "lets a server read any local file through LOAD DATA LOCAL INFILE"},
		"columnsWithAlias": {isFalse,
			"renames the columns of every result, which the fenced layer reads by name"},
		"loc": {func(v string) bool { return v == "UTC" },
			"times are UTC, as the database's clock writes them: loc=UTC (or leave it out)"},
		"timeTruncate": {func(v string) bool { d, err := time.ParseDuration(v); return err == nil && d == time.Microsecond },
			"MySQL rounds and MariaDB truncates sub-microsecond parts: timeTruncate=1us (or leave it out)"},
		"charset": {func(v string) bool { return !slices.ContainsFunc(strings.Split(v, ","), notUTF8MB4) },
			"arguments are escaped as utf8mb4; another character set can turn an argument into SQL: charset=utf8mb4 (or leave it out)"},
		"collation": {func(v string) bool { return utf8mb4Collation.MatchString(v) },
			"arguments are escaped as utf8mb4; a collation of another character set can turn an argument into SQL: a utf8mb4_* collation"},
		"strict": {func(string) bool { return false }, "removed from the driver, which panics on it"},
	}
	// timeouts map the driver's network timeouts to the option that sets them.
	timeouts = map[string]func(*DSNOptions) *time.Duration{
		"timeout":      func(o *DSNOptions) *time.Duration { return &o.DialTimeout },
		"readTimeout":  func(o *DSNOptions) *time.Duration { return &o.ReadTimeout },
		"writeTimeout": func(o *DSNOptions) *time.Duration { return &o.WriteTimeout },
	}
	utf8mb4Collation = regexp.MustCompile(`(?i)^utf8mb4_[a-z0-9_]+$`)
)

func isTrue(v string) bool  { b, ok := readBool(v); return ok && b }
func isFalse(v string) bool { b, ok := readBool(v); return ok && !b }

func notUTF8MB4(cs string) bool { return !strings.EqualFold(strings.TrimSpace(cs), "utf8mb4") }

// readBool reads a boolean as the driver does.
func readBool(v string) (value, ok bool) {
	switch v {
	case "1", "true", "TRUE", "True":
		return true, true
	case "0", "false", "FALSE", "False":
		return false, true
	}
	return false, false
}

// checkParam checks one parameter of a DSN; a network timeout it carries
// becomes o's, unless o sets another.
func checkParam(key, value string, o *DSNOptions) error {
	field := fmt.Sprintf("dsn parameter %q", key)
	if slices.Contains(anyValue, key) {
		return nil
	}
	if rule, ok := onlyValue[key]; ok {
		if key == "loc" {
			value = unescape(value)
		}
		if !rule.ok(value) {
			return fieldErr(field, "refused: %s, not %q", rule.why, value)
		}
		return nil
	}
	if opt, ok := timeouts[key]; ok {
		d, err := time.ParseDuration(value)
		switch dst := opt(o); {
		case err != nil:
			return fieldErr(field, "is not a duration: %q", value)
		case *dst != 0 && *dst != d:
			return fieldErr(field, "refused: it says %v and the options %v; set one", d, *dst)
		default:
			*dst = d
		}
		return nil
	}
	v := SessionVariable(key)
	why, ok := sessionReasons[v]
	if !ok {
		why = "the fenced layer accepts no session variables in its DSN; it sets time_zone, innodb_lock_wait_timeout and wait_timeout itself (DSNOptions)"
	}
	return fieldErr(field, "refused: it sets the session variable %s: %s", v, why)
}

func unescape(v string) string {
	if u, err := url.QueryUnescape(v); err == nil {
		return u
	}
	return v
}

// sessionReasons say why the session variables the fence relies on most
// may not be set by a DSN. Every other session variable is refused too.
var sessionReasons = map[string]string{
	"timestamp":                "it moves the session clock (NOW(), UTC_TIMESTAMP()); leases and key windows are measured on the database's own clock",
	"time_zone":                "the fenced layer sets time_zone to '+00:00' itself",
	"autocommit":               "the fenced layer owns its transactions; autocommit=0 would leave single statements uncommitted",
	"innodb_lock_wait_timeout": "set DSNOptions.LockWaitTimeout instead",
	"wait_timeout":             "set DSNOptions.WaitTimeout instead",
	"unique_checks":            "unique_checks=0 lets InnoDB accept a duplicate operation key",
	"pseudo_thread_id":         "it changes the session's identity",
	"tidb_sysdate_is_now":      "on TiDB, it makes SYSDATE() follow the session clock, which leases and key windows must not",
	"character_set_client":     "arguments are escaped as utf8mb4; another character set can turn an argument into SQL",
	"character_set_connection": "arguments are escaped as utf8mb4; another character set can turn an argument into SQL",
	"character_set_results":    "results are read as utf8mb4",
	"collation_connection":     "arguments are escaped as utf8mb4; another character set can turn an argument into SQL",
	"names":                    "arguments are escaped as utf8mb4; another character set can turn an argument into SQL",
	"sql_mode":                 "sql_mode changes how the server reads quotes and backslashes",
	"tx_isolation":             "the fenced layer's reads must not see uncommitted rows",
	"transaction_isolation":    "the fenced layer's reads must not see uncommitted rows",
}

// SessionVariable returns the session variable that a DSN parameter key
// would set, as the server reads the driver's `SET key = value`: without
// backticks, an @@ prefix, a SESSION/LOCAL/GLOBAL scope (as a keyword or a
// prefix), and in lower case. A key that does not read as one variable is
// returned trimmed and lower-cased, for the error message.
func SessionVariable(key string) string {
	v := strings.ToLower(strings.TrimSpace(key))
	for _, scope := range []string{"session ", "local ", "global "} {
		if strings.HasPrefix(v, scope) {
			v = strings.TrimSpace(v[len(scope):])
		}
	}
	v = strings.TrimPrefix(v, "@@")
	for _, scope := range []string{"session.", "local.", "global."} {
		v = strings.TrimPrefix(v, scope)
	}
	return strings.Trim(v, "`'\" ")
}
