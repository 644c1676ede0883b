package main

import (
	"flag"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/fencekit/fencekit/provider"
)

// run (its workers and its console), resolve, approve and jobs read one
// provider configuration: the same flags, each defaulting to the same
// variable, so that an operator's verification asks what the workers can
// ask (the same lookups) and computes the same key window. A bad value is
// refused naming its flag, or its variable.
func TestOneProviderConfiguration(t *testing.T) {
	t.Setenv("FENCEKIT_PROVIDER_URL", "http://127.0.0.1:8099/v1")
	t.Setenv("FENCEKIT_PROVIDER_LOOKUPS", "refund-id")
	t.Setenv("FENCEKIT_PROVIDER_SKEW_MARGIN", "2m")
	t.Setenv("FENCEKIT_PROVIDER_TIMEOUT", "4s")
	configs := map[string]*providerConfig{}
	parse := func(name string, register func(*flag.FlagSet), p *providerConfig, args ...string) {
		t.Helper()
		fs := flag.NewFlagSet(name, flag.ContinueOnError)
		register(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		configs[name] = p
	}
	var run runFlags
	var res resolveFlags
	var app approveFlags
	var jobs jobsFlags
	parse("run", run.register, &run.providerConfig)
	parse("resolve", res.register, &res.provider)
	parse("approve", app.register, &app.provider)
	parse("jobs", jobs.register, &jobs.provider)
	want := provider.Capabilities{SafeResend: true, KeyRetention: 24 * time.Hour, LookupByRefundID: true}
	for name, p := range configs {
		caps, err := p.capabilities()
		if err != nil || caps != want || p.providerURL != "http://127.0.0.1:8099/v1" || p.claim().SkewMargin != 2*time.Minute || p.claim().ProviderTimeout != 4*time.Second {
			t.Errorf("%s reads %+v (%v), url %q, claim %+v; want the variables' %+v", name, caps, err, p.providerURL, p.claim(), want)
		}
		if err := p.check(true); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}

	for env, says := range map[string]string{
		"FENCEKIT_PROVIDER_LOOKUPS=bogus":         `-provider-lookups (from $FENCEKIT_PROVIDER_LOOKUPS) "bogus": unknown lookup "bogus"`,
		"FENCEKIT_PROVIDER_KEY_RETENTION=forever": `$FENCEKIT_PROVIDER_KEY_RETENTION "forever" (the default of -provider-key-retention): not a duration`,
		"FENCEKIT_PROVIDER_URL=ftp://psp":         `-provider-url (from $FENCEKIT_PROVIDER_URL) "ftp://psp" is not an absolute http(s) URL`,
		"FENCEKIT_PROVIDER_SAFE_RESEND=maybe":     `$FENCEKIT_PROVIDER_SAFE_RESEND "maybe" (the default of -provider-safe-resend): not true or false`,
		"FENCEKIT_PROVIDER_URL=":                  `-provider-url (or $FENCEKIT_PROVIDER_URL) is required`,
	} {
		name, value, _ := strings.Cut(env, "=")
		t.Run(env, func(t *testing.T) {
			t.Setenv(name, value)
			var r runFlags
			fs := flag.NewFlagSet("run", flag.ContinueOnError)
			r.register(fs)
			if err := fs.Parse(nil); err != nil {
				t.Fatal(err)
			}
			if err := r.providerConfig.check(true); err == nil || !strings.Contains(err.Error(), says) {
				t.Errorf("%s: %v, want an error saying %q", env, err, says)
			}
		})
	}
	// A flag given replaces a variable it could not read.
	t.Setenv("FENCEKIT_PROVIDER_KEY_RETENTION", "forever")
	var r resolveFlags
	fs := flag.NewFlagSet("resolve", flag.ContinueOnError)
	r.register(fs)
	if err := fs.Parse([]string{"-provider-key-retention", "12h"}); err != nil {
		t.Fatal(err)
	}
	if err := r.provider.check(false); err != nil || r.provider.keyRetention != 12*time.Hour {
		t.Errorf("-provider-key-retention 12h over a bad variable: %v, %v", err, r.provider.keyRetention)
	}
}

// Stripe is part of the one configuration: -provider stripe (or
// $FENCEKIT_PROVIDER=stripe) gives run, resolve, approve and jobs the same
// Stripe client, whose key only $STRIPE_API_KEY gives (refused by name
// without it, in every command), and no -provider-url is required.
func TestStripeIsOneProviderConfigurationToo(t *testing.T) {
	t.Setenv("FENCEKIT_PROVIDER", "stripe")
	t.Setenv("FENCEKIT_PROVIDER_URL", "")
	t.Setenv(stripeKeyEnv, "")
	var rf runFlags
	var res resolveFlags
	var app approveFlags
	var jobs jobsFlags
	for name, c := range map[string]struct {
		register func(*flag.FlagSet)
		p        *providerConfig
	}{"run": {rf.register, &rf.providerConfig}, "resolve": {res.register, &res.provider}, "approve": {app.register, &app.provider}, "jobs": {jobs.register, &jobs.provider}} {
		fs := flag.NewFlagSet(name, flag.ContinueOnError)
		c.register(fs)
		if err := fs.Parse(nil); err != nil {
			t.Fatal(err)
		}
		if _, err := c.p.client(); err == nil || !strings.Contains(err.Error(), "$"+stripeKeyEnv+" is empty") {
			t.Errorf("%s with -provider stripe and no key: %v, want $%s named", name, err, stripeKeyEnv)
		}
	}
	t.Setenv(stripeKeyEnv, "sk_test_one_configuration")
	fs := flag.NewFlagSet("resolve", flag.ContinueOnError)
	var r resolveFlags
	r.register(fs)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	c, err := r.provider.client()
	if err != nil || c == nil || !c.Capabilities().LookupByRefundID || c.Capabilities().KeyRetention != 24*time.Hour {
		t.Fatalf("resolve with -provider stripe: %T %v; want Stripe's client and contract", c, err)
	}
	// The commands themselves go on to the database with -provider stripe
	// and no URL (Stripe's own API), instead of asking for -provider-url.
	dsn := migratedDSN(t)
	for _, args := range [][]string{
		{"resolve", "-dsn", dsn, "-id", "1", "-as", "succeeded", "-refund-id", "re_1", "-reason", "r"},
		{"approve", "-dsn", dsn, "-id", "1", "-confirm", "re_1"},
	} {
		err := run(t.Context(), args, io.Discard)
		if err == nil || strings.Contains(err.Error(), "provider-url") {
			t.Errorf("refundd %s with -provider stripe: %v, want it to reach the job (none), not to ask for -provider-url", args[0], err)
		}
	}
	fs = flag.NewFlagSet("resolve", flag.ContinueOnError)
	r = resolveFlags{}
	r.register(fs)
	if err := fs.Parse([]string{"-provider", "adyen"}); err != nil {
		t.Fatal(err)
	}
	if err := r.provider.check(false); err == nil || !strings.Contains(err.Error(), `-provider "adyen": must be http or stripe`) {
		t.Fatalf("-provider adyen: %v", err)
	}
}
