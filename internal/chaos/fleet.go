package chaos

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
)

// fleetProc is one slot of the fleet: its proxies and its current process.
type fleetProc struct {
	slot         int
	startMu      sync.Mutex // held while a process of the slot is replaced
	db, prov     *toxiproxy.Proxy
	amqp         *toxiproxy.Proxy // the path to the broker (--dispatch rabbitmq)
	mu           sync.Mutex
	name         string
	cmd          *exec.Cmd
	listen       string
	paused, down bool
	exited       chan struct{}
	generation   int
}

// start starts a new process in p's slot and waits until it serves;
// p.startMu is held.
func (r *chaosRun) start(ctx context.Context, p *fleetProc) error {
	r.procMu.Lock()
	r.incarn++
	r.procMu.Unlock()
	p.mu.Lock()
	p.generation++
	name := fmt.Sprintf("w%d.%d", p.slot, p.generation)
	p.mu.Unlock()
	cfg := r.cfg.Clone()
	cfg.Addr = p.db.Listen
	args := []string{AgentCommand,
		"-dsn", cfg.FormatDSN(),
		"-provider-url", "http://" + p.prov.Listen,
		"-provider-key-retention", chaosKeyRetention.String(),
		"-provider-lookup-lag", chaosLookupLag.String(),
		"-provider-skew-margin", "2s",
		"-listen", "127.0.0.1:0",
		"-operator-listen", "127.0.0.1:0",
		"-workers", fmt.Sprint(r.f.Slots),
		"-lease", r.f.Lease.String(),
		"-scan", chaosScan.String(),
		"-provider-timeout", chaosProviderTimeout.String(),
		"-budget-rate", "5000", "-budget-burst", "500",
		"-stop-grace", chaosStopGrace.String(),
		"-lock-wait", "1s",
		"-pending-delay", chaosPendingDelay.String(),
		"-retry-delay", "200ms",
		"-lag-poll", "100ms",
		"-chaos-history", filepath.Join(r.dir, name+".jsonl"),
		"-chaos-control", r.controlURL + "/step",
		"-chaos-proc", name,
	}
	if r.broker != nil {
		args = append(args, "-dispatch", DispatchRabbitMQ, "-amqp-url", r.broker.fleetURL(p.amqp.Listen), "-amqp-queue", r.broker.queue)
	}
	args = append(args, r.providerArgs()...)
	if r.kafka != nil {
		args = append(args, r.kafka.fleetArgs()...)
	}
	cmd := exec.Command(r.f.Exe, args...)
	// A fleet process never outlives refundd chaos.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Env = append(os.Environ(), r.providerEnv()...)
	logf, err := os.Create(filepath.Join(r.dir, name+".log"))
	if err != nil {
		return err
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		logf.Close()
		return err
	}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("chaos: start %s: %w", name, err)
	}
	listening := make(chan string, 1)
	go func() {
		defer logf.Close()
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Bytes()
			logf.Write(append(line, '\n'))
			if bytes.Contains(line, []byte(`"msg":"refundd running"`)) {
				var l struct{ Listen string }
				if json.Unmarshal(line, &l) == nil {
					select {
					case listening <- l.Listen:
					default:
					}
				}
			}
		}
	}()
	exited := make(chan struct{})
	p.mu.Lock()
	p.name, p.cmd, p.listen, p.paused, p.down, p.exited = name, cmd, "", false, false, exited
	p.mu.Unlock()
	go func() {
		_ = cmd.Wait()
		p.mu.Lock()
		p.down = true
		p.mu.Unlock()
		close(exited)
	}()
	select {
	case addr := <-listening:
		p.mu.Lock()
		p.listen = addr
		p.mu.Unlock()
		go r.supervise(ctx, p, exited)
		return nil
	case <-exited:
		return fmt.Errorf("chaos: %s exited before serving; see %s", name, filepath.Join(r.dir, name+".log"))
	case <-time.After(30 * time.Second):
		return fmt.Errorf("chaos: %s did not serve within 30s; see %s", name, filepath.Join(r.dir, name+".log"))
	}
}

// supervise restarts p's process when it dies (a SIGKILL), unless the fleet
// is stopping or something else already replaced it.
func (r *chaosRun) supervise(ctx context.Context, p *fleetProc, exited chan struct{}) {
	<-exited
	for !r.stopping.Load() && ctx.Err() == nil {
		p.startMu.Lock()
		p.mu.Lock()
		current := p.exited == exited
		p.mu.Unlock()
		if !current || r.stopping.Load() {
			p.startMu.Unlock()
			return
		}
		err := r.start(ctx, p)
		p.startMu.Unlock()
		if err == nil {
			return
		}
		r.logf("restart %s: %v; trying again", p.name, err)
		time.Sleep(200 * time.Millisecond)
	}
}

// signal sends sig to p's current process.
func (p *fleetProc) signal(sig syscall.Signal) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.down || p.cmd == nil || p.cmd.Process == nil {
		return false
	}
	return p.cmd.Process.Signal(sig) == nil
}

// procByName finds the slot whose current process is name.
func (r *chaosRun) procByName(name string) *fleetProc {
	for _, p := range r.procs {
		p.mu.Lock()
		ok := p.name == name
		p.mu.Unlock()
		if ok {
			return p
		}
	}
	return nil
}

// rollingRestart restarts every process of the fleet in turn, as a deploy
// does: SIGTERM, wait for it to write back and exit, start the new one.
func (r *chaosRun) rollingRestart(ctx context.Context) {
	// The deploy waits for the steered episode: its zombies need the
	// others to take their jobs over, and a stopping process claims none.
	select {
	case <-r.steer.done:
	case <-ctx.Done():
		return
	}
	for _, p := range r.procs {
		if ctx.Err() != nil {
			return
		}
		// A frozen process is deployed once it thaws.
		for wait := time.Now().Add(3 * r.f.Lease); ; {
			p.mu.Lock()
			paused := p.paused
			p.mu.Unlock()
			if !paused || time.Now().After(wait) || ctx.Err() != nil {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		// Holding startMu, the supervisor cannot restart the process too.
		p.startMu.Lock()
		p.mu.Lock()
		exited := p.exited
		p.mu.Unlock()
		if p.signal(syscall.SIGTERM) {
			<-exited
		}
		var err error
		for try := 0; try < 5 && ctx.Err() == nil; try++ {
			if err = r.start(ctx, p); err == nil {
				break
			}
			r.logf("rolling restart of slot %d: %v; trying again", p.slot, err)
		}
		p.startMu.Unlock()
		if err != nil {
			// The supervisor takes the slot over from here.
			p.mu.Lock()
			failed := p.exited
			p.mu.Unlock()
			go r.supervise(ctx, p, failed)
			continue
		}
		r.count(faultRollingRestart, 1)
	}
}

// stopAll stops the fleet: SIGTERM, then SIGKILL for a process that does
// not exit in time.
func (r *chaosRun) stopAll() {
	r.stopping.Store(true)
	r.steer.stop() // nothing may stay held while the fleet drains
	for _, p := range r.procs {
		p.startMu.Lock() // no restart from now on
		p.signal(syscall.SIGCONT)
		p.signal(syscall.SIGTERM)
	}
	for _, p := range r.procs {
		p.mu.Lock()
		exited := p.exited
		p.mu.Unlock()
		if exited != nil {
			select {
			case <-exited:
			case <-time.After(chaosStopGrace + 10*time.Second):
				p.signal(syscall.SIGKILL)
				<-exited
			}
		}
		p.startMu.Unlock()
	}
}

// forwardWebhook hands a webhook of the fake provider to a process of the
// fleet that is up; a paused or dead one makes the provider retry.
func (r *chaosRun) forwardWebhook(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var up []string
	for _, p := range r.procs {
		p.mu.Lock()
		if !p.down && !p.paused && p.listen != "" {
			up = append(up, p.listen)
		}
		p.mu.Unlock()
	}
	if len(up) == 0 {
		http.Error(w, "no process is up", http.StatusServiceUnavailable)
		return
	}
	fwd, _ := http.NewRequestWithContext(req.Context(), http.MethodPost, "http://"+up[r.intn(len(up))]+"/webhooks", bytes.NewReader(body))
	fwd.Header = req.Header.Clone()
	resp, err := (&http.Client{Timeout: 2 * time.Second}).Do(fwd)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	w.WriteHeader(resp.StatusCode)
	w.Write(b)
}
