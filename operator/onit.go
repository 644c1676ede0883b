package operator

import (
	"context"
	stdsql "database/sql"
	"fmt"

	"github.com/fencekit/fencekit/fencedwrite"
)

// OnIt marks operator as working on job id, seen at attempt seen ("I'm on
// it"): the other operators see the mark on the queue and the job, while
// the job stays in manual review at that attempt. It takes the mark over
// from whoever held it (the mark informs; it locks nothing: any resolver
// may still resolve the job). ErrNotInReview or ErrResolvedElsewhere when
// the job is not in review at seen.
func (s *Service) OnIt(ctx context.Context, id int64, operator string, seen int64) (OnIt, error) {
	if err := CheckOperator("operator", operator); err != nil {
		return OnIt{}, fmt.Errorf("mark on it: %w", err)
	}
	j, err := s.readJob(ctx, id)
	if err != nil {
		return OnIt{}, fmt.Errorf("mark on it: %w", err)
	}
	if err := inReview(j, seen); err != nil {
		return OnIt{}, fmt.Errorf("mark on it: %w", err)
	}
	if _, err := s.c.ExecContext(ctx, "INSERT INTO `review_assignments` (`job_id`, `operator`, `attempt`, `since`) VALUES (?, ?, ?, "+fencedwrite.ClockUTC+") "+
		"ON DUPLICATE KEY UPDATE `operator` = VALUES(`operator`), `attempt` = VALUES(`attempt`), `since` = VALUES(`since`), `released_at` = NULL",
		id, operator, seen); err != nil {
		return OnIt{}, fmt.Errorf("mark job %d on it: %w", id, err)
	}
	var o OnIt
	if _, err := s.queryRow(ctx, "SELECT `operator`, `since` FROM `review_assignments` WHERE `job_id` = ?", []any{id}, &o.Operator, &o.Since); err != nil {
		return OnIt{}, fmt.Errorf("read job %d's mark: %w", id, err)
	}
	o.Since = o.Since.UTC()
	return o, nil
}

// LetGo removes operator's "on it" mark from job id; a mark another
// operator holds stays.
func (s *Service) LetGo(ctx context.Context, id int64, operator string) error {
	if err := CheckOperator("operator", operator); err != nil {
		return fmt.Errorf("let go: %w", err)
	}
	if _, err := s.c.ExecContext(ctx, "UPDATE `review_assignments` SET `released_at` = "+fencedwrite.ClockUTC+
		" WHERE `job_id` = ? AND `operator` = ? AND `released_at` IS NULL", id, operator); err != nil {
		return fmt.Errorf("let go of job %d: %w", id, err)
	}
	return nil
}

// NextInQueue returns the oldest job in manual review, other than skip,
// that no other operator is on: what operator should open next (resolve
// and open next). ok is false when there is none.
func (s *Service) NextInQueue(ctx context.Context, operator string, skip int64) (id int64, ok bool, err error) {
	ok, err = s.queryRow(ctx, "SELECT j.`id` FROM `refund_jobs` j WHERE j.`state` = 'manual_review' AND j.`id` <> ? AND NOT EXISTS "+
		"(SELECT 1 FROM `review_assignments` a WHERE a.`job_id` = j.`id` AND a.`released_at` IS NULL AND a.`attempt` = j.`attempt` AND a.`operator` <> ?) "+
		"ORDER BY j.`updated_at`, j.`id` LIMIT 1", []any{skip, operator}, &id)
	if err != nil {
		return 0, false, fmt.Errorf("find the next job in review: %w", err)
	}
	return id, ok, nil
}

// queryRow runs q with args and scans its first row into dest; ok is false
// when there is none.
func (s *Service) queryRow(ctx context.Context, q string, args []any, dest ...any) (ok bool, err error) {
	err = s.each(ctx, q, args, func(rows *stdsql.Rows) error {
		if ok {
			return nil
		}
		ok = true
		return rows.Scan(dest...)
	})
	return ok, err
}
