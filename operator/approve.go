package operator

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/fencekit/fencekit/audit"
	"github.com/fencekit/fencekit/ent"
	"github.com/fencekit/fencekit/evidence"
	"github.com/fencekit/fencekit/fencedwrite"
	"github.com/fencekit/fencekit/provider"
)

// readApproval reads approval request id, with its facts, or an error
// matching ErrNotFound.
func (s *Service) readApproval(ctx context.Context, id int64) (Approval, error) {
	list, err := s.approvals(ctx, s.c, "`id` = ?", id)
	if err != nil {
		return Approval{}, err
	}
	if len(list) == 0 {
		return Approval{}, fmt.Errorf("approval request %d: %w", id, ErrNotFound)
	}
	if err := s.approvalFacts(ctx, list); err != nil {
		return Approval{}, err
	}
	return list[0], nil
}

// decide closes request id as status by operator, on tx: it must still be
// pending (ErrRequestClosed otherwise, when another decision came first).
func decide(ctx context.Context, tx *ent.Tx, id int64, status ApprovalStatus, operator string) error {
	res, err := tx.ExecContext(ctx, "UPDATE `refund_approvals` SET `status` = ?, `decided_by` = ?, `decided_at` = "+fencedwrite.ClockUTC+" WHERE `id` = ? AND `status` = 'pending'",
		string(status), operator, id)
	if err != nil {
		return fmt.Errorf("decide approval request %d: %w", id, err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return fmt.Errorf("decide approval request %d: %w", id, ErrRequestClosed)
	}
	return nil
}

// close decides request a without acting, with the audit entry e, in one
// transaction: declined (by an approver, or withdrawn), refused at approval
// (recorded as declined: the table knows no other way to close without
// acting; the entry's outcome says refused) or stale.
func (s *Service) close(ctx context.Context, a Approval, status ApprovalStatus, operator string, e audit.Entry) error {
	tx, err := s.c.Tx(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	if err := decide(ctx, tx, a.ID, status, operator); err != nil {
		return err
	}
	if _, err := audit.Record(ctx, tx, e); err != nil {
		return err
	}
	return tx.Commit()
}

// Approve carries out approval request id as approver, who must differ
// from the requester (ErrSameOperator). An override needs confirm, the
// approver's typed confirmation: the refund id the job will be settled on.
//
// The resolution is fenced on the attempt the requester saw, never on the
// job's attempt now: when the job moved since (even if it came back to
// manual review), the request is closed as stale and the call answers
// ErrResolvedElsewhere. A resend is checked again against the provider and
// the key's window (ErrRefundExists, ErrOutsideWindow, ErrNoProof); an
// override's refund id is verified again: when the provider now confirms
// it the job settles verified; when it attributes it to another operation
// or reports it not succeeded, never (ErrRefundMismatch,
// ErrRefundNotSucceeded). Such a refusal is audited with the request's id
// and closes the request. ErrProviderUnavailable leaves it pending. Both
// operators are recorded in the audit entry; an override is marked.
// Outcomes are Resolve's, plus ErrRequestClosed.
func (s *Service) Approve(ctx context.Context, id int64, approver, confirm string) (Result, error) {
	if err := CheckOperator("operator", approver); err != nil {
		return Result{}, fmt.Errorf("approve: %w", err)
	}
	if id <= 0 {
		return Result{}, fmt.Errorf("approve: %w", inputErr("id", "must be an approval request id, got %d", id))
	}
	a, err := s.readApproval(ctx, id)
	if err != nil {
		return Result{}, fmt.Errorf("approve: %w", err)
	}
	if a.Status != Pending {
		return Result{}, fmt.Errorf("approve request %d: it is %s (by %s): %w", id, a.Status, a.DecidedBy, ErrRequestClosed)
	}
	if strings.EqualFold(approver, a.RequestedBy) {
		return Result{}, fmt.Errorf("approve request %d: %s requested it: %w", id, a.RequestedBy, ErrSameOperator)
	}
	if a.Override && strings.TrimSpace(confirm) != a.RefundID {
		return Result{}, fmt.Errorf("approve request %d: %w", id, inputErr("confirm",
			"type the refund id %s to confirm the override: the job will be settled on it without the provider's confirmation and marked unverified for good", a.RefundID))
	}
	j, err := s.readJob(ctx, a.JobID)
	if err != nil {
		return Result{}, fmt.Errorf("approve request %d: %w", id, err)
	}
	// The attempt the requester saw, never the job's attempt now.
	if err := inReview(j, a.SeenAttempt); err != nil {
		return Result{}, s.stale(ctx, a, j, approver, err)
	}
	r := Resolution{JobID: a.JobID, As: a.As, RefundID: a.RefundID, Reason: a.Reason, Operator: approver, SeenAttempt: a.SeenAttempt, Override: a.Override}
	note := fmt.Sprintf("request %d by %s, seen at attempt %d", a.ID, a.RequestedBy, a.SeenAttempt)
	var v *Verification
	var answer provider.Refund
	switch {
	case a.As == AsRefund:
		proof, found, err := s.noRefundYet(ctx, j)
		if err != nil {
			return Result{}, s.refuseRequest(ctx, a, j, r, shown(j, nil, found.Raw, note), err)
		}
		note += "; the key is inside its window, the provider shows no refund for it that succeeded, is pending or was reversed, and " + proof
	case a.Override:
		v, answer, err = s.verify(ctx, j, a.RefundID)
		switch {
		case err == nil:
			// The provider confirms it now: settled verified, no override.
			r.Override = false
			note += "; the provider confirms the refund now: settled verified"
		case v.Overridable():
			answer = provider.Refund{}
			note += "; override: " + v.Said
		default:
			return Result{}, s.refuseRequest(ctx, a, j, r, shown(j, v, answer.Raw, note), err)
		}
	}
	e := audit.Entry{Operator: approver, RequestedBy: a.RequestedBy, ApprovalID: a.ID, Reason: a.Reason, RefundID: a.RefundID,
		Override: r.Override, EvidenceShown: shown(j, v, answer.Raw, note).String()}
	res, err := s.apply(ctx, j, a.As, e, answer, func(ctx context.Context, tx *ent.Tx) error {
		return decide(ctx, tx, a.ID, Approved, approver)
	})
	if errors.Is(err, ErrResolvedElsewhere) {
		return Result{}, s.stale(ctx, a, j, approver, err)
	}
	if err != nil {
		return Result{}, fmt.Errorf("approve request %d: %w", id, err)
	}
	return res, nil
}

// refuseRequest answers an approval the provider or the evidence refused
// (why): a refusal audited with the request's id, which closes the
// request, unless nothing was learnt (ErrProviderUnavailable: it stays
// pending, to be tried again).
func (s *Service) refuseRequest(ctx context.Context, a Approval, j *ent.RefundJob, r Resolution, rec shownRecord, why error) error {
	err := fmt.Errorf("approve request %d: %w", a.ID, why)
	if errors.Is(why, ErrProviderUnavailable) {
		return err
	}
	e := refusalEntry(j, r, a, rec.refusedBecause(why))
	if cerr := s.close(ctx, a, Declined, r.Operator, e); cerr != nil {
		// The refusal stands; its record is best effort.
		s.refused(ctx, j, r, a, rec.refusedBecause(why))
	}
	return err
}

// stale closes request a as stale (the job moved since it was made) and
// returns the error to answer, matching ErrResolvedElsewhere.
func (s *Service) stale(ctx context.Context, a Approval, seen *ent.RefundJob, approver string, why error) error {
	j := seen
	if now, err := s.readJob(ctx, a.JobID); err == nil {
		j = now
	}
	reason := fmt.Sprintf("job moved since request %d was made at attempt %d: %v", a.ID, a.SeenAttempt, why)
	e := audit.Entry{JobID: a.JobID, OperationKey: a.OperationKey, Action: actionOf(a.As), Outcome: audit.OutcomeStale,
		Operator: approver, RequestedBy: a.RequestedBy, ApprovalID: a.ID, Reason: reason, RefundID: a.RefundID,
		StateBefore: string(j.State), AttemptBefore: j.Attempt, StateAfter: string(j.State), AttemptAfter: j.Attempt,
		EvidenceShown: shown(j, nil, nil, fmt.Sprintf("request %d to resolve as %s, seen at attempt %d", a.ID, a.As, a.SeenAttempt)).String()}
	if err := s.close(ctx, a, Stale, approver, e); err != nil && !errors.Is(err, ErrRequestClosed) {
		return fmt.Errorf("approve request %d: %w (closing it as stale failed: %v)", a.ID, ErrResolvedElsewhere, err)
	}
	return fmt.Errorf("approve request %d: %w", a.ID, why)
}

// noRefundYet checks, before a resend (DESIGN.md, "operator resolution"),
// that the key is inside its window, that the provider shows no refund for
// it that succeeded, is pending or was reversed, and that there is proof
// the original request did not execute: a definitive answer for the same
// key, a rejected refund in the provider's lookup or a rejection in the
// observation log received after the key's last send. "Not found" is never
// that proof. It returns the proof.
func (s *Service) noRefundYet(ctx context.Context, j *ent.RefundJob) (proof string, found provider.Refund, err error) {
	if err := s.inWindow(ctx, j); err != nil {
		return "", provider.Refund{}, err
	}
	lctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	refunds, err := s.prov.Lookup(lctx, provider.Query{OperationKey: j.OperationKey, PaymentRef: j.PaymentRef, ProviderRefundID: deref(j.ProviderRefundID)})
	if err != nil {
		return "", provider.Refund{}, fmt.Errorf("look up refunds of %s: %w: %w", j.OperationKey, ErrProviderUnavailable, err)
	}
	for _, r := range refunds {
		if r.Reference == j.OperationKey && r.Status != provider.StatusRejected {
			return "", r, fmt.Errorf("resend job %d: the provider reports refund %s %s for %s: %w", j.ID, r.ProviderRefundID, r.Status, j.OperationKey, ErrRefundExists)
		}
	}
	for _, r := range refunds {
		if r.Reference == j.OperationKey && r.Status == provider.StatusRejected {
			return fmt.Sprintf("the provider's lookup shows refund %s of %s rejected", r.ProviderRefundID, j.OperationKey), provider.Refund{}, nil
		}
	}
	es, err := evidence.ForKey(ctx, s.c, j.OperationKey)
	if err != nil {
		return "", provider.Refund{}, fmt.Errorf("resend job %d: %w", j.ID, err)
	}
	for _, e := range es {
		// Only a rejection observed after the key's last send answers for
		// that send: an earlier attempt's says nothing about it.
		if e.Status == evidence.Rejected && (j.LastSendAt == nil || e.ReceivedAt.After(*j.LastSendAt)) {
			return fmt.Sprintf("observation %d (%s) records the provider's rejection of %s", e.ID, e.Source, j.OperationKey), provider.Refund{}, nil
		}
	}
	return "", provider.Refund{}, fmt.Errorf("resend job %d: the provider shows nothing for %s, and not found is no proof: %w", j.ID, j.OperationKey, ErrNoProof)
}

// Decline closes approval request id without acting, as operator (who may
// be the requester, withdrawing it), with a reason; it is audited, and the
// request shows the decliner's reason from then on.
func (s *Service) Decline(ctx context.Context, id int64, operator, reason string) (Approval, error) {
	if err := errors.Join(CheckOperator("operator", operator), checkReason(reason)); err != nil {
		return Approval{}, fmt.Errorf("decline: %w", err)
	}
	a, err := s.readApproval(ctx, id)
	if err != nil {
		return Approval{}, fmt.Errorf("decline: %w", err)
	}
	if a.Status != Pending {
		return Approval{}, fmt.Errorf("decline request %d: it is %s: %w", id, a.Status, ErrRequestClosed)
	}
	j, err := s.readJob(ctx, a.JobID)
	if err != nil {
		return Approval{}, fmt.Errorf("decline request %d: %w", id, err)
	}
	e := audit.Entry{JobID: a.JobID, OperationKey: a.OperationKey, Action: audit.ActionDecline, Outcome: audit.OutcomeDeclined,
		Operator: operator, RequestedBy: a.RequestedBy, ApprovalID: a.ID, Reason: reason, RefundID: a.RefundID,
		StateBefore: string(j.State), AttemptBefore: j.Attempt, StateAfter: string(j.State), AttemptAfter: j.Attempt,
		EvidenceShown: shown(j, nil, nil, fmt.Sprintf("request %d to resolve as %s, seen at attempt %d", a.ID, a.As, a.SeenAttempt)).String()}
	if err := s.close(ctx, a, Declined, operator, e); err != nil {
		return Approval{}, fmt.Errorf("decline request %d: %w", id, err)
	}
	return s.readApproval(ctx, id)
}
