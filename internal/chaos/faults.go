package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
)

// zombie is a process frozen with a job's provider answer in hand. The new
// holder's provider call is held until the zombie has written back, so that
// the zombie's write meets the job running under the new attempt: the very
// write the fence exists to refuse.
type zombie struct {
	proc  string
	wrote chan struct{}
}

// serveStep is where a process waits at a step boundary while the chaos
// process decides whether to inject a fault exactly there.
func (r *chaosRun) serveStep(w http.ResponseWriter, req *http.Request) {
	var s chaosStep
	if err := json.NewDecoder(req.Body).Decode(&s); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	switch s.Step {
	case stepBeforeCall:
		r.steer.beforeCall(req.Context(), s)
	case stepWriteBack:
		r.steer.writeBack(s)
		return
	case stepQueued:
		r.steer.queued(s)
		return
	case stepBatch:
		r.steer.batch(s)
		return
	case stepWroteBack:
		r.steer.wroteBack(s)
	}
	if s.Step == stepWroteBack {
		r.zombieMu.Lock()
		if z := r.zombies[s.Job]; z != nil && z.proc == s.Proc {
			close(z.wrote)
			delete(r.zombies, s.Job)
		}
		r.zombieMu.Unlock()
		return
	}
	if s.Step == stepBeforeCall {
		r.zombieMu.Lock()
		z := r.zombies[s.Job]
		r.zombieMu.Unlock()
		if z != nil && z.proc != s.Proc {
			r.count(faultHeldForZombie, 1)
			select {
			case <-z.wrote:
			case <-time.After(2 * r.f.Lease):
				// The zombie died or never wrote back: stop waiting for it.
				r.zombieMu.Lock()
				if r.zombies[s.Job] == z {
					delete(r.zombies, s.Job)
				}
				r.zombieMu.Unlock()
			}
		}
	}
	p := r.procByName(s.Proc)
	if p == nil || !r.injecting.Load() || r.steer.active(s.Proc) {
		return // no random fault may spoil the steered episode
	}
	switch s.Step {
	case stepClaimCommit:
		if r.chance(0.02) {
			kind := faultCutTakeoverCommit
			if s.What == "claim" {
				kind = faultCutClaimCommit
				if s.Count > 1 {
					kind = faultCutBatchCommit
				}
			}
			r.cutReplies(p, kind)
		}
	case stepBeforeCall:
		if r.chance(0.004) {
			r.kill(p, faultKillBeforeCall)
		}
	case stepAfterAnswer:
		switch {
		case r.chance(0.004):
			r.kill(p, faultKillAfterAnswer)
		case r.chance(r.f.Pause):
			r.pause(p, s)
		}
	case stepBusinessWrite:
		if s.Transition != "complete" && s.Transition != "fail" {
			return // only these write the ledger row the faults lock
		}
		switch {
		case r.chance(0.01):
			r.lockWait(req.Context(), s)
		case r.chance(0.01):
			r.deadlock(s)
		}
	case stepWriteCommit:
		switch {
		case r.chance(0.004):
			r.kill(p, faultKillBeforeCommit)
		case r.chance(0.02):
			r.cutReplies(p, faultCutCompletion)
		}
	}
}

// cutReplies makes p's database proxy reset every connection as soon as the
// server answers anything: the COMMIT the process is about to send reaches
// the server and runs, and its reply is lost.
func (r *chaosRun) cutReplies(p *fleetProc, kind string) {
	name := fmt.Sprintf("cut-%d", time.Now().UnixNano())
	if _, err := p.db.Toxics.AddToxicJson(strings.NewReader(
		`{"name":"` + name + `","type":"reset_peer","stream":"downstream","toxicity":1,"attributes":{"timeout":0}}`)); err != nil {
		return
	}
	r.count(kind, 1)
	time.AfterFunc(300*time.Millisecond, func() { _ = p.db.Toxics.RemoveToxic(context.Background(), name) })
}

// kill SIGKILLs p's process where it stands; its supervisor restarts it.
func (r *chaosRun) kill(p *fleetProc, kind string) {
	p.mu.Lock()
	exited := p.exited
	p.mu.Unlock()
	if p.signal(syscall.SIGKILL) {
		r.count(kind, 1)
		<-exited
	}
}

// pause SIGSTOPs p's process past its lease and resumes it: a zombie
// with a provider answer in hand, whose jobs others take over meanwhile.
func (r *chaosRun) pause(p *fleetProc, s chaosStep) {
	r.zombieMu.Lock()
	if r.zombies[s.Job] != nil {
		r.zombieMu.Unlock()
		return
	}
	r.zombies[s.Job] = &zombie{proc: s.Proc, wrote: make(chan struct{})}
	r.zombieMu.Unlock()
	if !p.signal(syscall.SIGSTOP) {
		r.zombieMu.Lock()
		delete(r.zombies, s.Job)
		r.zombieMu.Unlock()
		return
	}
	r.count(faultPause, 1)
	p.mu.Lock()
	p.paused = true
	p.mu.Unlock()
	time.Sleep(r.f.Lease + 4*chaosScan) // the fault itself: a process frozen past its lease
	p.mu.Lock()
	p.paused = false
	p.mu.Unlock()
	p.signal(syscall.SIGCONT)
}

// lockWait holds the job's ledger row locked past the process's lock wait
// timeout (1 s): its ledger write fails with 1205 and the write-back rolls
// back.
func (r *chaosRun) lockWait(ctx context.Context, s chaosStep) {
	tx, err := r.lockDB.BeginTx(context.WithoutCancel(ctx), nil)
	if err != nil {
		return
	}
	var id int64
	if err := tx.QueryRow("SELECT id FROM refunds WHERE operation_key = ? FOR UPDATE", s.Key).Scan(&id); err != nil {
		_ = tx.Rollback()
		return
	}
	r.count(faultLockWait, 1)
	time.AfterFunc(1500*time.Millisecond, func() { _ = tx.Rollback() })
}

// deadlock makes the write-back's transaction one side of a deadlock: the
// chaos session, made heavier by ballast so that the server picks the
// write-back as the victim, locks the job's ledger row, then asks for the
// job's row, which the write-back holds, while the write-back asks for the
// ledger row.
func (r *chaosRun) deadlock(s chaosStep) {
	ctx := context.Background()
	tx, err := r.lockDB.BeginTx(ctx, nil)
	if err != nil {
		return
	}
	if _, err := tx.Exec("UPDATE chaos_ballast SET n = n + 1"); err != nil {
		_ = tx.Rollback()
		return
	}
	var id int64
	if err := tx.QueryRow("SELECT id FROM refunds WHERE operation_key = ? FOR UPDATE", s.Key).Scan(&id); err != nil {
		_ = tx.Rollback()
		return
	}
	go func() {
		defer tx.Rollback()
		var job int64
		// Granted: the write-back was the victim. An error (1213) means the
		// chaos session was, and nothing was injected.
		if tx.QueryRow("SELECT id FROM refund_jobs WHERE id = ? FOR UPDATE", s.Job).Scan(&job) == nil {
			r.count(faultDeadlock, 1)
		}
	}()
}

// backgroundFaults cuts and slows the processes' paths at random until ctx
// ends.
func (r *chaosRun) backgroundFaults(ctx context.Context) {
	tick := time.NewTicker(400 * time.Millisecond)
	defer tick.Stop()
	if r.broker != nil {
		// Every run through the broker meets duplicates and a cut at
		// once; later ticks draw broker faults among the others.
		r.brokerFault(ctx, r.procs[len(r.procs)-1], 300*time.Millisecond, 0)
		r.brokerFault(ctx, nil, 0, 2)
	}
	if r.kafka != nil {
		// Every run through Kafka meets each of its faults at once.
		for kind := range 3 {
			r.kafkaFault(ctx, kind)
		}
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		p := r.procs[r.intn(len(r.procs))]
		p.mu.Lock()
		steered := r.steer.active(p.name)
		p.mu.Unlock()
		if steered {
			continue // no random fault may spoil the steered episode
		}
		name := fmt.Sprintf("bg-%d", time.Now().UnixNano())
		var (
			px   *toxiproxy.Proxy
			spec string
			kind string
			hold = time.Duration(50+r.intn(500)) * time.Millisecond
		)
		switch r.intn(6) {
		case 0:
			px, kind, spec = p.db, faultDBCut, `"type":"reset_peer","stream":"upstream","toxicity":1,"attributes":{"timeout":0}`
		case 1:
			px, kind = p.db, faultDBLatency
			spec = fmt.Sprintf(`"type":"latency","stream":"downstream","toxicity":1,"attributes":{"latency":%d,"jitter":%d}`, 20+r.intn(300), r.intn(50))
		case 2:
			px, kind, spec = p.prov, faultProviderPathCut, `"type":"reset_peer","stream":"downstream","toxicity":1,"attributes":{"timeout":0}`
		case 3:
			px, kind = p.prov, faultProviderPathLag
			spec = fmt.Sprintf(`"type":"latency","stream":"downstream","toxicity":1,"attributes":{"latency":%d,"jitter":%d}`, 100+r.intn(1200), r.intn(100))
		case 4, 5:
			switch {
			case r.broker != nil:
				r.brokerFault(ctx, p, hold, r.intn(3))
			case r.kafka != nil:
				r.kafkaFault(ctx, r.intn(3))
			}
			continue // else a quiet tick
		default:
			continue // a quiet tick
		}
		if _, err := px.Toxics.AddToxicJson(strings.NewReader(`{"name":"` + name + `",` + spec + `}`)); err != nil {
			continue
		}
		r.count(kind, 1)
		time.AfterFunc(hold, func() { _ = px.Toxics.RemoveToxic(context.Background(), name) })
	}
}

func (r *chaosRun) clearToxics() {
	for _, p := range r.procs {
		for _, px := range []*toxiproxy.Proxy{p.db, p.prov} {
			px.Toxics.ResetToxics(context.Background())
		}
	}
}
