package operator

import (
	"fmt"
	"strings"
	"time"

	"github.com/fencekit/fencekit/evidence"
	"github.com/fencekit/fencekit/fencedwrite"
	"github.com/fencekit/fencekit/provider"
)

// situation is what a job's status is derived from: its row, the latest
// evidence the provider gave about its request, and the audit's override
// mark. The lists and the job view fill it alike, so that a queue row and
// the job's page say the same.
type situation struct {
	JobSummary
	createdAt           time.Time
	firstSent, lastSent *time.Time
	leaseUntil          *time.Time
	lastError, review   string
	// holder is the process holding (or that last held) the job, when
	// the attempts log is read (the job view).
	holder string
	// said is the provider's latest word on the request: its latest
	// evidence (webhooks, late answers, lookups, verifications).
	said *Evidence
	// rejectedSince is a rejection received after the last send.
	rejectedSince *Evidence
	// caps is what the provider offers, when the service has one.
	caps *provider.Capabilities
	// windowEnd is when the key's safe resend window closes, when known.
	windowEnd *time.Time
	// since and age are when the job's row last changed, and how long ago
	// by the database's clock.
	since time.Time
	age   time.Duration
}

// evidenceFacts sets the provider's latest word from es (oldest first).
func (s *situation) evidenceFacts(es []Evidence) {
	for i := range es {
		e := &es[i]
		if e.Status == string(evidence.NotFound) || e.Status == string(evidence.Conflict) {
			continue
		}
		s.said = e
		if e.Status == string(evidence.Rejected) && (s.lastSent == nil || e.ReceivedAt.After(*s.lastSent)) {
			s.rejectedSince = e
		}
	}
}

// status derives the job's money-first status from what is known: what was
// sent and when, what came back, what the provider says now, whether the
// money may have moved, and what happens next.
func (s situation) status() Status {
	st := Status{Sent: s.sentText(), ProviderSays: s.saysText()}
	amount, pay := s.Amount.String(), Visible(s.PaymentRef)
	answer, mayHavePaid := s.answer()
	if s.State != fencedwrite.StateSucceeded && s.State != fencedwrite.StateFailed {
		st.Answer = answer // a settled job's last answer is history: the timeline has it
	}
	refund := Visible(s.ProviderRefundID)
	switch {
	case s.State == fencedwrite.StateSucceeded && s.Unverified != nil:
		st.Money, st.Headline = MoneyUnverified, "Refunded, UNVERIFIED"
		st.Text = fmt.Sprintf("%s to %s settled on refund %s by an override (asked by %s, approved by %s); the provider never confirmed it.",
			amount, pay, refund, Visible(s.Unverified.RequestedBy), Visible(s.Unverified.ApprovedBy))
		st.Next = "Nothing: the job is settled. The mark stays; check the refund with the provider when it can be asked."
	case s.State == fencedwrite.StateSucceeded:
		st.Money, st.Headline = MoneyRefunded, "Refunded"
		st.Text = fmt.Sprintf("%s to %s, refund %s, confirmed by the provider.", amount, pay, refund)
		st.Next = "Nothing: the job is settled."
	case s.State == fencedwrite.StateFailed:
		st.Money, st.Headline = MoneyNotRefunded, "Not refunded"
		st.Text = fmt.Sprintf("the provider declined %s to %s (%s). No money moved.", amount, pay, oneLine(s.lastError))
		st.Next = "Nothing: the job is closed. A new refund needs a new request."
	case s.said != nil && (s.said.Status == string(evidence.Succeeded) || s.said.Status == string(evidence.Reversed)):
		st.Money, st.Headline = MoneyAtProvider, "Refunded at the provider"
		st.Text = fmt.Sprintf("%s to %s: %s says refund %s %s (%s); not settled here yet. %s",
			amount, pay, s.said.source(), Visible(s.said.ProviderRefundID), s.said.Status, Stamp(s.said.ReceivedAt), s.nextText())
	case s.rejectedSince != nil:
		st.Money, st.Headline = MoneyDeclined, "Declined"
		st.Text = fmt.Sprintf("%s says the provider declined %s to %s (%s); no money moved for that send. %s",
			s.rejectedSince.source(), amount, pay, Stamp(s.rejectedSince.ReceivedAt), s.nextText())
	case s.firstSent == nil && s.lastSent == nil && s.ProviderRefundID == "" && s.said == nil:
		st.Money, st.Headline = MoneyNotSent, "Not sent"
		st.Text = fmt.Sprintf("%s to %s, nothing sent yet. No money has moved. %s", amount, pay, s.nextText())
	case s.said != nil && s.said.Status == string(evidence.Pending) || strings.Contains(s.lastError, "pending at the provider"):
		st.Money, st.Headline = MoneyPending, "Pending"
		st.Text = fmt.Sprintf("the provider accepted %s to %s%s and has not paid yet. %s", amount, pay, refundNamed(refund), s.nextText())
	case answer != "" && !mayHavePaid && s.NextAction == fencedwrite.ActionRefund && (s.firstSent == nil || s.lastSent == nil || s.firstSent.Equal(*s.lastSent)):
		// Sent once, and that send's answer says it paid nothing: the
		// worker sends again (its next action is a send only when the
		// provider certainly did not execute). An answer that paid
		// nothing to a lookup (a reconcile turned away, rate limited) says
		// nothing of the send before it: that falls to Unknown.
		st.Money, st.Headline = MoneyNotSent, "Not paid yet"
		st.Text = fmt.Sprintf("%s, tried %s: %s. No money has moved. %s", amount, s.sentShort(), answer, s.nextText())
	default:
		st.Money, st.Headline = MoneyUnknown, "Unknown"
		what := answer
		if what == "" {
			what, mayHavePaid = "no answer recorded yet", true
		}
		paid := "the provider may have paid"
		if !mayHavePaid {
			paid = "nothing shows the provider paid, and nothing proves it did not"
		}
		st.Text = fmt.Sprintf("%s sent %s, %s; %s. %s", amount, s.sentShort(), what, paid, s.nextText())
	}
	if st.Next == "" {
		st.Next = s.nextText()
	}
	if s.State == fencedwrite.StateManualReview {
		st.Options = s.options()
	}
	return st
}

func refundNamed(refund string) string {
	if refund == "" {
		return ""
	}
	return " (refund " + refund + ")"
}

// source says who said it.
func (e *Evidence) source() string {
	switch e.Source {
	case string(evidence.Webhook):
		return "the provider's webhook"
	case string(evidence.Operator):
		return "an operator's verification"
	case string(evidence.Reconcile):
		return "a lookup"
	}
	return "the provider's answer"
}

// answer says what came back from the last provider call, and whether the
// provider may have paid.
func (s situation) answer() (string, bool) {
	if s.State == fencedwrite.StateManualReview {
		k := reasonKind(s.review)
		if k.Key == "other" {
			return "the worker could not decide: " + oneLine(s.review), true
		}
		return k.Answer, k.MayHavePaid
	}
	return lastAnswer(s.lastError)
}

func (s situation) sentText() string {
	switch {
	case s.firstSent == nil && s.lastSent == nil:
		return "never"
	case s.lastSent == nil || s.firstSent != nil && s.firstSent.Equal(*s.lastSent):
		return "once, " + stampOf(coalesce(s.firstSent, s.lastSent))
	case s.firstSent == nil:
		return "last possibly " + Stamp(*s.lastSent)
	}
	return "first " + Stamp(*s.firstSent) + ", last possibly " + Stamp(*s.lastSent)
}

// sentShort is when it was last sent, for the status line.
func (s situation) sentShort() string {
	if t := coalesce(s.lastSent, s.firstSent); t != nil {
		return Stamp(*t)
	}
	return "(when is not recorded)"
}

func coalesce(ts ...*time.Time) *time.Time {
	for _, t := range ts {
		if t != nil {
			return t
		}
	}
	return nil
}

func (s situation) saysText() string {
	if s.said == nil {
		return "nothing recorded: no webhook, late answer or verification"
	}
	return fmt.Sprintf("%s at %s: refund %s %s", s.said.source(), Stamp(s.said.ReceivedAt), orNone(Visible(s.said.ProviderRefundID)), s.said.Status)
}

func orNone(s string) string {
	if s == "" {
		return "(no id)"
	}
	return s
}

// nextText says what happens next.
func (s situation) nextText() string {
	what := "send the refund"
	if s.NextAction == fencedwrite.ActionReconcile {
		what = "ask the provider about it (it never sends again)"
	}
	switch s.State {
	case fencedwrite.StateReady:
		if s.NextRunAt == nil {
			return fmt.Sprintf("The worker will %s when it is next due.", what)
		}
		return fmt.Sprintf("The worker will %s at %s.", what, Stamp(*s.NextRunAt))
	case fencedwrite.StateRunning:
		holder := "A worker"
		if s.holder != "" {
			holder = Visible(s.holder)
		}
		verb := "is sending it"
		if s.NextAction == fencedwrite.ActionReconcile {
			verb = "is asking the provider about it"
		}
		return fmt.Sprintf("%s %s now (lease until %s).", holder, verb, stampOf(s.leaseUntil))
	case fencedwrite.StateManualReview:
		if s.said != nil && s.said.Status == string(evidence.Succeeded) && s.said.ProviderRefundID != "" {
			return "Settle it on refund " + Visible(s.said.ProviderRefundID) + " once the provider confirms it belongs to this request."
		}
		return "Check reference " + Visible(s.OperationKey) + " at the provider, then decide."
	}
	return ""
}

// options are the decisions on a job in manual review, each with the facts
// it rests on.
func (s situation) options() []Option {
	key, amount, pay := Visible(s.OperationKey), s.Amount.String(), Visible(s.PaymentRef)
	settle := Option{Action: "resolve_succeeded", Title: "Settle as refunded",
		Facts: []string{fmt.Sprintf("Needs a refund id the provider confirms for request %s: payment %s, %s, succeeded.", key, pay, amount)}}
	if s.ProviderRefundID != "" {
		settle.Facts = append(settle.Facts, "The provider named refund "+Visible(s.ProviderRefundID)+" for this request before.")
	}
	if s.said != nil && s.said.ProviderRefundID != "" && s.said.ProviderRefundID != s.ProviderRefundID {
		settle.Facts = append(settle.Facts, fmt.Sprintf("%s named refund %s (%s).", capitalize(s.said.source()), Visible(s.said.ProviderRefundID), s.said.Status))
	}
	reconcile := Option{Action: "resolve_reconcile", Title: "Ask the provider again",
		Facts: []string{"The worker looks request " + key + " up again; it never sends a second refund."}}
	resend := Option{Action: "request_refund", Title: "Send it again (a second operator approves)",
		Facts: []string{"Moves money: the provider pays a key at most once, and only while it remembers the key."}}
	override := Option{Action: "request_override", Title: "Settle on your own proof (a second operator approves)",
		Facts: []string{"Only for a refund the provider cannot confirm or deny (it does not find the id, or offers no lookup for it); never for one it attributes to another payment or request.",
			"The job stays marked unverified for good, with both operators' names."}}
	if s.caps != nil {
		lookups := lookupsOf(*s.caps)
		reconcile.Facts = append(reconcile.Facts, "The provider offers lookups "+lookups+".")
		settle.Facts = append(settle.Facts, "The provider offers lookups "+lookups+".")
		if !s.caps.LookupByReference && !s.caps.ListByPayment && (!s.caps.LookupByRefundID || s.ProviderRefundID == "") {
			reconcile.Facts = append(reconcile.Facts, "None can find this request without a refund id: it will come back here.")
		}
		switch {
		case !s.caps.SafeResend:
			resend.Refused = "The provider does not promise that the same key pays once: sending again could pay twice."
		case s.windowEnd != nil:
			resend.Facts = append(resend.Facts, "The key's safe window closes at "+Stamp(*s.windowEnd)+"; after that a resend could pay twice.")
		case s.firstSent == nil:
			resend.Facts = append(resend.Facts, "The key was never sent.")
		}
	}
	switch {
	case s.rejectedSince != nil:
		resend.Facts = append(resend.Facts, fmt.Sprintf("Proof the last send paid nothing: %s at %s says rejected.", s.rejectedSince.source(), Stamp(s.rejectedSince.ReceivedAt)))
	case resend.Refused == "":
		resend.Facts = append(resend.Facts, "No proof yet that the last send paid nothing (\"not found\" proves nothing): an approval is refused until a rejection is recorded.")
	}
	if s.said != nil && (s.said.Status == string(evidence.Succeeded) || s.said.Status == string(evidence.Pending) || s.said.Status == string(evidence.Reversed)) {
		resend.Refused = fmt.Sprintf("%s says refund %s %s: the money moved or may still move.", capitalize(s.said.source()), Visible(s.said.ProviderRefundID), s.said.Status)
	}
	return []Option{settle, reconcile, resend, override}
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// lookupsOf says which lookups a provider offers.
func lookupsOf(c provider.Capabilities) string {
	var by []string
	if c.LookupByReference {
		by = append(by, "by reference")
	}
	if c.ListByPayment {
		by = append(by, "by payment")
	}
	if c.LookupByRefundID {
		by = append(by, "by refund id")
	}
	switch len(by) {
	case 0:
		return "none"
	case 1:
		return by[0] + " only"
	}
	return strings.Join(by[:len(by)-1], ", ") + " and " + by[len(by)-1]
}
