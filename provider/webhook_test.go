package provider_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/fencekit/fencekit/provider"
)

var webhookSentinels = []error{
	provider.ErrWebhookUnsigned,
	provider.ErrWebhookMalformed,
	provider.ErrWebhookWrongSecret,
	provider.ErrWebhookTampered,
	provider.ErrWebhookTooOld,
	provider.ErrWebhookTooNew,
}

// wantWebhookErr fails unless err matches target and no other webhook
// sentinel (nor any refund sentinel).
func wantWebhookErr(t *testing.T, err, target error) {
	t.Helper()
	for _, s := range append(webhookSentinels, sentinels...) {
		if is := errors.Is(err, s); is != (s == target) {
			t.Errorf("error %v: errors.Is(%v) = %v", err, s, is)
		}
	}
	if target == nil && err != nil {
		t.Errorf("error %v, want nil", err)
	}
}

var (
	secret    = []byte("whsec_test_0123456789")
	signedAt  = time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	eventBody = []byte(`{"id":"evt_1","type":"refund.succeeded","created":1735732800,` +
		`"refund":{"id":"re_1","payment":"pay_1","amount":300,"currency":"EUR","reference":"op-1","status":"succeeded"}}`)
)

// hexMAC is the v1 of body signed at ts with key, computed here from the
// documented format rather than by the package.
func hexMAC(key []byte, ts string, body []byte) string {
	m := hmac.New(sha256.New, key)
	fmt.Fprintf(m, "%s.%s", ts, body)
	return hex.EncodeToString(m.Sum(nil))
}

func TestSignWebhook(t *testing.T) {
	t.Run("the header is t, the key id and the HMAC of t.body", func(t *testing.T) {
		got := provider.SignWebhook(secret, signedAt, eventBody)
		want := "t=1735732800,kid=" + provider.WebhookKeyID(secret) + ",v1=" + hexMAC(secret, "1735732800", eventBody)
		if got != want {
			t.Errorf("header %q, want %q", got, want)
		}
	})

	t.Run("the key id is an HMAC of a fixed label, different for each secret", func(t *testing.T) {
		m := hmac.New(sha256.New, secret)
		m.Write([]byte("fencekit webhook key id"))
		if got, want := provider.WebhookKeyID(secret), hex.EncodeToString(m.Sum(nil))[:16]; got != want {
			t.Errorf("key id %q, want %q", got, want)
		}
		if provider.WebhookKeyID([]byte("other")) == provider.WebhookKeyID(secret) {
			t.Error("two secrets have one key id")
		}
	})

	t.Run("an empty secret panics", func(t *testing.T) {
		defer func() {
			if recover() == nil {
				t.Error("SignWebhook signed with an empty secret")
			}
		}()
		provider.SignWebhook(nil, signedAt, eventBody)
	})
}

func TestVerifyWebhook(t *testing.T) {
	good := provider.SignWebhook(secret, signedAt, eventBody)
	kid := provider.WebhookKeyID(secret)
	v1 := hexMAC(secret, "1735732800", eventBody)
	signedWith := func(ts string, body []byte) string {
		return "t=" + ts + ",kid=" + kid + ",v1=" + hexMAC(secret, ts, body)
	}
	other := []byte("whsec_other")

	cases := []struct {
		name   string
		secret []byte
		header string
		body   []byte
		now    time.Time
		tol    time.Duration
		want   error
	}{
		{"a fresh, authentic event is accepted", secret, good, eventBody, signedAt, 0, nil},
		{"spaces around fields are tolerated", secret, "t=1735732800 , kid=" + kid + " , v1=" + v1, eventBody, signedAt, 0, nil},
		{"fields may come in any order, and unknown ones are ignored", secret, "v0=abc,v1=" + v1 + ",kid=" + kid + ",t=1735732800", eventBody, signedAt, 0, nil},
		{"upper-case hex is the same signature", secret, "t=1735732800,kid=" + strings.ToUpper(kid) + ",v1=" + strings.ToUpper(v1), eventBody, signedAt, 0, nil},
		{"signed exactly the tolerance ago is accepted", secret, good, eventBody, signedAt.Add(provider.DefaultWebhookTolerance), 0, nil},
		{"signed exactly the tolerance ahead is accepted", secret, good, eventBody, signedAt.Add(-provider.DefaultWebhookTolerance), 0, nil},

		{"no header is unsigned", secret, "", eventBody, signedAt, 0, provider.ErrWebhookUnsigned},
		{"a blank header is unsigned", secret, "  ", eventBody, signedAt, 0, provider.ErrWebhookUnsigned},

		{"a header without t is malformed", secret, "kid=" + kid + ",v1=" + v1, eventBody, signedAt, 0, provider.ErrWebhookMalformed},
		{"a header without v1 is malformed", secret, "t=1735732800,kid=" + kid, eventBody, signedAt, 0, provider.ErrWebhookMalformed},
		{"a header without kid is malformed", secret, "t=1735732800,v1=" + v1, eventBody, signedAt, 0, provider.ErrWebhookMalformed},
		{"a field without a value is malformed", secret, "t,kid=" + kid + ",v1=" + v1, eventBody, signedAt, 0, provider.ErrWebhookMalformed},
		{"a repeated t is malformed", secret, good + ",t=1735732801", eventBody, signedAt, 0, provider.ErrWebhookMalformed},
		{"a repeated v1 is malformed", secret, good + ",v1=" + v1, eventBody, signedAt, 0, provider.ErrWebhookMalformed},
		{"a t with a sign is malformed", secret, "t=+1735732800,kid=" + kid + ",v1=" + v1, eventBody, signedAt, 0, provider.ErrWebhookMalformed},
		{"a negative t is malformed", secret, "t=-5,kid=" + kid + ",v1=" + v1, eventBody, signedAt, 0, provider.ErrWebhookMalformed},
		{"a t in milliseconds too large for seconds is malformed", secret, "t=99999999999999999999,kid=" + kid + ",v1=" + v1, eventBody, signedAt, 0, provider.ErrWebhookMalformed},
		{"a v1 that is not hex is malformed", secret, "t=1735732800,kid=" + kid + ",v1=" + strings.Repeat("z", 64), eventBody, signedAt, 0, provider.ErrWebhookMalformed},
		{"a short v1 is malformed", secret, "t=1735732800,kid=" + kid + ",v1=" + v1[:62], eventBody, signedAt, 0, provider.ErrWebhookMalformed},
		{"a short kid is malformed", secret, "t=1735732800,kid=" + kid[:14] + ",v1=" + v1, eventBody, signedAt, 0, provider.ErrWebhookMalformed},

		{"another secret is refused as the wrong secret", other, good, eventBody, signedAt, 0, provider.ErrWebhookWrongSecret},
		{"a receiver without a secret refuses everything", nil, good, eventBody, signedAt, 0, provider.ErrWebhookWrongSecret},
		{"a signature by another secret under our key id is tampered", secret, "t=1735732800,kid=" + kid + ",v1=" + hexMAC(other, "1735732800", eventBody), eventBody, signedAt, 0, provider.ErrWebhookTampered},

		{"a changed body is tampered", secret, good, []byte(strings.Replace(string(eventBody), `"amount":300`, `"amount":900`, 1)), signedAt, 0, provider.ErrWebhookTampered},
		{"a body with a byte appended is tampered", secret, good, append(append([]byte{}, eventBody...), ' '), signedAt, 0, provider.ErrWebhookTampered},
		{"a refreshed t on an old signature is tampered", secret, "t=1735733000,kid=" + kid + ",v1=" + v1, eventBody, signedAt, 0, provider.ErrWebhookTampered},
		{"a changed signature is tampered", secret, "t=1735732800,kid=" + kid + ",v1=" + strings.Repeat("0", 64), eventBody, signedAt, 0, provider.ErrWebhookTampered},

		{"an authentic replay past the tolerance is too old", secret, good, eventBody, signedAt.Add(provider.DefaultWebhookTolerance + time.Second), 0, provider.ErrWebhookTooOld},
		{"the caller's tolerance applies", secret, good, eventBody, signedAt.Add(11 * time.Second), 10 * time.Second, provider.ErrWebhookTooOld},
		{"signed further ahead than the tolerance is too new", secret, good, eventBody, signedAt.Add(-provider.DefaultWebhookTolerance - time.Second), 0, provider.ErrWebhookTooNew},

		{"an authentic body that is not JSON is malformed", secret, signedWith("1735732800", []byte(`refund ok`)), []byte(`refund ok`), signedAt, 0, provider.ErrWebhookMalformed},
		{"an authentic event without an id is malformed", secret,
			signedWith("1735732800", []byte(`{"type":"refund.succeeded","created":1,"refund":{"id":"re_1","reference":"op-1","status":"succeeded"}}`)),
			[]byte(`{"type":"refund.succeeded","created":1,"refund":{"id":"re_1","reference":"op-1","status":"succeeded"}}`), signedAt, 0, provider.ErrWebhookMalformed},
		{"an authentic refund event without a refund is malformed", secret,
			signedWith("1735732800", []byte(`{"id":"evt_1","type":"refund.succeeded","created":1}`)),
			[]byte(`{"id":"evt_1","type":"refund.succeeded","created":1}`), signedAt, 0, provider.ErrWebhookMalformed},
		{"an authentic event whose status contradicts its type is malformed", secret,
			signedWith("1735732800", []byte(`{"id":"evt_1","type":"refund.succeeded","created":1,"refund":{"id":"re_1","reference":"op-1","status":"pending"}}`)),
			[]byte(`{"id":"evt_1","type":"refund.succeeded","created":1,"refund":{"id":"re_1","reference":"op-1","status":"pending"}}`), signedAt, 0, provider.ErrWebhookMalformed},
		{"an authentic event of an unknown type is returned for the receiver to ignore", secret,
			signedWith("1735732800", []byte(`{"id":"evt_9","type":"payout.paid","created":1}`)),
			[]byte(`{"id":"evt_9","type":"payout.paid","created":1}`), signedAt, 0, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := provider.VerifyWebhook(tc.secret, tc.header, tc.body, tc.now, tc.tol)
			wantWebhookErr(t, err, tc.want)
		})
	}

	t.Run("the event is parsed with its refund", func(t *testing.T) {
		ev, err := provider.VerifyWebhook(secret, good, eventBody, signedAt.Add(time.Minute), 0)
		if err != nil {
			t.Fatal(err)
		}
		if ev.ID != "evt_1" || ev.Type != provider.EventRefundSucceeded || !ev.Created.Equal(signedAt) || ev.Created.Location() != time.UTC {
			t.Errorf("event %+v, want evt_1 refund.succeeded created %v UTC", ev, signedAt)
		}
		want := provider.Refund{ProviderRefundID: "re_1", Reference: "op-1", PaymentRef: "pay_1", AmountMinor: 300, Currency: "EUR", Status: provider.StatusSucceeded}
		got := ev.Refund
		got.Raw = nil
		if !reflect.DeepEqual(got, want) {
			t.Errorf("refund %+v, want %+v", got, want)
		}
		if err := provider.Verify(req, ev.Refund); err != nil {
			t.Errorf("the event's refund does not verify against its request: %v", err)
		}
		if string(ev.Raw) != string(eventBody) || !strings.HasPrefix(string(ev.Refund.Raw), `{"id":"re_1"`) {
			t.Errorf("raw %q and refund raw %q, want the body and the refund object", ev.Raw, ev.Refund.Raw)
		}
	})

	types := []struct {
		typ    provider.EventType
		status provider.Status
	}{
		{provider.EventRefundPending, provider.StatusPending},
		{provider.EventRefundSucceeded, provider.StatusSucceeded},
		{provider.EventRefundFailed, provider.StatusRejected},
		{provider.EventRefundReversed, provider.StatusReversed},
	}
	for _, tc := range types {
		t.Run(string(tc.typ)+" carries a "+string(tc.status)+" refund", func(t *testing.T) {
			body := fmt.Appendf(nil, `{"id":"evt_2","type":%q,"created":1735732800,"refund":{"id":"re_1","payment":"pay_1","amount":300,"currency":"EUR","reference":"op-1","status":%q,"reason":"r"}}`, tc.typ, tc.status)
			ev, err := provider.VerifyWebhook(secret, provider.SignWebhook(secret, signedAt, body), body, signedAt, 0)
			if err != nil {
				t.Fatal(err)
			}
			if st, ok := ev.Type.StatusOf(); !ok || st != tc.status || ev.Refund.Status != tc.status || ev.Refund.Reason != "r" {
				t.Errorf("event %+v: StatusOf %q %v, want %q", ev, st, ok, tc.status)
			}
		})
	}
}
