package main

// Every use of the worker's API is in this file, so that a change of the
// worker (batched write-backs, say) changes the benchmark in one place:
// startWorker builds every worker the benchmark runs (the burn-downs, the
// takeover's doomed and surviving workers, the memory run's process, the
// explain test's). The data layer's own calls (the unbatched cycle, the
// history probes) live with their sections.

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"time"

	"github.com/fencekit/fencekit/dispatch/kafka"
	"github.com/fencekit/fencekit/dispatch/rabbitmq"
	"github.com/fencekit/fencekit/provider"
	"github.com/fencekit/fencekit/worker"
)

// workerSettings are what the benchmark sets on a worker.
type workerSettings struct {
	Workers         int
	Lease, Scan     time.Duration // zero: the worker's defaults
	ProviderTimeout time.Duration // zero: the worker's default
	BudgetRate      float64       // zero: no limit worth the name
	BudgetBurst     int           // zero: Workers, at most maxBurst
	Provider        provider.Client
	// Claimed runs when a claim or takeover committed, before the provider
	// is called; takeover is true when the job was taken over (it
	// reconciles).
	Claimed func(id int64, takeover bool)
	// Done runs after the job's write-back, with its outcome.
	Done func(id int64, err error)
	// Passed runs after each scheduler pass, with how many jobs it claimed
	// through hints (a broker's messages).
	Passed func(hinted int)
	// Broker, when set, is the RabbitMQ dispatch the worker consumes
	// (dispatch/rabbitmq), beside its scan.
	Broker *rabbitmq.Config
	// Kafka, when set, is the Kafka dispatch the worker consumes
	// (dispatch/kafka), beside its scan; startWorker returns once the
	// consumer was assigned its partitions.
	Kafka *kafka.Config
}

// maxBurst keeps a pass's grant within what one batch claim takes
// (fencedwrite.MaxBatch): the worker asks TakeoverExpired for every token it
// was granted.
const maxBurst = 1_000

// startWorker starts a fencekit worker on db and returns a function that
// stops it (Stop: the jobs in flight finish and write back).
func startWorker(ctx context.Context, db *sql.DB, s workerSettings) (stop func(context.Context) error, err error) {
	burst := s.BudgetBurst
	if burst == 0 {
		burst = min(s.Workers, maxBurst)
	}
	rate := s.BudgetRate
	if rate == 0 {
		rate = 1e7
	}
	hooks := worker.Hooks{}
	if s.Claimed != nil {
		hooks.BeforeProviderCall = func(j worker.Job) { s.Claimed(j.ID, j.Attempt > 1) }
	}
	if s.Done != nil {
		hooks.WroteBack = func(j worker.Job, err error) { s.Done(j.ID, err) }
	}
	if s.Passed != nil {
		hooks.Pass = func(p worker.PassResult) { s.Passed(p.Hinted) }
	}
	w, err := worker.New(worker.Config{
		DB:              db,
		Provider:        s.Provider,
		Workers:         s.Workers,
		Lease:           s.Lease,
		ScanInterval:    s.Scan,
		ProviderTimeout: s.ProviderTimeout,
		BudgetRate:      rate,
		BudgetBurst:     burst,
		Logger:          slog.New(slog.DiscardHandler), // the worker logs every job at Info
		Hooks:           hooks,
	})
	if err != nil {
		return nil, err
	}
	if err := w.Start(ctx); err != nil {
		return nil, err
	}
	var consume func(context.Context) error
	assigned := make(chan struct{}, 1)
	switch {
	case s.Broker != nil:
		c, err := rabbitmq.NewConsumer(*s.Broker, w, rabbitmq.Hooks{})
		if err != nil {
			_ = w.StopAndCancel(ctx)
			return nil, err
		}
		consume, assigned = c.Run, nil
	case s.Kafka != nil:
		c, err := kafka.NewConsumer(*s.Kafka, w, kafka.Hooks{Assigned: func([]int32) {
			select {
			case assigned <- struct{}{}:
			default:
			}
		}})
		if err != nil {
			_ = w.StopAndCancel(ctx)
			return nil, err
		}
		consume = c.Run
	default:
		return w.Stop, nil
	}
	consumeCtx, stopConsuming := context.WithCancel(context.WithoutCancel(ctx))
	consumed := make(chan struct{})
	go func() { defer close(consumed); _ = consume(consumeCtx) }()
	if assigned != nil {
		select {
		case <-assigned:
		case <-time.After(30 * time.Second):
			stopConsuming()
			<-consumed
			_ = w.StopAndCancel(ctx)
			return nil, fmt.Errorf("the Kafka consumer was assigned no partition within 30s")
		}
	}
	return func(ctx context.Context) error {
		stopConsuming()
		<-consumed
		return w.Stop(ctx)
	}, nil
}

// instantProvider is the zero-latency provider of a no-op job: every refund
// succeeds at once, and a lookup finds it. It keeps no state, so a worker
// process's memory is the worker's own.
type instantProvider struct {
	// hang makes Refund wait until its context ends (a call in flight
	// when the worker is killed).
	hang bool
}

func (instantProvider) Capabilities() provider.Capabilities {
	return provider.Capabilities{SafeResend: true, KeyRetention: 24 * time.Hour, LookupByReference: true}
}

func (p instantProvider) Refund(ctx context.Context, req provider.RefundRequest) (provider.Refund, error) {
	if p.hang {
		<-ctx.Done()
		return provider.Refund{}, provider.ErrOutcomeUnknown
	}
	return succeeded(req.OperationKey), nil
}

func (instantProvider) Lookup(_ context.Context, q provider.Query) ([]provider.Refund, error) {
	if _, ok := requestOf(q.OperationKey); !ok {
		return nil, nil
	}
	return []provider.Refund{succeeded(q.OperationKey)}, nil
}

func succeeded(key string) provider.Refund {
	r, _ := requestOf(key)
	return provider.Refund{ProviderRefundID: "re_" + key, Reference: key, PaymentRef: r.PaymentRef,
		AmountMinor: r.AmountMinor, Currency: r.Currency, Status: provider.StatusSucceeded}
}
