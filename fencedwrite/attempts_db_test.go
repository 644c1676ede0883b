//go:build !tidb

package fencedwrite_test

// The attempts log against the database's own refusals: a trigger of this
// test's, which TiDB cannot have (the TiDB run leaves this file out).

import (
	"errors"
	"testing"

	"github.com/fencekit/fencekit/ent/refundjob"
	"github.com/fencekit/fencekit/fencedwrite"
)

// A claim whose log row the database refuses does not happen: the
// refusal rolls back the fenced UPDATE with it (the claim's outcome is
// ErrUnexpectedState, nothing claimed).
func TestRefusedAttemptRowRollsBackTheClaim(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	// A second BEFORE INSERT trigger, this test's own, refuses one holder's
	// rows as a database fence would.
	if _, err := e.raw.Exec("CREATE TRIGGER `test_refuse_holder` BEFORE INSERT ON `refund_job_attempts` FOR EACH ROW " +
		"IF NEW.`holder` = 'refused-by-the-fence' THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'test: refused'; END IF"); err != nil {
		t.Fatal(err)
	}
	job := e.enqueue("refused")
	l, err := e.c.RefundJob.Claim(ctx, job.ID, fencedwrite.ClaimOptions{Holder: "refused-by-the-fence"})
	if l != nil || !errors.Is(err, fencedwrite.ErrUnexpectedState) {
		t.Fatalf("a claim whose attempt row was refused: lease %v, %v; want ErrUnexpectedState", l, err)
	}
	e.wantJob(job.ID, refundjob.StateReady, 0)
	e.wantAttempts(job.ID)
	leases, err := e.c.RefundJob.ClaimDue(ctx, 5, fencedwrite.ClaimOptions{Holder: "refused-by-the-fence"})
	if leases != nil || !errors.Is(err, fencedwrite.ErrUnexpectedState) {
		t.Fatalf("a batch whose attempt rows were refused: leases %v, %v; want ErrUnexpectedState", leases, err)
	}
	e.wantJob(job.ID, refundjob.StateReady, 0)
	e.wantAttempts(job.ID)
}
