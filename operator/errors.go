package operator

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/fencekit/fencekit/fencedwrite"
)

// What an operator's call can answer besides success. Every error from an
// action (Resolve, RequestApproval, Approve, Decline, the sessions and the
// "on it" marks) matches (errors.Is) at least one of these and says what
// the caller may conclude; none of them means the job changed, except where
// said. Explain turns each into the status and the sentence a front end
// shows (the table refusals, below).
var (
	// ErrInvalid means the input was refused before anything was read or
	// written: an empty operator, an empty reason, an unknown action, a
	// missing confirmation. The error is a *fencedwrite.FieldError naming the
	// field (it is fencedwrite.ErrInvalid: one kind of field error in the
	// module). Fix the input.
	ErrInvalid = fencedwrite.ErrInvalid

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
	// operator gave (a typo, an id of another provider, a refund too fresh
	// for the provider's lookups). Nothing was written but the refusal's
	// audit entry. Only an approved override settles the job on it.
	ErrUnknownRefund = errors.New("provider does not know the refund")

	// ErrRefundMismatch means the provider knows the refund but attributes
	// it to another operation: another key, payment, amount or currency. The
	// error is a *MismatchError naming the first field that differs. Nothing
	// was written but the refusal's audit entry. Such a refund id can never
	// settle the job, override or not.
	ErrRefundMismatch = errors.New("refund does not belong to this operation")

	// ErrRefundNotSucceeded means the provider reports the refund, for this
	// very operation, as pending, rejected or reversed: not a success to
	// settle the job on, override or not. Nothing was written but the
	// refusal's audit entry.
	ErrRefundNotSucceeded = errors.New("provider does not report the refund as succeeded")

	// ErrCannotVerify means the provider offers no lookup that could find
	// the refund id (none by refund id, and the request's own lookups do not
	// list it): it cannot be asked about it, so nothing was verified.
	// Nothing was written but the refusal's audit entry. A second operator
	// may approve an override, which marks the job unverified for good.
	ErrCannotVerify = errors.New("provider cannot be asked about the refund")

	// ErrProviderUnavailable means the provider lookup a verification needs
	// failed (timeout, rate limit, no provider configured): nothing was
	// learnt about the refund and nothing was written. Try again later.
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
	// declined, refused or found stale. Nothing was written.
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

	// ErrNoProof means a resend was refused because nothing proves the
	// original request did not execute: neither the provider's lookup (a
	// rejected refund for the key) nor the observation log (a rejection)
	// holds a definitive answer. "Not found" is not proof: lookups lag and
	// the request may still be queued. Nothing was written but the audit
	// entry; reconcile, or settle with evidence.
	ErrNoProof = errors.New("no proof the original refund did not execute")

	// ErrCommitUnknown means the database did not acknowledge the
	// resolution's COMMIT and a re-read could not settle it: the resolution
	// and its audit entry may or may not be in place (they commit together).
	// Read the job before acting again.
	ErrCommitUnknown = errors.New("resolution outcome unknown")

	// ErrSessionEnded means a console session token names no live session:
	// unknown, expired, signed out, or revoked because the operator's roles
	// changed. Nothing was written. Sign in again.
	ErrSessionEnded = errors.New("session ended")
)

func inputErr(field, format string, args ...any) *fencedwrite.FieldError {
	return &fencedwrite.FieldError{Field: field, Problem: fmt.Sprintf(format, args...)}
}

// MismatchError says which field of the provider's refund differs from the
// job's operation. It matches ErrRefundMismatch.
type MismatchError struct {
	RefundID string
	Field    string // the first that differs, in this order: "payment", "reference" (the operation key), "currency", "amount"; or "refund id"
	Got      string // what the provider reports (or fencekit's records, with Recorded)
	Want     string // what the job holds
	// Recorded, when set, says that fencekit's own records, not the
	// provider, show the refund is not this job's: another job holds it
	// ("another job"), or the provider named another refund for this very
	// request ("this job"). The provider need not be asked.
	Recorded string
	// Payment is, with Recorded "another job", that job's payment.
	Payment string
}

func (e *MismatchError) Error() string {
	return fmt.Sprintf("refund %s: %s is %s at the provider, the job's is %s", e.RefundID, e.Field, e.Got, e.Want)
}

// Is makes every MismatchError match ErrRefundMismatch.
func (e *MismatchError) Is(target error) bool { return target == ErrRefundMismatch }

// whose says whose refund the provider says it is.
func (e *MismatchError) whose() string {
	switch {
	case e.Recorded == "another job":
		return fmt.Sprintf("fencekit's own records give refund %s to request %s (payment %s), not to this job's %s", e.RefundID, e.Got, e.Payment, e.Want)
	case e.Recorded == "this job":
		return fmt.Sprintf("the provider named refund %s for this request, not %s", e.Got, e.RefundID)
	}
	switch e.Field {
	case "payment":
		return fmt.Sprintf("the provider says refund %s belongs to payment %s, not this job's payment %s", e.RefundID, e.Got, e.Want)
	case "reference":
		return fmt.Sprintf("the provider says refund %s was made for request %s, not this job's %s (another refund of the same payment)", e.RefundID, e.Got, e.Want)
	case "currency":
		return fmt.Sprintf("the provider says refund %s is in %s, this job refunds in %s", e.RefundID, e.Got, e.Want)
	case "amount":
		return fmt.Sprintf("the provider says refund %s is for %s, this job refunds %s", e.RefundID, e.Got, e.Want)
	}
	return fmt.Sprintf("the provider's refund %s differs from this job (%s: %s against %s)", e.RefundID, e.Field, e.Got, e.Want)
}

// sentence is what a person reads about the mismatch: whose refund it is,
// and that it can never settle this job.
func (e *MismatchError) sentence() string {
	return "Refused: " + e.whose() + ". It can never settle this job, not even by override. Nothing was written but the audit entry."
}

// Refusal is how a front end shows one of this package's errors: the HTTP
// status of the page and the sentence a person reads, which says what was
// refused, why, and what to do.
type Refusal struct {
	Err      error
	Status   int
	Sentence string
}

// refusals is the one table from sentinel to status and sentence, in the
// order Explain matches them: an error wrapping several (a resolution
// superseded after its COMMIT reply was lost) takes the first.
var refusals = []Refusal{
	{ErrCommitUnknown, http.StatusServiceUnavailable, "The database did not confirm the action: it may or may not have been recorded (the job's change and its audit entry commit together). Read the job before acting again."},
	{ErrInvalid, http.StatusUnprocessableEntity, "Refused: the form is not complete or not valid. Nothing was written."},
	{ErrNotFound, http.StatusNotFound, "Not found: no job or approval request has this id."},
	{ErrSessionEnded, http.StatusUnauthorized, "Your session has ended (signed out, expired, or your roles changed): sign in again."},
	{ErrSameOperator, http.StatusForbidden, "Refused: you asked for this yourself, and four eyes need two people: another operator must approve it. The request stays pending."},
	{ErrResolvedElsewhere, http.StatusConflict, "Refused: the job moved since it was seen (another operator, the reconciler or a worker acted first). Nothing was written; read the job again and decide afresh."},
	{ErrNotInReview, http.StatusConflict, "Refused: the job is not in manual review, so there is nothing to resolve. Nothing was written; read the job again."},
	{ErrRequestClosed, http.StatusConflict, "Refused: this request is already closed (approved, declined, refused or stale). Nothing was written."},
	{ErrRefundMismatch, http.StatusConflict, "Refused: the provider attributes this refund to another payment or request. It can never settle this job, not even by override. Nothing was written but the audit entry."},
	{ErrRefundNotSucceeded, http.StatusConflict, "Refused: the provider reports this refund as not succeeded (pending, rejected or reversed), so it cannot settle the job, not even by override. Nothing was written but the audit entry."},
	{ErrUnknownRefund, http.StatusConflict, "Refused: the provider does not know this refund id (a typo, another provider's id, or a refund too new for its lookups). Nothing was written but the audit entry. If you hold other proof (a bank statement), ask a second operator for an override: the job will stay marked unverified."},
	{ErrCannotVerify, http.StatusConflict, "Refused: the provider offers no lookup that could find this refund, so it cannot confirm it. Nothing was written but the audit entry. If you hold other proof (a bank statement), ask a second operator for an override: the job will stay marked unverified."},
	{ErrNeedsApproval, http.StatusConflict, "This needs a second operator: ask for an approval instead. Nothing was written."},
	{ErrOutsideWindow, http.StatusConflict, "Refused: sending the same key again could pay twice (the provider does not promise safe resends, or the key's safe window has closed). Nothing was written but the audit entry; ask the provider again instead."},
	{ErrRefundExists, http.StatusConflict, "Refused: the provider shows a refund for this request that succeeded, is pending or was reversed: the money moved or may still move, so it is not sent again. Nothing was written but the audit entry."},
	{ErrNoProof, http.StatusConflict, "Refused: nothing proves the first request did not pay (\"not found\" proves nothing: lookups lag and requests queue), so it is not sent again. The refusal is in the audit and the request is closed; ask the provider again instead, or settle with evidence."},
	{ErrProviderUnavailable, http.StatusServiceUnavailable, "The provider could not be asked, so nothing was verified and nothing was written. Try again later."},
}

// Refusals returns the table Explain reads: every sentinel of this package
// with its status and sentence.
func Refusals() []Refusal { return append([]Refusal(nil), refusals...) }

// Explain returns how to show err to a person: the status and the sentence
// of the first sentinel of the table it matches, with the details a typed
// error carries (the field and its problem; whose refund it is). An error
// of no sentinel (a database failure) is a 500 that claims nothing about
// what was written.
func Explain(err error) (status int, sentence string) {
	var mm *MismatchError
	fields := fieldErrors(err)
	switch {
	case errors.Is(err, ErrCommitUnknown):
	case len(fields) > 0:
		return http.StatusUnprocessableEntity, "Refused: " + strings.Join(fields, "; ") + ". Nothing was written."
	case errors.As(err, &mm):
		return http.StatusConflict, mm.sentence()
	}
	for _, r := range refusals {
		if errors.Is(err, r.Err) {
			return r.Status, r.Sentence
		}
	}
	return http.StatusInternalServerError, "The action failed for a reason the console does not know (the log has it): read the job again before acting; it shows what was written."
}

// fieldErrors lists every field error in err's tree ("reason: is
// required"), in order: a form can be wrong in several fields at once.
func fieldErrors(err error) []string {
	var out []string
	var walk func(error)
	walk = func(err error) {
		if fe, ok := err.(*fencedwrite.FieldError); ok {
			out = append(out, fe.Error())
			return
		}
		switch u := err.(type) {
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				walk(e)
			}
		case interface{ Unwrap() error }:
			if e := u.Unwrap(); e != nil {
				walk(e)
			}
		}
	}
	walk(err)
	return out
}
