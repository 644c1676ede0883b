package fencedwrite

import (
	"errors"
	"fmt"
)

// The outcomes of a fenced write (Apply, Run). An error returned by the
// runner matches (errors.Is) exactly one of ErrSuperseded, ErrAlreadySettled,
// ErrCommitUnknown, ErrRolledBack, ErrUnexpectedState, ErrFoundRowsOff and
// ErrInvalid, so callers can switch on them; the one exception is a write
// superseded after its COMMIT reply was lost, which matches both ErrSuperseded
// and ErrCommitUnknown. A nil error means the transaction committed and the
// driver acknowledged the COMMIT.
var (
	// ErrSuperseded means another claim, takeover or operator resolution moved
	// the job's attempt past the caller's: the caller has lost its write
	// rights for good. Nothing was written by this call. Stop working on the
	// job; record any provider evidence in the observation log instead.
	ErrSuperseded = errors.New("superseded by a newer attempt")

	// ErrAlreadySettled means the transition the caller asked for is already
	// in place, made by this same attempt: an earlier commit landed but its
	// reply was lost. Treat it as success and do not act again (in
	// particular, do not call the provider again).
	ErrAlreadySettled = errors.New("already settled by this attempt")

	// ErrCommitUnknown means COMMIT was sent but no reply arrived, and a
	// re-read could not tell whether it landed. The write may or may not be
	// in place. Do not call the provider and do not retry blindly: the next
	// scheduler pass reads the truth from the database.
	ErrCommitUnknown = errors.New("commit outcome unknown")

	// ErrRolledBack means the transaction was rolled back and nothing it wrote
	// is in place: the callback failed, a statement failed (a deadlock, a lock
	// wait timeout, a broken connection before COMMIT was sent), a commit hook
	// failed, or the server answered COMMIT with an error. The caller still
	// holds its lease and may retry the same transition. From Claim, Takeover
	// or Enqueue it means nothing was claimed or enqueued; retry later.
	ErrRolledBack = errors.New("rolled back")

	// ErrUnexpectedState means the fenced write matched no row and a fresh
	// re-read found the job neither superseded nor settled as asked (for
	// example this attempt already settled it differently), or the database
	// fence (a trigger) refused the write. Nothing was written; look at the
	// job before acting, and do not retry blindly.
	ErrUnexpectedState = errors.New("job is not in the state this write expects")

	// ErrFoundRowsOff means the fenced write matched its row but the driver
	// reported 0 affected rows: the connection counts changed rows, not
	// matched rows. Connect with clientFoundRows=true (see DSN). Nothing was
	// written.
	ErrFoundRowsOff = errors.New("driver reports changed rows, not matched rows (clientFoundRows=true is missing)")
)

// Errors from claim, takeover and input checks.
var (
	// ErrNotFound means no job has the given id.
	ErrNotFound = errors.New("job not found")

	// ErrNotClaimable means the job is not in a state the claim or takeover
	// accepts: a claim needs a due ready job, a takeover a running job whose
	// lease has expired. Nothing was written.
	ErrNotClaimable = errors.New("job not claimable")

	// ErrInvalid means the call was wrong, not unlucky: an argument failed
	// validation (the error names the field and the problem), a transition
	// was not built from a lease or a read job, or a runner callback misused
	// its transaction. Nothing was written, and retrying the same call gets
	// the same answer: fix the caller. ErrInvalidLease, ErrOutsideRun,
	// ErrNoFencedWrite and ErrRunnerOwnsCommit match it.
	ErrInvalid = errors.New("invalid input")

	// ErrInvalidLease means a transition was built from a lease that Claim or
	// Takeover did not return (a zero value, or nil). It matches ErrInvalid.
	ErrInvalidLease = fmt.Errorf("%w: lease was not obtained from Claim or Takeover", ErrInvalid)

	// ErrOutsideRun means a fenced write was attempted outside the fenced
	// transaction runner, which must own the COMMIT to report its outcome.
	// It matches ErrInvalid.
	ErrOutsideRun = fmt.Errorf("%w: fenced write outside the fenced transaction runner", ErrInvalid)

	// ErrNoFencedWrite means a runner callback returned without applying any
	// fenced write; the transaction was rolled back. It matches ErrInvalid.
	ErrNoFencedWrite = fmt.Errorf("%w: no fenced write in the transaction", ErrInvalid)

	// ErrRunnerOwnsCommit is what a callback gets when it commits or rolls
	// back the runner's transaction: only the runner ends it, so that it can
	// report the outcome. Return from the callback instead. It matches
	// ErrInvalid.
	ErrRunnerOwnsCommit = fmt.Errorf("%w: the fenced runner owns COMMIT and ROLLBACK: return from the callback instead", ErrInvalid)

	// ErrKeyConflict means the idempotency key is already enqueued (or was,
	// and its job is archived) with different request parameters. A new
	// request needs a new key.
	ErrKeyConflict = errors.New("idempotency key already used with different parameters")

	// ErrKeyArchived means the key was enqueued before, with the same
	// parameters, and its job has since been settled and archived. The
	// request is not new: treat it like the no-op of a duplicate enqueue.
	// A key, once enqueued, is known for ever, so a re-delivered request can
	// never become a second refund.
	ErrKeyArchived = errors.New("idempotency key already enqueued; its job is archived")

	// ErrBypass means code tried to write a fenced entity (or change a
	// create-only companion) through Ent's generic builders. The fenced API
	// is the only way to write it. It matches ErrInvalid.
	ErrBypass = fmt.Errorf("%w: generic write of a fenced entity", ErrInvalid)
)

// Row is what a re-read of a job found.
type Row struct {
	Found   bool
	State   string
	Attempt int64
}

func (r Row) String() string {
	if !r.Found {
		return "no such row"
	}
	return fmt.Sprintf("%s at attempt %d", r.State, r.Attempt)
}

// WriteError reports a fenced write that did not commit as asked: which
// write, what the fresh re-read found, and the outcome (one of the sentinels
// above, matched with errors.Is).
type WriteError struct {
	Table   string // table name, e.g. refund_jobs
	ID      int64  // job id
	Op      string // transition, e.g. "complete"
	Attempt int64  // the attempt the write was fenced on
	Found   Row    // what the re-read found; zero when it could not be read
	Outcome error  // ErrSuperseded, ErrAlreadySettled, ErrCommitUnknown, ...
	Cause   error  // the underlying error, if any (commit error, callback error)
}

func (e *WriteError) Error() string {
	msg := fmt.Sprintf("%s %s#%d at attempt %d", e.Op, e.Table, e.ID, e.Attempt)
	if e.Cause == nil || !errors.Is(e.Cause, e.Outcome) {
		msg += fmt.Sprintf(": %v", e.Outcome)
	}
	if e.Found.Found || e.Found.State != "" {
		msg += fmt.Sprintf(" (row is %s)", e.Found)
	}
	if e.Cause != nil {
		msg += ": " + e.Cause.Error()
	}
	return msg
}

// Unwrap exposes both the outcome sentinel and the cause to errors.Is/As.
func (e *WriteError) Unwrap() []error {
	if e.Cause == nil {
		return []error{e.Outcome}
	}
	return []error{e.Outcome, e.Cause}
}

// FieldError is a validation failure of one named field.
type FieldError struct {
	Field   string
	Problem string
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Problem }

// Is makes every FieldError match ErrInvalid.
func (e *FieldError) Is(target error) bool { return target == ErrInvalid }

func fieldErr(field, format string, args ...any) *FieldError {
	return &FieldError{Field: field, Problem: fmt.Sprintf(format, args...)}
}
