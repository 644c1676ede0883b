package main

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	stripego "github.com/stripe/stripe-go/v84"

	"github.com/fencekit/fencekit/provider"
	"github.com/fencekit/fencekit/provider/stripe"
)

const (
	runStripeKey    = "sk_test_runstripe0123456789"
	runStripeSecret = "whsec_run_stripe"
)

// refundd run -provider stripe settles a refund through the Stripe adapter
// (against refundd fakeprovider -api stripe), verifies webhooks Stripe's way
// with any of the secrets of $STRIPE_WEBHOOK_SECRET, and never logs the key.
func TestRunWithStripe(t *testing.T) {
	t.Setenv(stripeKeyEnv, runStripeKey)
	t.Setenv(stripeSecretsEnv, "whsec_old_secret, "+runStripeSecret)
	t.Setenv("FENCEKIT_WEBHOOK_SECRET", "")
	dsn := migratedDSN(t)
	url := startFake(t, "-api", "stripe")
	logs := &syncBuffer{}
	r := startRunLogging(t, dsn, logs, "-scan", "10ms", "-provider", "stripe", "-provider-url", url)
	c := cli{t: t, dsn: dsn}
	c.must("enqueue", "-key", "st-run-1", "-payment", "pi_run1", "-amount", "12.50", "-currency", "EUR")
	deadline := time.Now().Add(time.Minute)
	for tick := time.NewTicker(20 * time.Millisecond); ; <-tick.C {
		if strings.Contains(c.must("jobs", "-json"), `"state": "succeeded"`) {
			break
		}
		s := c.must("jobs", "-id", "1")
		if time.Now().After(deadline) {
			t.Fatalf("the refund never settled through Stripe's adapter:\n%s", s)
		}
	}

	body := []byte(`{"id":"evt_run","object":"event","api_version":"` + stripego.APIVersion + `","created":1767225600,"type":"refund.updated",` +
		`"data":{"object":{"id":"re_1","object":"refund","amount":1250,"currency":"eur","payment_intent":"pi_run1",` +
		`"metadata":{"fencekit_operation_key":"st-run-1"},"status":"succeeded"}}}`)
	now := time.Now()
	mac := hmac.New(sha256.New, []byte(runStripeSecret))
	fmt.Fprintf(mac, "%d.%s", now.Unix(), body)
	stripeSigned := fmt.Sprintf("t=%d,v1=%s", now.Unix(), hex.EncodeToString(mac.Sum(nil)))
	postStripe := func(header string) int {
		req, _ := http.NewRequest(http.MethodPost, "http://"+r.webhooks+"/webhooks", bytes.NewReader(body))
		req.Header.Set(stripe.SignatureHeader, header)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := postStripe(stripeSigned); code != http.StatusOK {
		t.Fatalf("a webhook signed with the second of the secrets: %d, want 200", code)
	}
	if code := postStripe(strings.Replace(stripeSigned, "v1=", "v1=0", 1)); code != http.StatusUnauthorized {
		t.Fatalf("a webhook with a bad signature: %d, want 401", code)
	}
	if code := post(t, r.webhooks, body, provider.SignWebhook([]byte(runStripeSecret), now, body)); code != http.StatusUnauthorized {
		t.Fatalf("a webhook signed fencekit's way: %d, want 401", code)
	}
	if s := c.must("jobs", "-id", "1"); !strings.Contains(s, "webhook") {
		t.Fatalf("the Stripe webhook is not in the job's evidence:\n%s", s)
	}
	r.cancel()
	if err := r.wait(); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(logs.String(), runStripeKey) || !strings.Contains(logs.String(), "refundd running") {
		t.Fatalf("the logs show the key, or nothing:\n%s", logs)
	}
}

func TestRunRefusesAStripeItCannotTrust(t *testing.T) {
	// The refusals come before any connection: no database is needed, and
	// a run that started anyway would stop at once on the cancelled
	// context, with an error that names no flag.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	const dsn = "root@tcp(127.0.0.1:3306)/never_opened"
	refused := func(t *testing.T, want []string, args ...string) {
		t.Helper()
		var out bytes.Buffer
		err := run(ctx, append([]string{"run", "-dsn", dsn, "-listen", "127.0.0.1:0", "-operator-listen", "127.0.0.1:0"}, args...), &out)
		if err == nil {
			t.Fatalf("refundd run %v started", args)
		}
		for _, w := range want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("refundd run %v: %v; want it to name %s", args, err, w)
			}
		}
		if strings.Contains(err.Error(), runStripeKey) {
			t.Errorf("the error shows the key: %v", err)
		}
	}
	for _, tc := range []struct {
		name, key, secret string
		want, args        []string
	}{
		{"without a key", "", runStripeSecret, []string{"$STRIPE_API_KEY"}, nil},
		{"without a webhook secret", runStripeKey, "", []string{"$STRIPE_WEBHOOK_SECRET", "-no-webhooks"}, nil},
		{"with lookups of its own", runStripeKey, runStripeSecret, []string{"-provider-lookups"}, []string{"-provider-lookups", "reference"}},
		{"with a resend contract of its own", runStripeKey, runStripeSecret, []string{"-provider-safe-resend"}, []string{"-provider-safe-resend=false"}},
		{"with a key kept longer than Stripe keeps it", runStripeKey, runStripeSecret, []string{"-provider-key-retention", "24h0m0s"}, []string{"-provider-key-retention", "48h"}},
		{"with a URL that is not http(s)", runStripeKey, runStripeSecret, []string{"-provider-url"}, []string{"-provider-url", "api.stripe.com"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(stripeKeyEnv, tc.key)
			t.Setenv(stripeSecretsEnv, tc.secret)
			refused(t, tc.want, append([]string{"-provider", "stripe"}, tc.args...)...)
		})
	}
	t.Run("with an unknown provider", func(t *testing.T) {
		t.Setenv("FENCEKIT_WEBHOOK_SECRET", "whsec")
		refused(t, []string{"-provider", `"adyen"`}, "-provider", "adyen", "-provider-url", "http://127.0.0.1:9")
	})
}

// refundd fakeprovider -api stripe speaks Stripe's API: a payment it does
// not know is captured in -payment-currency, and a request without a key
// is refused as Stripe refuses it.
func TestFakeProviderSpeaksStripe(t *testing.T) {
	t.Parallel()
	if err := run(context.Background(), []string{"fakeprovider", "-addr", "127.0.0.1:0", "-api", "adyen"}, io.Discard); err == nil || !strings.Contains(err.Error(), "-api") {
		t.Fatalf("fakeprovider -api adyen: %v, want -api refused by name", err)
	}
	url := startFake(t, "-api", "stripe", "-payment-currency", "usd")
	c, err := stripe.New(stripe.Config{Key: "sk_test_fake", URL: url})
	if err != nil {
		t.Fatal(err)
	}
	req := provider.RefundRequest{OperationKey: "fp-st-1", PaymentRef: "pi_fp1", AmountMinor: 500, Currency: "USD"}
	if r, err := c.Refund(context.Background(), req); err != nil || r.Status != provider.StatusSucceeded {
		t.Fatalf("a refund through Stripe's API: %+v, %v", r, err)
	}
	resp, err := http.Get(url + "/v1/refunds")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a request without a key: %d, want 401", resp.StatusCode)
	}
}
