package history

import (
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"time"
)

// Recorder appends one process's events to its history file. Each event is
// one line handed to the kernel by a single write(2) on a file opened with
// O_APPEND, with no buffering in the process, so a process killed at any
// point loses at most the events it had not written yet. Several
// incarnations may share a file as long as each has its own proc name.
//
// A nil *Recorder records nothing, so a worker can run without a history.
// Its methods are safe for concurrent use.
type Recorder struct {
	proc string

	mu  sync.Mutex
	f   *os.File
	id  int64 // the last id handed out
	t   int64 // the last time written: a process's own clock never runs backwards
	err error // the first write error, reported by Close
}

// Open opens (creating it if needed) the history file at path for the
// process incarnation proc.
func Open(path, proc string) (*Recorder, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open history: %w", err)
	}
	return &Recorder{proc: proc, f: f}, nil
}

// Call records the start of an operation described by e (Op, Job, Attempt,
// To, Key, Detail) and returns its id, to be passed to Return. Call it before
// the operation starts. It never fails: a write error is kept for Close.
func (r *Recorder) Call(e Event) int64 {
	if r == nil {
		return 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.id++
	e.ID, e.Phase = r.id, PhaseCall
	r.write(e)
	return e.ID
}

// Return records the end of operation id; e carries its Result (and, for a
// provider call, the answer in Detail), and may repeat the call's fields.
// Call it after the operation ended. It never fails: a write error is kept
// for Close.
func (r *Recorder) Return(id int64, e Event) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	e.ID, e.Phase = id, PhaseReturn
	r.write(e)
}

// write stamps e with the process and the time and writes it as one line;
// r.mu is held.
func (r *Recorder) write(e Event) {
	r.t = max(time.Now().UnixNano(), r.t+1)
	e.Proc, e.T = r.proc, r.t
	line, err := json.Marshal(e)
	if err == nil {
		_, err = r.f.Write(append(line, '\n'))
	}
	if err != nil && r.err == nil {
		r.err = fmt.Errorf("write history: %w", err)
	}
}

// Close closes the file. It returns the first error met while writing: the
// history then misses events, and a check of it proves nothing.
func (r *Recorder) Close() error {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.f.Close(); err != nil && r.err == nil {
		r.err = fmt.Errorf("close history: %w", err)
	}
	return r.err
}
