package operator

import (
	"fmt"

	"github.com/fencekit/fencekit/fencedwrite"
)

// facts are the job's facts as both front ends show them, in order, each
// derived once here: the console's table and `refundd jobs -id` print the
// same labels and values. Details that no longer hold (the last error and
// the review reason of a job that left review) are not facts: they stay in
// the timeline and the audit.
func facts(v *JobView) []Fact {
	fs := []Fact{
		{"amount", "Amount", v.Amount.String()},
		{"payment", "Payment", Visible(v.PaymentRef)},
		{"reference", "Reference (operation key)", Visible(v.OperationKey)},
		{"state", "State", stateText(v)},
	}
	if v.Unverified != nil {
		fs = append(fs, Fact{"unverified", "Unverified", v.Unverified.Text()})
	}
	if v.State == fencedwrite.StateManualReview {
		k := reasonKind(v.ReviewReason)
		fs = append(fs, Fact{"review", "Why it is here", k.Label})
		if v.OnIt != nil {
			fs = append(fs, Fact{"on-it", "On it", Visible(v.OnIt.Operator) + " since " + Stamp(v.OnIt.Since)})
		}
	}
	fs = append(fs, Fact{"sent", "Sent", v.Detail.Sent})
	if v.Detail.Answer != "" {
		fs = append(fs, Fact{"answer", "What came back", v.Detail.Answer})
	}
	fs = append(fs,
		Fact{"provider-says", "The provider says", v.Detail.ProviderSays},
		Fact{"next", "Next", v.Detail.Next},
		Fact{"refund-id", "Provider refund id", orNoneKnown(Visible(v.ProviderRefundID))},
		Fact{"ledger", "Ledger", ledgerText(v.Ledger)},
		Fact{"attempt", "Attempt", fmt.Sprintf("%d (claims, takeovers and resolutions so far)", v.Attempt)},
		Fact{"created", "Requested", Stamp(v.CreatedAt)},
	)
	return fs
}

// engineering are the worker's own words and the row's figures, for whoever
// debugs: second, on their own.
func engineering(v *JobView) []Fact {
	var fs []Fact
	if v.State == fencedwrite.StateRunning && v.LeaseUntil != nil {
		fs = append(fs, Fact{"lease", "Lease until", Stamp(*v.LeaseUntil)})
	}
	if v.State == fencedwrite.StateReady || v.State == fencedwrite.StateRunning {
		fs = append(fs, Fact{"next-action", "Next action", v.NextAction})
	}
	if v.KeyFirstUsedAt != nil {
		fs = append(fs, Fact{"key-first-used", "Key first used", Stamp(*v.KeyFirstUsedAt)})
	}
	if v.LastSendAt != nil {
		fs = append(fs, Fact{"last-send", "Last possible send", Stamp(*v.LastSendAt)})
	}
	unfinished := v.State != fencedwrite.StateSucceeded && v.State != fencedwrite.StateFailed
	if unfinished && v.LastError != "" {
		fs = append(fs, Fact{"last-error", "Last error (the worker's words)", visibleLines(v.LastError)})
	}
	if v.State == fencedwrite.StateManualReview && v.ReviewReason != "" {
		fs = append(fs, Fact{"review-reason", "Review reason (the worker's words)", visibleLines(v.ReviewReason)})
	}
	if v.ReviewEvidence != "" {
		fs = append(fs, Fact{"review-evidence", "Review notes (the worker's and operators')", visibleLines(v.ReviewEvidence)})
	}
	fs = append(fs, Fact{"updated", "Row last changed", Stamp(v.UpdatedAt)})
	return fs
}

func stateText(v *JobView) string {
	switch v.State {
	case fencedwrite.StateManualReview:
		return "in manual review since " + Stamp(v.UpdatedAt)
	case fencedwrite.StateReady:
		return "waiting: " + v.NextAction + " at " + stampOf(v.NextRunAt)
	case fencedwrite.StateRunning:
		holder := "a worker"
		if len(v.Attempts) > 0 && v.Attempts[len(v.Attempts)-1].Holder != "" {
			holder = Visible(v.Attempts[len(v.Attempts)-1].Holder)
		}
		return fmt.Sprintf("running: %s holds it (%s) until %s", holder, v.NextAction, stampOf(v.LeaseUntil))
	case fencedwrite.StateSucceeded:
		return "refunded (settled " + Stamp(v.UpdatedAt) + ")"
	case fencedwrite.StateFailed:
		return "not refunded (closed " + Stamp(v.UpdatedAt) + ")"
	}
	return Visible(v.State)
}

func ledgerText(l *LedgerRow) string {
	if l == nil {
		return "no ledger row"
	}
	s := l.Status
	if l.ProviderRefundID != "" {
		s += " (" + Visible(l.ProviderRefundID) + ")"
	}
	if l.SettledAt != nil {
		s += ", settled " + Stamp(*l.SettledAt)
	}
	return s
}

func orNoneKnown(s string) string {
	if s == "" {
		return "none known"
	}
	return s
}
