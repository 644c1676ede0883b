package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/fencekit/fencekit/provider/fakeprovider"
)

// fakeFlags are the flags of refundd fakeprovider: where it listens, where
// its webhooks go, and its faults (fakeprovider.RandomFaults).
type fakeFlags struct {
	addr, webhookURL string
	api, currency    string // -api, -payment-currency
	retention, lag   time.Duration
	random           fakeprovider.RandomFaults
	rates            []rateFlag
}

// rateFlag is one fault rate's flag.
type rateFlag struct {
	name, usage string
	v           *float64
}

// check names the flag and the value of every invalid setting.
func (f fakeFlags) check() error {
	var errs []error
	for _, r := range f.rates {
		if !(*r.v >= 0 && *r.v <= 1) {
			errs = append(errs, fmt.Errorf("-%s %v: must be a rate in [0, 1]", r.name, *r.v))
		}
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"key-retention", f.retention}, {"lookup-lag", f.lag}, {"max-latency", f.random.MaxLatency}, {"pending-delay", f.random.PendingDelay},
		{"reverse-delay", f.random.ReverseDelay}, {"max-webhook-delay", f.random.MaxWebhookDelay}} {
		if d.v < 0 {
			errs = append(errs, fmt.Errorf("-%s %v: must not be negative", d.name, d.v))
		}
	}
	if f.api != fakeprovider.APIFencekit && f.api != fakeprovider.APIStripe {
		errs = append(errs, fmt.Errorf("-api %q: must be %s or %s", f.api, fakeprovider.APIFencekit, fakeprovider.APIStripe))
	}
	if len(f.currency) != 3 {
		errs = append(errs, fmt.Errorf("-payment-currency %q: must be a three-letter ISO code", f.currency))
	}
	if f.random.LookupLag > 0 && f.lag <= 0 {
		errs = append(errs, fmt.Errorf("-lag-rate %v: needs a positive -lookup-lag", f.random.LookupLag))
	}
	return errors.Join(errs...)
}

func (f *fakeFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.addr, "addr", "127.0.0.1:8090", "address to listen on")
	fs.StringVar(&f.api, "api", fakeprovider.APIFencekit, "the API it speaks: fencekit (refundd run -provider-url URL), or stripe, Stripe's refunds (refundd run -provider stripe -provider-url URL; webhooks signed Stripe's way with the first secret of $"+stripeSecretsEnv+")")
	fs.StringVar(&f.currency, "payment-currency", "eur", "with -api stripe, the currency of the payments it takes as captured (a Stripe refund names none: the payment, read first, says it)")
	fs.StringVar(&f.webhookURL, "webhook-url", "", "POST a signed webhook here for every change of a refund (refundd run's -listen, path /webhooks); signed with $FENCEKIT_WEBHOOK_SECRET")
	fs.DurationVar(&f.retention, "key-retention", fakeprovider.DefaultKeyRetention, "how long an idempotency key is kept")
	fs.DurationVar(&f.lag, "lookup-lag", 0, "the lookup lag the provider declares, and the lag of refunds -lag-rate picks")
	fs.Int64Var(&f.random.Seed, "seed", 0, "seed of the random faults")
	f.rates = []rateFlag{
		{"rate-limit", "share of refund requests refused with 429 before processing", &f.random.RateLimit},
		{"server-error", "share of refund requests refused with 503 before processing", &f.random.ServerError},
		{"cut", "share of refund requests processed, then cut without an answer", &f.random.Cut},
		{"latency", "share of answers held for up to -max-latency", &f.random.Latency},
		{"pending", "share of refunds executed as pending, decided -pending-delay later", &f.random.Pending},
		{"decline", "share of those pending refunds declined rather than settled", &f.random.Decline},
		{"lag-rate", "share of refunds invisible to lookups for -lookup-lag", &f.random.LookupLag},
		{"reverse", "share of refunds reversed -reverse-delay after they succeed", &f.random.Reverse},
		{"webhook-duplicate", "share of webhooks sent twice", &f.random.WebhookDuplicate},
		{"webhook-late", "share of webhooks held for up to -max-webhook-delay", &f.random.WebhookLate},
	}
	for _, r := range f.rates {
		fs.Float64Var(r.v, r.name, 0, r.usage+" (a rate in [0, 1])")
	}
	fs.DurationVar(&f.random.MaxLatency, "max-latency", fakeprovider.DefaultMaxLatency, "longest held answer")
	fs.DurationVar(&f.random.PendingDelay, "pending-delay", fakeprovider.DefaultPendingDelay, "how long a pending refund waits to be decided")
	fs.DurationVar(&f.random.ReverseDelay, "reverse-delay", fakeprovider.DefaultReverseDelay, "how long after its success a refund is reversed")
	fs.DurationVar(&f.random.MaxWebhookDelay, "max-webhook-delay", fakeprovider.DefaultMaxWebhookDelay, "longest held webhook")
}

// serveFake serves the fake provider on -addr until ctx ends. Any payment
// it does not know is taken as captured for its first refund's amount.
func serveFake(ctx context.Context, f fakeFlags, out io.Writer) error {
	if err := f.check(); err != nil {
		return fmt.Errorf("fakeprovider: %w", err)
	}
	cfg := fakeprovider.Config{Addr: f.addr, KeyRetention: f.retention, LookupLag: f.lag, Random: f.random, AnyPayment: true, Background: true,
		API: f.api, PaymentCurrency: f.currency}
	env, run := "FENCEKIT_WEBHOOK_SECRET", "refundd run -provider-url "
	if f.api == fakeprovider.APIStripe {
		env, run = stripeSecretsEnv, "refundd run -provider stripe -provider-url "
	}
	if f.webhookURL != "" {
		secret, _, _ := strings.Cut(os.Getenv(env), ",")
		if secret = strings.TrimSpace(secret); secret == "" {
			return fmt.Errorf("fakeprovider: -webhook-url needs $%s, the secret refundd run verifies the webhooks with", env)
		}
		cfg.WebhookURL, cfg.WebhookSecret = f.webhookURL, []byte(secret)
	}
	s, err := fakeprovider.Listen(cfg)
	if err != nil {
		return err
	}
	defer s.Close()
	fmt.Fprintf(out, "fakeprovider: serving on %s (%s's API: %s%s)\n", s.URL(), f.api, run, s.URL())
	<-ctx.Done()
	fmt.Fprintf(out, "fakeprovider: stopped\n")
	return nil
}
