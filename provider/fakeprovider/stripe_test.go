package fakeprovider_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fencekit/fencekit/provider"
	"github.com/fencekit/fencekit/provider/fakeprovider"
	"github.com/fencekit/fencekit/provider/stripe"
)

// stripeCall sends a request to a fake speaking Stripe's API, with a key,
// and returns the status, the headers and the decoded body.
func stripeCall(t *testing.T, s *fakeprovider.Server, method, path string, form url.Values, key string) (int, http.Header, map[string]any) {
	t.Helper()
	var body io.Reader
	if method == http.MethodPost {
		body = strings.NewReader(form.Encode())
	} else if len(form) > 0 {
		path += "?" + form.Encode()
	}
	req, _ := http.NewRequest(method, s.URL()+path, body)
	req.Header.Set("Authorization", "Bearer sk_test_fake")
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, out
}

func refundForm(payment, amount, key string) url.Values {
	return url.Values{"payment_intent": {payment}, "amount": {amount}, "metadata[fencekit_operation_key]": {key}}
}

func TestStripeAPI(t *testing.T) {
	start := func(t *testing.T, cfg fakeprovider.Config) *fakeprovider.Server {
		cfg.API = fakeprovider.APIStripe
		s := fakeprovider.StartWith(cfg)
		t.Cleanup(s.Close)
		s.AddPayment("pi_1", 1000, "EUR")
		return s
	}
	t.Run("a replay carries Idempotent-Replayed and the first answer", func(t *testing.T) {
		s := start(t, fakeprovider.Config{})
		code, h, first := stripeCall(t, s, http.MethodPost, "/v1/refunds", refundForm("pi_1", "300", "op-1"), "op-1")
		if code != 200 || h.Get("Idempotent-Replayed") != "" || first["status"] != "succeeded" || first["currency"] != "eur" || first["charge"] != "ch_1" {
			t.Fatalf("first answer %d %v %v", code, h, first)
		}
		code, h, again := stripeCall(t, s, http.MethodPost, "/v1/refunds", refundForm("pi_1", "300", "op-1"), "op-1")
		if code != 200 || h.Get("Idempotent-Replayed") != "true" || again["id"] != first["id"] || s.Executions("op-1") != 1 {
			t.Fatalf("replay %d %v %v, %d executions", code, h, again, s.Executions("op-1"))
		}
	})
	t.Run("Stripe's refusals in Stripe's shape", func(t *testing.T) {
		s := start(t, fakeprovider.Config{})
		for _, tc := range []struct {
			name       string
			form       url.Values
			key        string
			code       int
			typ, param string
		}{
			{"an unknown parameter", url.Values{"payment_intent": {"pi_1"}, "amount": {"1"}, "reference": {"k"}}, "k", 400, "invalid_request_error", "reference"},
			{"no payment", url.Values{"amount": {"1"}, "metadata[fencekit_operation_key]": {"k"}}, "k", 400, "invalid_request_error", "payment_intent"},
			{"a payment it does not have", refundForm("pi_nobody", "1", "k2"), "k2", 400, "invalid_request_error", "payment_intent"},
			{"more than is left", refundForm("pi_1", "1001", "k3"), "k3", 400, "invalid_request_error", "amount"},
			{"a key that is not the operation key", refundForm("pi_1", "1", "k4"), "k4-attempt-2", 400, "invalid_request_error", "metadata"},
		} {
			code, _, body := stripeCall(t, s, http.MethodPost, "/v1/refunds", tc.form, tc.key)
			e, _ := body["error"].(map[string]any)
			if code != tc.code || e["type"] != tc.typ || e["param"] != tc.param {
				t.Errorf("%s: %d %v, want %d %s on %s", tc.name, code, body, tc.code, tc.typ, tc.param)
			}
		}
		req, _ := http.NewRequest(http.MethodGet, s.URL()+"/v1/payment_intents/pi_1", nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("without a key: %d, want 401", resp.StatusCode)
		}
	})
	t.Run("the refunds of a payment, newest first, paged", func(t *testing.T) {
		s := start(t, fakeprovider.Config{})
		for _, k := range []string{"a", "b", "c"} {
			stripeCall(t, s, http.MethodPost, "/v1/refunds", refundForm("pi_1", "10", k), k)
		}
		_, _, page := stripeCall(t, s, http.MethodGet, "/v1/refunds", url.Values{"payment_intent": {"pi_1"}, "limit": {"2"}}, "")
		data := page["data"].([]any)
		if len(data) != 2 || page["has_more"] != true || data[0].(map[string]any)["id"] != "re_3" {
			t.Fatalf("first page %v", page)
		}
		_, _, next := stripeCall(t, s, http.MethodGet, "/v1/refunds", url.Values{"charge": {"ch_1"}, "limit": {"2"}, "starting_after": {"re_2"}}, "")
		if data := next["data"].([]any); len(data) != 1 || next["has_more"] != false || data[0].(map[string]any)["id"] != "re_1" {
			t.Fatalf("next page %v", next)
		}
	})
	t.Run("webhooks are Stripe's events, signed Stripe's way", func(t *testing.T) {
		secret := "whsec_fake_stripe"
		var (
			mu  sync.Mutex
			got []provider.WebhookEvent
		)
		hooks := stripe.Webhooks{Secrets: []string{secret}}
		rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			evs, err := hooks.VerifyWebhook(r.Header, body, time.Now())
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			mu.Lock()
			got = append(got, evs...)
			mu.Unlock()
		}))
		t.Cleanup(rcv.Close)
		s := start(t, fakeprovider.Config{WebhookURL: rcv.URL, WebhookSecret: []byte(secret)})
		s.Script("op-1", fakeprovider.Fault{Pending: true})
		stripeCall(t, s, http.MethodPost, "/v1/refunds", refundForm("pi_1", "300", "op-1"), "op-1")
		s.Settle("op-1")
		<-s.WebhooksSent("op-1", 3)
		for _, d := range s.WebhookDeliveries() {
			if !d.OK() {
				t.Fatalf("delivery %+v refused", d)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		var types []string
		for _, e := range got {
			types = append(types, string(e.Type))
		}
		if strings.Join(types, " ") != "refund.created charge.refunded refund.updated" ||
			got[0].Refund.Status != provider.StatusPending || got[0].Refund.Reference != "op-1" ||
			strings.Join(got[1].Payments, " ") != "ch_1 pi_1" || got[2].Refund.Status != provider.StatusSucceeded {
			t.Fatalf("events %v: %+v", types, got)
		}
	})
}
