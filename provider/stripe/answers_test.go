package stripe

import (
	"errors"
	"fmt"
	"net/http"
	"testing"

	stripego "github.com/stripe/stripe-go/v84"
	"pgregory.net/rapid"

	"github.com/fencekit/fencekit/provider"
)

// matched returns the sentinels err matches.
func matched(err error) []error {
	var out []error
	for _, s := range provider.Sentinels() {
		if errors.Is(err, s) {
			out = append(out, s)
		}
	}
	return out
}

func stripeErr(status int, typ stripego.ErrorType, code stripego.ErrorCode, param string) *stripego.Error {
	return &stripego.Error{HTTPStatusCode: status, Type: typ, Code: code, Param: param, Msg: "message"}
}

// Each Stripe answer to a refund's creation means one thing, DESIGN.md's
// table read in Stripe's words.
func TestSendErrorsMeanWhatStripeSays(t *testing.T) {
	const invalid = stripego.ErrorTypeInvalidRequest
	cases := []struct {
		name string
		err  error
		want error
	}{
		{"429 is refused before processing: the same key later", stripeErr(429, invalid, stripego.ErrorCodeRateLimit, ""), provider.ErrRateLimited},
		{"a 429 lock timeout too", stripeErr(429, invalid, stripego.ErrorCodeLockTimeout, ""), provider.ErrRateLimited},
		{"409 idempotency_key_in_use: the first request still runs", stripeErr(409, stripego.ErrorTypeIdempotency, stripego.ErrorCodeIdempotencyKeyInUse, ""), provider.ErrKeyInUse},
		{"any 409 conflicts with another request", stripeErr(409, invalid, "", ""), provider.ErrKeyInUse},
		{"400 idempotency_error: the key holds other parameters", stripeErr(400, stripego.ErrorTypeIdempotency, "", ""), provider.ErrKeyParamsMismatch},
		{"charge_already_refunded is evidence, not a failure", stripeErr(400, invalid, stripego.ErrorCodeChargeAlreadyRefunded, ""), provider.ErrAlreadyRefunded},
		{"amount_too_large is evidence, not a failure", stripeErr(400, invalid, stripego.ErrorCodeAmountTooLarge, "amount"), provider.ErrAlreadyRefunded},
		{"more than is left to refund (param amount) is evidence", stripeErr(400, invalid, "", "amount"), provider.ErrAlreadyRefunded},
		{"amount_too_small is a rejection", stripeErr(400, invalid, stripego.ErrorCodeAmountTooSmall, "amount"), provider.ErrRejected},
		{"500 is an unknown outcome", stripeErr(500, stripego.ErrorTypeAPI, "", ""), provider.ErrOutcomeUnknown},
		{"503 is an unknown outcome", stripeErr(503, stripego.ErrorTypeAPI, "", ""), provider.ErrOutcomeUnknown},
		{"a refused key is no answer about the refund", stripeErr(401, invalid, "", ""), provider.ErrOutcomeUnknown},
		{"a key without the right is no answer either", stripeErr(403, invalid, "", ""), provider.ErrOutcomeUnknown},
		{"a refused shape is this client's bug", stripeErr(400, invalid, stripego.ErrorCodeParameterUnknown, "reference"), provider.ErrInvalidRequest},
		{"charge_disputed is a definitive rejection", stripeErr(400, invalid, stripego.ErrorCodeChargeDisputed, ""), provider.ErrRejected},
		{"a payment Stripe does not have is a rejection", stripeErr(400, invalid, stripego.ErrorCodeResourceMissing, "payment_intent"), provider.ErrRejected},
		{"a 400 without a code or param cannot be read", stripeErr(400, invalid, "", ""), provider.ErrOutcomeUnknown},
		{"a transport error is an unknown outcome", fmt.Errorf("Post: %w", errors.New("connection reset by peer")), provider.ErrOutcomeUnknown},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := sendError(tc.err)
			if m := matched(got); len(m) != 1 || m[0] != tc.want {
				t.Fatalf("sendError(%v) = %v, matching %v; want exactly %v", tc.err, got, m, tc.want)
			}
		})
	}
}

// Whatever Stripe answers, the classification matches exactly one
// sentinel, and it never claims more than the answer proves: a 5xx or no
// answer is never a rejection (the job would fail while the refund may have
// executed), and only an idempotency error says the key holds other
// parameters.
func TestSendErrorNeverClaimsMoreThanTheAnswer(t *testing.T) {
	codes := []stripego.ErrorCode{"", stripego.ErrorCodeRateLimit, stripego.ErrorCodeLockTimeout, stripego.ErrorCodeIdempotencyKeyInUse,
		stripego.ErrorCodeChargeAlreadyRefunded, stripego.ErrorCodeAmountTooLarge, stripego.ErrorCodeAmountTooSmall,
		stripego.ErrorCodeChargeDisputed, stripego.ErrorCodeResourceMissing, stripego.ErrorCodeParameterUnknown, "something_new"}
	types := []stripego.ErrorType{"", stripego.ErrorTypeAPI, stripego.ErrorTypeCard, stripego.ErrorTypeIdempotency, stripego.ErrorTypeInvalidRequest, "new_type"}
	rapid.Check(t, func(t *rapid.T) {
		se := stripeErr(
			rapid.SampledFrom([]int{400, 401, 402, 403, 404, 409, 422, 424, 429, 500, 502, 503, 504}).Draw(t, "status"),
			rapid.SampledFrom(types).Draw(t, "type"),
			rapid.SampledFrom(codes).Draw(t, "code"),
			rapid.SampledFrom([]string{"", "amount", "payment_intent", "metadata"}).Draw(t, "param"))
		got := sendError(se)
		m := matched(got)
		if len(m) != 1 {
			t.Fatalf("%+v: %v matches %v, want exactly one sentinel", se, got, m)
		}
		switch {
		case se.HTTPStatusCode >= 500 && m[0] != provider.ErrOutcomeUnknown:
			t.Fatalf("%d: %v, want an unknown outcome: the refund may have executed", se.HTTPStatusCode, m[0])
		case se.HTTPStatusCode == http.StatusTooManyRequests && m[0] != provider.ErrRateLimited:
			t.Fatalf("429: %v, want rate limited", m[0])
		case m[0] == provider.ErrKeyParamsMismatch && se.Type != stripego.ErrorTypeIdempotency:
			t.Fatalf("%+v read as another key's parameters", se)
		case m[0] == provider.ErrRejected && se.Code == "":
			t.Fatalf("%+v read as a definitive rejection without Stripe's reason", se)
		}
	})
}

// The refund statuses of Stripe's documentation, and nothing else.
func TestRefundStatuses(t *testing.T) {
	for status, want := range map[stripego.RefundStatus]provider.Status{
		"succeeded": provider.StatusSucceeded, "pending": provider.StatusPending, "requires_action": provider.StatusPending,
		"failed": provider.StatusRejected, "canceled": provider.StatusRejected,
	} {
		r, err := refundOf(&stripego.Refund{ID: "re_1", Status: status}, anyPayment, nil)
		if err != nil || r.Status != want {
			t.Errorf("%s: %v, %v; want %s", status, r.Status, err, want)
		}
	}
	for _, status := range []stripego.RefundStatus{"", "processing", "SUCCEEDED"} {
		if _, err := refundOf(&stripego.Refund{ID: "re_1", Status: status}, anyPayment, nil); !errors.Is(err, provider.ErrOutcomeUnknown) {
			t.Errorf("status %q: %v, want an unknown outcome", status, err)
		}
	}
}
