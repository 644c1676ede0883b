package rabbitmq

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/fencekit/fencekit/fencedwrite"
)

// Defaults for Config.
const (
	// DefaultQueue is the quorum queue of due refund jobs.
	DefaultQueue = "fencekit.refund_jobs.due"
	// DefaultConfirmTimeout bounds the wait for the broker's confirm of one
	// publish before it is sent again.
	DefaultConfirmTimeout = 5 * time.Second
	// DefaultPublishAttempts is how many times a publish is sent before
	// Publish gives up on it (ErrNotConfirmed): the scan finds its job.
	// Eight attempts wait about 11 s in all (0.1 s doubling, at most 5 s):
	// long enough for a quorum queue declared a moment ago to elect its
	// leader on a busy broker, which nacks until then (three, 0.3 s in all,
	// ran out under load).
	DefaultPublishAttempts = 8
	// DefaultReconnectDelay is the first wait after a lost connection; it
	// doubles on every failed dial, up to DefaultReconnectMax.
	DefaultReconnectDelay = 100 * time.Millisecond
	DefaultReconnectMax   = 5 * time.Second
	// DefaultHeartbeat is the AMQP heartbeat: a connection silently cut is
	// noticed within about two of them.
	DefaultHeartbeat = 10 * time.Second
)

// ErrNotConfirmed means the broker confirmed none of a publish's sends
// (nacks, timeouts or a connection that failed): the message may or may not
// be in the queue. Either way nothing is lost: a message is a hint, and the
// workers' scan claims the job within one scan interval.
var ErrNotConfirmed = errors.New("publish not confirmed by the broker")

// Config configures a Dispatcher or a Consumer. A zero field takes its
// default; the constructors validate the result once and name every bad
// field.
type Config struct {
	// URL is the broker's, amqp://user:password@host:port/vhost. Required.
	URL string
	// Queue is the durable quorum queue's name; DefaultQueue when empty.
	// Every dispatcher and consumer of one fleet uses the same.
	Queue string
	// ConfirmTimeout bounds the wait for one publish's confirm.
	ConfirmTimeout time.Duration
	// PublishAttempts is how many times one id is sent before Publish gives
	// up on it.
	PublishAttempts int
	// ReconnectDelay and ReconnectMax bound the waits between dials after a
	// lost connection, and between the sends of one publish (doubling from
	// the first to the second).
	ReconnectDelay, ReconnectMax time.Duration
	// Heartbeat is the AMQP heartbeat interval.
	Heartbeat time.Duration
	// Name names the connection in the broker's listings (rabbitmqctl
	// list_connections client_properties).
	Name string
	// Logger receives the logs; slog.Default() when nil.
	Logger *slog.Logger
	// Dial, when set, opens the TCP connection to the broker (tests put a
	// proxy in between to cut it); net.Dial with a 5 s timeout when nil.
	Dial func(network, addr string) (net.Conn, error)
}

func (c Config) withDefaults() Config {
	if c.Queue == "" {
		c.Queue = DefaultQueue
	}
	if c.ConfirmTimeout == 0 {
		c.ConfirmTimeout = DefaultConfirmTimeout
	}
	if c.PublishAttempts == 0 {
		c.PublishAttempts = DefaultPublishAttempts
	}
	if c.ReconnectDelay == 0 {
		c.ReconnectDelay = DefaultReconnectDelay
	}
	if c.ReconnectMax == 0 {
		c.ReconnectMax = DefaultReconnectMax
	}
	if c.Heartbeat == 0 {
		c.Heartbeat = DefaultHeartbeat
	}
	if c.Name == "" {
		c.Name = "fencekit"
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

func (c Config) validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, &fencedwrite.FieldError{Field: "rabbitmq.Config." + field, Problem: fmt.Sprintf(format, args...)})
	}
	if c.URL == "" {
		bad("URL", "is required (amqp://user:password@host:port/vhost)")
	} else if u, err := amqp.ParseURI(c.URL); err != nil {
		bad("URL", "is not an AMQP URI: %v", err)
	} else if u.Host == "" {
		bad("URL", "has no host")
	} else if pu, err := url.Parse(c.URL); err == nil && pu.RawQuery != "" {
		bad("URL", "must not have a query")
	}
	if len(c.Queue) > 255 {
		bad("Queue", "must be at most 255 bytes, got %d", len(c.Queue))
	}
	if c.PublishAttempts < 1 || c.PublishAttempts > 100 {
		bad("PublishAttempts", "must be between 1 and 100, got %d", c.PublishAttempts)
	}
	for name, d := range map[string]time.Duration{"ConfirmTimeout": c.ConfirmTimeout, "ReconnectDelay": c.ReconnectDelay,
		"ReconnectMax": c.ReconnectMax, "Heartbeat": c.Heartbeat} {
		if d <= 0 {
			bad(name, "must be positive, got %v", d)
		}
	}
	if c.ReconnectMax < c.ReconnectDelay {
		bad("ReconnectMax", "must not be below ReconnectDelay (%v), got %v", c.ReconnectDelay, c.ReconnectMax)
	}
	return errors.Join(errs...)
}

// dial opens a connection named cfg.Name, role says which side.
func (c Config) dial(role string) (*amqp.Connection, error) {
	props := amqp.NewConnectionProperties()
	props.SetClientConnectionName(c.Name + "/" + role)
	ac := amqp.Config{Heartbeat: c.Heartbeat, Properties: props, Locale: "en_US"}
	if c.Dial != nil {
		ac.Dial = c.Dial
	} else {
		ac.Dial = amqp.DefaultDial(5 * time.Second)
	}
	conn, err := amqp.DialConfig(c.URL, ac)
	if err != nil {
		return nil, fmt.Errorf("dial broker: %w", err)
	}
	return conn, nil
}

// declare declares the durable quorum queue on ch: every side does, and
// declaring it again with the same arguments changes nothing.
func (c Config) declare(ch *amqp.Channel) error {
	_, err := ch.QueueDeclare(c.Queue, true, false, false, false, amqp.Table{amqp.QueueTypeArg: amqp.QueueTypeQuorum})
	if err != nil {
		return fmt.Errorf("declare queue %s: %w", c.Queue, err)
	}
	return nil
}
