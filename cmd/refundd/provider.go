package main

import (
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/fencekit/fencekit/fencedwrite"
	"github.com/fencekit/fencekit/provider"
	"github.com/fencekit/fencekit/worker"
)

// providerConfig is the one provider configuration of refundd run (its
// workers and its console) and of the operators' commands (resolve,
// approve): the same flags, each defaulting to the same environment
// variable, so that an operator's verification asks the provider exactly
// what the workers can ask (the same lookups, the same key window). Errors
// name the flag, or the variable the value came from.
type providerConfig struct {
	// kind is -provider: http or stripe (providerchoice.go).
	kind                                string
	providerURL, providerLookups        string
	safeResend                          bool
	keyRetention, lookupLag, skewMargin time.Duration
	// timeout bounds one provider call (a worker's send or lookup, an
	// operator's verification); with the retention and the skew margin it
	// makes a key's safe resend window.
	timeout time.Duration
	// fromEnv names the variables that gave a flag its value, by flag;
	// envChecks refuse a variable's value the flag could not read, unless
	// the flag was given.
	fromEnv   map[string]string
	envChecks []func() error
	// fs is the flag set the configuration was registered on, to tell a
	// flag given from its default.
	fs *flag.FlagSet
}

// The provider's variables, by flag.
var providerEnv = map[string]string{
	"provider":               "FENCEKIT_PROVIDER",
	"provider-url":           "FENCEKIT_PROVIDER_URL",
	"provider-lookups":       "FENCEKIT_PROVIDER_LOOKUPS",
	"provider-safe-resend":   "FENCEKIT_PROVIDER_SAFE_RESEND",
	"provider-key-retention": "FENCEKIT_PROVIDER_KEY_RETENTION",
	"provider-lookup-lag":    "FENCEKIT_PROVIDER_LOOKUP_LAG",
	"provider-skew-margin":   "FENCEKIT_PROVIDER_SKEW_MARGIN",
	"provider-timeout":       "FENCEKIT_PROVIDER_TIMEOUT",
}

// envValue is a flag.Value whose default is read from an environment
// variable; a value the variable holds and the flag cannot read is an error
// naming the variable (when the flag is not given, which would replace it).
type envValue struct {
	flag.Value
	bad error
}

// String is the value's text ("" for the zero envValue the flag package
// makes to tell a default from the zero value).
func (e *envValue) String() string {
	if e == nil || e.Value == nil {
		return ""
	}
	return e.Value.String()
}

// IsBoolFlag lets a boolean flag be given without a value.
func (e *envValue) IsBoolFlag() bool {
	b, ok := e.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

func (p *providerConfig) register(fs *flag.FlagSet) {
	p.fromEnv, p.fs = map[string]string{}, fs
	vars := func(name, usage string, v flag.Value) {
		env := providerEnv[name]
		ev := &envValue{Value: v}
		if s, ok := os.LookupEnv(env); ok && s != "" {
			if err := v.Set(s); err != nil {
				ev.bad = fmt.Errorf("$%s %q (the default of -%s): %w", env, s, name, err)
			}
			p.fromEnv[name] = env
		}
		fs.Var(ev, name, usage+"; $"+env+" sets the default")
		p.envChecks = append(p.envChecks, func() error {
			if flagSet(fs, name) {
				return nil
			}
			return ev.bad
		})
	}
	p.kind, p.providerLookups, p.safeResend, p.keyRetention = providerHTTP, "reference,payment,refund-id", true, 24*time.Hour
	p.skewMargin, p.timeout = fencedwrite.DefaultSkewMargin, worker.DefaultProviderTimeout
	vars("provider", providerUsage, (*stringValue)(&p.kind))
	vars("provider-url", "base URL of the payment provider's refund API, an absolute http(s) URL", (*stringValue)(&p.providerURL))
	vars("provider-lookups", "the lookups the provider offers, comma-separated: reference (by merchant reference), payment (list the payment's refunds), refund-id; a reconcile asks them in that order (with refund-id alone, a send whose answer was lost goes to manual review)",
		(*stringValue)(&p.providerLookups))
	vars("provider-safe-resend", "the provider's contract: the same key with the same parameters executes at most once while retained", (*boolValue)(&p.safeResend))
	vars("provider-key-retention", "how long the provider keeps an idempotency key", (*durationValue)(&p.keyRetention))
	vars("provider-lookup-lag", "how long a new refund may be invisible to the provider's lookups", (*durationValue)(&p.lookupLag))
	vars("provider-skew-margin", "clock difference allowed between us and the provider, taken off the key's window", (*durationValue)(&p.skewMargin))
	vars("provider-timeout", "bound of one provider call (a worker's, or an operator's verification); taken off the key's window", (*durationValue)(&p.timeout))
}

// source names where a flag's value came from, for errors.
func (p providerConfig) source(name string) string {
	if env, ok := p.fromEnv[name]; ok && !p.given(name) {
		return "-" + name + " (from $" + env + ")"
	}
	return "-" + name
}

// check refuses a configuration refundd must not use, naming the flag or
// the variable: a missing URL (when required), one that is not an absolute
// http(s) URL, an unknown lookup, negative durations.
func (p providerConfig) check(urlRequired bool) error {
	errs := []error{p.checkKind()}
	for _, e := range p.envChecks {
		if err := e(); err != nil {
			errs = append(errs, err)
		}
	}
	switch {
	case p.providerURL == "" && urlRequired:
		errs = append(errs, errors.New("-provider-url (or $FENCEKIT_PROVIDER_URL) is required: the base URL of the provider's refund API, an absolute http(s) URL such as https://psp.example/v1"))
	case p.providerURL != "":
		if err := checkProviderURL(p.providerURL); err != nil {
			errs = append(errs, fmt.Errorf("%s %w", p.source("provider-url"), err))
		}
	}
	if _, err := p.capabilities(); err != nil {
		errs = append(errs, err)
	}
	for name, d := range map[string]time.Duration{"provider-skew-margin": p.skewMargin, "provider-lookup-lag": p.lookupLag, "provider-key-retention": p.keyRetention} {
		if d < 0 {
			errs = append(errs, fmt.Errorf("%s %v: must not be negative (a negative margin would widen the key's resend window past the provider's retention)", p.source(name), d))
		}
	}
	if p.timeout <= 0 {
		errs = append(errs, fmt.Errorf("%s %v: must be positive", p.source("provider-timeout"), p.timeout))
	}
	return errors.Join(errs...)
}

// capabilities are the provider's declared contract: -provider-lookups and
// the -provider-* settings.
func (p providerConfig) capabilities() (provider.Capabilities, error) {
	caps := provider.Capabilities{SafeResend: p.safeResend, KeyRetention: p.keyRetention, LookupLag: p.lookupLag}
	for _, l := range strings.Split(p.providerLookups, ",") {
		switch strings.TrimSpace(l) {
		case "reference":
			caps.LookupByReference = true
		case "payment":
			caps.ListByPayment = true
		case "refund-id":
			caps.LookupByRefundID = true
		default:
			return caps, fmt.Errorf("%s %q: unknown lookup %q (reference, payment, refund-id)", p.source("provider-lookups"), p.providerLookups, l)
		}
	}
	return caps, nil
}

// client returns the provider's client, or nil without a URL (the
// operators' actions that need the provider then answer that it is not
// configured, naming the flag).
func (p providerConfig) client() (provider.Client, error) {
	if err := p.check(false); err != nil {
		return nil, err
	}
	if p.kind == providerStripe {
		return p.stripeClient()
	}
	if p.providerURL == "" {
		return nil, nil
	}
	caps, _ := p.capabilities() // checked
	return provider.NewHTTPClient(p.providerURL, &http.Client{}, caps), nil
}

// claim is the part of a claim's options that makes a key's resend window:
// the same for the workers and the operators.
func (p providerConfig) claim() fencedwrite.ClaimOptions {
	return fencedwrite.ClaimOptions{ProviderTimeout: p.timeout, SkewMargin: p.skewMargin}
}

// checkProviderURL accepts an absolute http or https URL with a host and
// no query or fragment: the client appends the API's paths to it.
func checkProviderURL(s string) error {
	if s == "" {
		return errors.New("-provider-url (or $FENCEKIT_PROVIDER_URL) is required: the base URL of the provider's refund API, an absolute http(s) URL such as https://psp.example/v1")
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Opaque != "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return fmt.Errorf("%q is not an absolute http(s) URL with a host and no query, fragment or credentials (such as https://psp.example/v1)", s)
	}
	return nil
}

// The flag values of providerConfig.
type (
	stringValue   string
	boolValue     bool
	durationValue time.Duration
)

func (v *stringValue) Set(s string) error { *v = stringValue(s); return nil }
func (v *stringValue) String() string {
	if v == nil {
		return ""
	}
	return string(*v)
}

func (v *boolValue) Set(s string) error {
	b, err := strconv.ParseBool(s)
	if err != nil {
		return errors.New("not true or false")
	}
	*v = boolValue(b)
	return nil
}
func (v *boolValue) String() string   { return strconv.FormatBool(v != nil && bool(*v)) }
func (v *boolValue) IsBoolFlag() bool { return true }

func (v *durationValue) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return errors.New("not a duration such as 30s or 24h")
	}
	*v = durationValue(d)
	return nil
}
func (v *durationValue) String() string {
	if v == nil {
		return "0s"
	}
	return time.Duration(*v).String()
}
