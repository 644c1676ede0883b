package main

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/fencekit/fencekit/fencedwrite"
)

// sessionCounts adds up what the server counted on every session of a pool:
// each connection reads its own SHOW SESSION STATUS just before it closes.
// The server is shared with other clients, so the global counters would
// count their statements too; per session they cannot.
type sessionCounts struct {
	questions atomic.Int64 // statements the server executed, the closing SHOW excluded
	commits   atomic.Int64 // COMMITs
	sessions  atomic.Int64 // connections opened
	lost      atomic.Int64 // connections that broke before they could be read
	// serverNS is the processor time the server's threads spent on these
	// sessions, in nanoseconds (/proc/<server>/task/<thread>/schedstat at
	// the session's start and end; MariaDB runs a thread per connection
	// and names it in information_schema.PROCESSLIST.TID): the server's CPU
	// for this pool's work alone, whatever other clients of the shared
	// server do. Zero when the server is not a local MariaDB.
	serverNS atomic.Int64
	timed    atomic.Int64 // sessions whose server CPU was measured

	mu     sync.Mutex
	record func(query string, args []driver.NamedValue) // when set, every statement sent
}

// openCounted opens a pool on dsn with the fenced layer's settings
// (fencedwrite.Config, as fencedwrite.OpenDB does) whose sessions are
// counted in c. Close the pool to settle the counts.
func openCounted(dsn string, c *sessionCounts) (*sql.DB, error) {
	cfg, err := fencedwrite.Config(dsn, fencedwrite.DSNOptions{})
	if err != nil {
		return nil, err
	}
	conn, err := fencedwrite.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	return sql.OpenDB(&countingConnector{inner: conn, c: c}), nil
}

type countingConnector struct {
	inner driver.Connector
	c     *sessionCounts
}

func (cc *countingConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := cc.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	cc.c.sessions.Add(1)
	c := &countedConn{Conn: conn, c: cc.c}
	c.thread, c.startNS = serverThread(conn)
	return c, nil
}

// serverThread returns the server thread's /proc path serving conn and its
// CPU time so far; "" when it cannot be read (another server, another
// machine).
func serverThread(conn driver.Conn) (path string, ns int64) {
	pid := serverPID()
	if pid == "" {
		return "", 0
	}
	rows, err := conn.(driver.QueryerContext).QueryContext(context.Background(), "SELECT TID FROM information_schema.PROCESSLIST WHERE ID = CONNECTION_ID()", nil)
	if err != nil {
		return "", 0
	}
	vals := make([]driver.Value, 1)
	err = rows.Next(vals)
	rows.Close()
	if err != nil {
		return "", 0
	}
	path = "/proc/" + pid + "/task/" + asString(vals[0]) + "/schedstat"
	ns, ok := threadNS(path)
	if !ok {
		return "", 0
	}
	return path, ns
}

// threadNS reads a thread's time on a CPU, in nanoseconds.
func threadNS(path string) (int64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0, false
	}
	n, err := strconv.ParseInt(f[0], 10, 64)
	return n, err == nil
}

var (
	serverPIDOnce sync.Once
	serverPIDs    string
)

// serverPID is the local mariadbd's process id, if one runs.
func serverPID() string {
	serverPIDOnce.Do(func() {
		procs, _ := filepath.Glob("/proc/[0-9]*/stat")
		for _, p := range procs {
			b, err := os.ReadFile(p)
			if err != nil {
				continue
			}
			if comm, _, ok := procCPU(string(b)); ok && (comm == "mariadbd" || comm == "mysqld") {
				serverPIDs = filepath.Base(filepath.Dir(p))
				return
			}
		}
	})
	return serverPIDs
}

func (cc *countingConnector) Driver() driver.Driver { return cc.inner.Driver() }

// countedConn forwards every optional interface go-sql-driver/mysql
// implements, so that database/sql uses the connection exactly as it would
// use the driver's own (interpolated queries stay one round trip).
type countedConn struct {
	driver.Conn
	c       *sessionCounts
	thread  string // the server thread's schedstat, "" when not measured
	startNS int64
}

func (cc *countedConn) seen(query string, args []driver.NamedValue) {
	cc.c.mu.Lock()
	rec := cc.c.record
	cc.c.mu.Unlock()
	if rec != nil {
		rec(query, args)
	}
}

func (cc *countedConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	cc.seen(query, args)
	return cc.Conn.(driver.ExecerContext).ExecContext(ctx, query, args)
}

func (cc *countedConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	cc.seen(query, args)
	return cc.Conn.(driver.QueryerContext).QueryContext(ctx, query, args)
}

func (cc *countedConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	cc.seen(query, nil)
	return cc.Conn.(driver.ConnPrepareContext).PrepareContext(ctx, query)
}

func (cc *countedConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	return cc.Conn.(driver.ConnBeginTx).BeginTx(ctx, opts)
}

func (cc *countedConn) Ping(ctx context.Context) error {
	return cc.Conn.(driver.Pinger).Ping(ctx)
}

func (cc *countedConn) ResetSession(ctx context.Context) error {
	return cc.Conn.(driver.SessionResetter).ResetSession(ctx)
}

func (cc *countedConn) IsValid() bool { return cc.Conn.(driver.Validator).IsValid() }

func (cc *countedConn) CheckNamedValue(nv *driver.NamedValue) error {
	return cc.Conn.(driver.NamedValueChecker).CheckNamedValue(nv)
}

// Close reads the session's counters, then closes it.
func (cc *countedConn) Close() error {
	if q, commits, err := sessionStatus(cc.Conn); err == nil {
		q-- // the SHOW itself
		if cc.thread != "" {
			q-- // the read of the thread's id
		}
		cc.c.questions.Add(q)
		cc.c.commits.Add(commits)
	} else {
		cc.c.lost.Add(1)
	}
	if cc.thread != "" {
		if ns, ok := threadNS(cc.thread); ok && ns >= cc.startNS {
			cc.c.serverNS.Add(ns - cc.startNS)
			cc.c.timed.Add(1)
		}
	}
	return cc.Conn.Close()
}

const showSessionStatus = "SHOW SESSION STATUS WHERE Variable_name IN ('Questions', 'Com_commit')"

func sessionStatus(conn driver.Conn) (questions, commits int64, err error) {
	if v, ok := conn.(driver.Validator); ok && !v.IsValid() {
		return 0, 0, errors.New("connection is broken")
	}
	rows, err := conn.(driver.QueryerContext).QueryContext(context.Background(), showSessionStatus, nil)
	if err != nil {
		return 0, 0, err
	}
	defer rows.Close()
	vals := make([]driver.Value, 2)
	for {
		if err := rows.Next(vals); err == io.EOF {
			break
		} else if err != nil {
			return 0, 0, err
		}
		n, err := strconv.ParseInt(asString(vals[1]), 10, 64)
		if err != nil {
			return 0, 0, err
		}
		switch asString(vals[0]) {
		case "Questions":
			questions = n
		case "Com_commit":
			commits = n
		}
	}
	return questions, commits, nil
}

func asString(v driver.Value) string {
	switch v := v.(type) {
	case []byte:
		return string(v)
	case string:
		return v
	case int64:
		return strconv.FormatInt(v, 10)
	}
	return ""
}
