package decide_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/fencekit/fencekit/evidence"
	"github.com/fencekit/fencekit/provider"
	"github.com/fencekit/fencekit/provider/stripe"
	"github.com/fencekit/fencekit/worker/internal/decide"
)

// stripeRow is one line of Stripe's table in docs/providers.md: an answer
// Stripe gives, as Stripe sends it, and the decision the worker takes on it
// through the real adapter (provider/stripe) and Decide.
type stripeRow struct {
	answer string // the table's first column, as docs/providers.md writes it
	// Stripe's answer to the refund's creation (send) or to the list of the
	// payment's refunds (reconcile): a status and a body. cut closes the
	// connection without an answer.
	status  int
	body    string
	cut     bool
	replay  bool // the answer carries Idempotent-Replayed: true
	edit    func(*decide.Input)
	kind    decide.Kind
	action  decide.Action // a Reschedule's next action
	rule    string
	reconc  bool // a reconcile's lookup, not a send
	request provider.RefundRequest
}

const stripeRefund = `{"id":"re_1","object":"refund","amount":300,"currency":"eur","payment_intent":"pi_1","charge":"ch_1","metadata":{"fencekit_operation_key":"op-1"},"status":"%s","failure_reason":%s}`

func refundJSON(status, failure string) string {
	if failure == "" {
		failure = "null"
	} else {
		failure = `"` + failure + `"`
	}
	return strings.Replace(strings.Replace(stripeRefund, "%s", status, 1), "%s", failure, 1)
}

func stripeErrJSON(typ, code, param string) string {
	s := `{"error":{"type":"` + typ + `","message":"as Stripe says it"`
	if code != "" {
		s += `,"code":"` + code + `"`
	}
	if param != "" {
		s += `,"param":"` + param + `"`
	}
	return s + `}}`
}

var stripeReq = provider.RefundRequest{OperationKey: "op-1", PaymentRef: "pi_1", AmountMinor: 300, Currency: "EUR"}

// stripeRows are Stripe's table. Sends are on a key first used a minute
// ago (a send that may have executed before) unless edited.
var stripeRows = []stripeRow{
	{answer: "refund `succeeded`", status: 200, body: refundJSON("succeeded", ""), kind: decide.Complete, rule: decide.RuleSendSucceeded},
	{answer: "refund `pending`", status: 200, body: refundJSON("pending", ""), kind: decide.Reschedule, action: decide.Reconcile, rule: decide.RuleSendPending},
	{answer: "refund `requires_action`", status: 200, body: refundJSON("requires_action", ""), kind: decide.Reschedule, action: decide.Reconcile, rule: decide.RuleSendPending},
	{answer: "refund `failed`", status: 200, body: refundJSON("failed", "lost_or_stolen_card"), kind: decide.Fail, rule: decide.RuleSendRejected},
	{answer: "refund `canceled`", status: 200, body: refundJSON("canceled", ""), kind: decide.Fail, rule: decide.RuleSendRejected},
	{answer: "a replay (`Idempotent-Replayed: true`) of `pending`", status: 200, body: refundJSON("pending", ""), replay: true, kind: decide.Reschedule, action: decide.Reconcile, rule: decide.RuleSendPending},
	{answer: "a refund for another amount, payment or key", status: 200, body: strings.Replace(refundJSON("succeeded", ""), `"amount":300`, `"amount":299`, 1), kind: decide.ManualReview, rule: decide.RuleSendMismatch},
	{answer: "429 `rate_limit`", status: 429, body: stripeErrJSON("invalid_request_error", "rate_limit", ""), kind: decide.Reschedule, action: decide.Refund, rule: decide.RuleSendRateLimited},
	{answer: "429 `lock_timeout`", status: 429, body: stripeErrJSON("invalid_request_error", "lock_timeout", ""), kind: decide.Reschedule, action: decide.Refund, rule: decide.RuleSendRateLimited},
	{answer: "409 `idempotency_key_in_use`", status: 409, body: stripeErrJSON("idempotency_error", "idempotency_key_in_use", ""), kind: decide.Reschedule, action: decide.Reconcile, rule: decide.RuleSendKeyInUse},
	{answer: "400 `idempotency_error` (the key, other parameters)", status: 400, body: stripeErrJSON("idempotency_error", "", ""), kind: decide.ManualReview, rule: decide.RuleSendKeyParamsMismatch},
	{answer: "400 `charge_already_refunded` after a send that may have executed", status: 400, body: stripeErrJSON("invalid_request_error", "charge_already_refunded", ""), kind: decide.Reschedule, action: decide.Reconcile, rule: decide.RuleSendAlreadyRefunded},
	{answer: "400 `charge_already_refunded` on the key's first send", status: 400, body: stripeErrJSON("invalid_request_error", "charge_already_refunded", ""),
		edit: func(in *decide.Input) { in.KeyFirstUsedAt = in.LastSendAt }, kind: decide.ManualReview, rule: decide.RuleSendRefundedElsewhere},
	{answer: "400 on `amount` (more than is left), or `amount_too_large`", status: 400, body: stripeErrJSON("invalid_request_error", "", "amount"), kind: decide.Reschedule, action: decide.Reconcile, rule: decide.RuleSendAlreadyRefunded},
	{answer: "400 with another code (`charge_disputed`, `resource_missing`, …)", status: 400, body: stripeErrJSON("invalid_request_error", "charge_disputed", ""), kind: decide.Fail, rule: decide.RuleSendRejected},
	{answer: "400 `parameter_*`", status: 400, body: stripeErrJSON("invalid_request_error", "parameter_unknown", "reference"), kind: decide.ManualReview, rule: decide.RuleSendInvalidRequest},
	{answer: "5xx (Stripe replays even a 500 under the key)", status: 500, body: stripeErrJSON("api_error", "", ""), kind: decide.Reschedule, action: decide.Reconcile, rule: decide.RuleSendOutcomeUnknown},
	{answer: "a timeout, a reset, a cut or truncated answer", cut: true, kind: decide.Reschedule, action: decide.Reconcile, rule: decide.RuleSendOutcomeUnknown},
	{answer: "401/403 (the key refused)", status: 401, body: stripeErrJSON("invalid_request_error", "", ""), kind: decide.Reschedule, action: decide.Reconcile, rule: decide.RuleSendOutcomeUnknown},
	{answer: "the payment in another currency, or holding less than the amount", request: provider.RefundRequest{OperationKey: "op-1", PaymentRef: "pi_1", AmountMinor: 300, Currency: "USD"},
		kind: decide.Fail, rule: decide.RuleSendRejected},

	{answer: "the payment's refunds show the key's `succeeded`", reconc: true, status: 200, body: list(refundJSON("succeeded", "")), kind: decide.Complete, rule: decide.RuleReconcileSucceeded},
	{answer: "the payment's refunds show the key's `pending` or `requires_action`", reconc: true, status: 200, body: list(refundJSON("requires_action", "")),
		kind: decide.Reschedule, action: decide.Reconcile, rule: decide.RuleReconcilePending},
	{answer: "the payment's refunds show the key's `failed` or `canceled`", reconc: true, status: 200, body: list(refundJSON("failed", "declined")), kind: decide.Fail, rule: decide.RuleReconcileRejected},
	{answer: "`failed` after the log saw it `succeeded` (a refund that failed after it succeeded)", reconc: true, status: 200, body: list(refundJSON("failed", "expired_or_canceled_card")),
		edit: func(in *decide.Input) {
			in.Evidence = []evidence.Entry{{Observation: evidence.Observation{OperationKey: "op-1", Source: evidence.Webhook, Status: evidence.Succeeded, ProviderRefundID: "re_1"}}}
		}, kind: decide.ManualReview, rule: decide.RuleReconcileRejectedVsLog},
	{answer: "nothing for the key, inside the lookup lag", reconc: true, status: 200, body: list(),
		edit: func(in *decide.Input) { in.LastSendAt = at(-10 * time.Second) }, kind: decide.Reschedule, action: decide.Reconcile, rule: decide.RuleNotFoundInLag},
	{answer: "nothing for the key, after the lag, inside the key's 24 h", reconc: true, status: 200, body: list(), kind: decide.Reschedule, action: decide.Refund, rule: decide.RuleNotFoundResend},
	{answer: "nothing for the key, after the key's 24 h", reconc: true, status: 200, body: list(),
		edit: func(in *decide.Input) { in.KeyFirstUsedAt, in.LastSendAt = at(-25*time.Hour), at(-25*time.Hour) }, kind: decide.ManualReview, rule: decide.RuleNotFoundResendUnsafe},
	{answer: "the list answers 429", reconc: true, status: 429, body: stripeErrJSON("invalid_request_error", "rate_limit", ""), kind: decide.Reschedule, action: decide.Reconcile, rule: decide.RuleLookupRateLimited},
	{answer: "the list fails (5xx, a timeout)", reconc: true, status: 503, body: stripeErrJSON("api_error", "", ""), kind: decide.Reschedule, action: decide.Reconcile, rule: decide.RuleLookupOutcomeUnknown},
}

func list(refunds ...string) string {
	return `{"object":"list","url":"/v1/refunds","has_more":false,"data":[` + strings.Join(refunds, ",") + `]}`
}

// stripeAnswering serves a payment intent pi_1 of 10.00 EUR, and answers
// the refund's creation and the refunds' list as row says.
func stripeAnswering(t *testing.T, row stripeRow) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/v1/payment_intents/") {
			io.WriteString(w, `{"id":"pi_1","object":"payment_intent","amount":1000,"amount_received":1000,"currency":"eur"}`)
			return
		}
		if row.cut {
			if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
				conn.Close()
			}
			return
		}
		if row.replay {
			w.Header().Set("Idempotent-Replayed", "true")
		}
		w.WriteHeader(row.status)
		io.WriteString(w, row.body)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// Stripe's answers decide what DESIGN.md's table says, through the real
// adapter: each row of docs/providers.md's table of Stripe, checked end to
// end from Stripe's bytes to the worker's decision.
func TestStripesAnswersDecideAsDesigned(t *testing.T) {
	for _, row := range stripeRows {
		t.Run(row.answer, func(t *testing.T) {
			c, err := stripe.New(stripe.Config{Key: "sk_test_decide", URL: stripeAnswering(t, row).URL})
			if err != nil {
				t.Fatal(err)
			}
			request := stripeReq
			if row.request != (provider.RefundRequest{}) {
				request = row.request
			}
			in := decide.Input{Action: decide.Refund, Request: request, Caps: c.Capabilities(), Now: now,
				KeyFirstUsedAt: at(-time.Minute), LastSendAt: at(-2 * time.Minute), KeyWindow: window}
			if row.reconc {
				in.Action, in.LastSendAt = decide.Reconcile, at(-10*time.Minute)
				in.KeyFirstUsedAt = in.LastSendAt
			} else {
				in.LastSendAt = at(0)
			}
			if row.edit != nil {
				row.edit(&in)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if row.reconc {
				in.Found, in.LookupErr = c.Lookup(ctx, provider.Query{OperationKey: request.OperationKey, PaymentRef: request.PaymentRef})
			} else {
				in.Sent, in.SendErr = c.Refund(ctx, request)
			}
			d := decide.Decide(in)
			if d.Kind != row.kind || d.Rule != row.rule || (d.Kind == decide.Reschedule && d.NextAction != row.action) {
				t.Fatalf("decided %s %s (%s): %s; want %s %s (%s)", d.Kind, d.NextAction, d.Rule, d.Reason, row.kind, row.action, row.rule)
			}
		})
	}
}

// docs/providers.md's table of Stripe says what the rows above decide: each
// row has its line, naming its decision and its rule.
func TestStripesTableIsTheDocs(t *testing.T) {
	doc, err := os.ReadFile("../../../docs/providers.md")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(doc), "\n")
	for _, row := range stripeRows {
		var line string
		for _, l := range lines {
			if strings.HasPrefix(l, "| "+row.answer+" |") {
				line = l
				break
			}
		}
		decision := row.kind.String()
		if row.kind == decide.Reschedule {
			decision += " " + string(row.action)
		}
		switch {
		case line == "":
			t.Errorf("docs/providers.md has no line for %q", row.answer)
		case !strings.Contains(line, "`"+row.rule+"`") || !strings.Contains(line, decision):
			t.Errorf("docs/providers.md's line for %q does not say %q and `%s`:\n%s", row.answer, decision, row.rule, line)
		}
	}
}
