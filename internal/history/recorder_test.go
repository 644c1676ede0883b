package history

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func TestRecorderRoundTripsThroughLoad(t *testing.T) {
	dir := t.TempDir()
	const procs, goroutines, ops = 2, 4, 50
	var wg sync.WaitGroup
	for p := range procs {
		rec, err := Open(filepath.Join(dir, fmt.Sprintf("w%d.jsonl", p)), fmt.Sprintf("w%d.1", p))
		if err != nil {
			t.Fatal(err)
		}
		var inner sync.WaitGroup
		for g := range goroutines {
			inner.Go(func() {
				for i := range ops {
					job := int64(g*ops + i + 1)
					id := rec.Call(Event{Op: OpWrite, Job: job, Attempt: 3, To: "ready", Key: "k"})
					rec.Return(id, Event{Op: OpWrite, Job: job, Attempt: 3, To: "ready", Result: ResultOK})
				}
			})
		}
		wg.Go(func() {
			inner.Wait()
			if err := rec.Close(); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()

	events, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != procs*goroutines*ops*2 {
		t.Fatalf("loaded %d events, want %d", len(events), procs*goroutines*ops*2)
	}
	calls := map[string]Event{}
	last := map[string]int64{}
	for _, e := range events {
		k := fmt.Sprintf("%s/%d", e.Proc, e.ID)
		if e.T <= last[e.Proc] {
			t.Errorf("%s: time went backwards at %+v", e.Proc, e)
		}
		last[e.Proc] = e.T
		switch e.Phase {
		case PhaseCall:
			if _, dup := calls[k]; dup {
				t.Errorf("id %s called twice", k)
			}
			if e.Key != "k" || e.To != "ready" || e.Result != "" {
				t.Errorf("call %s lost its fields: %+v", k, e)
			}
			calls[k] = e
		case PhaseReturn:
			c, ok := calls[k]
			if !ok || c.Job != e.Job || e.Result != ResultOK || e.T <= c.T {
				t.Errorf("return %+v does not match its call %+v", e, c)
			}
		}
	}
	jobs := map[int64]Final{}
	for j := int64(1); j <= goroutines*ops; j++ {
		jobs[j] = Final{"ready", 0}
	}
	// The writes were never claimed: the recorder round-trips, the model refuses them.
	if r := Check(events, jobs, 0); r.OK || len(r.Failures) != goroutines*ops || r.Ops != procs*goroutines*ops {
		t.Errorf("check of unclaimed writes: %s (%d failures, %d ops)", r.Summary(), len(r.Failures), r.Ops)
	}
}

func TestNilRecorderRecordsNothing(t *testing.T) {
	var rec *Recorder
	if id := rec.Call(Event{Op: OpClaim}); id != 0 {
		t.Errorf("nil recorder handed out id %d", id)
	}
	rec.Return(1, Event{Result: ResultOK})
	if err := rec.Close(); err != nil {
		t.Error(err)
	}
}

func TestLoad(t *testing.T) {
	good := `{"proc":"w1.1","id":1,"phase":"call","t":100,"op":"claim","job":1,"attempt":1}` + "\n"

	t.Run("a last line cut short by a kill is ignored", func(t *testing.T) {
		dir := t.TempDir()
		writeFile(t, dir, "w1.jsonl", good+`{"proc":"w1.1","id":1,"phase":"ret`)
		writeFile(t, dir, "notes.txt", "not a history")
		events, err := Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		if len(events) != 1 || events[0] != (Event{Proc: "w1.1", ID: 1, Phase: PhaseCall, T: 100, Op: OpClaim, Job: 1, Attempt: 1}) {
			t.Errorf("loaded %+v", events)
		}
	})

	t.Run("a last line complete but for its newline is kept", func(t *testing.T) {
		dir := t.TempDir()
		writeFile(t, dir, "w1.jsonl", good+strings.TrimSuffix(strings.Replace(good, "call", "return", 1), "\n"))
		events, err := Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		if len(events) != 2 || events[1].Phase != PhaseReturn {
			t.Errorf("loaded %+v", events)
		}
	})

	t.Run("a bad line before the last is an error naming file and line", func(t *testing.T) {
		dir := t.TempDir()
		writeFile(t, dir, "w2.jsonl", good+"{\"proc\":\n"+good)
		_, err := Load(dir)
		if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "w2.jsonl")+" line 2:") {
			t.Errorf("got error %v, want one naming w2.jsonl line 2", err)
		}
	})

	t.Run("a missing directory is an error", func(t *testing.T) {
		if _, err := Load(filepath.Join(t.TempDir(), "nope")); err == nil {
			t.Error("no error")
		}
	})
}

func writeFile(t *testing.T, dir, name, text string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}
