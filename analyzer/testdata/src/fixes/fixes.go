// Package fixes checks the suggested fixes: offered only where the job's
// state and attempt are unambiguously at hand (fixes.go.golden holds the
// file with them applied).
package fixes

import (
	"context"
	"database/sql"
)

type Job struct {
	ID      int64
	State   string
	Attempt int64
}

type Row struct{ ID int64 } // no State, no Attempt

const requeueSQL = "UPDATE refund_jobs SET state = 'ready' WHERE id = ?"

// Fixed: a job value whose ID the WHERE takes, read only.
func requeue(ctx context.Context, db *sql.DB, job Job) error {
	_, err := db.ExecContext(ctx, "UPDATE refund_jobs SET state = 'ready' WHERE id = ?", job.ID) // want `unfenced UPDATE of refund_jobs: WHERE lacks state = \? and attempt = \?`
	return err
}

// Fixed: a pointer, a raw string on several lines, a SET with arguments.
func (s *store) settle(ctx context.Context, job *Job, ref string) error {
	_, err := s.db.ExecContext(ctx, // want +1 `unfenced UPDATE of refund_jobs: WHERE lacks state = \? and attempt = \?`
		`UPDATE refund_jobs SET state = 'succeeded', provider_ref = ?
		WHERE id = ?`, ref, job.ID)
	return err
}

type store struct{ db *sql.DB }

// Fixed: only the attempt is missing.
func fail(db *sql.DB, job Job) {
	db.Exec("UPDATE refund_jobs SET state = 'failed' WHERE id = ? AND state = 'running'", job.ID) // want `WHERE lacks attempt = \?`
}

// Fixed inside a closure; the job is read in other places too.
func retry(db *sql.DB, job *Job) func() {
	_ = job.State + "x"
	return func() {
		db.Exec("UPDATE refund_jobs SET attempt = attempt + 1 WHERE id = ?", job.ID) // want `unfenced UPDATE`
	}
}

// No fix: the WHERE takes a bare id; which job it is cannot be told.
func byID(ctx context.Context, db *sql.DB, id int64, job Job) {
	db.ExecContext(ctx, "UPDATE refund_jobs SET state = 'ready' WHERE id = ?", id) // want `unfenced UPDATE`
	_ = job.ID
}

// No fix: the job's state was changed before the write; fencing on it
// would fence on the new state, not the one read.
func mutated(db *sql.DB, job Job) {
	job.State = "done"
	db.Exec("UPDATE refund_jobs SET state = ? WHERE id = ?", job.State, job.ID) // want `unfenced UPDATE`
}

// No fix: the job is passed on (it may be changed there).
func passedOn(db *sql.DB, job *Job) {
	touch(job)
	db.Exec("UPDATE refund_jobs SET state = 'ready' WHERE id = ?", job.ID) // want `unfenced UPDATE`
}

func touch(*Job) {}

// No fix: a method is called on the job.
func (j *Job) advance() { j.Attempt++ }

func methodCalled(db *sql.DB, job *Job) {
	job.advance()
	db.Exec("UPDATE refund_jobs SET state = 'ready' WHERE id = ?", job.ID) // want `unfenced UPDATE`
}

// No fix: the job is redeclared.
func redeclared(db *sql.DB, jobs []Job) {
	job := jobs[0]
	job, n := jobs[1], 1
	_ = n
	db.Exec("UPDATE refund_jobs SET state = 'ready' WHERE id = ?", job.ID) // want `unfenced UPDATE`
}

// Fixed: the row written is b's (the WHERE takes b.ID); a's id is a value
// set, and a subquery's WHERE does not count.
func twoJobs(db *sql.DB, a, b Job) {
	db.Exec("UPDATE refund_jobs SET state = 'ready', parent_id = ?, n = (SELECT 1 WHERE 1 = ?) WHERE id = ?", a.ID, a.Attempt, b.ID) // want `unfenced UPDATE`
}

// No fix: the row written is childID's, not the job's.
func child(db *sql.DB, job Job, childID int64) {
	db.Exec("UPDATE refund_jobs SET parent_id = ? WHERE id = ?", job.ID, childID) // want `unfenced UPDATE`
}

// No fix: the WHERE takes two jobs' fields.
func whereTwo(db *sql.DB, a, b Job) {
	db.Exec("UPDATE refund_jobs SET state = 'ready' WHERE id = ? AND parent_id = ?", a.ID, b.ID) // want `unfenced UPDATE`
}

// No fix: the type lacks the fields.
func noFields(db *sql.DB, r Row) {
	db.Exec("UPDATE refund_jobs SET state = 'ready' WHERE id = ?", r.ID) // want `unfenced UPDATE`
}

// No fix: appending would land after an OR, or after LIMIT.
func shapes(db *sql.DB, job Job) {
	db.Exec("UPDATE refund_jobs SET state = 'ready' WHERE id = ? OR parent_id = ?", job.ID, job.ID) // want `unfenced UPDATE`
	db.Exec("UPDATE refund_jobs SET state = 'ready' WHERE id = ? ORDER BY id LIMIT 1", job.ID)      // want `unfenced UPDATE`
	db.Exec("UPDATE refund_jobs SET state = 'ready' WHERE id = ?;", job.ID)                         // want `unfenced UPDATE`
	db.Exec("UPDATE refund_jobs j SET j.state = 'ready' WHERE j.id = ?", job.ID)                    // want `unfenced UPDATE`
	db.Exec("UPDATE refund_jobs SET state = 'ready' WHERE id = ? AND attempt = 2 OR 1 = 1", job.ID) // want `unfenced UPDATE`
	db.Exec("UPDATE refund_jobs SET state = 'ready' WHERE id = ? -- by id", job.ID)                 // want `unfenced UPDATE`
}

// No fix: named placeholders, spread arguments, a constant, a count of
// placeholders that does not match.
func others(db *sql.DB, job Job, args []any) {
	db.Exec("UPDATE refund_jobs SET state = 'ready' WHERE id = :id", job.ID) // want `unfenced UPDATE`
	db.Exec("UPDATE refund_jobs SET state = 'ready' WHERE id = ?", args...)  // want `unfenced UPDATE`
	db.Exec(requeueSQL, job.ID)                                              // want `unfenced UPDATE`
	db.Exec("UPDATE refund_jobs SET state = 'ready' WHERE id = 7", job.ID)   // want `unfenced UPDATE`
}

type leased struct {
	id, attempt int64
	state       string
}

// Fixed: unexported fields of the package's own type.
func (l leased) done(db *sql.DB) {
	db.Exec("UPDATE refund_jobs SET state = 'done' WHERE id = ?", l.id) // want `unfenced UPDATE`
}

// No fix: the legacy worker's job knows its attempt but not its state.
type claimed struct{ id, attempt int64 }

func (j claimed) done(db *sql.DB) {
	db.Exec("UPDATE refund_jobs SET state = 'done' WHERE id = ?", j.id) // want `unfenced UPDATE`
}
