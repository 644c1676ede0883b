package chaos

import (
	"fmt"

	"github.com/fencekit/fencekit/provider"
	"github.com/fencekit/fencekit/provider/fakeprovider"
	"github.com/fencekit/fencekit/provider/stripe"
)

// The providers the fleet speaks to (Config.Provider): the fake provider's
// own API through provider.HTTPClient, or the fake taught Stripe's API
// through the real Stripe adapter (provider/stripe), with the whole fault
// mix either way.
const (
	ProviderHTTP   = "http"
	ProviderStripe = "stripe"
)

// chaosStripeKey is the fleet's Stripe key: any key will do for the fake,
// which only wants one sent.
const chaosStripeKey = "sk_test_chaos"

// fakeAPI is the API the fake provider speaks for the run's provider.
func (r *chaosRun) fakeAPI() string {
	if r.f.Provider == ProviderStripe {
		return fakeprovider.APIStripe
	}
	return fakeprovider.APIFencekit
}

// providerArgs are the fleet's refundd run flags that choose the provider:
// with Stripe, the adapter declares Stripe's contract, save the retention
// and lag of this fake, which forgets keys within a run.
func (r *chaosRun) providerArgs() []string {
	if r.f.Provider == ProviderStripe {
		return []string{"-provider", "stripe"}
	}
	return nil
}

// providerEnv is the fleet's environment for the provider: its webhook
// secret, and Stripe's key.
func (r *chaosRun) providerEnv() []string {
	if r.f.Provider == ProviderStripe {
		return []string{"STRIPE_API_KEY=" + chaosStripeKey, "STRIPE_WEBHOOK_SECRET=" + r.secret}
	}
	return []string{"FENCEKIT_WEBHOOK_SECRET=" + r.secret}
}

// paymentRef is the payment of the i-th job: a PaymentIntent for Stripe.
func (r *chaosRun) paymentRef(i int) string {
	if r.f.Provider == ProviderStripe {
		return fmt.Sprintf("pi_chaos%06d", i)
	}
	return fmt.Sprintf("pay-%06d", i)
}

// client is the chaos process's own client of the fake provider, for its
// steering and its checks: the client the fleet uses, without the faults
// of the fleet's paths.
func (r *chaosRun) client() provider.Client {
	if r.f.Provider != ProviderStripe {
		return r.srv.Client()
	}
	c, err := stripe.New(stripe.Config{Key: chaosStripeKey, URL: r.srv.URL(), KeyRetention: chaosKeyRetention, LookupLag: chaosLookupLag})
	if err != nil {
		panic("chaos: the Stripe adapter refused the harness's settings: " + err.Error()) // constants
	}
	return c
}
