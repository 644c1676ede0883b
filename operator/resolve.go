package operator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/fencekit/fencekit/audit"
	"github.com/fencekit/fencekit/ent"
	"github.com/fencekit/fencekit/ent/refundjob"
	"github.com/fencekit/fencekit/evidence"
	"github.com/fencekit/fencekit/fencedwrite"
	"github.com/fencekit/fencekit/ledger"
	"github.com/fencekit/fencekit/money"
	"github.com/fencekit/fencekit/provider"
)

// hooks are test signals: each runs, when set, at its point of an action.
type hooks struct {
	// beforeApply runs after an action read the job and verified what it
	// needs, just before the fenced write: a second writer can move the
	// job here.
	beforeApply func(jobID int64)
	// beforeCommit runs inside a resolution's transaction after its last
	// statement (the audit entry): an error rolls the whole resolution back.
	beforeCommit func(jobID int64) error
}

// CheckOperator validates an operator identity: a login name, not empty, at
// most MaxOperatorLen characters, of ASCII letters, digits and . _ @ - only
// (the console's user names are the same). Four eyes compare identities
// ignoring case; outside ASCII, names that read the same differ in bytes (a
// Cyrillic "а", full-width letters, combining accents, invisible
// characters), and one person could approve their own request. field names
// the input in the error.
func CheckOperator(field, name string) error {
	switch {
	case strings.TrimSpace(name) == "":
		return inputErr(field, "must name the operator, got an empty name")
	case len(name) > MaxOperatorLen:
		return inputErr(field, "must be at most %d characters, got %d", MaxOperatorLen, len(name))
	case strings.TrimSpace(name) != name:
		return inputErr(field, "%q has leading or trailing spaces", name)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._@-", r)) {
			return inputErr(field, "%q: %q is not allowed: an operator is a login name of ASCII letters, digits and . _ @ -", name, r)
		}
	}
	return nil
}

func checkReason(reason string) error {
	switch {
	case strings.TrimSpace(reason) == "":
		return inputErr("reason", "is required: say why")
	case len(reason) > MaxReasonLen:
		return inputErr("reason", "must be at most %d bytes, got %d", MaxReasonLen, len(reason))
	}
	return nil
}

func (r Resolution) validate() error {
	var errs []error
	if r.JobID <= 0 {
		errs = append(errs, inputErr("id", "must be a job id, got %d", r.JobID))
	}
	switch r.As {
	case AsSucceeded:
		if r.RefundID == "" {
			errs = append(errs, inputErr("refund-id", "is required to resolve as succeeded: the provider's refund id"))
		} else if len(r.RefundID) > 255 || strings.ContainsFunc(r.RefundID, func(c rune) bool { return c <= ' ' || c > '~' }) {
			errs = append(errs, inputErr("refund-id", "%q is not a provider refund id (printable ASCII, no spaces, at most 255)", r.RefundID))
		}
	case AsReconcile, AsRefund:
		if r.RefundID != "" {
			errs = append(errs, inputErr("refund-id", "only goes with -as succeeded, got %q with -as %s", r.RefundID, r.As))
		}
		if r.Override {
			errs = append(errs, inputErr("override", "only goes with -as succeeded"))
		}
	default:
		errs = append(errs, inputErr("as", "must be succeeded, reconcile or refund, got %q", r.As))
	}
	if err := checkReason(r.Reason); err != nil {
		errs = append(errs, err)
	}
	if err := CheckOperator("operator", r.Operator); err != nil {
		errs = append(errs, err)
	}
	if r.SeenAttempt <= 0 {
		errs = append(errs, inputErr("attempt", "must be the attempt the job was seen at (a job in manual review has one > 0), got %d", r.SeenAttempt))
	}
	return errors.Join(errs...)
}

// inReview checks that j is in manual review at the attempt seen.
func inReview(j *ent.RefundJob, seen int64) error {
	if j.State != refundjob.StateManualReview {
		if j.Attempt != seen {
			return fmt.Errorf("job %d is %s at attempt %d, seen at %d: %w", j.ID, j.State, j.Attempt, seen, ErrResolvedElsewhere)
		}
		return fmt.Errorf("job %d is %s: %w", j.ID, j.State, ErrNotInReview)
	}
	if j.Attempt != seen {
		return fmt.Errorf("job %d is at attempt %d, seen at %d: %w", j.ID, j.Attempt, seen, ErrResolvedElsewhere)
	}
	return nil
}

func actionOf(as Action) string {
	switch as {
	case AsSucceeded:
		return audit.ActionResolveSucceeded
	case AsReconcile:
		return audit.ActionResolveReconcile
	}
	return audit.ActionResolveRefund
}

// shownRecord is what an audit entry keeps of what the operator's decision
// rested on (refund_audit.evidence_shown, JSON): the job's review as it
// stood, the provider's answer, the verification field by field, and for a
// refusal what the operator was told.
type shownRecord struct {
	ReviewReason   string          `json:"review_reason,omitempty"`
	ReviewEvidence string          `json:"review_evidence,omitempty"`
	LastError      string          `json:"last_error,omitempty"`
	ProviderRefund string          `json:"provider_refund_id,omitempty"`
	Provider       json.RawMessage `json:"provider_answer,omitempty"`
	Verification   *Verification   `json:"verification,omitempty"`
	// Refused is the sentence the operator read (Explain); Cause the
	// error itself.
	Refused string `json:"refused,omitempty"`
	Cause   string `json:"cause,omitempty"`
	Note    string `json:"note,omitempty"`
}

// shown is an audit entry's evidence_shown: j's review, the verification v
// (when one was made) with the provider's raw answer, and a note.
func shown(j *ent.RefundJob, v *Verification, raw []byte, note string) shownRecord {
	rec := shownRecord{ReviewReason: deref(j.ReviewReason), ReviewEvidence: deref(j.ReviewEvidence), LastError: deref(j.LastError),
		ProviderRefund: deref(j.ProviderRefundID), Verification: v, Note: note}
	if len(raw) > 0 {
		if json.Valid(raw) {
			rec.Provider = raw
		} else {
			rec.Note = strings.TrimSpace(rec.Note + " provider answer (not JSON): " + string(raw))
		}
	}
	return rec
}

// refusedBecause marks rec as a refusal for why.
func (rec shownRecord) refusedBecause(why error) shownRecord {
	_, rec.Refused = Explain(why)
	rec.Cause = why.Error()
	return rec
}

func (rec shownRecord) String() string {
	b, _ := json.Marshal(rec) // strings and valid JSON only
	return string(b)
}

// Resolve carries out r at once, fenced on r.SeenAttempt, with its audit
// entry in the same transaction. As succeeded verifies r.RefundID with the
// provider first; as reconcile needs nothing more; as refund, and an
// override, answer ErrNeedsApproval (use RequestApproval).
//
// nil means the resolution and its audit entry committed. An error matches
// the sentinels of this package: ErrInvalid, ErrNotFound, ErrNotInReview,
// ErrResolvedElsewhere (nothing written), ErrUnknownRefund,
// ErrRefundMismatch, ErrRefundNotSucceeded, ErrCannotVerify (refused, and
// the refusal audited), ErrProviderUnavailable (nothing learnt, nothing
// written), or ErrCommitUnknown (read the job before acting again).
func (s *Service) Resolve(ctx context.Context, r Resolution) (Result, error) {
	if err := r.validate(); err != nil {
		return Result{}, fmt.Errorf("resolve: %w", err)
	}
	if r.As == AsRefund || r.Override {
		return Result{}, fmt.Errorf("resolve job %d as %s: a second operator must approve it (request it): %w", r.JobID, r.As, ErrNeedsApproval)
	}
	j, err := s.readJob(ctx, r.JobID)
	if err != nil {
		return Result{}, fmt.Errorf("resolve: %w", err)
	}
	if err := inReview(j, r.SeenAttempt); err != nil {
		return Result{}, fmt.Errorf("resolve: %w", err)
	}
	var v *Verification
	var answer provider.Refund
	if r.As == AsSucceeded {
		var err error
		v, answer, err = s.verify(ctx, j, r.RefundID)
		if err != nil {
			if !errors.Is(err, ErrProviderUnavailable) {
				s.refused(ctx, j, r, Approval{}, shown(j, v, answer.Raw, "").refusedBecause(err))
			}
			return Result{}, fmt.Errorf("resolve job %d as succeeded: %w", j.ID, err)
		}
	}
	e := audit.Entry{Operator: r.Operator, Reason: r.Reason, RefundID: r.RefundID, EvidenceShown: shown(j, v, answer.Raw, "").String()}
	return s.apply(ctx, j, r.As, e, answer)
}

// refused records a refusal of r on job j (of request a, when it came from
// one). It is best effort: the refusal stands whether or not its record
// could be written.
func (s *Service) refused(ctx context.Context, j *ent.RefundJob, r Resolution, a Approval, rec shownRecord) {
	_, _ = audit.Record(ctx, s.c, refusalEntry(j, r, a, rec))
}

func refusalEntry(j *ent.RefundJob, r Resolution, a Approval, rec shownRecord) audit.Entry {
	return audit.Entry{JobID: j.ID, OperationKey: j.OperationKey, Action: actionOf(r.As), Outcome: audit.OutcomeRefused,
		Operator: r.Operator, RequestedBy: a.RequestedBy, ApprovalID: a.ID, Reason: r.Reason, RefundID: r.RefundID, EvidenceShown: rec.String(),
		StateBefore: string(j.State), AttemptBefore: j.Attempt, StateAfter: string(j.State), AttemptAfter: j.Attempt}
}

// apply runs the fenced resolution of j as `as` with its audit entry e (and
// extra, the approval's decision, when set) in one transaction.
func (s *Service) apply(ctx context.Context, j *ent.RefundJob, as Action, e audit.Entry, answer provider.Refund, extra ...func(context.Context, *ent.Tx) error) (Result, error) {
	text := fmt.Sprintf("operator %s resolved as %s", e.Operator, as)
	if e.RequestedBy != "" {
		text = fmt.Sprintf("operator %s approved request %d of %s to resolve as %s", e.Operator, e.ApprovalID, e.RequestedBy, as)
	}
	if e.Override {
		text += " (OVERRIDE: refund not verified)"
	}
	// The reason's lines are indented under this entry, so that they cannot
	// forge the separator of another one; the audit keeps it as typed.
	reason := strings.NewReplacer("\r\n", "\n", "\r", "\n").Replace(e.Reason)
	text += ": " + strings.ReplaceAll(reason, "\n", "\n  ")
	kept := audit.Append(j.ReviewEvidence, text)
	var tr *ent.RefundJobTransition
	var then []func(context.Context, *ent.Tx) error
	res := Result{JobID: j.ID, Attempt: j.Attempt + 1, RequestID: e.ApprovalID}
	switch as {
	case AsSucceeded:
		tr = s.c.RefundJob.ResolveSucceeded(j, e.RefundID, kept)
		then = append(then, ledger.Refunded(j.OperationKey, e.RefundID))
		res.State = string(refundjob.StateSucceeded)
		if len(answer.Raw) > 0 {
			obs := evidence.Observation{OperationKey: j.OperationKey, JobID: j.ID, Source: evidence.Operator,
				ProviderRefundID: answer.ProviderRefundID, Status: evidence.Succeeded, Payload: answer.Raw}
			then = append(then, func(ctx context.Context, tx *ent.Tx) error {
				_, _, err := evidence.Record(ctx, tx, obs)
				return err
			})
		}
	case AsReconcile:
		tr = s.c.RefundJob.ResolveReconcile(j, kept)
		res.State = string(refundjob.StateReady)
	case AsRefund:
		tr = s.c.RefundJob.ResolveRefund(j, kept)
		res.State = string(refundjob.StateReady)
	}
	e.JobID, e.OperationKey, e.Action, e.Outcome = j.ID, j.OperationKey, actionOf(as), audit.OutcomeDone
	e.StateBefore, e.AttemptBefore, e.StateAfter, e.AttemptAfter = string(j.State), j.Attempt, res.State, res.Attempt
	then = append(then, extra...)
	then = append(then, func(ctx context.Context, tx *ent.Tx) error {
		// The attempts log names who took the attempt: the operator who
		// resolved (the approver of an approved request).
		return tx.RefundJob.RecordResolution(ctx, j.ID, res.Attempt, e.Operator)
	}, func(ctx context.Context, tx *ent.Tx) error {
		// The audit entry commits with the resolution or not at all: on
		// the resolution's transaction, never the pool.
		id, err := audit.Record(ctx, tx, e)
		res.AuditID = id
		return err
	})
	if s.hooks.beforeCommit != nil {
		then = append(then, func(context.Context, *ent.Tx) error { return s.hooks.beforeCommit(j.ID) })
	}
	if s.hooks.beforeApply != nil {
		s.hooks.beforeApply(j.ID)
	}
	err := s.c.RefundJob.Apply(ctx, tr, func(ctx context.Context, tx *ent.Tx) error {
		for _, fn := range then {
			if err := fn(ctx, tx); err != nil {
				return err
			}
		}
		return nil
	})
	switch {
	case err == nil:
		return res, nil
	case errors.Is(err, fencedwrite.ErrCommitUnknown):
		return Result{}, fmt.Errorf("resolve job %d as %s: %w: %w", j.ID, as, ErrCommitUnknown, err)
	case errors.Is(err, fencedwrite.ErrAlreadySettled):
		// This very resolution committed before (its reply was lost), with
		// its audit entry.
		res.AuditID = 0
		return res, nil
	case errors.Is(err, fencedwrite.ErrSuperseded), errors.Is(err, fencedwrite.ErrUnexpectedState):
		return Result{}, fmt.Errorf("resolve job %d as %s: %w: %w", j.ID, as, ErrResolvedElsewhere, err)
	}
	return Result{}, fmt.Errorf("resolve job %d as %s: %w", j.ID, as, err)
}

// Verification is what the provider said about a refund id an operator gave
// for a job: the outcome, the provider's refund (when it knows it) and each
// field checked against the job. It is recorded in the audit with the
// resolution, the request or the refusal it decided, and shown to the
// approver of a request.
type Verification struct {
	RefundID string `json:"refund_id"`
	// Outcome is one of the Verify* constants.
	Outcome string `json:"outcome"`
	// Said is the outcome in a sentence, for people.
	Said string `json:"said"`
	// Answer is the provider's refund of that id, when it knows it.
	Answer *ProviderRefund `json:"answer,omitempty"`
	// Fields compares the provider's refund with the job, field by field,
	// when it knows it.
	Fields []FieldCheck `json:"fields,omitempty"`
}

// The outcomes of a verification.
const (
	VerifyVerified     = "verified"      // the provider's refund of this operation, succeeded
	VerifyMismatch     = "mismatch"      // the provider's refund of another operation: never this job's
	VerifyNotSucceeded = "not_succeeded" // this operation's refund, pending, rejected or reversed
	VerifyUnknown      = "unknown"       // the provider's lookup does not find the id
	VerifyCannotAsk    = "cannot_ask"    // the provider offers no lookup that could find the id
)

// Overridable reports whether a second operator may settle the job on the
// refund id although it did not verify: only when the provider cannot say
// anything about it (it does not find the id, or cannot be asked). A refund
// the provider attributes to another operation, or reports as not
// succeeded, never is.
func (v *Verification) Overridable() bool {
	return v != nil && (v.Outcome == VerifyUnknown || v.Outcome == VerifyCannotAsk)
}

// heldElsewhere says whether fencekit's own records show that refundID is
// not j's: another job holds it (its provider refund id, indexed), or the
// provider named another refund for j's own request.
func (s *Service) heldElsewhere(ctx context.Context, j *ent.RefundJob, refundID string) (*MismatchError, error) {
	if j.ProviderRefundID != nil && *j.ProviderRefundID != "" && *j.ProviderRefundID != refundID {
		return &MismatchError{RefundID: refundID, Field: "refund id", Got: *j.ProviderRefundID, Want: refundID, Recorded: "this job"}, nil
	}
	other, err := s.c.RefundJob.Query().Where(refundjob.ProviderRefundID(refundID), refundjob.IDNEQ(j.ID)).First(ctx)
	switch {
	case ent.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("verify refund %s: read the jobs that hold it: %w", refundID, err)
	}
	return &MismatchError{RefundID: refundID, Field: "reference", Got: other.OperationKey, Want: j.OperationKey, Recorded: "another job", Payment: other.PaymentRef}, nil
}

// ProviderRefund is the provider's refund as a verification read it.
type ProviderRefund struct {
	ID        string `json:"id"`
	Reference string `json:"reference"`
	Payment   string `json:"payment"`
	Amount    Amount `json:"amount"`
	Status    string `json:"status"`
}

// FieldCheck is one field of a verification: what the job holds, what the
// provider reports, and whether they agree.
type FieldCheck struct {
	Field    string `json:"field"`
	Job      string `json:"job"`
	Provider string `json:"provider"`
	Same     bool   `json:"same"`
}

// verify looks refundID up at the provider and checks that it is a
// succeeded refund of j's operation. The error matches ErrRefundMismatch,
// ErrRefundNotSucceeded, ErrUnknownRefund or ErrCannotVerify with the
// verification that says why, or ErrProviderUnavailable (a nil
// verification: nothing was learnt).
func (s *Service) verify(ctx context.Context, j *ent.RefundJob, refundID string) (*Verification, provider.Refund, error) {
	if s.prov == nil {
		return nil, provider.Refund{}, fmt.Errorf("verify refund %s: no provider configured: %w", refundID, ErrProviderUnavailable)
	}
	// fencekit's own records first: a refund id another job holds, or
	// another than the one the provider named for this request, is never
	// this job's, whatever a provider that cannot be asked about it (or
	// whose lookups lag) says.
	if m, err := s.heldElsewhere(ctx, j, refundID); err != nil || m != nil {
		if err != nil {
			return nil, provider.Refund{}, err
		}
		v := &Verification{RefundID: refundID, Outcome: VerifyMismatch, Said: capitalize(m.whose())}
		return v, provider.Refund{}, fmt.Errorf("verify refund: %w", m)
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	q := provider.Query{ProviderRefundID: refundID}
	byID := s.prov.Capabilities().LookupByRefundID
	if !byID {
		// Without a lookup by id, the key's own lookups list its refunds.
		q = provider.Query{OperationKey: j.OperationKey, PaymentRef: j.PaymentRef}
	}
	v := &Verification{RefundID: refundID}
	found, err := s.prov.Lookup(ctx, q)
	if errors.Is(err, provider.ErrNoLookup) {
		v.Outcome, v.Said = VerifyCannotAsk, fmt.Sprintf("The provider offers no lookup that could find refund %s (by refund id, by reference or by payment): it cannot be asked about it", refundID)
		return v, provider.Refund{}, fmt.Errorf("verify refund %s: %w", refundID, ErrCannotVerify)
	}
	if err != nil {
		return nil, provider.Refund{}, fmt.Errorf("verify refund %s: %w: %w", refundID, ErrProviderUnavailable, err)
	}
	var r *provider.Refund
	for i := range found {
		if found[i].ProviderRefundID == refundID {
			r = &found[i]
			break
		}
	}
	if r == nil {
		v.Outcome, v.Said = VerifyUnknown, fmt.Sprintf("The provider does not know refund %s", refundID)
		if !byID {
			v.Said = fmt.Sprintf("The provider's refunds for request %s and payment %s do not include %s (it offers no lookup by refund id)", j.OperationKey, j.PaymentRef, refundID)
		}
		return v, provider.Refund{}, fmt.Errorf("verify refund %s: %w", refundID, ErrUnknownRefund)
	}
	amountOf := func(minor int64, currency string) string { return money.Format(minor, currency) + " " + currency }
	cur := strings.ToUpper(r.Currency)
	v.Answer = &ProviderRefund{ID: r.ProviderRefundID, Reference: r.Reference, Payment: r.PaymentRef, Amount: Amount{r.AmountMinor, cur}, Status: string(r.Status)}
	for _, c := range []FieldCheck{
		{"payment", j.PaymentRef, r.PaymentRef, false},
		{"reference", j.OperationKey, r.Reference, false},
		{"currency", j.Currency, cur, false},
		// The same integer in the same currency: the formats agree only
		// then.
		{"amount", amountOf(j.AmountMinor, j.Currency), amountOf(r.AmountMinor, cur), r.AmountMinor == j.AmountMinor && cur == j.Currency},
		{"status", string(provider.StatusSucceeded), string(r.Status), r.Status == provider.StatusSucceeded},
	} {
		if c.Field != "amount" && c.Field != "status" {
			c.Same = c.Job == c.Provider
		}
		v.Fields = append(v.Fields, c)
	}
	for _, c := range v.Fields[:4] {
		if !c.Same {
			m := &MismatchError{RefundID: refundID, Field: c.Field, Got: c.Provider, Want: c.Job}
			v.Outcome, v.Said = VerifyMismatch, capitalize(m.whose())
			return v, *r, fmt.Errorf("verify refund: %w", m)
		}
	}
	if r.Status != provider.StatusSucceeded {
		v.Outcome, v.Said = VerifyNotSucceeded, fmt.Sprintf("The provider reports refund %s of this request as %s, not succeeded", refundID, r.Status)
		return v, *r, fmt.Errorf("verify refund %s: the provider reports it %s: %w", refundID, r.Status, ErrRefundNotSucceeded)
	}
	v.Outcome, v.Said = VerifyVerified, fmt.Sprintf("The provider confirms refund %s: %s to payment %s for request %s, succeeded", refundID, amountOf(r.AmountMinor, cur), r.PaymentRef, r.Reference)
	return v, *r, nil
}

// RequestApproval files r for a second operator's approval: a resend (as
// refund) or an override (as succeeded with Override). The request records
// the attempt r.SeenAttempt and is audited with the facts the approver will
// see. It checks what can be checked now (the job is in manual review at
// that attempt; a resend is inside the key's window; an override's refund
// id is one the provider cannot say anything about: a refund it attributes
// to another operation, or reports not succeeded, is refused here with
// ErrRefundMismatch or ErrRefundNotSucceeded, and one that verifies needs
// no approval); the approval checks again.
func (s *Service) RequestApproval(ctx context.Context, r Resolution) (Approval, error) {
	if err := r.validate(); err != nil {
		return Approval{}, fmt.Errorf("request approval: %w", err)
	}
	switch {
	case r.As == AsReconcile:
		return Approval{}, fmt.Errorf("request approval: %w", inputErr("as", "reconcile needs no approval: resolve it"))
	case r.As == AsSucceeded && !r.Override:
		return Approval{}, fmt.Errorf("request approval: %w", inputErr("override", "a verified refund needs no approval: resolve it, or request an override"))
	}
	j, err := s.readJob(ctx, r.JobID)
	if err != nil {
		return Approval{}, fmt.Errorf("request approval: %w", err)
	}
	if err := inReview(j, r.SeenAttempt); err != nil {
		return Approval{}, fmt.Errorf("request approval: %w", err)
	}
	var rec shownRecord
	switch r.As {
	case AsRefund:
		if err := s.inWindow(ctx, j); err != nil {
			if errors.Is(err, ErrOutsideWindow) {
				// A refusal the operator reads as audited is audited.
				s.refused(ctx, j, r, Approval{}, shown(j, nil, nil, "a resend was asked for").refusedBecause(err))
			}
			return Approval{}, fmt.Errorf("request approval: %w", err)
		}
		rec = shown(j, nil, nil, "requests approval to send the refund again with the same key")
	case AsSucceeded:
		v, answer, err := s.verify(ctx, j, r.RefundID)
		switch {
		case err == nil:
			return Approval{}, fmt.Errorf("request approval: %w", inputErr("override", "%s: resolve it as succeeded, no second operator is needed", v.Said))
		case errors.Is(err, ErrProviderUnavailable):
			return Approval{}, fmt.Errorf("request approval: %w", err)
		case !v.Overridable():
			s.refused(ctx, j, r, Approval{}, shown(j, v, answer.Raw, "an override was asked for").refusedBecause(err))
			return Approval{}, fmt.Errorf("request approval: %w", err)
		}
		rec = shown(j, v, nil, "requests approval to settle as succeeded although the provider cannot confirm the refund (override)")
	}
	tx, err := s.c.Tx(ctx)
	if err != nil {
		return Approval{}, fmt.Errorf("request approval: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	res, err := tx.ExecContext(ctx, "INSERT INTO `refund_approvals` (`job_id`, `operation_key`, `resolve_as`, `refund_id`, `override`, `reason`, "+
		"`requested_by`, `seen_attempt`, `requested_at`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, "+fencedwrite.ClockUTC+")",
		j.ID, j.OperationKey, string(r.As), nullString(r.RefundID), r.Override, r.Reason, r.Operator, r.SeenAttempt)
	if err != nil {
		return Approval{}, fmt.Errorf("request approval: %w", err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		return Approval{}, fmt.Errorf("request approval: %w", err)
	}
	if _, err := audit.Record(ctx, tx, audit.Entry{JobID: j.ID, OperationKey: j.OperationKey, Action: audit.ActionRequestApproval,
		Outcome: audit.OutcomeRequested, Operator: r.Operator, ApprovalID: id, Reason: r.Reason, RefundID: r.RefundID, Override: false,
		EvidenceShown: rec.String(), StateBefore: string(j.State), AttemptBefore: j.Attempt, StateAfter: string(j.State), AttemptAfter: j.Attempt}); err != nil {
		return Approval{}, fmt.Errorf("request approval: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return Approval{}, fmt.Errorf("request approval: %w", err)
	}
	return s.readApproval(ctx, id)
}

// inWindow checks that sending j's key again cannot execute a second
// refund: the provider guarantees safe resends, and the key is still
// inside its window by the database's clock (or was never sent).
func (s *Service) inWindow(ctx context.Context, j *ent.RefundJob) error {
	if s.prov == nil {
		return fmt.Errorf("check resend window: no provider configured: %w", ErrProviderUnavailable)
	}
	caps := s.prov.Capabilities()
	if !caps.SafeResend {
		return fmt.Errorf("resend job %d: the provider does not guarantee safe resends of a key: %w", j.ID, ErrOutsideWindow)
	}
	if j.KeyFirstUsedAt == nil {
		return nil // never sent: nothing to execute twice
	}
	end := j.KeyFirstUsedAt.Add(s.keyWindow(caps))
	now, err := s.dbNow(ctx)
	if err != nil {
		return fmt.Errorf("check resend window: %w", err)
	}
	if !now.Before(end) {
		return fmt.Errorf("resend job %d: the key was first sent %s, its window closed at %s: %w", j.ID,
			Stamp(*j.KeyFirstUsedAt), Stamp(end), ErrOutsideWindow)
	}
	return nil
}

// keyWindow is how long after its first use a key may be sent again, as
// the workers compute it: the provider's retention less the provider
// timeout and the skew margin.
func (s *Service) keyWindow(caps provider.Capabilities) time.Duration {
	o := s.claim
	o.KeyRetention = caps.KeyRetention
	if o.ProviderTimeout == 0 {
		o.ProviderTimeout = fencedwrite.DefaultProviderTimeout
	}
	if o.SkewMargin == 0 {
		o.SkewMargin = fencedwrite.DefaultSkewMargin
	}
	return o.KeyWindow()
}

func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// dbNow reads the database's real clock.
func (s *Service) dbNow(ctx context.Context) (time.Time, error) {
	rows, err := s.c.QueryContext(ctx, "SELECT "+fencedwrite.ClockMicros)
	if err != nil {
		return time.Time{}, fmt.Errorf("read database clock: %w", err)
	}
	defer rows.Close()
	var us int64
	if !rows.Next() {
		return time.Time{}, fmt.Errorf("read database clock: no row: %w", rows.Err())
	}
	if err := rows.Scan(&us); err != nil {
		return time.Time{}, fmt.Errorf("read database clock: %w", err)
	}
	return micros(us), rows.Err()
}
