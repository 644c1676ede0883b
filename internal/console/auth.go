package console

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// Role is what an operator may do in the console. Every signed-in operator
// may read; the roles add actions.
type Role string

// The roles.
const (
	// Viewer reads the queue, jobs, searches, the dashboard and the approvals.
	Viewer Role = "viewer"
	// Resolver resolves a job in manual review and requests an override
	// (a resolution that needs a second operator's approval).
	Resolver Role = "resolver"
	// Approver approves another operator's override request, never their own.
	Approver Role = "approver"
)

var roles = []Role{Viewer, Resolver, Approver}

// ParseRoles parses a comma-separated list of roles ("resolver,approver").
func ParseRoles(s string) ([]Role, error) {
	var out []Role
	for _, r := range strings.Split(s, ",") {
		r = strings.TrimSpace(r)
		if !slices.Contains(roles, Role(r)) {
			return nil, fmt.Errorf("unknown role %q (viewer, resolver, approver)", r)
		}
		if !slices.Contains(out, Role(r)) {
			out = append(out, Role(r))
		}
	}
	return out, nil
}

// User is one operator of the users file.
type User struct {
	Name  string
	Roles []Role
	// Hash is the bcrypt hash of the password; empty for an operator who
	// signs in only through the authenticating proxy ("-" in the file).
	Hash []byte
}

// Has reports whether u holds role r.
func (u User) Has(r Role) bool { return slices.Contains(u.Roles, r) }

// Users are the console's operators by name.
type Users map[string]User

// BcryptCost is the cost of the hashes HashPassword makes.
const BcryptCost = 12

// HashPassword returns the bcrypt hash of password for the users file, at
// BcryptCost.
func HashPassword(password []byte) ([]byte, error) {
	return hashPassword(password, BcryptCost)
}

func hashPassword(password []byte, cost int) ([]byte, error) {
	if len(password) == 0 {
		return nil, errors.New("hash password: the password is empty")
	}
	if len(password) > 72 {
		return nil, errors.New("hash password: bcrypt uses at most 72 bytes of a password; this one is longer")
	}
	h, err := bcrypt.GenerateFromPassword(password, cost)
	if err != nil {
		return nil, fmt.Errorf("hash password: %w", err)
	}
	return h, nil
}

// UserLine formats one line of the users file.
func UserLine(name string, rs []Role, hash []byte) (string, error) {
	if err := checkName(name); err != nil {
		return "", err
	}
	if len(rs) == 0 {
		return "", errors.New("-role: at least one role is required (viewer, resolver, approver)")
	}
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = string(r)
	}
	h := "-"
	if len(hash) > 0 {
		h = string(hash)
	}
	return name + ":" + strings.Join(parts, ",") + ":" + h, nil
}

func checkName(name string) error {
	if name == "" {
		return errors.New("-name: the operator's name is empty")
	}
	if len(name) > 64 {
		return fmt.Errorf("-name %q: longer than 64 bytes", name)
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("._@-", c)) {
			return fmt.Errorf("-name %q: only letters, digits and . _ @ - are allowed", name)
		}
	}
	return nil
}

// ParseUsers reads a users file: one operator per line,
//
//	name:role[,role...]:bcrypt-hash
//
// with "-" as the hash of an operator who signs in only through the
// authenticating proxy. Blank lines and lines starting with # are ignored.
// Every problem is reported with its line number; a file with any problem
// is refused whole.
func ParseUsers(r io.Reader) (Users, error) {
	users := Users{}
	var errs []error
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Split(line, ":")
		if len(f) != 3 {
			errs = append(errs, fmt.Errorf("line %d: want name:roles:hash, got %d field(s)", n, len(f)))
			continue
		}
		if err := checkName(f[0]); err != nil {
			errs = append(errs, fmt.Errorf("line %d: %s", n, strings.TrimPrefix(err.Error(), "-name ")))
			continue
		}
		rs, err := ParseRoles(f[1])
		if err != nil {
			errs = append(errs, fmt.Errorf("line %d (%s): %w", n, f[0], err))
			continue
		}
		u := User{Name: f[0], Roles: rs}
		if f[2] != "-" {
			if _, err := bcrypt.Cost([]byte(f[2])); err != nil {
				errs = append(errs, fmt.Errorf("line %d (%s): the hash is not a bcrypt hash (make one with refundd console-user): %w", n, f[0], err))
				continue
			}
			u.Hash = []byte(f[2])
		}
		if _, dup := users[u.Name]; dup {
			errs = append(errs, fmt.Errorf("line %d: %s is listed twice", n, u.Name))
			continue
		}
		users[u.Name] = u
	}
	if err := sc.Err(); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("parse users: %w", err)
	}
	return users, nil
}

// LoadUsers reads the users file at path (ParseUsers).
func LoadUsers(path string) (Users, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("load users: %w", err)
	}
	defer f.Close()
	u, err := ParseUsers(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return u, nil
}

// dummyHashes are compared against when the name is unknown, so that an
// unknown name costs the same time as a wrong password: one per bcrypt
// cost, made the first time a file with that cost needs it.
var dummyHashes sync.Map

func dummyHash(cost int) []byte {
	if h, ok := dummyHashes.Load(cost); ok {
		return h.([]byte)
	}
	h, _ := bcrypt.GenerateFromPassword([]byte("fencekit console: no such operator"), cost)
	dummyHashes.Store(cost, h)
	return h
}

// authenticate returns the user when name and password match the file.
func (us Users) authenticate(name, password string) (User, bool) {
	u, ok := us[name]
	hash := u.Hash
	if !ok || len(hash) == 0 {
		cost := BcryptCost
		for _, other := range us { // the file's cost, so that timing tells nothing
			if c, err := bcrypt.Cost(other.Hash); err == nil {
				cost = c
				break
			}
		}
		hash = dummyHash(cost)
	}
	err := bcrypt.CompareHashAndPassword(hash, []byte(password))
	return u, ok && len(u.Hash) > 0 && err == nil
}

// ParsePrefixes parses -console-trusted-proxies: comma-separated CIDRs or
// single addresses.
func ParsePrefixes(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if !strings.Contains(p, "/") {
			a, err := netip.ParseAddr(p)
			if err != nil {
				return nil, fmt.Errorf("%q is neither a CIDR nor an address: %w", p, err)
			}
			out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
			continue
		}
		pf, err := netip.ParsePrefix(p)
		if err != nil {
			return nil, fmt.Errorf("%q is not a CIDR: %w", p, err)
		}
		out = append(out, pf.Masked())
	}
	return out, nil
}

// remoteAddr is the address of the peer of the connection, never a header.
func remoteAddr(r *http.Request) (netip.Addr, bool) {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	a, err := netip.ParseAddr(host)
	return a.Unmap(), err == nil
}

func trusted(prefixes []netip.Prefix, r *http.Request) bool {
	a, ok := remoteAddr(r)
	if !ok {
		return false
	}
	for _, p := range prefixes {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// limiter refuses a sign-in for a name from an address after MaxFailures
// failures within FailureWindow, until the window has passed.
type limiter struct {
	mu    sync.Mutex
	now   func() time.Time
	fails map[string][]time.Time
}

// The sign-in limit, per operator name and client address.
const (
	MaxFailures   = 5
	FailureWindow = 15 * time.Minute
	// maxLimited bounds the name-and-address pairs the limit remembers.
	maxLimited = 100_000
)

func (l *limiter) key(name string, r *http.Request) string {
	a, _ := remoteAddr(r)
	return name + "\x00" + a.String()
}

// blocked reports whether key has used up its failures, and until when.
func (l *limiter) blocked(key string) (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	recent := l.recent(key)
	if len(recent) < MaxFailures {
		return time.Time{}, false
	}
	return recent[0].Add(FailureWindow), true
}

func (l *limiter) fail(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.fails[key] = append(l.recent(key), l.now())
	if len(l.fails) > maxLimited { // bound the memory and the sweeps an attacker can make us spend
		for k := range l.fails {
			l.recent(k) // drops k when its failures are old
		}
		for k := range l.fails { // still full: forget some at random
			if len(l.fails) <= maxLimited*9/10 {
				break
			}
			delete(l.fails, k)
		}
	}
}

func (l *limiter) succeed(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.fails, key)
}

// recent drops the failures older than the window. l.mu is held.
func (l *limiter) recent(key string) []time.Time {
	cut := l.now().Add(-FailureWindow)
	f := l.fails[key]
	i := 0
	for i < len(f) && !f[i].After(cut) {
		i++
	}
	f = f[i:]
	if len(f) == 0 {
		delete(l.fails, key)
		return nil
	}
	l.fails[key] = f
	return f
}
