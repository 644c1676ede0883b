package chaos

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/fencekit/fencekit/dispatch/rabbitmq"
)

// Dispatch modes (--dispatch): the fleet's scan of the table alone, or
// RabbitMQ's messages with the scan as the safety net.
const (
	DispatchScan     = "scan"
	DispatchRabbitMQ = "rabbitmq"
)

// Broker fault kinds, as faults_by_kind names them (--dispatch rabbitmq).
const (
	faultBrokerCut       = "broker_connection_cut"
	faultBrokerPurge     = "broker_queue_purged"
	faultBrokerDuplicate = "broker_duplicate_publish"
	faultBrokerStale     = "broker_stale_publish"
)

// brokerRun is the broker side of a run with --dispatch rabbitmq: the
// queue of its own, the chaos process's publisher (straight to the
// broker) and its channel for an operator's purge.
type brokerRun struct {
	url, addr, queue string
	pub              *rabbitmq.Dispatcher
	conn             *amqp.Connection
	ch               *amqp.Channel
	published        int

	mu  sync.Mutex
	ids []int64 // every job's id, as enqueued
}

func newBrokerRun(ctx context.Context, rawURL string, seed uint64) (*brokerRun, error) {
	u, err := amqp.ParseURI(rawURL)
	if err != nil {
		return nil, fmt.Errorf("chaos: --amqp-url: %w", err)
	}
	b := &brokerRun{url: rawURL, addr: net.JoinHostPort(u.Host, strconv.Itoa(u.Port)), queue: fmt.Sprintf("fencekit-chaos-%d", seed)}
	b.pub, err = rabbitmq.NewDispatcher(rabbitmq.Config{URL: rawURL, Queue: b.queue, Name: "chaos", Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		return nil, fmt.Errorf("chaos: %w", err)
	}
	if b.conn, err = amqp.Dial(rawURL); err != nil {
		return nil, fmt.Errorf("chaos: no broker at %s (run scripts/ensure-rabbitmq.sh, or set --amqp-url): %w", redacted(rawURL), err)
	}
	if b.ch, err = b.conn.Channel(); err != nil {
		b.close()
		return nil, fmt.Errorf("chaos: broker channel: %w", err)
	}
	// A queue left by an earlier run with this seed starts empty.
	if _, err := b.ch.QueueDelete(b.queue, false, false, false); err != nil {
		b.close()
		return nil, fmt.Errorf("chaos: delete queue %s: %w", b.queue, err)
	}
	return b, nil
}

// fleetURL is the broker's URL through a process's proxy.
func (b *brokerRun) fleetURL(proxy string) string {
	u, err := url.Parse(b.url)
	if err != nil {
		return b.url
	}
	u.Host = proxy
	return u.String()
}

// publish publishes ids; what the broker did not confirm the scan finds.
func (b *brokerRun) publish(ctx context.Context, ids []int64) error {
	err := b.pub.Publish(ctx, ids...)
	if err == nil {
		b.mu.Lock()
		b.published += len(ids)
		b.mu.Unlock()
	}
	return err
}

// publishAll publishes every job's id once, trying again for a while when
// the broker does not confirm them (one restarting, say): a run whose
// fleet never saw a message would not test the broker's dispatch.
func (b *brokerRun) publishAll(ctx context.Context) error {
	b.mu.Lock()
	ids := append([]int64(nil), b.ids...)
	b.mu.Unlock()
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := b.publish(ctx, ids)
		if err == nil || time.Now().After(deadline) || ctx.Err() != nil {
			if err != nil {
				return fmt.Errorf("chaos: publish the jobs' ids to %s: %w", redacted(b.url), err)
			}
			return nil
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// brokerFault injects one broker fault: 0 cuts p's connections to the
// broker for hold, 1 purges the queue as an operator would, 2 publishes
// ids again (duplicates of due jobs, and stale ones of settled jobs alike:
// the chaos process does not look first, it only counts which were which).
func (r *chaosRun) brokerFault(ctx context.Context, p *fleetProc, hold time.Duration, kind int) {
	b := r.broker
	switch kind {
	case 0:
		name := fmt.Sprintf("broker-%d", time.Now().UnixNano())
		spec := `"type":"reset_peer","stream":"downstream","toxicity":1,"attributes":{"timeout":0}`
		if _, err := p.amqp.Toxics.AddToxicJson(strings.NewReader(`{"name":"` + name + `",` + spec + `}`)); err != nil {
			return
		}
		r.count(faultBrokerCut, 1)
		time.AfterFunc(hold, func() { _ = p.amqp.Toxics.RemoveToxic(context.Background(), name) })
	case 1:
		if _, err := b.ch.QueuePurge(b.queue, false); err == nil {
			r.count(faultBrokerPurge, 1)
		}
	case 2:
		b.mu.Lock()
		n := len(b.ids)
		b.mu.Unlock()
		if n == 0 {
			return
		}
		ids := make([]int64, 1+r.intn(8))
		for i := range ids {
			b.mu.Lock()
			ids[i] = b.ids[r.intn(n)]
			b.mu.Unlock()
		}
		settled := r.settledAmong(ctx, ids)
		_ = b.publish(ctx, ids) // a publish lost is one more fault
		r.count(faultBrokerStale, settled)
		r.count(faultBrokerDuplicate, len(ids)-settled)
	}
}

func (b *brokerRun) close() {
	if b.ch != nil {
		_, _ = b.ch.QueueDelete(b.queue, false, false, false)
	}
	if b.conn != nil {
		_ = b.conn.Close()
	}
	if b.pub != nil {
		_ = b.pub.Close()
	}
}

// newBrokerProxy is a process's path to the broker, which faults cut.
func newBrokerProxy(toxics *toxiproxy.ApiServer, slot int, addr string) *toxiproxy.Proxy {
	return toxiproxy.NewProxy(toxics, fmt.Sprintf("broker-%d", slot), "127.0.0.1:0", addr)
}

func redacted(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

// settledAmong is how many of ids are settled jobs (neither ready nor
// running): publishing them again is publishing stale hints. It is 0 when
// the database cannot tell.
func (r *chaosRun) settledAmong(ctx context.Context, ids []int64) int {
	var settled int
	_ = r.lockDB.QueryRowContext(ctx, "SELECT COUNT(*) FROM refund_jobs WHERE state NOT IN ('ready', 'running') AND id IN ("+placeholders(len(ids))+")", anys(ids)...).Scan(&settled)
	return settled
}

func placeholders(n int) string {
	s := make([]byte, 0, 2*n)
	for i := range n {
		if i > 0 {
			s = append(s, ',')
		}
		s = append(s, '?')
	}
	return string(s)
}

func anys(ids []int64) []any {
	out := make([]any, len(ids))
	for i, id := range ids {
		out[i] = id
	}
	return out
}
