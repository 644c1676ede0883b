package operator

import (
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/fencekit/fencekit/evidence"
	"github.com/fencekit/fencekit/fencedwrite"
	"github.com/fencekit/fencekit/provider"
)

// The status line never claims more than the facts prove, whatever the
// job's state, sends, evidence and last answer:
//   - "refunded" only for a job settled as succeeded (unverified exactly
//     when settled by an override), "not refunded" only for a failed job;
//   - a job whose request was sent and that nothing settles is never said
//     to have moved no money, unless its one send's answer says so;
//   - evidence of success is never hidden behind "unknown";
//   - a job in manual review always says what to check and offers the four
//     decisions, each with the facts it rests on;
//   - amounts are in major units with the currency.
func TestStatusNeverClaimsMoreThanTheFacts(t *testing.T) {
	t0 := time.Date(2026, 12, 5, 23, 24, 24, 0, time.UTC)
	rapid.Check(t, func(t *rapid.T) {
		at := func(label string) *time.Time {
			if !rapid.Bool().Draw(t, label+" set") {
				return nil
			}
			v := t0.Add(time.Duration(rapid.IntRange(0, 3600).Draw(t, label)) * time.Second)
			return &v
		}
		s := situation{
			JobSummary: JobSummary{ID: 1, OperationKey: "try-1", PaymentRef: "pay-5",
				Amount:           Amount{rapid.Int64Range(1, 1e9).Draw(t, "minor"), rapid.SampledFrom([]string{"EUR", "JPY", "KWD"}).Draw(t, "currency")},
				State:            rapid.SampledFrom([]string{fencedwrite.StateReady, fencedwrite.StateRunning, fencedwrite.StateManualReview, fencedwrite.StateSucceeded, fencedwrite.StateFailed}).Draw(t, "state"),
				NextAction:       rapid.SampledFrom([]string{fencedwrite.ActionRefund, fencedwrite.ActionReconcile}).Draw(t, "next action"),
				ProviderRefundID: rapid.SampledFrom([]string{"", "re_3"}).Draw(t, "refund id")},
			firstSent: at("first send"), lastSent: at("last send"), leaseUntil: at("lease"),
			lastError: rapid.SampledFrom([]string{"", `send refund: provider outcome unknown: Post "http://127.0.0.1:8099/v1/refunds": EOF`,
				"send refund: provider rate limited the request", "refund pending at the provider", "rejected: charge_disputed: x"}).Draw(t, "last error"),
			review: rapid.SampledFrom([]string{"the provider offers no lookup for this refund: it cannot be reconciled (x)",
				"not found after the lookup-lag window; resend not safe: x", "the provider says the payment is already refunded, but x", "something new"}).Draw(t, "review reason"),
		}
		if s.State == fencedwrite.StateReady {
			s.NextRunAt = at("due")
		}
		if s.State == fencedwrite.StateSucceeded && rapid.Bool().Draw(t, "override") {
			s.Unverified = &Unverified{RefundID: "re_3", RequestedBy: "rita", ApprovedBy: "amy", At: t0}
		}
		var es []Evidence
		for i := range rapid.IntRange(0, 3).Draw(t, "evidence") {
			es = append(es, Evidence{ID: int64(i + 1), Source: rapid.SampledFrom([]string{"webhook", "reconcile", "provider_response", "operator"}).Draw(t, "source"),
				Status:           rapid.SampledFrom([]string{"succeeded", "pending", "rejected", "reversed", "not_found", "conflict"}).Draw(t, "status"),
				ProviderRefundID: "re_3", ReceivedAt: t0.Add(time.Duration(i) * time.Minute)})
		}
		s.evidenceFacts(es)
		if rapid.Bool().Draw(t, "provider") {
			caps := provider.Capabilities{SafeResend: rapid.Bool().Draw(t, "safe"), KeyRetention: 24 * time.Hour, LookupByRefundID: rapid.Bool().Draw(t, "by id")}
			s.caps = &caps
		}
		st := s.status()
		line := st.String()
		if st.Headline == "" || st.Text == "" || st.Next == "" && s.State != fencedwrite.StateSucceeded && s.State != fencedwrite.StateFailed {
			t.Fatalf("an empty part: %+v", st)
		}
		if (st.Money == MoneyRefunded || st.Money == MoneyUnverified) != (s.State == fencedwrite.StateSucceeded) {
			t.Fatalf("%s says %s", s.State, line)
		}
		if (st.Money == MoneyUnverified) != (s.Unverified != nil) || (st.Money == MoneyNotRefunded) != (s.State == fencedwrite.StateFailed) {
			t.Fatalf("%s (override %v) says %s", s.State, s.Unverified != nil, line)
		}
		sent := s.firstSent != nil || s.lastSent != nil
		unsettled := s.State != fencedwrite.StateSucceeded && s.State != fencedwrite.StateFailed
		if unsettled && sent && st.Money == MoneyNotSent && !strings.Contains(line, "No money has moved") {
			t.Fatalf("a sent request said not sent: %s", line)
		}
		if unsettled && sent && st.Money == MoneyNotSent && s.NextAction != fencedwrite.ActionRefund {
			// The last answer that paid nothing was a lookup's (a
			// reconcile turned away): it says nothing of the send.
			t.Fatalf("a job whose next step asks the provider is said to have moved no money: %s", line)
		}
		if unsettled && sent && st.Money == MoneyNotSent && s.firstSent != nil && s.lastSent != nil && !s.firstSent.Equal(*s.lastSent) {
			t.Fatalf("a request sent twice is said to have moved no money from its last answer alone: %s", line)
		}
		if unsettled && s.said != nil && s.said.Status == string(evidence.Succeeded) && st.Money != MoneyAtProvider {
			t.Fatalf("evidence of success hidden: %s", line)
		}
		if !strings.Contains(line, s.Amount.String()) && s.State != fencedwrite.StateFailed || strings.Contains(line, " minor") {
			t.Fatalf("the line does not say the amount %s in major units: %s", s.Amount, line)
		}
		if s.State == fencedwrite.StateManualReview {
			if len(st.Options) != 4 {
				t.Fatalf("%d options in manual review", len(st.Options))
			}
			for _, o := range st.Options {
				if len(o.Facts) == 0 || o.Title == "" {
					t.Fatalf("an option without its facts: %+v", o)
				}
			}
			if st.Money != MoneyAtProvider && !strings.Contains(st.Next, "Check reference try-1") {
				t.Fatalf("manual review without what to check: %s", st.Next)
			}
		} else if len(st.Options) != 0 {
			t.Fatalf("options offered on a %s job", s.State)
		}
	})
}
