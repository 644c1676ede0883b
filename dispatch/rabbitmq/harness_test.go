package rabbitmq_test

import (
	"crypto/rand"
	"encoding/hex"
	"io"
	"net"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/fencekit/fencekit/dispatch/rabbitmq"
	"github.com/fencekit/fencekit/internal/brokertest"
	"github.com/fencekit/fencekit/internal/dispatchtest"
	"github.com/fencekit/fencekit/worker"
)

func brokerURL() string { return brokertest.URL() }

// env is one test's database and fake provider (dispatchtest) and queue of
// its own.
type env struct {
	*dispatchtest.Env
	queue string
}

var unsafeName = regexp.MustCompile(`[^a-zA-Z0-9]+`)

// newEnv is a test's environment; the test shares the broker (see
// brokertest), unless it took it for itself first.
func newEnv(t *testing.T) *env {
	t.Helper()
	return newEnvWith(t, brokertest.Shared)
}

func newEnvWith(t *testing.T, use func(testing.TB)) *env {
	t.Helper()
	use(t)
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := strings.ToLower(unsafeName.ReplaceAllString(t.Name(), "-"))
	if len(name) > 80 {
		name = name[:80]
	}
	e := &env{Env: dispatchtest.New(t), queue: "fencekit-test-" + name + "-" + hex.EncodeToString(b[:])}
	t.Cleanup(func() {
		// The queue is the test's own: delete it, messages and all.
		conn, err := amqp.Dial(brokerURL())
		if err != nil {
			t.Errorf("delete queue %s: %v", e.queue, err)
			return
		}
		defer conn.Close()
		ch, err := conn.Channel()
		if err == nil {
			_, err = ch.QueueDelete(e.queue, false, false, false)
		}
		if err != nil {
			t.Errorf("delete queue %s: %v", e.queue, err)
		}
	})
	return e
}

func (e *env) config(name string) rabbitmq.Config {
	return rabbitmq.Config{URL: brokerURL(), Queue: e.queue, Name: "test-" + name, ReconnectDelay: 10 * time.Millisecond,
		ReconnectMax: 200 * time.Millisecond, ConfirmTimeout: 2 * time.Second, Logger: e.Logger(name)}
}

// consume runs a Consumer for w until the test ends or stop is called.
func (e *env) consume(name string, w *worker.Client, hooks rabbitmq.Hooks, mod func(*rabbitmq.Config)) (c *rabbitmq.Consumer, stop func()) {
	e.T.Helper()
	cfg := e.config(name)
	if mod != nil {
		mod(&cfg)
	}
	c, err := rabbitmq.NewConsumer(cfg, w, hooks)
	if err != nil {
		e.T.Fatal(err)
	}
	return c, dispatchtest.Consume(e.T, name, c.Run)
}

func (e *env) dispatcher(mod func(*rabbitmq.Config)) *rabbitmq.Dispatcher {
	e.T.Helper()
	cfg := e.config("dispatcher")
	if mod != nil {
		mod(&cfg)
	}
	d, err := rabbitmq.NewDispatcher(cfg)
	if err != nil {
		e.T.Fatal(err)
	}
	e.T.Cleanup(func() { _ = d.Close() })
	return d
}

func (e *env) publish(d *rabbitmq.Dispatcher, ids ...int64) {
	e.T.Helper()
	if err := d.Publish(e.T.Context(), ids...); err != nil {
		e.T.Fatal(err)
	}
}

// verdict is a consumer's BeforeAck.
type verdict struct {
	id      int64
	claimed bool
	err     error
}

func await[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	return dispatchtest.Await(t, ch, what)
}

// gate is a TCP proxy to the broker that the test can take down: Down cuts
// every connection through it and refuses new ones (their dials fail at
// once) until Up. What a client sees of a broker restarted or a network
// cut, for this client alone.
type gate struct {
	dispatchtest.Cut
	ln net.Listener
}

func newGate(t *testing.T, upstream string) *gate {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := &gate{ln: ln}
	t.Cleanup(func() { _ = ln.Close(); g.Down() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go g.pipe(c, upstream)
		}
	}()
	return g
}

func (g *gate) pipe(c net.Conn, upstream string) {
	if !g.Admit(c) {
		return
	}
	u, err := net.Dial("tcp", upstream)
	if err != nil {
		_ = c.Close()
		return
	}
	if !g.Admit(u) {
		_ = c.Close()
		return
	}
	go func() { _, _ = io.Copy(u, c); _ = u.Close() }()
	_, _ = io.Copy(c, u)
	_ = c.Close()
}

// Dial dials the broker through the gate (rabbitmq.Config.Dial).
func (g *gate) Dial(network, _ string) (net.Conn, error) {
	return net.DialTimeout(network, g.ln.Addr().String(), 5*time.Second)
}

// brokerAddr is the host:port of brokerURL.
func brokerAddr(t *testing.T) string {
	t.Helper()
	u, err := amqp.ParseURI(brokerURL())
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort(u.Host, strconv.Itoa(u.Port))
}
