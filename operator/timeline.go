package operator

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/fencekit/fencekit/audit"
	"github.com/fencekit/fencekit/evidence"
	"github.com/fencekit/fencekit/fencedwrite"
)

// evidenceText says what a piece of evidence is, in plain words. done says
// whether the job is settled (its unprocessed evidence then waits for
// nothing).
func evidenceText(e Evidence, done bool) string {
	refund := ""
	if e.ProviderRefundID != "" {
		refund = "refund " + Visible(e.ProviderRefundID) + " "
	}
	var said string
	switch e.Status {
	case string(evidence.Succeeded):
		said = refund + "succeeded: the money moved"
	case string(evidence.Pending):
		said = refund + "pending: accepted, not paid yet"
	case string(evidence.Rejected):
		said = refund + "rejected: the provider will not pay it"
	case string(evidence.Reversed):
		said = refund + "reversed: it was paid, then the money came back to the merchant"
	case string(evidence.NotFound):
		said = "no refund found"
	case string(evidence.Conflict):
		said = refund + "a conflict (the key in use, or known with other details)"
	default:
		said = refund + Visible(e.Status)
	}
	var text string
	switch e.Source {
	case string(evidence.Webhook):
		text = "The provider's webhook: " + said
	case string(evidence.Operator):
		text = "The provider confirmed to an operator's verification: " + said
	case string(evidence.Reconcile):
		text = "A lookup found " + said
	default:
		text = "The provider answered: " + said
	}
	if e.ProcessedAt == nil && !done {
		text += " (not acted on yet)"
	}
	return text + "."
}

// auditText says what an audit entry records, in plain words.
func auditText(a AuditEntry) string {
	who := Visible(a.Operator)
	refund := Visible(a.RefundID)
	why := ""
	if a.Reason != "" {
		why = ": " + quote(a.Reason)
	}
	request := fmt.Sprintf("request %d", a.ApprovalID)
	if a.RequestedBy != "" {
		request = fmt.Sprintf("%s's request %d", Visible(a.RequestedBy), a.ApprovalID)
	}
	asked := map[string]string{
		audit.ActionResolveSucceeded: "settle it as refunded on refund " + refund,
		audit.ActionResolveReconcile: "send it back to ask the provider again",
		audit.ActionResolveRefund:    "send the refund again with the same key",
	}[a.Action]
	switch {
	case a.Action == audit.ActionWake:
		return "New evidence took it out of manual review; the worker will ask the provider again" + why
	case a.Outcome == audit.OutcomeRequested && a.RefundID != "":
		return fmt.Sprintf("%s asked a second operator to settle it on refund %s without the provider's confirmation (an override, request %d)%s", who, refund, a.ApprovalID, why)
	case a.Outcome == audit.OutcomeRequested:
		return fmt.Sprintf("%s asked a second operator to send the refund again with the same key (request %d)%s", who, a.ApprovalID, why)
	case a.Outcome == audit.OutcomeDeclined && a.Operator == a.RequestedBy:
		return fmt.Sprintf("%s withdrew request %d%s", who, a.ApprovalID, why)
	case a.Outcome == audit.OutcomeDeclined:
		return fmt.Sprintf("%s declined %s%s", who, request, why)
	case a.Outcome == audit.OutcomeStale:
		return fmt.Sprintf("%s's approval of %s was refused: the job had moved since it was asked (now %s at attempt %d); the request is closed as stale", who, request, a.StateAfter, a.AttemptAfter)
	case a.Outcome == audit.OutcomeRefused && a.ApprovalID != 0:
		return fmt.Sprintf("%s's approval of %s (to %s) was refused, and the request closed: %s", who, request, asked, strings.TrimPrefix(a.Refused, "Refused: "))
	case a.Outcome == audit.OutcomeRefused:
		return fmt.Sprintf("%s's attempt to %s was refused: %s", who, asked, strings.TrimPrefix(a.Refused, "Refused: "))
	case a.Action == audit.ActionResolveSucceeded && a.Override:
		return fmt.Sprintf("%s approved %s: settled as refunded on refund %s WITHOUT the provider's confirmation (override: unverified)%s", who, request, refund, why)
	case a.Action == audit.ActionResolveSucceeded && a.ApprovalID != 0:
		return fmt.Sprintf("%s approved %s: settled as refunded on refund %s, which the provider now confirms%s", who, request, refund, why)
	case a.Action == audit.ActionResolveSucceeded:
		return fmt.Sprintf("%s settled it as refunded on refund %s, confirmed by the provider%s", who, refund, why)
	case a.ApprovalID != 0:
		return fmt.Sprintf("%s approved %s to %s%s", who, request, asked, why)
	case a.Action == audit.ActionResolveReconcile:
		return fmt.Sprintf("%s sent it back to ask the provider again%s", who, why)
	}
	return fmt.Sprintf("%s: %s %s%s", who, a.Action, a.Outcome, why)
}

// sentAt says whether the attempt claimed at t sent the refund: a claim at
// the key's first use or its last possible send did; one after the last
// send only asked; one between them did one or the other.
func sentAt(v *JobView, a Attempt) string {
	t := *a.ClaimedAt
	switch {
	case a.Op == fencedwrite.AttemptTakeover:
		return "to ask the provider what became of the last send (a takeover never sends)"
	case v.KeyFirstUsedAt != nil && t.Equal(*v.KeyFirstUsedAt), v.LastSendAt != nil && t.Equal(*v.LastSendAt):
		return "and sent the refund request"
	case v.LastSendAt == nil || t.After(*v.LastSendAt):
		return "to ask the provider about it"
	}
	return "to send the refund again or to ask about it"
}

// timeline merges a job's history into one list in plain words, each line
// with its time on the database's clock, in a deterministic order: time,
// then kind, then id.
func timeline(v *JobView) []Event {
	evs := []Event{{At: v.CreatedAt, Kind: EventEnqueued,
		Text: fmt.Sprintf("Refund of %s to payment %s requested (reference %s).", v.Amount, Visible(v.PaymentRef), Visible(v.OperationKey))}}
	for _, a := range v.Attempts {
		if a.ClaimedAt == nil || a.Op == fencedwrite.AttemptResolution { // a resolution is the audit's entry
			continue
		}
		text := fmt.Sprintf("%s claimed it (attempt %d) %s", Visible(a.Holder), a.Attempt, sentAt(v, a))
		kind := EventClaimed
		if a.Op == fencedwrite.AttemptTakeover {
			kind = EventTakenOver
			text = fmt.Sprintf("%s took it over (attempt %d) after the lease of attempt %d expired, %s", Visible(a.Holder), a.Attempt, a.Attempt-1, sentAt(v, a))
		}
		if a.LeaseUntil != nil {
			text += "; leased until " + Stamp(*a.LeaseUntil)
		}
		evs = append(evs, Event{At: *a.ClaimedAt, Kind: kind, Attempt: a.Attempt, Text: text + "."})
	}
	for _, e := range v.Evidence {
		kind := EventEvidence
		if e.Source == string(evidence.Webhook) {
			kind = EventWebhook
		}
		evs = append(evs, Event{At: e.ReceivedAt, Kind: kind, Attempt: e.Attempt, Ref: e.ID, Text: e.Text})
		if by := supersededBy(v, e); by != nil {
			evs = append(evs, Event{At: e.ReceivedAt, Kind: EventFence, Attempt: e.Attempt, Ref: e.ID,
				Text: fmt.Sprintf("The fence refused the write-back of attempt %d (%s): attempt %d (%s by %s, %s) had replaced it. Its answer above was kept as evidence.",
					e.Attempt, Visible(v.Attempts[e.Attempt-1].Holder), by.Attempt, by.Op, Visible(by.Holder), Stamp(*by.ClaimedAt))})
		}
	}
	for _, c := range v.Calls {
		evs = append(evs, Event{At: c.AnsweredAt, Kind: EventCall, Attempt: c.Attempt, Text: callText(v, c)})
	}
	for _, a := range v.Audit {
		kind := EventAudit
		if a.Action == audit.ActionWake {
			kind = EventWoken
		}
		evs = append(evs, Event{At: a.RecordedAt, Kind: kind, Attempt: a.AttemptAfter, Ref: a.ID, Text: a.Text + "."})
	}
	if e, ok := lastWriteBack(v); ok {
		evs = append(evs, e)
	}
	if v.Ledger != nil && v.Ledger.SettledAt != nil {
		evs = append(evs, Event{At: *v.Ledger.SettledAt, Kind: EventSettled,
			Text: fmt.Sprintf("The ledger row settled: %s%s.", v.Ledger.Status, refundNamed(Visible(v.Ledger.ProviderRefundID)))})
	}
	rank := map[EventKind]int{EventEnqueued: 0, EventClaimed: 1, EventTakenOver: 2, EventCall: 3, EventEvidence: 4, EventWebhook: 5, EventFence: 6,
		EventWorker: 7, EventAudit: 8, EventWoken: 9, EventSettled: 10}
	slices.SortStableFunc(evs, func(a, b Event) int {
		if c := a.At.Compare(b.At); c != 0 {
			return c
		}
		if r := rank[a.Kind] - rank[b.Kind]; r != 0 {
			return r
		}
		return cmp.Compare(a.Ref, b.Ref)
	})
	return evs
}

// callText says what a worker's provider call asked and what came back,
// in plain words; the provider's own words (its reason, its refund id) are
// shown visible.
func callText(v *JobView, c Call) string {
	who := fmt.Sprintf("attempt %d", c.Attempt)
	if int(c.Attempt) <= len(v.Attempts) && v.Attempts[c.Attempt-1].Holder != "" {
		who = fmt.Sprintf("%s (attempt %d)", Visible(v.Attempts[c.Attempt-1].Holder), c.Attempt)
	}
	asked := who + " sent the refund request"
	if c.Kind == "lookup" {
		asked = who + " asked the provider what became of the refund"
	}
	refund := ""
	if c.ProviderRefundID != "" {
		refund = " (refund " + Visible(c.ProviderRefundID) + ")"
	}
	var came string
	switch c.Outcome {
	case "succeeded":
		came = "it answered: refunded" + refund + ", the money moved"
	case "pending":
		came = "it answered: accepted, not paid yet" + refund
	case "rejected":
		came = "it answered: rejected" + refund + ", it will not pay"
	case "not_found":
		came = "it found no refund for this reference"
	case "conflict":
		came = "it answered with a conflict on the idempotency key"
	case "rate_limited":
		came = "it refused for now (rate limited); nothing was done"
	case "already_refunded":
		came = "it answered that the payment is already refunded"
	case "refused":
		came = "it was not sent: the request failed the client's own checks"
		if c.Kind == "lookup" {
			came = "the answer failed the client's own checks (it did not match the request)"
		}
	case "no_lookup":
		came = "the provider offers no lookup that can find this refund: nothing could be asked"
	default:
		came = "no answer came back (" + oneLine(Visible(c.Detail)) + "): the outcome is unknown, the provider may have paid"
	}
	return asked + "; " + came + "."
}

// supersededBy returns the attempt that had replaced e's when e (an answer
// to a worker's own call) was recorded: the fence refused that worker's
// write-back, and the worker kept the answer as evidence.
func supersededBy(v *JobView, e Evidence) *Attempt {
	if e.Attempt < 1 || e.Attempt >= int64(len(v.Attempts)) || (e.Source != string(evidence.ProviderResponse) && e.Source != string(evidence.Reconcile)) {
		return nil
	}
	next := &v.Attempts[e.Attempt]
	if next.ClaimedAt == nil || next.ClaimedAt.After(e.ReceivedAt) || v.Attempts[e.Attempt-1].Holder == "" {
		return nil
	}
	return next
}

// lastWriteBack is the worker's last write of the job, when the job is
// where a worker put it (not an operator, not the reconciler): where it
// went and why, at the row's last change.
func lastWriteBack(v *JobView) (Event, bool) {
	if v.Attempt == 0 || v.State == fencedwrite.StateRunning {
		return Event{}, false
	}
	for _, a := range v.Audit {
		if a.Outcome == audit.OutcomeDone && a.AttemptAfter == v.Attempt {
			return Event{}, false // an operator's resolution or a wake-up put it here
		}
	}
	who := "The worker"
	if h := v.Attempts[v.Attempt-1].Holder; h != "" {
		who = Visible(h)
	}
	var text string
	switch v.State {
	case fencedwrite.StateManualReview:
		k := reasonKind(v.ReviewReason)
		text = fmt.Sprintf("%s handed it to manual review: %s", who, k.Answer)
		if k.Key == "other" {
			text += ": " + oneLine(v.ReviewReason)
		}
	case fencedwrite.StateSucceeded:
		text = fmt.Sprintf("%s settled it as refunded: the provider confirmed refund %s", who, Visible(v.ProviderRefundID))
	case fencedwrite.StateFailed:
		text = fmt.Sprintf("%s closed it as not refunded: the provider declined it (%s)", who, oneLine(v.LastError))
	case fencedwrite.StateReady:
		answer, _ := lastAnswer(v.LastError)
		if answer == "" {
			answer = "no error recorded"
		}
		next := "send it"
		if v.NextAction == fencedwrite.ActionReconcile {
			next = "ask the provider"
		}
		text = fmt.Sprintf("%s wrote back: %s; it will %s at %s", who, answer, next, stampOf(v.NextRunAt))
	}
	return Event{At: v.UpdatedAt, Kind: EventWorker, Attempt: v.Attempt, Text: text + "."}, true
}
