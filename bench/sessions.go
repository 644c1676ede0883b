package main

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"io"
	"strconv"
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
	return &countedConn{Conn: conn, c: cc.c}, nil
}

func (cc *countingConnector) Driver() driver.Driver { return cc.inner.Driver() }

// countedConn forwards every optional interface go-sql-driver/mysql
// implements, so that database/sql uses the connection exactly as it would
// use the driver's own (interpolated queries stay one round trip).
type countedConn struct {
	driver.Conn
	c *sessionCounts
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
		cc.c.questions.Add(q - 1) // the SHOW itself
		cc.c.commits.Add(commits)
	} else {
		cc.c.lost.Add(1)
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
