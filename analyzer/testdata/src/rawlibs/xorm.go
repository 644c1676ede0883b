package rawlibs

import (
	"context"

	"xorm.io/xorm"
)

// xormStore runs raw SQL through the engine, a session and the SQL
// builder, as xorm's documentation shows.
type xormStore struct {
	engine *xorm.Engine
}

func (s *xormStore) Claim(j RefundJob) error {
	_, err := s.engine.Exec("UPDATE refund_jobs SET state = 'claimed', attempt = attempt + 1 WHERE id = ? AND state = ? AND attempt = ?", j.ID, j.State, j.Attempt)
	return err
}

func (s *xormStore) Release(id int64) error {
	_, err := s.engine.Exec("UPDATE refund_jobs SET state = 'ready' WHERE id = ?", id) // want `unfenced UPDATE of refund_jobs`
	return err
}

func (s *xormStore) Fail(j RefundJob, reason string) error {
	// sqlOrArgs ...any: the query is the first element.
	q := "UPDATE refund_jobs SET state = 'failed', reason = ? WHERE id = ? AND " + extraWhere
	_, err := s.engine.Exec(q, reason, j.ID) // want `the fence of this UPDATE cannot be proven: its WHERE is built at run time from extraWhere`
	return err
}

// FailFenced is fenced on one path only: the path without is reported.
func (s *xormStore) FailFenced(j RefundJob, reason string) error {
	q := "UPDATE refund_jobs SET state = 'failed', reason = ? WHERE id = ?" // want `unfenced UPDATE of refund_jobs`
	if reason != "" {
		q += " AND state = ? AND attempt = ?"
	}
	_, err := s.engine.Exec(q, reason, j.ID, j.State, j.Attempt)
	return err
}

func (s *xormStore) Settle(ctx context.Context, j RefundJob) error {
	sess := s.engine.NewSession()
	defer sess.Close()
	if err := sess.Begin(); err != nil {
		return err
	}
	if _, err := sess.Exec("UPDATE refund_jobs SET state = 'settled' WHERE id = ? AND state = ? AND attempt = ?", j.ID, j.State, j.Attempt); err != nil {
		return err
	}
	if _, err := sess.Exec("UPDATE refund_jobs SET settled_at = NOW() WHERE " + extraWhere); err != nil { // want `the fence of this UPDATE cannot be proven: its WHERE is built at run time from extraWhere`
		return err
	}
	// SQL(query any, args ...any) then Exec() with no arguments.
	if _, err := sess.SQL("UPDATE refund_jobs SET state = ? WHERE id = ?", "settled", j.ID).Exec(); err != nil { // want `unfenced UPDATE of refund_jobs`
		return err
	}
	if _, err := s.engine.SQL("UPDATE refund_jobs SET note = ? WHERE " + extraWhere).Exec(); err != nil { // want `the fence of this UPDATE cannot be proven: its WHERE is built at run time from extraWhere`
		return err
	}
	if _, err := sess.Context(ctx).SQL("UPDATE refund_jobs SET state = ? WHERE id = ? AND state = ? AND attempt = ?", "settled", j.ID, j.State, j.Attempt).Exec(); err != nil {
		return err
	}
	// Reads: not reported.
	if _, err := s.engine.Query("SELECT id FROM refund_jobs WHERE " + extraWhere); err != nil {
		return err
	}
	return sess.Commit()
}

// Through xorm.Interface (Engine, EngineGroup and Session all satisfy it).
func xormIface(db xorm.Interface, ids []any) error {
	if _, err := db.Exec("UPDATE refund_jobs SET state = 'ready' WHERE id = ? AND state = 'failed' AND attempt = ?", 1, 2); err != nil {
		return err
	}
	// A spread argument list: the query is the slice's first element.
	args := append([]any{"UPDATE refund_jobs SET state = 'x' WHERE " + extraWhere}, ids...)
	if _, err := db.Exec(args...); err != nil { // want `the fence of this UPDATE cannot be proven: its WHERE is built at run time from extraWhere`
		return err
	}
	_, err := db.Exec("INSERT INTO refund_jobs (id, state) VALUES (?, 'ready') ON DUPLICATE KEY UPDATE state = 'ready'", 1) // want `INSERT … ON DUPLICATE KEY UPDATE writes existing refund_jobs rows`
	return err
}
