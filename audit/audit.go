// Package audit writes the operators' audit (refund_audit), the append-only
// record of every action that takes a job out of manual review or asks to:
// package operator's resolutions, approvals and refusals, and the
// reconciler's wake-ups on new evidence. The database stamps each entry's
// time and refuses to change or delete one (migrations/*_operator_audit*.sql).
//
// Record runs on the caller's transaction, so an entry commits together with
// the fenced write it describes, or not at all.
package audit

import (
	"context"
	stdsql "database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/fencekit/fencekit/fencedwrite"
)

// Actions and outcomes of entries (the table's enums).
const (
	ActionResolveSucceeded = "resolve_succeeded"
	ActionResolveReconcile = "resolve_reconcile"
	ActionResolveRefund    = "resolve_refund"
	ActionRequestApproval  = "request_approval"
	ActionDecline          = "decline"
	ActionWake             = "wake"

	OutcomeDone      = "done"
	OutcomeRequested = "requested"
	OutcomeRefused   = "refused"
	OutcomeDeclined  = "declined"
	OutcomeStale     = "stale"
)

// Reconciler is the identity the reconciler records its wake-ups under.
const Reconciler = "system:reconciler"

// Entry is one audit entry to record. The database stamps its time.
type Entry struct {
	JobID         int64
	OperationKey  string
	Action        string
	Outcome       string
	Operator      string
	RequestedBy   string // the requester of an approved request
	ApprovalID    int64
	Reason        string
	RefundID      string
	Override      bool
	EvidenceShown string
	StateBefore   string
	AttemptBefore int64
	StateAfter    string
	AttemptAfter  int64
}

// DB is where entries are written: an *ent.Client or an *ent.Tx.
type DB interface {
	ExecContext(ctx context.Context, query string, args ...any) (stdsql.Result, error)
}

const insert = "INSERT INTO `refund_audit` (`job_id`, `operation_key`, `action`, `outcome`, `operator`, `requested_by`, " +
	"`approval_id`, `reason`, `refund_id`, `override`, `evidence_shown`, `state_before`, `attempt_before`, `state_after`, " +
	"`attempt_after`, `recorded_at`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, " + fencedwrite.ClockUTC + ")"

// Record appends e and returns its id. An entry without an operator or a
// reason is refused before it is sent (and by the database).
func Record(ctx context.Context, db DB, e Entry) (int64, error) {
	switch {
	case strings.TrimSpace(e.Operator) == "":
		return 0, errors.New("record audit: the operator is empty")
	case strings.TrimSpace(e.Reason) == "":
		return 0, errors.New("record audit: the reason is empty")
	}
	res, err := db.ExecContext(ctx, insert, e.JobID, e.OperationKey, e.Action, e.Outcome, e.Operator, nullString(e.RequestedBy),
		nullInt(e.ApprovalID), e.Reason, nullString(e.RefundID), e.Override, e.EvidenceShown, e.StateBefore, e.AttemptBefore,
		e.StateAfter, e.AttemptAfter)
	if err != nil {
		return 0, fmt.Errorf("record audit of job %d: %w", e.JobID, err)
	}
	id, err := res.LastInsertId()
	if err != nil {
		return 0, fmt.Errorf("record audit of job %d: %w", e.JobID, err)
	}
	return id, nil
}

// Append returns the job's review evidence with text added after what was
// there: a resolution adds to the evidence and never replaces it.
func Append(earlier *string, text string) string {
	if earlier == nil || *earlier == "" {
		return text
	}
	return *earlier + "\n---\n" + text
}

func nullInt(v int64) any {
	if v == 0 {
		return nil
	}
	return v
}

func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}
