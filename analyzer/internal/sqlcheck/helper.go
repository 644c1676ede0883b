package sqlcheck

import (
	"bufio"
	"crypto/sha256"
	"encoding/gob"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The fencelint-sql helper judges SQL text for a fencelint that does not
// link the parser: go vet starts its tool once for every package and
// dependency, and the parser's start-up (its tables, its packages' init)
// would be paid by all of them, where only the packages whose text names a
// fenced table need it. fencelint starts the helper at its first question
// and keeps it for the rest of its run.
const (
	// HelperName is the helper's command name.
	HelperName = "fencelint-sql"
	// HelperEnv names the variable that gives the helper's path.
	HelperEnv = "FENCELINT_SQL"
	// protocol is what the helper says first; fencelint refuses a helper
	// that says anything else (another version's).
	protocol = "fencelint-sql protocol 2"
)

// Helper is the path of the helper: $FENCELINT_SQL, else fencelint-sql
// beside the running executable (where go install puts both), else the one
// built from source for this executable (see builtPath), else on PATH, else,
// for a fencelint built from a checkout without -trimpath (go build -o X
// ./cmd/fencelint), one built now from that checkout, once.
func Helper() (string, error) {
	if p := os.Getenv(HelperEnv); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%s=%s names no helper: %w", HelperEnv, p, err)
		}
		return p, nil
	}
	name := HelperName
	if runtime.GOOS == "windows" {
		name += ".exe"
	}
	exe, err := os.Executable()
	if err == nil {
		if real, err := filepath.EvalSymlinks(exe); err == nil {
			exe = real
		}
	}
	beside := filepath.Join(filepath.Dir(exe), name)
	if exe != "" && isFile(beside) {
		return beside, nil
	}
	cached, cacheErr := builtPath(exe, name)
	if cacheErr == nil && isFile(cached) {
		return cached, nil
	}
	if p, err := exec.LookPath(HelperName); err == nil {
		return p, nil
	}
	why := "fencelint was not built from a checkout it can find"
	if root, ok := sourceRoot(); ok && cacheErr == nil {
		if err := build(root, cached); err == nil {
			return cached, nil
		} else {
			why = err.Error()
		}
	} else if cacheErr != nil {
		why = cacheErr.Error()
	}
	return "", fmt.Errorf("its SQL checker %s is neither at %s nor on PATH, and building it failed (%s): install it with fencelint, from the same version (go install github.com/fencekit/fencekit/cmd/fencelint@VERSION github.com/fencekit/fencekit/cmd/fencelint-sql@VERSION), or name it with %s",
		HelperName, beside, why, HelperEnv)
}

func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

// builtPath is where a helper built from source for the executable exe
// lives: the user's cache directory, under a name that changes with exe
// (its path, size and time), so that a rebuilt fencelint builds its
// helper again.
func builtPath(exe, name string) (string, error) {
	st, err := os.Stat(exe)
	if err != nil {
		return "", err
	}
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(fmt.Appendf(nil, "%s\x00%d\x00%d", exe, st.Size(), st.ModTime().UnixNano()))
	return filepath.Join(dir, "fencekit", fmt.Sprintf("%s-%x%s", HelperName, sum[:8], strings.TrimPrefix(name, HelperName))), nil
}

// sourceRoot is the checkout fencelint was built from, when its file
// paths were compiled in (a build without -trimpath): this file is
// analyzer/internal/sqlcheck/helper.go in it, and the helper's command is
// cmd/fencelint-sql.
func sourceRoot() (string, bool) {
	_, file, _, ok := runtime.Caller(0)
	if !ok || !filepath.IsAbs(file) {
		return "", false
	}
	root := filepath.Clean(filepath.Join(filepath.Dir(file), "..", "..", ".."))
	return root, isFile(filepath.Join(root, "cmd", HelperName, "main.go"))
}

// build builds the helper from the checkout root into dst, through a
// temporary file renamed into place, so that a concurrent run sees either
// nothing or the whole binary.
func build(root, dst string) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	tmp := fmt.Sprintf("%s.%d.tmp", dst, os.Getpid())
	defer os.Remove(tmp)
	cmd := exec.Command("go", "build", "-o", tmp, "./cmd/"+HelperName)
	cmd.Dir = root
	// The checkout's own workspace and flags, not those of the module
	// under analysis (go vet's environment may say GOWORK=off, -mod=mod).
	cmd.Env = append(os.Environ(), "GOWORK=", "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./cmd/%s in %s: %v: %s", HelperName, root, err, firstN(strings.TrimSpace(string(out)), 400))
	}
	return os.Rename(tmp, dst)
}

// The protocol: the helper's first line is its greeting (protocol, then
// a newline); then fencelint writes requests and the helper writes a
// response a request, as a gob stream each way. gob, not JSON: a Go string
// constant may hold bytes that are not UTF-8, which JSON would replace, so
// the helper would judge other text and name other offsets.

// request is one question to the helper; a template has Template set.
type request struct {
	Config   *Config
	Text     string
	Parts    []Part
	Template bool
}

// response is the helper's answer to one request.
type response struct {
	Problems []Problem
	Err      string
}

// Serve answers requests read from r with j, a response a request, on w,
// after a greeting that names the protocol, until r ends. It is the
// helper's main loop.
func Serve(j Judge, r io.Reader, w io.Writer) error {
	bw := bufio.NewWriter(w)
	if _, err := bw.WriteString(protocol + "\n"); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return err
	}
	enc := gob.NewEncoder(bw)
	dec := gob.NewDecoder(bufio.NewReader(r))
	for {
		var req request
		if err := dec.Decode(&req); err == io.EOF {
			return nil
		} else if err != nil {
			return fmt.Errorf("read request: %w", err)
		}
		var resp response
		switch {
		case req.Config == nil:
			resp.Err = "request without Config"
		case req.Template:
			resp.Problems = j.CheckTemplate(req.Parts, req.Config)
		default:
			resp.Problems = j.Check(req.Text, req.Config)
		}
		if err := enc.Encode(resp); err != nil {
			return err
		}
		if err := bw.Flush(); err != nil {
			return err
		}
	}
}

// helperJudge asks the helper, one question at a time, and remembers the
// answers of this process's run (a package asks the same text often).
// Once the helper fails, every question gets an Unjudged problem and
// Failure reports why: no text naming a fenced table passes unjudged.
type helperJudge struct {
	mu      sync.Mutex
	started bool
	err     error
	path    string
	cmd     *exec.Cmd
	in      io.WriteCloser
	enc     *gob.Encoder
	dec     *gob.Decoder
	stderr  tail
	answers map[string][]Problem
}

func (h *helperJudge) Check(s string, cfg *Config) []Problem {
	return h.ask(request{Config: cfg, Text: s})
}

// questionKey is a request as a string, every text quoted (%q keeps every
// byte and no text can pass for a field separator): two questions share a
// key only when they are the same question.
func questionKey(req request) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%t %q %+v", req.Template, req.Text, *req.Config)
	for _, p := range req.Parts {
		fmt.Fprintf(&b, " | %q %t %d %d %q", p.Text, p.Hole, p.Param, p.Outer, p.Name)
	}
	return b.String()
}

func (h *helperJudge) CheckTemplate(parts []Part, cfg *Config) []Problem {
	return h.ask(request{Config: cfg, Parts: parts, Template: true})
}

func (h *helperJudge) ask(req request) []Problem {
	key := questionKey(req)
	h.mu.Lock()
	defer h.mu.Unlock()
	if ps, ok := h.answers[key]; ok {
		return slices.Clone(ps)
	}
	if !h.started {
		h.started = true
		h.err = h.start()
	}
	if h.err == nil {
		var resp response
		stop := h.deadline()
		err := h.enc.Encode(req)
		if err == nil {
			err = h.dec.Decode(&resp)
		}
		if late := stop(); late != nil {
			h.err = late
		} else if err != nil {
			h.err = h.broken(err)
		} else if resp.Err != "" {
			h.err = fmt.Errorf("%s: %s", h.path, resp.Err)
		} else {
			if h.answers == nil {
				h.answers = map[string][]Problem{}
			}
			h.answers[key] = resp.Problems
			return slices.Clone(resp.Problems)
		}
	}
	// Unjudged: named after the first fenced table the question names.
	text := req.Text
	for _, p := range req.Parts {
		text += p.Text
	}
	t := Table{Name: "a fenced table"}
	if i := slices.IndexFunc(req.Config.Tables, func(c Table) bool { return containsFold(text, c.Name) }); i >= 0 {
		t = req.Config.Tables[i]
	}
	return []Problem{{Kind: Unjudged, Table: t, Stop: h.err.Error()}}
}

// deadline arms the limit on one answer: past it the helper is killed,
// which ends the wait. stop disarms it and says whether it fired. A
// question takes the parser microseconds; a helper silent for the limit
// ($FENCELINT_SQL_TIMEOUT, default a minute) is stuck, and fencelint
// fails rather than hang the build.
func (h *helperJudge) deadline() (stop func() error) {
	if h.cmd == nil {
		return func() error { return nil }
	}
	limit := time.Minute
	if v := os.Getenv(HelperEnv + "_TIMEOUT"); v != "" {
		if d, err := time.ParseDuration(v); err == nil && d > 0 {
			limit = d
		}
	}
	var fired atomic.Bool
	t := time.AfterFunc(limit, func() {
		fired.Store(true)
		h.cmd.Process.Kill()
	})
	return func() error {
		t.Stop()
		if !fired.Load() {
			return nil
		}
		h.broken(nil)
		return fmt.Errorf("%s did not answer within %v ($%s_TIMEOUT) and was stopped", h.path, limit, HelperEnv)
	}
}

func (h *helperJudge) start() error {
	path, err := Helper()
	if err != nil {
		return err
	}
	h.path = path
	cmd := exec.Command(path)
	cmd.Stderr = &h.stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", path, err)
	}
	// The helper ends when its input does, that is when this process
	// exits; nothing waits for it.
	h.cmd = cmd
	return h.connect(in, out)
}

// Connect returns a judge that asks the helper at the other end of in
// and out (the helper's input and output), after checking its greeting.
// fencelint starts the helper and connects to it; a test connects to
// Serve through pipes.
func Connect(in io.WriteCloser, out io.Reader) (Judge, error) {
	h := &helperJudge{started: true, path: HelperName}
	if err := h.connect(in, out); err != nil {
		return nil, err
	}
	return h, nil
}

func (h *helperJudge) connect(in io.WriteCloser, out io.Reader) error {
	h.in = in
	br := bufio.NewReader(out)
	greeting, err := br.ReadString('\n')
	if err != nil {
		return h.broken(err)
	}
	if greeting = strings.TrimSuffix(greeting, "\n"); greeting != protocol {
		return fmt.Errorf("%s speaks %q where this fencelint speaks %q: install both from the same version", h.path, firstN(greeting, 80), protocol)
	}
	h.enc = gob.NewEncoder(in)
	h.dec = gob.NewDecoder(br)
	return nil
}

// firstN is s cut to at most n bytes.
func firstN(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// broken describes a helper that stopped answering, with the end of what
// it wrote on its standard error (a panic's message).
func (h *helperJudge) broken(err error) error {
	// Waiting for the stopped process drains its standard error.
	h.in.Close()
	if h.cmd != nil {
		h.cmd.Process.Kill()
		h.cmd.Wait()
	}
	if errors.Is(err, io.EOF) {
		err = errors.New("it exited")
	}
	if s := strings.TrimSpace(h.stderr.String()); s != "" {
		return fmt.Errorf("%s stopped answering (%v): %s", h.path, err, s)
	}
	return fmt.Errorf("%s stopped answering: %v", h.path, err)
}

// stop closes the helper's input and waits for it to exit; the next
// question starts another. A failed helper stays failed.
func (h *helperJudge) stop() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.cmd == nil || h.err != nil {
		return
	}
	h.in.Close()
	h.cmd.Wait()
	h.started, h.cmd, h.in, h.enc, h.dec = false, nil, nil, nil, nil
}

func (h *helperJudge) failure() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err
}

// tail keeps the last 2 KiB written to it.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if n := len(t.buf) - 2048; n > 0 {
		t.buf = t.buf[n:]
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
