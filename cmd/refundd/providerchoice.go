package main

import (
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strings"

	"github.com/fencekit/fencekit/provider"
	"github.com/fencekit/fencekit/provider/stripe"
)

// The providers refundd run speaks to (-provider).
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

// providerChoice is refundd run's -provider, with the flag set it was
// registered on, to tell the -provider-* flags given from their defaults.
type providerChoice struct {
	kind string
	fs   *flag.FlagSet
}

func (p *providerChoice) register(fs *flag.FlagSet) {
	p.fs = fs
	fs.StringVar(&p.kind, "provider", providerHTTP, "the payment provider: http (the API provider.HTTPClient speaks, at -provider-url, with the -provider-* contract), "+
		"or stripe (Stripe's API: the key from $"+stripeKeyEnv+", the webhook signing secrets from $"+stripeSecretsEnv+", comma-separated during a roll; "+
		"-provider-url only for stripe-mock or refundd fakeprovider -api stripe; Stripe's contract is declared in code, and -provider-key-retention and -provider-lookup-lag may only make it stricter or fit a test double)")
}

// given reports whether the flag name was given on the command line.
func (p providerChoice) given(name string) bool {
	return p.fs != nil && flagSet(p.fs, name)
}

// secretEnv names the environment variable the webhook secret comes from.
func (p providerChoice) secretEnv() string {
	if p.kind == providerStripe {
		return stripeSecretsEnv
	}
	return "FENCEKIT_WEBHOOK_SECRET"
}

// checkProvider refuses a provider refundd run must not start with, naming
// each flag and variable: an unknown -provider; for http, a -provider-url
// that is not an absolute http(s) URL, bad -provider-lookups, no webhook
// secret; for stripe, no key, no webhook secret, a -provider-url that is not
// an http(s) URL, a -provider-lookups or -provider-safe-resend given (the
// contract is Stripe's), a -provider-key-retention longer than Stripe's.
func (f runFlags) checkProvider(secret string) error {
	var errs []error
	if secret == "" && !f.noWebhooks {
		errs = append(errs, fmt.Errorf("$%s is empty: set it to the provider's webhook signing secret, or pass -no-webhooks to run without the webhook endpoint", f.prov.secretEnv()))
	}
	switch f.prov.kind {
	case providerHTTP:
		// The one provider configuration (provider.go): the URL, the
		// lookups and the durations, naming the flag or its variable.
		if err := f.providerConfig.check(true); err != nil {
			errs = append(errs, err)
		}
	case providerStripe:
		if os.Getenv(stripeKeyEnv) == "" {
			errs = append(errs, fmt.Errorf("$%s is empty: set it to the Stripe secret key (sk_…) or a restricted key with write access to refunds and read access to payment intents and charges", stripeKeyEnv))
		}
		// -provider-url only for stripe-mock or the fake's Stripe API.
		if err := f.providerConfig.check(false); err != nil {
			errs = append(errs, err)
		}
		for _, name := range []string{"provider-lookups", "provider-safe-resend"} {
			if f.prov.given(name) {
				errs = append(errs, fmt.Errorf("-%s with -provider stripe: Stripe's lookups and its idempotency are its contract, declared in provider/stripe", name))
			}
		}
		if f.prov.given("provider-key-retention") && (f.keyRetention <= 0 || f.keyRetention > stripe.KeyRetention) {
			errs = append(errs, fmt.Errorf("-provider-key-retention %v with -provider stripe: must be positive and at most Stripe's %v", f.keyRetention, stripe.KeyRetention))
		}
		if f.lookupLag < 0 {
			errs = append(errs, fmt.Errorf("-provider-lookup-lag %v: must not be negative", f.lookupLag))
		}
	default:
		errs = append(errs, fmt.Errorf("-provider %q: must be %s or %s", f.prov.kind, providerHTTP, providerStripe))
	}
	return errors.Join(errs...)
}

// newProvider returns refundd run's provider client and the verifier of
// its webhooks (nil: fencekit's scheme with the worker's WebhookSecret).
// checkProvider has passed.
func (f runFlags) newProvider(secret string) (provider.Client, provider.WebhookVerifier, error) {
	if f.prov.kind != providerStripe {
		caps, err := f.capabilities()
		if err != nil {
			return nil, nil, err
		}
		return provider.NewHTTPClient(f.providerURL, &http.Client{}, caps), nil, nil
	}
	cfg := stripe.Config{Key: os.Getenv(stripeKeyEnv), URL: f.providerURL}
	if f.prov.given("provider-key-retention") {
		cfg.KeyRetention = f.keyRetention
	}
	if f.prov.given("provider-lookup-lag") {
		cfg.LookupLag = f.lookupLag
	}
	c, err := stripe.New(cfg)
	if err != nil {
		return nil, nil, err
	}
	var secrets []string
	for s := range strings.SplitSeq(secret, ",") {
		if s = strings.TrimSpace(s); s != "" {
			secrets = append(secrets, s)
		}
	}
	return c, stripe.Webhooks{Secrets: secrets}, nil
}
