package operator

import (
	"errors"
	"fmt"
)

// What an operator's call can answer besides success. Every error from an
// action (Resolve, RequestApproval, Approve, Decline) matches (errors.Is)
// at least one of these and says what the caller may conclude; none of them
// means the job changed, except where said.
var (
	// ErrInvalid means the input was refused before anything was read or
	// written: an empty operator, an empty reason, an unknown action. The
	// error is an *InputError naming the field. Fix the input.
	ErrInvalid = errors.New("invalid operator input")

	// ErrNotFound means no job (or no approval request) has the given id.
	// Nothing was written.
	ErrNotFound = errors.New("not found")

	// ErrNotInReview means the job is not in manual review (operators
	// resolve only those). Nothing was written; read the job again.
	ErrNotInReview = errors.New("job is not in manual review")

	// ErrResolvedElsewhere means the job moved on since the operator saw it:
	// its attempt is no longer the one the resolution (or the approval
	// request) was made on, because another operator, the reconciler or a
	// worker wrote it first. Nothing was written; read the job again and
	// decide afresh. An approval request found stale is closed as such.
	ErrResolvedElsewhere = errors.New("job moved since it was seen")

	// ErrUnknownRefund means the provider does not know the refund id the
	// operator gave (a typo, a forged id, an id of another provider).
	// Nothing was written but the refusal's audit entry. Only an approved
	// override resolves the job without a verified refund.
	ErrUnknownRefund = errors.New("provider does not know the refund")

	// ErrRefundMismatch means the provider knows the refund but it does not
	// belong to this job's operation: another key, payment, amount or
	// currency. The error is a *MismatchError naming the first field that
	// differs. Nothing was written but the refusal's audit entry.
	ErrRefundMismatch = errors.New("refund does not belong to this operation")

	// ErrRefundNotSucceeded means the provider reports the refund, for this
	// very operation, as pending, rejected or reversed: not a success to
	// settle the job on. Nothing was written but the refusal's audit entry.
	ErrRefundNotSucceeded = errors.New("provider does not report the refund as succeeded")

	// ErrProviderUnavailable means the provider lookup a verification needs
	// failed (timeout, rate limit, no lookup offered, no provider
	// configured): nothing was learnt about the refund and nothing was
	// written. Try again later.
	ErrProviderUnavailable = errors.New("provider lookup failed")

	// ErrNeedsApproval means the action moves money (a resend) or overrides
	// a failed verification, so a second operator must approve it: file it
	// with RequestApproval. Nothing was written.
	ErrNeedsApproval = errors.New("action needs a second operator's approval")

	// ErrSameOperator means the approver is the operator who requested the
	// action: four eyes need two people. Nothing was written; the request
	// stays pending.
	ErrSameOperator = errors.New("approver must differ from the requester")

	// ErrRequestClosed means the approval request was already approved,
	// declined or found stale. Nothing was written.
	ErrRequestClosed = errors.New("approval request is closed")

	// ErrOutsideWindow means a resend was refused because sending the same
	// key again could execute a second refund: the provider does not
	// guarantee safe resends, or the key's retention window (minus the
	// provider timeout and the skew margin) has passed. Nothing was written
	// but the audit entry; reconcile instead.
	ErrOutsideWindow = errors.New("resend outside the key's safe window")

	// ErrRefundExists means a resend was refused because the provider
	// reports a refund for this operation key that succeeded, is pending, or
	// was reversed: the money moved or may still move. Nothing was written
	// but the audit entry.
	ErrRefundExists = errors.New("provider reports a refund for this operation")

	// ErrCommitUnknown means the database did not acknowledge the
	// resolution's COMMIT and a re-read could not settle it: the resolution
	// and its audit entry may or may not be in place (they commit together).
	// Read the job before acting again.
	ErrCommitUnknown = errors.New("resolution outcome unknown")
)

// InputError is a refused input: Field names the field (or the CLI's flag
// without its dash), Problem says what is wrong. It matches ErrInvalid.
type InputError struct {
	Field   string
	Problem string
}

func (e *InputError) Error() string { return e.Field + ": " + e.Problem }

// Is makes every InputError match ErrInvalid.
func (e *InputError) Is(target error) bool { return target == ErrInvalid }

func inputErr(field, format string, args ...any) *InputError {
	return &InputError{Field: field, Problem: fmt.Sprintf(format, args...)}
}

// MismatchError says which field of the provider's refund differs from the
// job's operation. It matches ErrRefundMismatch.
type MismatchError struct {
	RefundID string
	Field    string // the first that differs, in this order: "payment", "reference" (the operation key), "currency", "amount"
	Got      string // what the provider reports
	Want     string // what the job holds
}

func (e *MismatchError) Error() string {
	return fmt.Sprintf("refund %s: %s is %s at the provider, the job's is %s", e.RefundID, e.Field, e.Got, e.Want)
}

// Is makes every MismatchError match ErrRefundMismatch.
func (e *MismatchError) Is(target error) bool { return target == ErrRefundMismatch }
