package operator

import (
	"strings"

	"github.com/fencekit/fencekit/provider"
)

// ReasonKind is a kind of review reason: the worker's reasons (its own
// words, written for engineers) grouped by what an operator must find out,
// in plain words.
type ReasonKind struct {
	// Key names the kind in URLs and filters ("answer_lost").
	Key string `json:"key"`
	// Label is the kind in a few words, for the queue's groups.
	Label string `json:"label"`
	// Answer says what came back, as the status line does.
	Answer string `json:"answer"`
	// MayHavePaid is whether the provider may have paid for this request.
	MayHavePaid bool `json:"may_have_paid"`
	// prefixes start the worker's reasons of this kind (worker/internal/
	// decide's review reasons; TestReasonKindsKnowTheWorkersReasons).
	prefixes []string
}

// reasonKinds are the kinds of review reasons, in the order the queue
// groups them; the last is every reason no other kind knows.
var reasonKinds = []ReasonKind{
	{Key: "answer_lost", Label: "Answer lost; the provider cannot be asked",
		Answer:      "the answer was lost, and the provider offers no lookup that can find this refund",
		MayHavePaid: true, prefixes: []string{"the provider offers no lookup for this refund"}},
	{Key: "not_found", Label: "Sent; the provider does not show it",
		Answer:      "the provider does not show it after its lookup lag, which proves nothing (lookups lag, requests queue)",
		MayHavePaid: true, prefixes: []string{"not found after the lookup-lag window; resend not safe", "not found after the lookup-lag window; the observation log holds other"}},
	{Key: "refund_unseen", Label: "A refund was reported; the lookup does not show it",
		Answer:      "a refund for it was reported before, but the provider's lookup does not show it now",
		MayHavePaid: true, prefixes: []string{"not found after the lookup-lag window, but"}},
	{Key: "mismatch", Label: "The provider answered about something else",
		Answer:      "the provider answered about another payment, request, amount or currency",
		MayHavePaid: true, prefixes: []string{"the provider's answer does not match the request", "a refund the provider reports for this key does not match"}},
	{Key: "several_refunds", Label: "More than one refund for one request",
		Answer:      "the provider shows more than one refund for this request",
		MayHavePaid: true, prefixes: []string{"the provider names refund", "the provider holds several refunds"}},
	{Key: "key_reused", Label: "The request's key is known with other details",
		Answer:      "the provider holds this request's key with another payment or amount: something may have been paid for it",
		MayHavePaid: true, prefixes: []string{"the provider holds this operation key with other parameters"}},
	{Key: "refunded_elsewhere", Label: "The payment was already refunded",
		Answer:      "the provider says the payment was already refunded, by another refund, before this one was ever sent",
		MayHavePaid: false, prefixes: []string{"the provider says the payment is already refunded"}},
	{Key: "contradiction", Label: "The provider's answers contradict each other",
		Answer:      "the provider's answers contradict each other or the evidence",
		MayHavePaid: true, prefixes: []string{"the provider reports status", "the provider reports this key's refund", "the job says its key was never sent"}},
	{Key: "not_sent", Label: "Not sent: a configuration problem or a bug",
		Answer:      "nothing was sent: the request failed the worker's own checks (a configuration problem or a bug)",
		MayHavePaid: false, prefixes: []string{"the request failed the client's checks", "the lookup failed the client's checks", "unknown action", "the job's request has no operation key"}},
	{Key: "other", Label: "Other", Answer: "the worker could not decide", MayHavePaid: true},
}

// ReasonKinds returns the kinds of review reasons, in the queue's order.
func ReasonKinds() []ReasonKind { return append([]ReasonKind(nil), reasonKinds...) }

// ReasonKindOf returns the kind of a worker's review reason: the last kind
// ("other") when no kind knows it.
func ReasonKindOf(reason string) ReasonKind { return reasonKind(reason) }

// reasonKind returns the kind of a worker's review reason.
func reasonKind(reason string) ReasonKind {
	for _, k := range reasonKinds {
		for _, p := range k.prefixes {
			if strings.HasPrefix(reason, p) {
				return k
			}
		}
	}
	return reasonKinds[len(reasonKinds)-1]
}

// kindByKey returns the kind named key.
func kindByKey(key string) (ReasonKind, bool) {
	for _, k := range reasonKinds {
		if k.Key == key {
			return k, true
		}
	}
	return ReasonKind{}, false
}

// lastAnswer says, in plain words, what a rescheduled job's last provider
// call answered (the worker's last error), and whether the provider may
// have paid for that call.
func lastAnswer(lastError string) (answer string, mayHavePaid bool) {
	e := strings.ToLower(lastError)
	switch {
	case lastError == "":
		return "", false
	case strings.Contains(e, provider.ErrOutcomeUnknown.Error()):
		return "the answer was lost (a timeout, a cut connection or a provider error)", true
	case strings.Contains(e, provider.ErrRateLimited.Error()):
		return "the provider turned it away before processing it (rate limited): that call paid nothing", false
	case strings.Contains(e, provider.ErrKeyInUse.Error()):
		return "another request with the same key was in flight at the provider", true
	case strings.Contains(e, "pending at the provider"):
		return "the provider accepted it and has not paid yet (pending)", true
	case strings.HasPrefix(e, "not found, inside the provider's lookup lag"):
		return "not found yet, inside the provider's lookup lag (too early to tell)", true
	case strings.HasPrefix(e, "not found after the lookup-lag window; resending"):
		return "not found after the provider's lookup lag; the same key will be sent again inside its safe window (the provider pays a key once)", true
	case strings.HasPrefix(e, "not found, and the key was never sent"):
		return "not found, and the request was never sent", false
	case strings.Contains(e, provider.ErrAlreadyRefunded.Error()) || strings.Contains(e, "reversed"):
		return "the provider says it was already refunded: evidence that it went through", true
	case strings.Contains(e, "named no refund id"):
		return "the provider said it succeeded but named no refund id", true
	}
	return "the last call answered: " + oneLine(lastError), true
}
