package worker

import (
	"context"
	stdsql "database/sql"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"entgo.io/ent/dialect"

	"github.com/fencekit/fencekit/ent"
	"github.com/fencekit/fencekit/fencedwrite"
	"github.com/fencekit/fencekit/provider"
	"github.com/fencekit/fencekit/worker/internal/decide"
)

// A worker makes one provider call per claim and records it, with its
// answer or its fault, in the calls log (refund_job_calls), in the
// transaction of its write-back: a write-back that lands always has its
// call, and the operators' timeline shows every call. A write-back the
// fence refused rolls its call back with it; its answer is kept as evidence
// instead.

// call is one provider call of an attempt, as the calls log keeps it.
type call struct {
	jobID, attempt int64
	key            string
	kind           string // send or lookup
	outcome        string // succeeded, pending, rejected, not_found, conflict, rate_limited, already_refunded, unknown, refused, no_lookup
	refundID       string
	detail         string
}

// maxCallDetail is the calls log's detail column (varchar(1024)).
const maxCallDetail = 1024

// callOf says what the attempt's provider call asked and what came back.
func callOf(l *ent.RefundJobLease, in decide.Input) call {
	c := call{jobID: l.ID(), attempt: l.Attempt(), key: l.Request().OperationKey, kind: "send"}
	if in.Action != decide.Refund {
		c.kind = "lookup"
	}
	switch {
	case in.Action == decide.Refund && in.SendErr != nil:
		c.outcome, c.detail = faultOf(in.SendErr), in.SendErr.Error()
	case in.Action == decide.Refund:
		c.outcome, c.refundID = string(in.Sent.Status), in.Sent.ProviderRefundID
		c.detail = answerText(in.Sent)
	case in.LookupErr != nil:
		c.outcome, c.detail = faultOf(in.LookupErr), in.LookupErr.Error()
	default:
		c.outcome = string(provider.StatusNotFound)
		var found []string
		for _, r := range in.Found {
			found = append(found, answerText(r))
			if r.Reference == in.Request.OperationKey && c.refundID == "" {
				c.outcome, c.refundID = string(r.Status), r.ProviderRefundID
			}
		}
		c.detail = "found nothing"
		if len(found) > 0 {
			c.detail = fmt.Sprintf("found %d: %s", len(found), strings.Join(found, "; "))
		}
	}
	if c.outcome == "" {
		c.outcome = "unknown"
	}
	c.detail = cut(c.detail, maxCallDetail)
	return c
}

// faultOf names a call's error in one word, by the provider's sentinels.
func faultOf(err error) string {
	switch {
	case errors.Is(err, provider.ErrRateLimited):
		return "rate_limited"
	case errors.Is(err, provider.ErrRejected):
		return string(provider.StatusRejected)
	case errors.Is(err, provider.ErrKeyParamsMismatch), errors.Is(err, provider.ErrKeyInUse):
		return "conflict"
	case errors.Is(err, provider.ErrNoLookup):
		return "no_lookup"
	case errors.Is(err, provider.ErrInvalidRequest), errors.Is(err, provider.ErrMismatch):
		return "refused"
	case errors.Is(err, provider.ErrAlreadyRefunded):
		return "already_refunded"
	}
	return "unknown" // a timeout, a reset, a 5xx: nobody knows what happened
}

func answerText(r provider.Refund) string {
	s := fmt.Sprintf("refund %s %s", r.ProviderRefundID, r.Status)
	if r.Reference != "" {
		s += " for " + r.Reference
	}
	if r.Reason != "" {
		s += ": " + r.Reason
	}
	return s
}

// cut shortens s to at most n bytes, on a rune boundary.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// insertCall records one call; the answer's time is the database clock's
// (the trigger stamps it again where the fence exists).
const insertCall = "INSERT INTO `refund_job_calls` (`job_id`, `attempt`, `kind`, `outcome`, `provider_refund_id`, `detail`, `answered_at`) VALUES "

const callValues = "(?, ?, ?, ?, ?, ?, " + fencedwrite.ClockUTC + ")"

func (c call) args() []any {
	var ref any
	if c.refundID != "" {
		ref = c.refundID
	}
	return []any{c.jobID, c.attempt, c.kind, c.outcome, ref, c.detail}
}

// callRows writes the calls of a batch's write-backs in one statement.
type callRows struct{}

func (callRows) ExecRows(ctx context.Context, exec dialect.ExecQuerier, rows []fencedwrite.BatchRow) (int64, error) {
	var args []any
	for _, r := range rows {
		args = append(args, r.Values...)
	}
	query := insertCall + strings.Repeat(callValues+", ", len(rows)-1) + callValues
	var res stdsql.Result
	if err := exec.Exec(ctx, query, args, &res); err != nil {
		return 0, fmt.Errorf("record %d provider calls: %w", len(rows), err)
	}
	return res.RowsAffected()
}

// withCall returns the write-back's callback that records c, then runs
// then (the ledger's, when there is one).
func withCall(c call, then func(context.Context, *ent.Tx) error) func(context.Context, *ent.Tx) error {
	return func(ctx context.Context, tx *ent.Tx) error {
		if !tx.RefundJob.DeferRow(ctx, callRows{}, c.key, c.args()...) {
			if _, err := tx.ExecContext(ctx, insertCall+callValues, c.args()...); err != nil {
				return fmt.Errorf("record the provider call of %s#%d at attempt %d: %w", ent.RefundJobFencedTable, c.jobID, c.attempt, err)
			}
		}
		if then == nil {
			return nil
		}
		return then(ctx, tx)
	}
}
