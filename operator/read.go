package operator

import (
	"cmp"
	"context"
	stdsql "database/sql"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fencekit/fencekit/ent"
	"github.com/fencekit/fencekit/ent/refund"
	"github.com/fencekit/fencekit/ent/refundjob"
	"github.com/fencekit/fencekit/ent/refundjobattempt"
	"github.com/fencekit/fencekit/evidence"
	"github.com/fencekit/fencekit/fencedwrite"
	"github.com/fencekit/fencekit/internal/audit"
)

// jobColumns are the columns of a JobSummary, then the age of the last
// change by the database's clock.
const jobColumns = "`id`, `operation_key`, `payment_ref`, `amount_minor`, `currency`, `state`, `attempt`, `next_action`, " +
	"`next_run_at`, `provider_refund_id`, `review_reason`, `last_error`, `updated_at`, " +
	"TIMESTAMPDIFF(MICROSECOND, `updated_at`, " + fencedwrite.ClockUTC + ")"

func (p Page) limit() (int, error) {
	switch {
	case p.Limit < 0 || p.Limit > MaxLimit:
		return 0, inputErr("limit", "must be between 1 and %d, got %d", MaxLimit, p.Limit)
	case p.Limit == 0:
		return DefaultLimit, nil
	}
	return p.Limit, nil
}

// A cursor is "id" for lists in id order, and "micros.id" (the row's
// updated_at in microseconds since the epoch, and its id) for lists in order
// of last change.
type cursor struct {
	micros int64
	id     int64
}

func parseCursor(after string, timed bool) (cursor, bool, error) {
	if after == "" {
		return cursor{}, false, nil
	}
	bad := inputErr("after", "%q is not a cursor this list printed", after)
	var c cursor
	var err error
	if timed {
		m, id, ok := strings.Cut(after, ".")
		if !ok {
			return c, false, bad
		}
		if c.micros, err = strconv.ParseInt(m, 10, 64); err != nil {
			return c, false, bad
		}
		after = id
	}
	if c.id, err = strconv.ParseInt(after, 10, 64); err != nil || c.id < 0 {
		return c, false, bad
	}
	return c, true, nil
}

func timedCursor(t time.Time, id int64) string {
	return strconv.FormatInt(t.UnixMicro(), 10) + "." + strconv.FormatInt(id, 10)
}

func micros(us int64) time.Time { return time.UnixMicro(us).UTC() }

// jobsQuery is the statement of a list of jobs.
func jobsQuery(where, order string) string {
	q := "SELECT " + jobColumns + " FROM `refund_jobs`"
	if where != "" {
		q += " WHERE " + where
	}
	return q + " ORDER BY " + order + " LIMIT ?"
}

// listJobs runs a query for jobColumns with where and args, in the given
// order, and returns limit rows and whether there are more.
func (s *Service) listJobs(ctx context.Context, where string, args []any, order string, limit int) ([]QueueItem, bool, error) {
	rows, err := s.c.QueryContext(ctx, jobsQuery(where, order), append(args, limit+1)...)
	if err != nil {
		return nil, false, fmt.Errorf("list jobs: %w", err)
	}
	defer rows.Close()
	var out []QueueItem
	for rows.Next() {
		var (
			it                   QueueItem
			next                 stdsql.NullTime
			ref, reason, lastErr stdsql.NullString
			age                  int64
		)
		j := &it.JobSummary
		if err := rows.Scan(&j.ID, &j.OperationKey, &j.PaymentRef, &j.Amount.Minor, &j.Amount.Currency, &j.State, &j.Attempt,
			&j.NextAction, &next, &ref, &reason, &lastErr, &j.UpdatedAt, &age); err != nil {
			return nil, false, fmt.Errorf("list jobs: %w", err)
		}
		j.UpdatedAt = j.UpdatedAt.UTC()
		if j.State == string(refundjob.StateReady) && next.Valid {
			t := next.Time.UTC()
			j.NextRunAt = &t
		}
		if j.State == string(refundjob.StateSucceeded) || j.State == string(refundjob.StateFailed) {
			j.NextAction = ""
		}
		j.ProviderRefundID = ref.String
		j.Reason = oneLine(reason.String)
		if j.Reason == "" {
			j.Reason = oneLine(lastErr.String)
		}
		it.Since = j.UpdatedAt
		it.Age = time.Duration(age) * time.Microsecond
		out = append(out, it)
	}
	if err := rows.Err(); err != nil {
		return nil, false, fmt.Errorf("list jobs: %w", err)
	}
	more := len(out) > limit
	if more {
		out = out[:limit]
	}
	return out, more, nil
}

const queueWhere = "`state` = 'manual_review'"

const afterChange = "(`updated_at` > TIMESTAMPADD(MICROSECOND, ?, TIMESTAMP'1970-01-01 00:00:00') OR " +
	"(`updated_at` = TIMESTAMPADD(MICROSECOND, ?, TIMESTAMP'1970-01-01 00:00:00') AND `id` > ?))"

// Queue returns one page of the manual review queue, oldest first, with
// each job's age, reason and amount. A database error is returned wrapped.
func (s *Service) Queue(ctx context.Context, p Page) (QueuePage, error) {
	limit, err := p.limit()
	if err != nil {
		return QueuePage{}, fmt.Errorf("read queue: %w", err)
	}
	c, ok, err := parseCursor(p.After, true)
	if err != nil {
		return QueuePage{}, fmt.Errorf("read queue: %w", err)
	}
	where, args := queueWhere, []any{}
	if ok {
		where += " AND " + afterChange
		args = append(args, c.micros, c.micros, c.id)
	}
	items, more, err := s.listJobs(ctx, where, args, "`updated_at`, `id`", limit)
	if err != nil {
		return QueuePage{}, fmt.Errorf("read queue: %w", err)
	}
	page := QueuePage{Items: items}
	if page.Items == nil {
		page.Items = []QueueItem{}
	}
	if more {
		last := items[len(items)-1]
		page.Next = timedCursor(last.UpdatedAt, last.ID)
	}
	return page, nil
}

// Search returns one page of the jobs matching q. With only q.State set,
// the jobs come least recently changed first (the index on state and
// updated_at); otherwise by id. Each field is served by an index (operation
// key: unique; payment; provider refund id; state).
func (s *Service) Search(ctx context.Context, q Query, p Page) (JobsPage, error) {
	limit, err := p.limit()
	if err != nil {
		return JobsPage{}, fmt.Errorf("search jobs: %w", err)
	}
	var conds []string
	var args []any
	if q.State != "" {
		if err := refundjob.StateValidator(refundjob.State(q.State)); err != nil {
			return JobsPage{}, fmt.Errorf("search jobs: %w", inputErr("state", "%q is not a state (ready, running, succeeded, manual_review, failed)", q.State))
		}
		conds, args = append(conds, "`state` = ?"), append(args, q.State)
	}
	for _, f := range []struct{ col, v string }{{"operation_key", q.OperationKey}, {"payment_ref", q.PaymentRef}, {"provider_refund_id", q.ProviderRefundID}} {
		if f.v != "" {
			conds, args = append(conds, "`"+f.col+"` = ?"), append(args, f.v)
		}
	}
	timed := q.State != "" && q.OperationKey == "" && q.PaymentRef == "" && q.ProviderRefundID == ""
	c, ok, err := parseCursor(p.After, timed)
	if err != nil {
		return JobsPage{}, fmt.Errorf("search jobs: %w", err)
	}
	order := "`id`"
	if timed {
		order = "`updated_at`, `id`"
		if ok {
			conds, args = append(conds, afterChange), append(args, c.micros, c.micros, c.id)
		}
	} else if ok {
		conds, args = append(conds, "`id` > ?"), append(args, c.id)
	}
	items, more, err := s.listJobs(ctx, strings.Join(conds, " AND "), args, order, limit)
	if err != nil {
		return JobsPage{}, fmt.Errorf("search jobs: %w", err)
	}
	page := JobsPage{Jobs: make([]JobSummary, len(items))}
	for i, it := range items {
		page.Jobs[i] = it.JobSummary
	}
	if more {
		last := items[len(items)-1]
		page.Next = strconv.FormatInt(last.ID, 10)
		if timed {
			page.Next = timedCursor(last.UpdatedAt, last.ID)
		}
	}
	return page, nil
}

const auditColumns = "`id`, `job_id`, `operation_key`, `action`, `outcome`, `operator`, `requested_by`, `approval_id`, `reason`, " +
	"`refund_id`, `override`, `evidence_shown`, `state_before`, `attempt_before`, `state_after`, `attempt_after`, `recorded_at`"

func (s *Service) audits(ctx context.Context, where string, args ...any) ([]AuditEntry, error) {
	rows, err := s.c.QueryContext(ctx, "SELECT "+auditColumns+" FROM `refund_audit` WHERE "+where, args...)
	if err != nil {
		return nil, fmt.Errorf("read audit: %w", err)
	}
	defer rows.Close()
	out := []AuditEntry{}
	for rows.Next() {
		var (
			e                  AuditEntry
			requestedBy, refID stdsql.NullString
			approvalID         stdsql.NullInt64
		)
		if err := rows.Scan(&e.ID, &e.JobID, &e.OperationKey, &e.Action, &e.Outcome, &e.Operator, &requestedBy, &approvalID, &e.Reason,
			&refID, &e.Override, &e.EvidenceShown, &e.StateBefore, &e.AttemptBefore, &e.StateAfter, &e.AttemptAfter, &e.RecordedAt); err != nil {
			return nil, fmt.Errorf("read audit: %w", err)
		}
		e.RequestedBy, e.RefundID, e.ApprovalID, e.RecordedAt = requestedBy.String, refID.String, approvalID.Int64, e.RecordedAt.UTC()
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read audit: %w", err)
	}
	return out, nil
}

// Departures returns one page of the jobs that left manual review, newest
// first, with who or what took each out and why.
func (s *Service) Departures(ctx context.Context, p Page) (DeparturesPage, error) {
	limit, err := p.limit()
	if err != nil {
		return DeparturesPage{}, fmt.Errorf("read departures: %w", err)
	}
	c, ok, err := parseCursor(p.After, false)
	if err != nil {
		return DeparturesPage{}, fmt.Errorf("read departures: %w", err)
	}
	where, args := "`state_before` = 'manual_review' AND `outcome` = 'done'", []any{}
	if ok {
		where, args = where+" AND `id` < ?", append(args, c.id)
	}
	entries, err := s.audits(ctx, where+" ORDER BY `id` DESC LIMIT ?", append(args, limit+1)...)
	if err != nil {
		return DeparturesPage{}, fmt.Errorf("read departures: %w", err)
	}
	page := DeparturesPage{Departures: []Departure{}}
	for i, e := range entries {
		if i == limit {
			page.Next = strconv.FormatInt(entries[i-1].ID, 10)
			break
		}
		page.Departures = append(page.Departures, Departure{JobID: e.JobID, OperationKey: e.OperationKey, At: e.RecordedAt,
			Action: e.Action, Operator: e.Operator, Why: oneLine(e.Reason), StateAfter: e.StateAfter, AttemptAfter: e.AttemptAfter, AuditID: e.ID})
	}
	return page, nil
}

const approvalColumns = "`id`, `job_id`, `operation_key`, `resolve_as`, `refund_id`, `override`, `reason`, `requested_by`, " +
	"`seen_attempt`, `requested_at`, `status`, `decided_by`, `decided_at`"

func (s *Service) approvals(ctx context.Context, db queryer, where string, args ...any) ([]Approval, error) {
	rows, err := db.QueryContext(ctx, "SELECT "+approvalColumns+" FROM `refund_approvals` WHERE "+where, args...)
	if err != nil {
		return nil, fmt.Errorf("read approvals: %w", err)
	}
	defer rows.Close()
	out := []Approval{}
	for rows.Next() {
		var (
			a                Approval
			refID, decidedBy stdsql.NullString
			decidedAt        stdsql.NullTime
			as, status       string
		)
		if err := rows.Scan(&a.ID, &a.JobID, &a.OperationKey, &as, &refID, &a.Override, &a.Reason, &a.RequestedBy,
			&a.SeenAttempt, &a.RequestedAt, &status, &decidedBy, &decidedAt); err != nil {
			return nil, fmt.Errorf("read approvals: %w", err)
		}
		a.As, a.Status, a.RefundID, a.DecidedBy, a.RequestedAt = Action(as), ApprovalStatus(status), refID.String, decidedBy.String, a.RequestedAt.UTC()
		if decidedAt.Valid {
			t := decidedAt.Time.UTC()
			a.DecidedAt = &t
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read approvals: %w", err)
	}
	return out, nil
}

// Approvals returns one page of approval requests, oldest first: the
// pending ones when pendingOnly, else all.
func (s *Service) Approvals(ctx context.Context, pendingOnly bool, p Page) (ApprovalsPage, error) {
	limit, err := p.limit()
	if err != nil {
		return ApprovalsPage{}, fmt.Errorf("read approvals: %w", err)
	}
	c, _, err := parseCursor(p.After, false)
	if err != nil {
		return ApprovalsPage{}, fmt.Errorf("read approvals: %w", err)
	}
	where := "`id` > ?"
	if pendingOnly {
		where = "`status` = 'pending' AND " + where
	}
	list, err := s.approvals(ctx, s.c, where+" ORDER BY `id` LIMIT ?", c.id, limit+1)
	if err != nil {
		return ApprovalsPage{}, err
	}
	page := ApprovalsPage{Approvals: list}
	if len(list) > limit {
		page.Approvals = list[:limit]
		page.Next = strconv.FormatInt(list[limit-1].ID, 10)
	}
	return page, nil
}

type queryer interface {
	QueryContext(ctx context.Context, query string, args ...any) (*stdsql.Rows, error)
}

// readJob reads job id, or an error matching ErrNotFound.
func (s *Service) readJob(ctx context.Context, id int64) (*ent.RefundJob, error) {
	j, err := s.c.RefundJob.Get(ctx, id)
	if ent.IsNotFound(err) {
		return nil, fmt.Errorf("job %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("read job %d: %w", id, err)
	}
	return j, nil
}

func summary(j *ent.RefundJob) JobSummary {
	s := JobSummary{ID: j.ID, OperationKey: j.OperationKey, PaymentRef: j.PaymentRef, Amount: Amount{j.AmountMinor, j.Currency},
		State: string(j.State), Attempt: j.Attempt, NextAction: string(j.NextAction), ProviderRefundID: deref(j.ProviderRefundID),
		Reason: oneLine(deref(j.ReviewReason)), UpdatedAt: j.UpdatedAt.UTC()}
	if s.Reason == "" {
		s.Reason = oneLine(deref(j.LastError))
	}
	switch j.State {
	case refundjob.StateReady:
		t := j.NextRunAt.UTC()
		s.NextRunAt = &t
	case refundjob.StateSucceeded, refundjob.StateFailed:
		s.NextAction = ""
	}
	return s
}

// Job returns job id's view, or an error matching ErrNotFound.
func (s *Service) Job(ctx context.Context, id int64) (*JobView, error) {
	if id <= 0 {
		return nil, fmt.Errorf("read job: %w", inputErr("id", "must be a job id, got %d", id))
	}
	j, err := s.readJob(ctx, id)
	if err != nil {
		return nil, err
	}
	v := &JobView{JobSummary: summary(j), LeaseUntil: utc(j.LeaseUntil), KeyFirstUsedAt: utc(j.KeyFirstUsedAt), LastSendAt: utc(j.LastSendAt),
		LastError: deref(j.LastError), ReviewReason: deref(j.ReviewReason), ReviewEvidence: deref(j.ReviewEvidence), CreatedAt: j.CreatedAt.UTC(),
		Evidence: []Evidence{}, Webhooks: []Evidence{}}
	r, err := s.c.Refund.Query().Where(refund.OperationKey(j.OperationKey)).Only(ctx)
	switch {
	case err == nil:
		v.Ledger = &LedgerRow{Status: string(r.Status), ProviderRefundID: deref(r.ProviderRefundID), SettledAt: utc(r.SettledAt)}
	case !ent.IsNotFound(err):
		return nil, fmt.Errorf("read ledger of job %d: %w", id, err)
	}
	es, err := evidence.ForKey(ctx, s.c, j.OperationKey)
	if err != nil {
		return nil, fmt.Errorf("read job %d: %w", id, err)
	}
	for _, e := range es {
		ev := Evidence{ID: e.ID, Source: string(e.Source), Status: string(e.Status), ProviderRefundID: e.ProviderRefundID, Attempt: e.Attempt,
			ReceivedAt: e.ReceivedAt.UTC(), ProcessedAt: utc(e.ProcessedAt), Payload: string(e.Payload)}
		v.Evidence = append(v.Evidence, ev)
		if e.Source == evidence.Webhook {
			v.Webhooks = append(v.Webhooks, ev)
		}
	}
	if v.Audit, err = s.audits(ctx, "`job_id` = ? ORDER BY `id`", id); err != nil {
		return nil, fmt.Errorf("read job %d: %w", id, err)
	}
	if v.Approvals, err = s.approvals(ctx, s.c, "`job_id` = ? ORDER BY `id`", id); err != nil {
		return nil, fmt.Errorf("read job %d: %w", id, err)
	}
	logged, err := s.c.RefundJobAttempt.Query().Where(refundjobattempt.JobID(id)).Order(refundjobattempt.ByAttempt()).All(ctx)
	if err != nil {
		return nil, fmt.Errorf("read attempts of job %d: %w", id, err)
	}
	v.Attempts = attempts(v, logged)
	v.Timeline = timeline(v)
	return v, nil
}

// attempts lists the job's attempts from 1 to its current one, with the
// attempts log's rows (logged).
func attempts(v *JobView, logged []*ent.RefundJobAttempt) []Attempt {
	out := make([]Attempt, v.Attempt)
	for i := range out {
		out[i] = Attempt{Attempt: int64(i) + 1, StartedBy: "a claim or a takeover (not recorded)", Evidence: []int64{}}
	}
	for _, r := range logged {
		if r.Attempt < 1 || r.Attempt > v.Attempt {
			continue
		}
		a := &out[r.Attempt-1]
		claimed := r.ClaimedAt.UTC()
		a.Op, a.Holder, a.ClaimedAt, a.LeaseUntil = string(r.Op), r.Holder, &claimed, utc(r.LeaseUntil)
		a.StartedBy = fmt.Sprintf("%s by %s", r.Op, r.Holder)
	}
	for _, a := range v.Audit {
		if a.Outcome == audit.OutcomeDone && a.AttemptAfter == a.AttemptBefore+1 && a.AttemptAfter >= 1 && a.AttemptAfter <= v.Attempt {
			out[a.AttemptAfter-1].StartedBy = a.Action + " by " + a.Operator
			out[a.AttemptAfter-1].AuditID = a.ID
		}
	}
	for _, e := range v.Evidence {
		if e.Attempt >= 1 && e.Attempt <= v.Attempt {
			out[e.Attempt-1].Evidence = append(out[e.Attempt-1].Evidence, e.ID)
		}
	}
	return out
}

// timeline merges a job's history into one list in a deterministic order:
// time, then kind, then id.
func timeline(v *JobView) []Event {
	evs := []Event{{At: v.CreatedAt, Kind: EventEnqueued, Text: fmt.Sprintf("enqueued %s, payment %s, %s", v.OperationKey, v.PaymentRef, v.Amount)}}
	for _, e := range v.Evidence {
		kind := EventEvidence
		if e.Source == string(evidence.Webhook) {
			kind = EventWebhook
		}
		text := fmt.Sprintf("%s: %s", e.Source, e.Status)
		if e.ProviderRefundID != "" {
			text += " " + e.ProviderRefundID
		}
		if e.ProcessedAt == nil {
			text += " (not yet acted on)"
		}
		evs = append(evs, Event{At: e.ReceivedAt, Kind: kind, Attempt: e.Attempt, Ref: e.ID, Text: text})
	}
	for _, a := range v.Attempts {
		if a.ClaimedAt == nil || a.Op == fencedwrite.AttemptResolution { // a resolution is the audit's entry
			continue
		}
		text := fmt.Sprintf("%s by %s", a.Op, a.Holder)
		if a.LeaseUntil != nil {
			text += ", leased until " + a.LeaseUntil.Format(TimeFormat)
		}
		kind := EventClaimed
		if a.Op == fencedwrite.AttemptTakeover {
			kind = EventTakenOver
		}
		evs = append(evs, Event{At: *a.ClaimedAt, Kind: kind, Attempt: a.Attempt, Text: text})
	}
	for _, a := range v.Audit {
		kind, text := EventAudit, fmt.Sprintf("%s %s by %s", a.Action, a.Outcome, a.Operator)
		if a.RequestedBy != "" {
			text += fmt.Sprintf(" (requested by %s, request %d)", a.RequestedBy, a.ApprovalID)
		}
		if a.Override {
			text += " OVERRIDE"
		}
		if a.RefundID != "" {
			text += " refund " + a.RefundID
		}
		if a.Action == audit.ActionWake {
			kind, text = EventWoken, "woken out of manual review by new evidence"
		}
		text += fmt.Sprintf(": %s -> %s@%d: %s", a.StateBefore+"@"+strconv.FormatInt(a.AttemptBefore, 10), a.StateAfter, a.AttemptAfter, oneLine(a.Reason))
		evs = append(evs, Event{At: a.RecordedAt, Kind: kind, Attempt: a.AttemptAfter, Ref: a.ID, Text: text})
	}
	if v.Ledger != nil && v.Ledger.SettledAt != nil {
		evs = append(evs, Event{At: *v.Ledger.SettledAt, Kind: EventSettled, Text: fmt.Sprintf("ledger %s %s", v.Ledger.Status, v.Ledger.ProviderRefundID)})
	}
	now := fmt.Sprintf("%s at attempt %d", v.State, v.Attempt)
	switch {
	case v.NextRunAt != nil:
		now += fmt.Sprintf(", next %s due %s", v.NextAction, v.NextRunAt.Format(TimeFormat))
	case v.State == string(refundjob.StateRunning) && v.LeaseUntil != nil:
		now += fmt.Sprintf(", %s, leased until %s", v.NextAction, v.LeaseUntil.Format(TimeFormat))
	case v.State == string(refundjob.StateManualReview):
		now += ": " + oneLine(v.ReviewReason)
	}
	rank := map[EventKind]int{EventEnqueued: 0, EventClaimed: 1, EventTakenOver: 2, EventEvidence: 3, EventWebhook: 4, EventAudit: 5, EventWoken: 6, EventSettled: 7}
	slices.SortStableFunc(evs, func(a, b Event) int {
		if c := a.At.Compare(b.At); c != 0 {
			return c
		}
		if r := rank[a.Kind] - rank[b.Kind]; r != 0 {
			return r
		}
		return cmp.Compare(a.Ref, b.Ref)
	})
	// Where the job stands comes last, whatever its time.
	return append(evs, Event{At: v.UpdatedAt, Kind: EventNow, Attempt: v.Attempt, Text: now})
}

// TimeFormat is how the views print database times: UTC, microseconds.
const TimeFormat = "2006-01-02T15:04:05.000000Z"

func utc(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 160 {
		s = s[:157] + "..."
	}
	return s
}
