package dbtest

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/go-sql-driver/mysql"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/fencekit/fencekit/fencedwrite"
	"github.com/fencekit/fencekit/internal/devdb"
)

// Proxy is an in-process TCP proxy (toxiproxy) between a test's clients and
// the server, to break connections at chosen moments.
type Proxy struct {
	t     testing.TB
	d     *DB
	proxy *toxiproxy.Proxy
}

// The proxies break connections on purpose; the driver would log each
// one to stderr. The errors still reach the code under test. The driver's
// logger is global and every DSN parse reads it, so it is set when the
// package loads, before any test runs: set from the first proxy (under a
// sync.Once) it raced with parallel tests parsing their DSNs.
func init() { _ = mysql.SetLogger(log.New(io.Discard, "", 0)) }

// NewProxy starts a proxy to d's server, stopped when t ends.
func NewProxy(t testing.TB, d *DB) *Proxy {
	t.Helper()
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	p := toxiproxy.NewProxy(srv, "mysql-"+d.Name, "127.0.0.1:0", d.cfg.Addr)
	if err := p.Start(); err != nil {
		t.Fatalf("start toxiproxy: %v", err)
	}
	t.Cleanup(p.Stop)
	return &Proxy{t: t, d: d, proxy: p}
}

// DSN is d.DSN(o) through the proxy.
func (p *Proxy) DSN(o fencedwrite.DSNOptions) string {
	p.t.Helper()
	c := p.d.Config()
	c.Addr = p.proxy.Listen
	dsn, err := fencedwrite.DSN(c.FormatDSN(), o)
	if err != nil {
		p.t.Fatal(err)
	}
	return dsn
}

// FencedDB opens a fenced pool (fencedwrite.NewConnector) whose every
// connection goes through the proxy, closed when the test ends.
func (p *Proxy) FencedDB(o fencedwrite.DSNOptions) *sql.DB {
	p.t.Helper()
	c := p.d.Config()
	c.Addr = p.proxy.Listen
	db, err := fencedwrite.OpenDB(c.FormatDSN(), o)
	if err != nil {
		p.t.Fatal(err)
	}
	p.t.Cleanup(func() { _ = db.Close() })
	return db
}

const cutToxic = "cut-replies"

// CutReplies makes the proxy reset every connection as soon as the server
// sends it anything: a statement already sent still reaches the server and
// runs, but its reply is lost, and no new connection can be opened. Call it
// right before sending COMMIT to lose the COMMIT's reply.
func (p *Proxy) CutReplies() {
	p.t.Helper()
	_, err := p.proxy.Toxics.AddToxicJson(strings.NewReader(
		`{"name":"` + cutToxic + `","type":"reset_peer","stream":"downstream","toxicity":1,"attributes":{"timeout":0}}`))
	if err != nil {
		p.t.Fatalf("add toxic: %v", err)
	}
}

// Restore removes CutReplies' toxic.
func (p *Proxy) Restore() {
	p.t.Helper()
	if err := p.proxy.Toxics.RemoveToxic(context.Background(), cutToxic); err != nil {
		p.t.Fatalf("remove toxic: %v", err)
	}
}

// FirstConnectionDB opens a pool whose first connection goes through the
// proxy and every later one straight to the server: after CutReplies kills
// the first connection, the pool can still reach the database.
func (p *Proxy) FirstConnectionDB(o fencedwrite.DSNOptions) *sql.DB {
	p.t.Helper()
	cfg, err := fencedwrite.Config(devdb.DSN(p.d.cfg, p.d.Name), o)
	if err != nil {
		p.t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		first = true
		d     net.Dialer
	)
	cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		mu.Lock()
		if first {
			first, addr = false, p.proxy.Listen
		}
		mu.Unlock()
		return d.DialContext(ctx, network, addr)
	}
	conn, err := fencedwrite.NewConnector(cfg)
	if err != nil {
		p.t.Fatal(err)
	}
	db := sql.OpenDB(conn)
	p.t.Cleanup(func() { _ = db.Close() })
	return db
}

// Stream names a direction through the proxy.
type Stream string

// The two directions: what the client sends, and what the server answers.
const (
	Upstream   Stream = "upstream"
	Downstream Stream = "downstream"
)

// CutAfter makes the proxy close each new connection once n bytes went
// through it in direction s: a statement cut mid-packet, a reply cut
// mid-row, or (for the exact n) a COMMIT that reached the server whose reply
// never comes back. Each connection counts its own bytes.
func (p *Proxy) CutAfter(s Stream, n int) {
	p.t.Helper()
	_, err := p.proxy.Toxics.AddToxicJson(strings.NewReader(fmt.Sprintf(
		`{"name":"cut-after-%s","type":"limit_data","stream":"%s","toxicity":1,"attributes":{"bytes":%d}}`, s, s, n)))
	if err != nil {
		p.t.Fatalf("add toxic: %v", err)
	}
}

// Delay holds everything the client sends for d until Undelay: a statement
// "in flight on the wire". Undelay lets what is held through at once.
func (p *Proxy) Delay(d time.Duration) {
	p.t.Helper()
	_, err := p.proxy.Toxics.AddToxicJson(strings.NewReader(fmt.Sprintf(
		`{"name":"delay","type":"latency","stream":"upstream","toxicity":1,"attributes":{"latency":%d}}`, d.Milliseconds())))
	if err != nil {
		p.t.Fatalf("add toxic: %v", err)
	}
}

// Undelay removes Delay's toxic; what it held goes through.
func (p *Proxy) Undelay() {
	p.t.Helper()
	if err := p.proxy.Toxics.RemoveToxic(context.Background(), "delay"); err != nil {
		p.t.Fatalf("remove toxic: %v", err)
	}
}

// Close stops the proxy and closes every connection through it now, rather
// than when the test ends: a test that makes many proxies would otherwise
// hold a server connection for each.
func (p *Proxy) Close() { p.proxy.Stop() }
