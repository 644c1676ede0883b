package operator

import (
	"context"
	stdsql "database/sql"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/fencekit/fencekit/audit"
	"github.com/fencekit/fencekit/ent"
	"github.com/fencekit/fencekit/ent/refund"
	"github.com/fencekit/fencekit/ent/refundjob"
	"github.com/fencekit/fencekit/ent/refundjobattempt"
	"github.com/fencekit/fencekit/ent/refundjobcall"
	"github.com/fencekit/fencekit/evidence"
	"github.com/fencekit/fencekit/fencedwrite"
)

// jobColumns are the columns of a job's situation, then the age of the
// last change by the database's clock.
const jobColumns = "`id`, `operation_key`, `payment_ref`, `amount_minor`, `currency`, `state`, `attempt`, `next_action`, " +
	"`next_run_at`, `provider_refund_id`, `review_reason`, `last_error`, `updated_at`, `key_first_used_at`, `last_send_at`, " +
	"`lease_until`, `created_at`, TIMESTAMPDIFF(MICROSECOND, `updated_at`, " + fencedwrite.ClockUTC + ")"

func (p Page) limit() (int, error) {
	switch {
	case p.Limit < 0 || p.Limit > MaxLimit:
		return 0, inputErr("limit", "must be between 1 and %d, got %d", MaxLimit, p.Limit)
	case p.Limit == 0:
		return DefaultLimit, nil
	}
	return p.Limit, nil
}

// A cursor is "id" for lists in id order, "micros.id" (the row's
// updated_at in microseconds since the epoch, and its id) for lists in order
// of last change, and "id.base64(value)" for prefix searches in order of
// the searched column.
type cursor struct {
	micros int64
	id     int64
	value  string
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

func parseValueCursor(after string) (cursor, bool, error) {
	if after == "" {
		return cursor{}, false, nil
	}
	bad := inputErr("after", "%q is not a cursor this list printed", after)
	id, v, ok := strings.Cut(after, ".")
	if !ok {
		return cursor{}, false, bad
	}
	c, _, err := parseCursor(id, false)
	if err != nil {
		return cursor{}, false, bad
	}
	b, err := base64.RawURLEncoding.DecodeString(v)
	if err != nil {
		return cursor{}, false, bad
	}
	c.value = string(b)
	return c, true, nil
}

func timedCursor(t time.Time, id int64) string {
	return strconv.FormatInt(t.UnixMicro(), 10) + "." + strconv.FormatInt(id, 10)
}

func valueCursor(v string, id int64) string {
	return strconv.FormatInt(id, 10) + "." + base64.RawURLEncoding.EncodeToString([]byte(v))
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
// order, and returns limit rows, each with its status, and whether there
// are more.
func (s *Service) listJobs(ctx context.Context, where string, args []any, order string, limit int) ([]*situation, bool, error) {
	rows, err := s.c.QueryContext(ctx, jobsQuery(where, order), append(args, limit+1)...)
	if err != nil {
		return nil, false, fmt.Errorf("list jobs: %w", err)
	}
	defer rows.Close()
	var out []*situation
	for rows.Next() {
		var (
			it                       situation
			next, first, last, lease stdsql.NullTime
			ref, reason, lastErr     stdsql.NullString
			age                      int64
		)
		j := &it.JobSummary
		if err := rows.Scan(&j.ID, &j.OperationKey, &j.PaymentRef, &j.Amount.Minor, &j.Amount.Currency, &j.State, &j.Attempt,
			&j.NextAction, &next, &ref, &reason, &lastErr, &j.UpdatedAt, &first, &last, &lease, &it.createdAt, &age); err != nil {
			return nil, false, fmt.Errorf("list jobs: %w", err)
		}
		j.UpdatedAt, it.createdAt = j.UpdatedAt.UTC(), it.createdAt.UTC()
		if j.State == string(refundjob.StateReady) && next.Valid {
			t := next.Time.UTC()
			j.NextRunAt = &t
		}
		it.firstSent, it.lastSent, it.leaseUntil = nullTime(first), nullTime(last), nullTime(lease)
		j.ProviderRefundID, it.review, it.lastError = ref.String, reason.String, lastErr.String
		it.summarize(time.Duration(age) * time.Microsecond)
		out = append(out, &it)
	}
	if err := rows.Err(); err != nil {
		return nil, false, fmt.Errorf("list jobs: %w", err)
	}
	more := len(out) > limit
	if more {
		out = out[:limit]
	}
	if err := s.situate(ctx, out); err != nil {
		return nil, false, err
	}
	return out, more, nil
}

func nullTime(t stdsql.NullTime) *time.Time {
	if !t.Valid {
		return nil
	}
	u := t.Time.UTC()
	return &u
}

// summarize fills the summary's derived fields that need only the row.
func (it *situation) summarize(age time.Duration) {
	j := &it.JobSummary
	if j.State == fencedwrite.StateSucceeded || j.State == fencedwrite.StateFailed {
		j.NextAction = ""
	}
	j.Reason = oneLine(it.review)
	if j.Reason == "" {
		j.Reason = oneLine(it.lastError)
	}
	if j.State == fencedwrite.StateManualReview {
		j.ReasonKind = reasonKind(it.review).Key
	}
	it.since, it.age = j.UpdatedAt, age
}

// situate completes each job's situation from the other tables, one query
// each for the whole page: the provider's latest evidence about the
// request, the override mark, the "on it" mark; then derives its status.
func (s *Service) situate(ctx context.Context, jobs []*situation) error {
	if len(jobs) == 0 {
		return nil
	}
	byKey := map[string]*situation{}
	byID := map[int64]*situation{}
	keys, ids := make([]any, 0, len(jobs)), make([]any, 0, len(jobs))
	for _, j := range jobs {
		byKey[j.OperationKey], byID[j.ID] = j, j
		keys, ids = append(keys, j.OperationKey), append(ids, j.ID)
	}
	in := func(n int) string { return "(" + strings.TrimSuffix(strings.Repeat("?, ", n), ", ") + ")" }
	ev := map[string][]Evidence{}
	err := s.each(ctx, "SELECT `operation_key`, `id`, `source`, `provider_status`, `provider_refund_id`, `received_at` FROM `refund_observations` "+
		"WHERE `operation_key` IN "+in(len(keys))+" ORDER BY `id`", keys, func(rows *stdsql.Rows) error {
		var key string
		var e Evidence
		var ref stdsql.NullString
		if err := rows.Scan(&key, &e.ID, &e.Source, &e.Status, &ref, &e.ReceivedAt); err != nil {
			return err
		}
		e.ProviderRefundID, e.ReceivedAt = ref.String, e.ReceivedAt.UTC()
		ev[key] = append(ev[key], e)
		return nil
	})
	if err != nil {
		return fmt.Errorf("read evidence: %w", err)
	}
	err = s.each(ctx, "SELECT `id`, `job_id`, `refund_id`, `requested_by`, `operator`, `approval_id`, `recorded_at` FROM `refund_audit` "+
		"WHERE `job_id` IN "+in(len(ids))+" AND `action` = 'resolve_succeeded' AND `outcome` = 'done' AND `override` = 1", ids, func(rows *stdsql.Rows) error {
		var u Unverified
		var job int64
		var ref, by stdsql.NullString
		var req stdsql.NullInt64
		if err := rows.Scan(&u.AuditID, &job, &ref, &by, &u.ApprovedBy, &req, &u.At); err != nil {
			return err
		}
		u.RefundID, u.RequestedBy, u.RequestID, u.At = ref.String, by.String, req.Int64, u.At.UTC()
		if j := byID[job]; j != nil {
			j.Unverified = &u
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("read overrides: %w", err)
	}
	err = s.each(ctx, "SELECT `job_id`, `operator`, `attempt`, `since` FROM `review_assignments` WHERE `job_id` IN "+in(len(ids))+
		" AND `released_at` IS NULL", ids, func(rows *stdsql.Rows) error {
		var job, attempt int64
		var o OnIt
		if err := rows.Scan(&job, &o.Operator, &attempt, &o.Since); err != nil {
			return err
		}
		o.Since = o.Since.UTC()
		if j := byID[job]; j != nil && j.State == fencedwrite.StateManualReview && j.Attempt == attempt {
			j.OnIt = &o
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("read on-it marks: %w", err)
	}
	err = s.each(ctx, "SELECT `job_id`, `attempt`, `holder` FROM `"+ent.RefundJobAttemptsTable+"` WHERE `job_id` IN "+in(len(ids)), ids, func(rows *stdsql.Rows) error {
		var job, attempt int64
		var holder string
		if err := rows.Scan(&job, &attempt, &holder); err != nil {
			return err
		}
		if j := byID[job]; j != nil && j.Attempt == attempt {
			j.holder = holder
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("read attempts: %w", err)
	}
	for _, j := range jobs {
		j.evidenceFacts(ev[j.OperationKey])
		s.capabilities(j)
		j.Status = j.status().StatusLine
	}
	return nil
}

// capabilities sets what the service's provider offers, and when j's key
// stops being safe to send again.
func (s *Service) capabilities(j *situation) {
	if s.prov == nil {
		return
	}
	caps := s.prov.Capabilities()
	j.caps = &caps
	if j.firstSent != nil && caps.SafeResend {
		end := j.firstSent.Add(s.keyWindow(caps))
		j.windowEnd = &end
	}
}

// each runs q with args and calls fn for each row.
func (s *Service) each(ctx context.Context, q string, args []any, fn func(*stdsql.Rows) error) error {
	rows, err := s.c.QueryContext(ctx, q, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := fn(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

func (it *situation) queueItem() QueueItem {
	return QueueItem{JobSummary: it.JobSummary, Since: it.since, Age: it.age}
}

const queueWhere = "`state` = 'manual_review'"

const afterChange = "(`updated_at` > TIMESTAMPADD(MICROSECOND, ?, TIMESTAMP'1970-01-01 00:00:00') OR " +
	"(`updated_at` = TIMESTAMPADD(MICROSECOND, ?, TIMESTAMP'1970-01-01 00:00:00') AND `id` > ?))"

// likePrefix is a LIKE pattern matching the values that start with p.
func likePrefix(p string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(p) + "%"
}

// reasonWhere selects the jobs in manual review whose reason is of kind k.
func reasonWhere(k ReasonKind) (string, []any) {
	if k.Key == "other" {
		var conds []string
		var args []any
		for _, other := range reasonKinds {
			for _, p := range other.prefixes {
				conds, args = append(conds, "`review_reason` LIKE ?"), append(args, likePrefix(p))
			}
		}
		return "NOT (" + strings.Join(conds, " OR ") + ")", args
	}
	var conds []string
	var args []any
	for _, p := range k.prefixes {
		conds, args = append(conds, "`review_reason` LIKE ?"), append(args, likePrefix(p))
	}
	return "(" + strings.Join(conds, " OR ") + ")", args
}

// Queue returns one page of the manual review queue, oldest first, with
// each job's status line, age, reason, amount, override and "on it" marks;
// only the jobs whose reason is of the kind reason when it is set (a
// ReasonKind's Key). A database error is returned wrapped.
func (s *Service) Queue(ctx context.Context, reason string, p Page) (QueuePage, error) {
	limit, err := p.limit()
	if err != nil {
		return QueuePage{}, fmt.Errorf("read queue: %w", err)
	}
	c, ok, err := parseCursor(p.After, true)
	if err != nil {
		return QueuePage{}, fmt.Errorf("read queue: %w", err)
	}
	where, args := queueWhere, []any{}
	if reason != "" {
		k, known := kindByKey(reason)
		if !known {
			return QueuePage{}, fmt.Errorf("read queue: %w", inputErr("reason", "%q is not a kind of review reason (%s)", reason, reasonKeys()))
		}
		w, a := reasonWhere(k)
		where, args = where+" AND "+w, append(args, a...)
	}
	if ok {
		where += " AND " + afterChange
		args = append(args, c.micros, c.micros, c.id)
	}
	items, more, err := s.listJobs(ctx, where, args, "`updated_at`, `id`", limit)
	if err != nil {
		return QueuePage{}, fmt.Errorf("read queue: %w", err)
	}
	page := QueuePage{Items: []QueueItem{}}
	for _, it := range items {
		page.Items = append(page.Items, it.queueItem())
	}
	if more {
		last := items[len(items)-1]
		page.Next = timedCursor(last.UpdatedAt, last.ID)
	}
	return page, nil
}

func reasonKeys() string {
	keys := make([]string, len(reasonKinds))
	for i, k := range reasonKinds {
		keys[i] = k.Key
	}
	return strings.Join(keys, ", ")
}

// Search returns one page of the jobs matching q. With only q.State set,
// the jobs come least recently changed first (the index on state and
// updated_at); a prefix search comes in the order of the column it
// searches (its index); the others by id. Each field is served by an index
// (operation key: unique; payment; provider refund id; state).
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
	var ordered string // the column a prefix search reads in order
	for _, f := range []struct{ col, v string }{{"operation_key", q.OperationKey}, {"payment_ref", q.PaymentRef}, {"provider_refund_id", q.ProviderRefundID}} {
		switch {
		case f.v == "":
		case q.Prefix:
			conds, args = append(conds, "`"+f.col+"` LIKE ?"), append(args, likePrefix(f.v))
			if ordered == "" {
				ordered = f.col
			}
		default:
			conds, args = append(conds, "`"+f.col+"` = ?"), append(args, f.v)
		}
	}
	timed := q.State != "" && q.OperationKey == "" && q.PaymentRef == "" && q.ProviderRefundID == ""
	order := "`id`"
	switch {
	case ordered != "":
		order = "`" + ordered + "`, `id`"
		c, ok, err := parseValueCursor(p.After)
		if err != nil {
			return JobsPage{}, fmt.Errorf("search jobs: %w", err)
		}
		if ok {
			conds, args = append(conds, "(`"+ordered+"` > ? OR (`"+ordered+"` = ? AND `id` > ?))"), append(args, c.value, c.value, c.id)
		}
	case timed:
		order = "`updated_at`, `id`"
		c, ok, err := parseCursor(p.After, true)
		if err != nil {
			return JobsPage{}, fmt.Errorf("search jobs: %w", err)
		}
		if ok {
			conds, args = append(conds, afterChange), append(args, c.micros, c.micros, c.id)
		}
	default:
		c, ok, err := parseCursor(p.After, false)
		if err != nil {
			return JobsPage{}, fmt.Errorf("search jobs: %w", err)
		}
		if ok {
			conds, args = append(conds, "`id` > ?"), append(args, c.id)
		}
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
		switch {
		case ordered != "":
			page.Next = valueCursor(map[string]string{"operation_key": last.OperationKey, "payment_ref": last.PaymentRef,
				"provider_refund_id": last.ProviderRefundID}[ordered], last.ID)
		case timed:
			page.Next = timedCursor(last.UpdatedAt, last.ID)
		default:
			page.Next = strconv.FormatInt(last.ID, 10)
		}
	}
	return page, nil
}

const auditColumns = "`id`, `job_id`, `operation_key`, `action`, `outcome`, `operator`, `requested_by`, `approval_id`, `reason`, " +
	"`refund_id`, `override`, `evidence_shown`, `state_before`, `attempt_before`, `state_after`, `attempt_after`, `recorded_at`"

func (s *Service) audits(ctx context.Context, where string, args ...any) ([]AuditEntry, error) {
	out := []AuditEntry{}
	err := s.each(ctx, "SELECT "+auditColumns+" FROM `refund_audit` WHERE "+where, args, func(rows *stdsql.Rows) error {
		var (
			e                  AuditEntry
			requestedBy, refID stdsql.NullString
			approvalID         stdsql.NullInt64
		)
		if err := rows.Scan(&e.ID, &e.JobID, &e.OperationKey, &e.Action, &e.Outcome, &e.Operator, &requestedBy, &approvalID, &e.Reason,
			&refID, &e.Override, &e.EvidenceShown, &e.StateBefore, &e.AttemptBefore, &e.StateAfter, &e.AttemptAfter, &e.RecordedAt); err != nil {
			return err
		}
		e.RequestedBy, e.RefundID, e.ApprovalID, e.RecordedAt = requestedBy.String, refID.String, approvalID.Int64, e.RecordedAt.UTC()
		var rec shownRecord
		if json.Unmarshal([]byte(e.EvidenceShown), &rec) == nil {
			e.Verification = rec.Verification
			if e.Outcome == audit.OutcomeRefused {
				// Entries from before the refusal's sentence was kept hold
				// the cause in the note.
				e.Refused = strings.TrimPrefix(rec.Note, "refused: ")
				if rec.Refused != "" {
					said := strings.ReplaceAll(rec.Refused, " Nothing was written but the audit entry.", "")
					e.Refused = said + " (" + oneLine(rec.Cause) + ")"
				}
				e.Refused = Visible(e.Refused)
			}
		}
		e.Text = auditText(e)
		out = append(out, e)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read audit: %w", err)
	}
	return out, nil
}

// Departures returns one page of the jobs that left manual review, newest
// first, with who or what took each out, the requester of an approved
// request, whether a settlement was verified, and why.
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
		d := Departure{JobID: e.JobID, OperationKey: e.OperationKey, At: e.RecordedAt, Action: e.Action, Operator: e.Operator,
			RequestedBy: e.RequestedBy, Why: oneLine(e.Reason), StateAfter: e.StateAfter, AttemptAfter: e.AttemptAfter, AuditID: e.ID, Text: e.Text}
		if e.StateAfter == fencedwrite.StateSucceeded {
			verified := !e.Override
			d.Verified = &verified
		}
		page.Departures = append(page.Departures, d)
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
		a.DecidedAt = nullTime(decidedAt)
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read approvals: %w", err)
	}
	return out, nil
}

// approvalFacts adds to each request the facts its approver decides on:
// the job's payment, amount and status now and whether it moved since the
// request, the verification at request time, what it asks, and how it was
// closed.
func (s *Service) approvalFacts(ctx context.Context, list []Approval) error {
	if len(list) == 0 {
		return nil
	}
	ids, jobIDs := make([]any, 0, len(list)), make([]any, 0, len(list))
	for _, a := range list {
		ids, jobIDs = append(ids, a.ID), append(jobIDs, a.JobID)
	}
	in := func(n int) string { return "(" + strings.TrimSuffix(strings.Repeat("?, ", n), ", ") + ")" }
	jobs, _, err := s.listJobs(ctx, "`id` IN "+in(len(jobIDs)), jobIDs, "`id`", len(jobIDs))
	if err != nil {
		return fmt.Errorf("read approvals: %w", err)
	}
	byJob := map[int64]*situation{}
	for _, j := range jobs {
		byJob[j.ID] = j
	}
	entries, err := s.audits(ctx, "`approval_id` IN "+in(len(ids))+" ORDER BY `id`", ids...)
	if err != nil {
		return fmt.Errorf("read approvals: %w", err)
	}
	for i := range list {
		a := &list[i]
		if j := byJob[a.JobID]; j != nil {
			a.PaymentRef, a.Amount, a.JobStatus = j.PaymentRef, j.Amount, j.Status
			a.JobMoved = j.State != fencedwrite.StateManualReview || j.Attempt != a.SeenAttempt
		}
		a.Asks = fmt.Sprintf("Send the refund of %s to payment %s again with the same key (request %s).", a.Amount, Visible(a.PaymentRef), Visible(a.OperationKey))
		if a.As == AsSucceeded {
			a.Asks = fmt.Sprintf("Settle %s to payment %s as refunded on refund %s, which the provider does not confirm (an override: the job stays marked unverified).",
				a.Amount, Visible(a.PaymentRef), Visible(a.RefundID))
		}
		if a.LastAnswer, err = s.lastAnswerOf(ctx, a.JobID); err != nil {
			return fmt.Errorf("read approvals: %w", err)
		}
		for _, e := range entries {
			switch {
			case e.ApprovalID != a.ID:
			case e.Outcome == audit.OutcomeRequested:
				a.Verification = e.Verification
			case e.Outcome == audit.OutcomeDeclined || e.Outcome == audit.OutcomeRefused || e.Outcome == audit.OutcomeStale || e.Outcome == audit.OutcomeDone:
				a.Closed = e.Text + " (" + Stamp(e.RecordedAt) + ")"
			}
		}
	}
	return nil
}

// lastAnswerOf says, in the timeline's words, what the provider answered to
// job id's last recorded call ("" when none was).
func (s *Service) lastAnswerOf(ctx context.Context, id int64) (string, error) {
	calls, err := s.calls(ctx, id)
	if err != nil || len(calls) == 0 {
		return "", err
	}
	last := calls[len(calls)-1]
	return callText(&JobView{}, last) + " (" + Stamp(last.AnsweredAt) + ")", nil
}

// Approvals returns one page of approval requests, oldest first, each with
// the facts its approver decides on: the pending ones when pendingOnly,
// else all.
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
	if err := s.approvalFacts(ctx, page.Approvals); err != nil {
		return ApprovalsPage{}, err
	}
	return page, nil
}

// Approval returns approval request id with its facts, or an error
// matching ErrNotFound.
func (s *Service) Approval(ctx context.Context, id int64) (Approval, error) {
	if id <= 0 {
		return Approval{}, fmt.Errorf("read approval: %w", inputErr("id", "must be an approval request id, got %d", id))
	}
	return s.readApproval(ctx, id)
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

// Job returns job id's view, or an error matching ErrNotFound.
func (s *Service) Job(ctx context.Context, id int64) (*JobView, error) {
	if id <= 0 {
		return nil, fmt.Errorf("read job: %w", inputErr("id", "must be a job id, got %d", id))
	}
	list, _, err := s.listJobs(ctx, "`id` = ?", []any{id}, "`id`", 1)
	if err != nil {
		return nil, fmt.Errorf("read job %d: %w", id, err)
	}
	if len(list) == 0 {
		return nil, fmt.Errorf("job %d: %w", id, ErrNotFound)
	}
	sit := list[0]
	v := &JobView{JobSummary: sit.JobSummary, LeaseUntil: sit.leaseUntil, KeyFirstUsedAt: sit.firstSent, LastSendAt: sit.lastSent,
		LastError: sit.lastError, ReviewReason: sit.review, CreatedAt: sit.createdAt, Evidence: []Evidence{}, Webhooks: []Evidence{}}
	j, err := s.readJob(ctx, id)
	if err != nil {
		return nil, err
	}
	v.ReviewEvidence = deref(j.ReviewEvidence)
	r, err := s.c.Refund.Query().Where(refund.OperationKey(v.OperationKey)).Only(ctx)
	switch {
	case err == nil:
		v.Ledger = &LedgerRow{Status: string(r.Status), ProviderRefundID: deref(r.ProviderRefundID), SettledAt: utc(r.SettledAt)}
	case !ent.IsNotFound(err):
		return nil, fmt.Errorf("read ledger of job %d: %w", id, err)
	}
	es, err := evidence.ForKey(ctx, s.c, v.OperationKey)
	if err != nil {
		return nil, fmt.Errorf("read job %d: %w", id, err)
	}
	done := v.State == fencedwrite.StateSucceeded || v.State == fencedwrite.StateFailed
	for _, e := range es {
		ev := Evidence{ID: e.ID, Source: string(e.Source), Status: string(e.Status), ProviderRefundID: e.ProviderRefundID, Attempt: e.Attempt,
			ReceivedAt: e.ReceivedAt.UTC(), ProcessedAt: utc(e.ProcessedAt), Payload: string(e.Payload)}
		ev.Text = evidenceText(ev, done)
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
	if err := s.approvalFacts(ctx, v.Approvals); err != nil {
		return nil, fmt.Errorf("read job %d: %w", id, err)
	}
	logged, err := s.c.RefundJobAttempt.Query().Where(refundjobattempt.JobID(id)).Order(refundjobattempt.ByAttempt()).All(ctx)
	if err != nil {
		return nil, fmt.Errorf("read attempts of job %d: %w", id, err)
	}
	v.Attempts = attempts(v, logged)
	if v.Calls, err = s.calls(ctx, id); err != nil {
		return nil, err
	}
	v.Detail = sit.status()
	v.Status = v.Detail.StatusLine
	v.Facts = facts(v)
	v.Engineering = engineering(v)
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
		a.StartedBy = fmt.Sprintf("%s by %s", r.Op, Visible(r.Holder))
	}
	for _, a := range v.Audit {
		if a.Outcome == audit.OutcomeDone && a.AttemptAfter == a.AttemptBefore+1 && a.AttemptAfter >= 1 && a.AttemptAfter <= v.Attempt {
			out[a.AttemptAfter-1].StartedBy = a.Action + " by " + Visible(a.Operator)
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

// MaxSummarized bounds the jobs QueueSummary reads, so that a view never
// reads a runaway queue whole: above it the summary says More.
const MaxSummarized = 10_000

// ReasonGroup is one kind of review reason in the queue: how many jobs,
// and the money they hold, per currency.
type ReasonGroup struct {
	ReasonKind
	Jobs  int      `json:"jobs"`
	Money []Amount `json:"money"`
}

// QueueSummary is the manual review queue at a glance: its jobs and the
// money they hold per currency, in all and by kind of reason (the kinds
// with no job left out). More says it stopped at MaxSummarized jobs.
type QueueSummary struct {
	Jobs   int           `json:"jobs"`
	Money  []Amount      `json:"money"`
	Groups []ReasonGroup `json:"groups"`
	More   bool          `json:"more,omitempty"`
}

// QueueSummary reads the queue at a glance, from the state index's range of
// the jobs in manual review (at most MaxSummarized of them).
func (s *Service) QueueSummary(ctx context.Context) (QueueSummary, error) {
	var cases []string
	var args []any
	for _, k := range reasonKinds {
		for _, p := range k.prefixes {
			cases, args = append(cases, "WHEN `review_reason` LIKE ? THEN ?"), append(args, likePrefix(p), k.Key)
		}
	}
	q := "SELECT CASE " + strings.Join(cases, " ") + " ELSE 'other' END AS `kind`, `currency`, COUNT(*), SUM(`amount_minor`) FROM " +
		"(SELECT `review_reason`, `currency`, `amount_minor` FROM `refund_jobs` WHERE " + queueWhere + " LIMIT ?) `q` GROUP BY `kind`, `currency` ORDER BY `currency`"
	sum := QueueSummary{Money: []Amount{}, Groups: []ReasonGroup{}}
	groups := map[string]*ReasonGroup{}
	total := map[string]int64{}
	var currencies []string
	err := s.each(ctx, q, append(args, MaxSummarized+1), func(rows *stdsql.Rows) error {
		var kind, cur string
		var n int
		var minor int64
		if err := rows.Scan(&kind, &cur, &n, &minor); err != nil {
			return err
		}
		g := groups[kind]
		if g == nil {
			k, _ := kindByKey(kind)
			g = &ReasonGroup{ReasonKind: k, Money: []Amount{}}
			groups[kind] = g
		}
		g.Jobs += n
		g.Money = append(g.Money, Amount{minor, cur})
		if _, seen := total[cur]; !seen {
			currencies = append(currencies, cur)
		}
		total[cur] += minor
		sum.Jobs += n
		return nil
	})
	if err != nil {
		return QueueSummary{}, fmt.Errorf("summarize queue: %w", err)
	}
	for _, cur := range currencies {
		sum.Money = append(sum.Money, Amount{total[cur], cur})
	}
	for _, k := range reasonKinds {
		if g := groups[k.Key]; g != nil {
			sum.Groups = append(sum.Groups, *g)
		}
	}
	if sum.Jobs > MaxSummarized {
		sum.More = true
	}
	return sum, nil
}

// calls reads the calls log of job id, in the order of its attempts.
func (s *Service) calls(ctx context.Context, id int64) ([]Call, error) {
	logged, err := s.c.RefundJobCall.Query().Where(refundjobcall.JobID(id)).Order(refundjobcall.ByAttempt()).All(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the provider calls of job %d: %w", id, err)
	}
	out := make([]Call, 0, len(logged))
	for _, c := range logged {
		out = append(out, Call{Attempt: c.Attempt, Kind: string(c.Kind), Outcome: c.Outcome, ProviderRefundID: deref(c.ProviderRefundID),
			Detail: c.Detail, AnsweredAt: c.AnsweredAt.UTC()})
	}
	return out, nil
}
