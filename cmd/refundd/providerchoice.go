package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/fencekit/fencekit/provider"
	"github.com/fencekit/fencekit/provider/stripe"
)

// The providers refundd speaks to (-provider, or $FENCEKIT_PROVIDER), in
// run (its workers and its console) and in the operators' commands alike:
// they are part of the one provider configuration (provider.go).
const (
	// providerHTTP is an API as provider.HTTPClient speaks it, at
	// -provider-url, with the contract the -provider-* flags declare: the
	// fake provider's, or a provider's that speaks it.
	providerHTTP = "http"
	// providerStripe is Stripe (provider/stripe): its contract is declared
	// in code, the key comes from $STRIPE_API_KEY.
	providerStripe = "stripe"
)

// The environment variables of -provider stripe: secrets never come from a
// flag (they would show in ps and in shell histories) and are never logged.
const (
	stripeKeyEnv     = "STRIPE_API_KEY"
	stripeSecretsEnv = "STRIPE_WEBHOOK_SECRET"
)

// providerUsage is -provider's.
const providerUsage = "the payment provider: http (the API provider.HTTPClient speaks, at -provider-url, with the -provider-* contract), " +
	"or stripe (Stripe's API: the key from $" + stripeKeyEnv + ", the webhook signing secrets from $" + stripeSecretsEnv + ", comma-separated during a roll; " +
	"-provider-url only for stripe-mock or refundd fakeprovider -api stripe; Stripe's contract is declared in code, and -provider-key-retention and -provider-lookup-lag may only make it stricter or fit a test double)"

// given reports whether the flag name was given on the command line.
func (p providerConfig) given(name string) bool {
	return p.fs != nil && flagSet(p.fs, name)
}

// secretEnv names the environment variable refundd run's webhook secret
// comes from.
func (p providerConfig) secretEnv() string {
	if p.kind == providerStripe {
		return stripeSecretsEnv
	}
	return "FENCEKIT_WEBHOOK_SECRET"
}

// checkKind refuses, naming each flag and variable: an unknown -provider;
// for stripe, no key, a -provider-lookups or -provider-safe-resend given
// (the contract is Stripe's), a -provider-key-retention longer than
// Stripe's.
func (p providerConfig) checkKind() error {
	var errs []error
	switch p.kind {
	case providerHTTP:
	case providerStripe:
		if os.Getenv(stripeKeyEnv) == "" {
			errs = append(errs, fmt.Errorf("$%s is empty: set it to the Stripe secret key (sk_…) or a restricted key with write access to refunds and read access to payment intents and charges", stripeKeyEnv))
		}
		for _, name := range []string{"provider-lookups", "provider-safe-resend"} {
			if p.given(name) {
				errs = append(errs, fmt.Errorf("-%s with -provider stripe: Stripe's lookups and its idempotency are its contract, declared in provider/stripe", name))
			}
		}
		if p.given("provider-key-retention") && (p.keyRetention <= 0 || p.keyRetention > stripe.KeyRetention) {
			errs = append(errs, fmt.Errorf("-provider-key-retention %v with -provider stripe: must be positive and at most Stripe's %v", p.keyRetention, stripe.KeyRetention))
		}
	default:
		errs = append(errs, fmt.Errorf("%s %q: must be %s or %s", p.source("provider"), p.kind, providerHTTP, providerStripe))
	}
	return errors.Join(errs...)
}

// stripeClient is Stripe's client of the configuration; checkKind has
// passed.
func (p providerConfig) stripeClient() (provider.Client, error) {
	cfg := stripe.Config{Key: os.Getenv(stripeKeyEnv), URL: p.providerURL}
	if p.given("provider-key-retention") {
		cfg.KeyRetention = p.keyRetention
	}
	if p.given("provider-lookup-lag") {
		cfg.LookupLag = p.lookupLag
	}
	return stripe.New(cfg)
}

// checkProvider refuses a provider refundd run must not start with, naming
// each flag and variable: the one configuration's checks (a -provider-url
// required for http), and no webhook secret.
func (f runFlags) checkProvider(secret string) error {
	var errs []error
	if secret == "" && !f.noWebhooks {
		errs = append(errs, fmt.Errorf("$%s is empty: set it to the provider's webhook signing secret, or pass -no-webhooks to run without the webhook endpoint", f.secretEnv()))
	}
	if err := f.providerConfig.check(f.kind != providerStripe); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// newProvider returns refundd run's provider client and the verifier of
// its webhooks (nil: fencekit's scheme with the worker's WebhookSecret).
// checkProvider has passed.
func (f runFlags) newProvider(secret string) (provider.Client, provider.WebhookVerifier, error) {
	c, err := f.client()
	if err != nil || f.kind != providerStripe {
		return c, nil, err
	}
	var secrets []string
	for s := range strings.SplitSeq(secret, ",") {
		if s = strings.TrimSpace(s); s != "" {
			secrets = append(secrets, s)
		}
	}
	return c, stripe.Webhooks{Secrets: secrets}, nil
}
