package stripe_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	stripego "github.com/stripe/stripe-go/v84"

	"github.com/fencekit/fencekit/provider"
	"github.com/fencekit/fencekit/provider/stripe"
)

var webhookSentinels = []error{
	provider.ErrWebhookUnsigned, provider.ErrWebhookMalformed, provider.ErrWebhookWrongSecret,
	provider.ErrWebhookTampered, provider.ErrWebhookTooOld, provider.ErrWebhookTooNew,
}

func wantWebhookErr(t *testing.T, err, target error) {
	t.Helper()
	for _, s := range webhookSentinels {
		if is := errors.Is(err, s); is != (s == target) {
			t.Errorf("error %v: errors.Is(%v) = %v", err, s, is)
		}
	}
}

const (
	oldSecret = "whsec_old_0123456789"
	newSecret = "whsec_new_9876543210"
)

// v1 is Stripe's signature of body at t with secret, computed here from the
// documented scheme (HMAC-SHA256 of "t.body", hex), not by stripe-go.
func v1(secret string, t time.Time, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	fmt.Fprintf(m, "%d.%s", t.Unix(), body)
	return hex.EncodeToString(m.Sum(nil))
}

// signed is a Stripe-Signature header for body at t, one v1 per secret.
func signed(t time.Time, body []byte, secrets ...string) http.Header {
	parts := []string{fmt.Sprintf("t=%d", t.Unix())}
	for _, s := range secrets {
		parts = append(parts, "v1="+v1(s, t, body))
	}
	h := http.Header{}
	h.Set(stripe.SignatureHeader, strings.Join(parts, ","))
	return h
}

func event(typ, object string) []byte {
	return []byte(`{"id":"evt_1","object":"event","api_version":"` + stripego.APIVersion + `","created":1767225600,"type":"` + typ +
		`","livemode":false,"pending_webhooks":1,"data":{"object":` + object + `}}`)
}

const refundObject = `{"id":"re_1","object":"refund","amount":300,"currency":"eur","payment_intent":"pi_1","charge":"ch_1",` +
	`"metadata":{"fencekit_operation_key":"op-1"},"status":"succeeded"}`

func TestStripeWebhooksAreVerifiedStripesWay(t *testing.T) {
	now := time.Now()
	body := event("refund.updated", refundObject)
	v := stripe.Webhooks{Secrets: []string{newSecret}}
	cases := []struct {
		name   string
		v      stripe.Webhooks
		header http.Header
		body   []byte
		want   error
	}{
		{"signed with the secret: verified", v, signed(now, body, newSecret), body, nil},
		{"during a roll Stripe signs with both secrets: either one verifies", v, signed(now, body, oldSecret, newSecret), body, nil},
		{"a receiver given both secrets accepts the old one", stripe.Webhooks{Secrets: []string{newSecret, oldSecret}}, signed(now, body, oldSecret), body, nil},
		{"another secret is refused", v, signed(now, body, oldSecret), body, provider.ErrWebhookTampered},
		{"a changed body is refused", v, signed(now, body, newSecret), []byte(strings.Replace(string(body), `"amount":300`, `"amount":30000`, 1)), provider.ErrWebhookTampered},
		{"no header is refused", v, http.Header{}, body, provider.ErrWebhookUnsigned},
		{"an unreadable header is refused", v, http.Header{stripe.SignatureHeader: {"t=abc,v1=00"}}, body, provider.ErrWebhookMalformed},
		{"a header without v1 is refused", v, http.Header{stripe.SignatureHeader: {fmt.Sprintf("t=%d,v0=%s", now.Unix(), v1(newSecret, now, body))}}, body, provider.ErrWebhookTampered},
		{"a signature older than the tolerance is refused", v, signed(now.Add(-6*time.Minute), body, newSecret), body, provider.ErrWebhookTooOld},
		{"a tolerance of its own", stripe.Webhooks{Secrets: []string{newSecret}, Tolerance: time.Minute}, signed(now.Add(-2*time.Minute), body, newSecret), body, provider.ErrWebhookTooOld},
		{"a receiver without a secret refuses everything", stripe.Webhooks{}, signed(now, body, newSecret), body, provider.ErrWebhookWrongSecret},
		{"an event of another API version is refused", v, signed(now, []byte(strings.Replace(string(body), stripego.APIVersion, "2022-11-15", 1)), newSecret),
			[]byte(strings.Replace(string(body), stripego.APIVersion, "2022-11-15", 1)), provider.ErrWebhookMalformed},
		{"a signed body that is no event is refused", v, signed(now, []byte(`{"id":"x"}`), newSecret), []byte(`{"id":"x"}`), provider.ErrWebhookMalformed},
		{"refund.failed with a succeeded refund is refused", v, signed(now, event("refund.failed", refundObject), newSecret), event("refund.failed", refundObject), provider.ErrWebhookMalformed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			evs, err := tc.v.VerifyWebhook(tc.header, tc.body, now)
			wantWebhookErr(t, err, tc.want)
			if tc.want == nil && (err != nil || len(evs) != 1) {
				t.Fatalf("events %+v, %v; want one", evs, err)
			}
			if tc.want != nil && len(evs) != 0 {
				t.Fatalf("a refused request gave events %+v", evs)
			}
		})
	}
}

func TestStripeWebhookEvents(t *testing.T) {
	now := time.Now()
	v := stripe.Webhooks{Secrets: []string{newSecret}}
	verify := func(t *testing.T, body []byte) []provider.WebhookEvent {
		t.Helper()
		evs, err := v.VerifyWebhook(signed(now, body, newSecret), body, now)
		if err != nil {
			t.Fatal(err)
		}
		return evs
	}
	for typ, status := range map[string]provider.Status{"refund.created": provider.StatusSucceeded, "refund.updated": provider.StatusSucceeded} {
		t.Run(typ+" carries the refund under its operation key", func(t *testing.T) {
			body := event(typ, refundObject)
			evs := verify(t, body)
			want := provider.Refund{ProviderRefundID: "re_1", Reference: "op-1", PaymentRef: "pi_1", AmountMinor: 300, Currency: "eur",
				Status: status, Raw: []byte(refundObject)}
			if len(evs) != 1 || evs[0].ID != "evt_1" || string(evs[0].Type) != typ || !reflect.DeepEqual(evs[0].Refund, want) || string(evs[0].Raw) != string(body) {
				t.Fatalf("events %+v, want the refund %+v", evs, want)
			}
		})
	}
	t.Run("refund.failed carries a rejected refund with Stripe's reason", func(t *testing.T) {
		evs := verify(t, event("refund.failed", strings.Replace(refundObject, `"status":"succeeded"`, `"status":"failed","failure_reason":"expired_or_canceled_card"`, 1)))
		if r := evs[0].Refund; r.Status != provider.StatusRejected || r.Reason != "failed: expired_or_canceled_card" {
			t.Fatalf("refund %+v", r)
		}
	})
	t.Run("a pending or requires_action refund is pending", func(t *testing.T) {
		for _, st := range []string{"pending", "requires_action"} {
			evs := verify(t, event("refund.created", strings.Replace(refundObject, `"succeeded"`, `"`+st+`"`, 1)))
			if evs[0].Refund.Status != provider.StatusPending {
				t.Fatalf("%s: %+v", st, evs[0].Refund)
			}
		}
	})
	t.Run("a refund fencekit did not make has no operation key", func(t *testing.T) {
		evs := verify(t, event("refund.created", strings.Replace(refundObject, `{"fencekit_operation_key":"op-1"}`, `{}`, 1)))
		if evs[0].Refund.Reference != "" {
			t.Fatalf("reference %q", evs[0].Refund.Reference)
		}
	})
	t.Run("charge.refunded names the payment, by its charge and its payment intent", func(t *testing.T) {
		evs := verify(t, event("charge.refunded", `{"id":"ch_1","object":"charge","amount":1000,"amount_refunded":300,"currency":"eur","payment_intent":"pi_1"}`))
		if len(evs) != 1 || !reflect.DeepEqual(evs[0].Payments, []string{"ch_1", "pi_1"}) || evs[0].Refund.ProviderRefundID != "" {
			t.Fatalf("events %+v", evs)
		}
	})
	t.Run("other types are acknowledged and give nothing", func(t *testing.T) {
		if evs := verify(t, event("payment_intent.succeeded", `{"id":"pi_1","object":"payment_intent"}`)); len(evs) != 0 {
			t.Fatalf("events %+v", evs)
		}
	})
}
