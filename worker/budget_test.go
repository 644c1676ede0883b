package worker_test

import (
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/fencekit/fencekit/fencedwrite"
	"github.com/fencekit/fencekit/provider/fakeprovider"
	"github.com/fencekit/fencekit/worker"
)

// syncBuffer is a log destination the test reads while the worker writes.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// budgetRow reads a budget's settings.
func (f *fleet) budgetRow(name string) (rate, capacity float64) {
	f.t.Helper()
	if err := f.db.RawDB().QueryRow("SELECT rate, capacity FROM provider_budgets WHERE name = ?", name).Scan(&rate, &capacity); err != nil {
		f.t.Fatal(err)
	}
	return rate, capacity
}

// startWith starts a worker on the fleet's budget with rate and burst, and
// returns Start's error; a started worker is stopped when the test ends.
func (f *fleet) startWith(rate float64, burst int, mod func(*worker.Config)) error {
	f.t.Helper()
	cfg := worker.Config{DB: f.db.FencedDB(fencedwrite.DSNOptions{}), Provider: f.srv.Client(), BudgetRate: rate, BudgetBurst: burst,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if mod != nil {
		mod(&cfg)
	}
	w, err := worker.New(cfg)
	if err != nil {
		f.t.Fatal(err)
	}
	if err := w.Start(f.t.Context()); err != nil {
		return err
	}
	f.t.Cleanup(func() { _ = w.StopAndCancel(f.t.Context()) })
	return nil
}

// The fleet's budget has one rate and one burst: a process started with
// others is refused and changes nothing, unless it is told to change them
// for the whole fleet, which it logs.
func TestWorkerKeepsTheFleetsBudget(t *testing.T) {
	t.Run("a process with another rate or burst than the fleet's is refused and changes nothing", func(t *testing.T) {
		f := newFleet(t, fakeprovider.Config{})
		if err := f.startWith(50, 100, nil); err != nil {
			t.Fatal(err)
		}
		for _, other := range []struct {
			rate  float64
			burst int
		}{{5, 100}, {50, 7}} {
			err := f.startWith(other.rate, other.burst, nil)
			if !errors.Is(err, worker.ErrBudgetDiffers) || !strings.Contains(err.Error(), "worker.Config.ChangeBudget") {
				t.Fatalf("a process with rate %v and burst %d: %v, want ErrBudgetDiffers naming worker.Config.ChangeBudget", other.rate, other.burst, err)
			}
			if rate, capacity := f.budgetRow(worker.DefaultBudgetName); rate != 50 || capacity != 100 {
				t.Fatalf("the fleet's budget became %v/s and %v: the refused process changed it", rate, capacity)
			}
		}
	})
	t.Run("told to, a process changes the fleet's rate and burst, and logs it", func(t *testing.T) {
		f := newFleet(t, fakeprovider.Config{})
		if err := f.startWith(50, 100, nil); err != nil {
			t.Fatal(err)
		}
		var logged syncBuffer
		err := f.startWith(5, 7, func(c *worker.Config) {
			c.ChangeBudget = true
			c.Logger = slog.New(slog.NewTextHandler(&logged, nil))
		})
		if err != nil {
			t.Fatal(err)
		}
		if rate, capacity := f.budgetRow(worker.DefaultBudgetName); rate != 5 || capacity != 7 {
			t.Fatalf("the fleet's budget is %v/s and %v, want the new 5/s and 7", rate, capacity)
		}
		for _, want := range []string{"changed the fleet's outbound budget", "from_rate=50", "from_burst=100", "rate=5", "burst=7"} {
			if !strings.Contains(logged.String(), want) {
				t.Fatalf("the log does not say %q:\n%s", want, logged.String())
			}
		}
	})
}
