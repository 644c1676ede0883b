package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fencekit/fencekit/ent"
	"github.com/fencekit/fencekit/internal/console"
	"github.com/fencekit/fencekit/operator"
	"github.com/fencekit/fencekit/provider"
)

// consoleFlags are refundd run's settings of the operators' console.
type consoleFlags struct {
	addr, users, authHeader, trustedProxies string
	tlsCert, tlsKey                         string
	secureCookies                           bool
	slo                                     time.Duration
	// listening, when set, is told the console's address once it serves.
	listening func(addr string)
}

func (f *consoleFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.addr, "console-addr", "", "address of the operators' console in the browser (empty: no console); a listener of its own, never -listen's")
	fs.StringVar(&f.users, "console-users", "", "the console's users file: name:role[,role]:bcrypt-hash per line (refundd console-user makes a line); roles viewer, resolver, approver")
	fs.StringVar(&f.authHeader, "console-auth-header", "", "the header in which an authenticating reverse proxy names the operator (X-Forwarded-User, say): trusted only from -console-trusted-proxies; the users file gives the roles")
	fs.StringVar(&f.trustedProxies, "console-trusted-proxies", "", "comma-separated CIDRs or addresses of the reverse proxy whose -console-auth-header is believed (the connection's peer address)")
	fs.BoolVar(&f.secureCookies, "console-secure-cookies", false, "mark the session cookie Secure although the console serves plain HTTP (behind a TLS-terminating proxy)")
	fs.StringVar(&f.tlsCert, "console-tls-cert", "", "serve the console over TLS with this certificate (PEM), with -console-tls-key")
	fs.StringVar(&f.tlsKey, "console-tls-key", "", "the private key (PEM) of -console-tls-cert")
	fs.DurationVar(&f.slo, "console-slo", console.DefaultSLO, "the age an unfinished job should never reach: the dashboard compares the oldest with it")
}

// check refuses console settings refundd run must not start with, naming
// each flag; listen and operatorListen are the other listeners' addresses.
func (f consoleFlags) check(listen, operatorListen string, noWebhooks bool) error {
	if f.addr == "" {
		for name, v := range map[string]string{"-console-users": f.users, "-console-auth-header": f.authHeader, "-console-trusted-proxies": f.trustedProxies, "-console-tls-cert": f.tlsCert, "-console-tls-key": f.tlsKey} {
			if v != "" {
				return fmt.Errorf("%s is set without -console-addr: give the console an address, or drop the flag", name)
			}
		}
		return nil
	}
	var errs []error
	if !noWebhooks && sameListener(f.addr, listen) {
		errs = append(errs, fmt.Errorf("-console-addr %q is -listen's address %q: the console needs a listener of its own, never the webhook listener, which faces the internet", f.addr, listen))
	}
	if sameListener(f.addr, operatorListen) {
		errs = append(errs, fmt.Errorf("-console-addr %q is -operator-listen's address %q: give the console a listener of its own", f.addr, operatorListen))
	}
	if f.users == "" {
		errs = append(errs, errors.New("-console-users is required with -console-addr: the operators and their roles"))
	}
	if (f.tlsCert == "") != (f.tlsKey == "") {
		errs = append(errs, errors.New("-console-tls-cert and -console-tls-key go together"))
	}
	if f.authHeader != "" && f.trustedProxies == "" {
		errs = append(errs, errors.New("-console-trusted-proxies is required with -console-auth-header: the header is believed only from those addresses"))
	}
	if f.authHeader == "" && f.trustedProxies != "" {
		errs = append(errs, errors.New("-console-trusted-proxies is set without -console-auth-header: name the header the proxy sets"))
	}
	if _, err := console.ParsePrefixes(f.trustedProxies); err != nil {
		errs = append(errs, fmt.Errorf("-console-trusted-proxies: %w", err))
	}
	if f.slo <= 0 {
		errs = append(errs, fmt.Errorf("-console-slo must be positive, got %v", f.slo))
	}
	return errors.Join(errs...)
}

// sameListener reports whether two listen addresses would share a port on
// this host: the same port, and the same host or either one every address.
// A port 0 (any free port) never collides.
func sameListener(a, b string) bool {
	ha, pa, errA := net.SplitHostPort(a)
	hb, pb, errB := net.SplitHostPort(b)
	if errA != nil || errB != nil {
		return a == b
	}
	if pa != pb || pa == "0" {
		return false
	}
	any := func(h string) bool {
		ip := net.ParseIP(h)
		return h == "" || ip != nil && ip.IsUnspecified()
	}
	if any(ha) || any(hb) {
		return true
	}
	if ha == hb {
		return true
	}
	ia, ib := net.ParseIP(ha), net.ParseIP(hb)
	return ia != nil && ib != nil && ia.Equal(ib)
}

// newConsole builds the console of refundd run on client, going through
// the operator API for every action, with the workers' provider (prov, of
// the configuration p: the same lookups, and a key's resend window with the
// workers' provider timeout and skew margin); its dashboard shows budget
// (-budget).
func (f consoleFlags) newConsole(client *ent.Client, prov provider.Client, p providerConfig, budget string, reg *prometheus.Registry, log *slog.Logger) (*console.Console, error) {
	users, err := console.LoadUsers(f.users)
	if err != nil {
		return nil, fmt.Errorf("-console-users: %w", err)
	}
	proxies, _ := console.ParsePrefixes(f.trustedProxies) // checked
	op, err := operator.New(operator.Config{Client: client, Provider: prov, LookupTimeout: p.timeout, Claim: p.claim()})
	if err != nil {
		return nil, fmt.Errorf("console: %w", err)
	}
	return console.New(console.Config{
		Client:         client,
		Operator:       op,
		Users:          users,
		AuthHeader:     f.authHeader,
		TrustedProxies: proxies,
		SecureCookies:  f.secureCookies,
		SLO:            f.slo,
		BudgetName:     budget,
		Counters:       func() console.Counters { return countersOf(reg) },
		Logger:         log,
	})
}

// countersOf reads this process's takeovers, stale writes refused and
// provider calls from its Prometheus registry.
func countersOf(reg prometheus.Gatherer) console.Counters {
	k := console.Counters{StaleWrites: map[string]float64{}, Calls: map[string]float64{}}
	mfs, err := reg.Gather()
	if err != nil {
		return k
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			label := ""
			if len(m.GetLabel()) > 0 {
				label = m.GetLabel()[0].GetValue()
			}
			v := m.GetCounter().GetValue()
			switch mf.GetName() {
			case "fencekit_takeovers_total":
				k.Takeovers += v
			case "fencekit_stale_writes_rejected_total":
				k.StaleWrites[label] += v
			case "fencekit_provider_calls_total":
				k.Calls[label] += v
			}
		}
	}
	return k
}

// listen opens the console's own listener.
func (f consoleFlags) listen() (net.Listener, error) {
	ln, err := net.Listen("tcp", f.addr)
	if err != nil {
		return nil, fmt.Errorf("listen for the console: %w", err)
	}
	return ln, nil
}

// serve serves the console on ln, over TLS with -console-tls-cert.
func (f consoleFlags) serve(srv *http.Server, ln net.Listener) error {
	if f.tlsCert != "" {
		return srv.ServeTLS(ln, f.tlsCert, f.tlsKey)
	}
	return srv.Serve(ln)
}

// consoleUser prints a users-file line for one operator, the password read
// from the first line of in (never a flag: flags show in ps and in shell
// history).
func consoleUser(fs *flag.FlagSet, args []string, in io.Reader, out io.Writer) error {
	name := fs.String("name", "", "the operator's name (letters, digits, . _ @ -)")
	role := fs.String("role", "", "comma-separated roles: viewer, resolver, approver")
	proxyOnly := fs.Bool("proxy-only", false, "no password: the operator signs in only through the authenticating proxy")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *role == "" {
		return errors.New("console-user: -role is required: viewer, resolver, approver (comma-separated)")
	}
	roles, err := console.ParseRoles(*role)
	if err != nil {
		return fmt.Errorf("console-user: -role %q: %w", *role, err)
	}
	var hash []byte
	if !*proxyOnly {
		line, err := bufio.NewReader(in).ReadString('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("console-user: read the password from stdin: %w", err)
		}
		password := strings.TrimRight(line, "\r\n")
		if password == "" {
			return errors.New("console-user: no password on stdin (or pass -proxy-only)")
		}
		if hash, err = console.HashPassword([]byte(password)); err != nil {
			return fmt.Errorf("console-user: %w", err)
		}
	}
	l, err := console.UserLine(*name, roles, hash)
	if err != nil {
		return fmt.Errorf("console-user: %w", err)
	}
	fmt.Fprintln(out, l)
	return nil
}
