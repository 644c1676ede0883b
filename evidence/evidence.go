// Package evidence is the observation log: an append-only, de-duplicated
// record of external evidence about refunds (provider responses, including
// ones that arrived too late for their worker to write; webhooks; reconcile
// results; operators' findings).
//
// Recording evidence and changing a job are two different things: a worker
// that lost its fence may still record what the provider told it, but only
// the current holder (or the reconciler, through the fenced API) changes the
// job. The database enforces the log's shape: rows are never updated except
// to mark them processed, once, and never deleted.
package evidence

import (
	"context"
	"crypto/sha256"
	stdsql "database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"entgo.io/ent/dialect/sql/sqlgraph"

	"github.com/fencekit/fencekit/fencedwrite"
)

// Source says where a piece of evidence came from.
type Source string

// The sources of evidence.
const (
	ProviderResponse Source = "provider_response" // a response to our own request
	Webhook          Source = "webhook"           // pushed by the provider
	Reconcile        Source = "reconcile"         // the answer to a lookup
	Operator         Source = "operator"          // a person's finding
)

// Status is what the evidence says about the refund at the provider.
type Status string

// The statuses evidence can report.
const (
	Succeeded Status = "succeeded"
	Pending   Status = "pending"
	Rejected  Status = "rejected"
	NotFound  Status = "not_found"
	Conflict  Status = "conflict"
	Reversed  Status = "reversed" // a settled refund was reversed: a new business process, never a change to the job
)

// Observation is one piece of evidence to record.
type Observation struct {
	OperationKey     string // the refund request it concerns (required)
	JobID            int64  // the job, when known
	Attempt          int64  // the attempt of the worker that saw it; 0 for webhooks and operators
	Source           Source
	ProviderRefundID string
	Status           Status
	Payload          []byte // the raw evidence as received (required)
	// EventID is the provider's id for the event, when it has one (webhooks
	// do). Without it, the evidence is identified by a digest of its source,
	// key, refund id, status and payload.
	EventID string
}

// DB is where evidence is written: an *ent.Client or an *ent.Tx (both run
// raw statements with the sql/execquery feature).
type DB interface {
	ExecContext(ctx context.Context, query string, args ...any) (stdsql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*stdsql.Rows, error)
}

var (
	sources  = map[Source]bool{ProviderResponse: true, Webhook: true, Reconcile: true, Operator: true}
	statuses = map[Status]bool{Succeeded: true, Pending: true, Rejected: true, NotFound: true, Conflict: true, Reversed: true}
)

func (o Observation) validate() error {
	var errs []error
	if o.OperationKey == "" {
		errs = append(errs, &fencedwrite.FieldError{Field: "operation_key", Problem: "must not be empty"})
	}
	if !sources[o.Source] {
		errs = append(errs, &fencedwrite.FieldError{Field: "source", Problem: fmt.Sprintf("unknown source %q", o.Source)})
	}
	if !statuses[o.Status] {
		errs = append(errs, &fencedwrite.FieldError{Field: "provider_status", Problem: fmt.Sprintf("unknown status %q", o.Status)})
	}
	if len(o.Payload) == 0 {
		errs = append(errs, &fencedwrite.FieldError{Field: "payload", Problem: "must not be empty: keep the raw evidence"})
	}
	if o.JobID < 0 || o.Attempt < 0 {
		errs = append(errs, &fencedwrite.FieldError{Field: "job_id/attempt", Problem: "must not be negative"})
	}
	return errors.Join(errs...)
}

// DedupKey identifies the evidence: the same evidence recorded twice is one
// row.
func (o Observation) DedupKey() string {
	if o.EventID != "" {
		return "event:" + string(o.Source) + ":" + o.EventID
	}
	h := sha256.New()
	for _, part := range []string{string(o.Source), o.OperationKey, o.ProviderRefundID, string(o.Status)} {
		fmt.Fprintf(h, "%d:%s;", len(part), part)
	}
	h.Write(o.Payload)
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

const insertObservation = "INSERT INTO refund_observations " +
	"(dedup_key, operation_key, job_id, attempt, source, provider_refund_id, provider_status, payload, received_at) " +
	"VALUES (?, ?, ?, ?, ?, ?, ?, ?, " + fencedwrite.ClockUTC + ")"

// Record appends o to the log, stamped with the database's time, unless the
// same evidence is already there. It returns the row's id and whether this
// call added it. Bad input is refused with an error naming each field.
func Record(ctx context.Context, db DB, o Observation) (id int64, created bool, err error) {
	if err := o.validate(); err != nil {
		return 0, false, fmt.Errorf("record evidence: %w", err)
	}
	key := o.DedupKey()
	res, err := db.ExecContext(ctx, insertObservation, key, o.OperationKey, nullInt(o.JobID), nullInt(o.Attempt),
		string(o.Source), nullString(o.ProviderRefundID), string(o.Status), string(o.Payload))
	if err != nil {
		if !sqlgraph.IsUniqueConstraintError(err) {
			return 0, false, fmt.Errorf("record evidence for %s: %w", o.OperationKey, err)
		}
		rows, err := db.QueryContext(ctx, "SELECT id FROM refund_observations WHERE dedup_key = ?", key)
		if err != nil {
			return 0, false, fmt.Errorf("record evidence for %s: read duplicate: %w", o.OperationKey, err)
		}
		defer rows.Close()
		if !rows.Next() {
			return 0, false, fmt.Errorf("record evidence for %s: duplicate %s vanished: %w", o.OperationKey, key, rows.Err())
		}
		if err := rows.Scan(&id); err != nil {
			return 0, false, err
		}
		return id, false, rows.Err()
	}
	id, err = res.LastInsertId()
	if err != nil {
		return 0, false, fmt.Errorf("record evidence for %s: %w", o.OperationKey, err)
	}
	return id, true, nil
}

// Entry is a recorded observation.
type Entry struct {
	Observation
	ID          int64
	ReceivedAt  time.Time
	ProcessedAt *time.Time
}

const selectEntries = "SELECT id, operation_key, job_id, attempt, source, provider_refund_id, provider_status, payload, received_at, processed_at FROM refund_observations"

// Unprocessed returns up to limit entries nobody has acted on yet, oldest
// first.
func Unprocessed(ctx context.Context, db DB, limit int) ([]Entry, error) {
	return query(ctx, db, selectEntries+" WHERE processed_at IS NULL ORDER BY id LIMIT ?", limit)
}

// ForKey returns every entry about one refund request, oldest first: read it
// before deciding that "not found" means anything.
func ForKey(ctx context.Context, db DB, operationKey string) ([]Entry, error) {
	return query(ctx, db, selectEntries+" WHERE operation_key = ? ORDER BY id", operationKey)
}

func query(ctx context.Context, db DB, q string, args ...any) ([]Entry, error) {
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("read evidence: %w", err)
	}
	defer rows.Close()
	var out []Entry
	for rows.Next() {
		var (
			e              Entry
			jobID, attempt stdsql.NullInt64
			refundID       stdsql.NullString
			source, status string
			payload        []byte
			processed      stdsql.NullTime
		)
		if err := rows.Scan(&e.ID, &e.OperationKey, &jobID, &attempt, &source, &refundID, &status, &payload, &e.ReceivedAt, &processed); err != nil {
			return nil, fmt.Errorf("read evidence: %w", err)
		}
		e.JobID, e.Attempt, e.ProviderRefundID = jobID.Int64, attempt.Int64, refundID.String
		e.Source, e.Status, e.Payload = Source(source), Status(status), payload
		if processed.Valid {
			e.ProcessedAt = &processed.Time
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// ErrAlreadyProcessed means another reconciler marked the entry first.
var ErrAlreadyProcessed = errors.New("evidence already processed")

// MarkProcessed marks an entry as acted on. Run it in the same transaction
// as the action (the fenced transition's callback), so the mark and the
// action commit together; a second reconciler gets ErrAlreadyProcessed.
func MarkProcessed(ctx context.Context, db DB, id int64) error {
	res, err := db.ExecContext(ctx, "UPDATE refund_observations SET processed_at = "+fencedwrite.ClockUTC+" WHERE id = ? AND processed_at IS NULL", id)
	if err != nil {
		return fmt.Errorf("mark evidence %d processed: %w", id, err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return fmt.Errorf("mark evidence %d processed: %w", id, ErrAlreadyProcessed)
	}
	return nil
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
