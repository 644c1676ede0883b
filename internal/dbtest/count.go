package dbtest

import (
	"context"
	"database/sql"
	"net"
	"sync"
	"sync/atomic"

	"github.com/fencekit/fencekit/fencedwrite"
	"github.com/fencekit/fencekit/internal/devdb"
)

// Statements counts the statements a pool sends: the COM_QUERY and
// COM_STMT_EXECUTE commands its connection writes to the server, read off
// the wire. It counts the same on every engine; MySQL's and MariaDB's
// per-session Questions counter has no equivalent on TiDB.
type Statements struct{ n atomic.Int64 }

// Sent returns how many statements the pool has sent since CountedDB
// returned it.
func (s *Statements) Sent() int64 { return s.n.Load() }

// CountedDB opens a pool of one connection, with the fenced layer's settings
// (fencedwrite.DSN with o), whose statements s counts. The connection is open
// when it returns, so the settings the driver sends while connecting are not
// counted.
func (d *DB) CountedDB(o fencedwrite.DSNOptions) (db *sql.DB, s *Statements) {
	d.t.Helper()
	cfg, err := fencedwrite.Config(devdb.DSN(d.cfg, d.Name), o)
	if err != nil {
		d.t.Fatal(err)
	}
	s = &Statements{}
	var dialer net.Dialer
	cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dialer.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &countingConn{Conn: c, s: s}, nil
	}
	conn, err := fencedwrite.NewConnector(cfg)
	if err != nil {
		d.t.Fatal(err)
	}
	db = sql.OpenDB(conn)
	d.t.Cleanup(func() { _ = db.Close() })
	db.SetMaxOpenConns(1)
	if err := db.Ping(); err != nil {
		d.t.Fatal(err)
	}
	s.n.Store(0)
	return db, s
}

// countingConn follows the packets the client writes (a 3-byte length, a
// sequence number, the payload) and counts the commands that run a
// statement: a packet with sequence number 0 whose payload starts with
// COM_QUERY or COM_STMT_EXECUTE.
type countingConn struct {
	net.Conn
	s *Statements

	mu      sync.Mutex
	header  []byte // the part of the next packet's header read so far
	left    int    // payload bytes of the current packet still to come
	command bool   // the current packet starts a command: its first byte says which
}

const (
	comQuery       = 0x03
	comStmtExecute = 0x17
)

func (c *countingConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	for b := p; len(b) > 0; {
		if c.left == 0 {
			need := 4 - len(c.header)
			if need > len(b) {
				need = len(b)
			}
			c.header = append(c.header, b[:need]...)
			b = b[need:]
			if len(c.header) == 4 {
				c.left = int(c.header[0]) | int(c.header[1])<<8 | int(c.header[2])<<16
				c.command = c.header[3] == 0
				c.header = c.header[:0]
			}
			continue
		}
		if c.command {
			if b[0] == comQuery || b[0] == comStmtExecute {
				c.s.n.Add(1)
			}
			c.command = false
		}
		n := min(c.left, len(b))
		c.left -= n
		b = b[n:]
	}
	c.mu.Unlock()
	return c.Conn.Write(p)
}
