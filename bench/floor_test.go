package main

import (
	"errors"
	"testing"

	"github.com/go-sql-driver/mysql"
)

// TestFloorFenceHoldsWhatItKeeps checks that the floor fence, the lower
// bound the bench measures, is a fence and not an empty trigger: it refuses
// a zombie's undeclared write, a stale declaration, an attempt that jumps, a
// claim before the job is due and a ledger row settled before its job, each
// with the trigger's SIGNAL (error 1644), and accepts the worker's path
// (claim, completion, ledger) on a session on '+00:00', as the fenced
// layer's.
func TestFloorFenceHoldsWhatItKeeps(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	m, raw := scratchDB(t, "floor", nil)
	if err := enqueue(ctx, raw, 0, 3); err != nil {
		t.Fatal(err)
	}
	if err := installFloor(ctx, raw, m.name); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := raw.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.TRIGGERS WHERE TRIGGER_SCHEMA = ?", m.name).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != len(floorTriggers) {
		t.Fatalf("%d triggers after installFloor, want the floor's %d", n, len(floorTriggers))
	}
	conn, err := raw.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	if _, err := conn.ExecContext(ctx, "SET time_zone = '+00:00'"); err != nil {
		t.Fatal(err)
	}
	key := func(i int) string { return request(i).OperationKey }
	write := func(q string, args ...any) error {
		_, err := conn.ExecContext(ctx, q, args...)
		return err
	}
	const (
		// The claim holds attempt 0 and takes 1; the completion holds 1.
		claim    = "UPDATE refund_jobs SET writer_attempt = ?, state = 'running', attempt = ?, lease_until = UTC_TIMESTAMP(6) + INTERVAL 1 MINUTE WHERE operation_key = ? AND state = 'ready' AND attempt = ?"
		complete = "UPDATE refund_jobs SET writer_attempt = ?, state = 'succeeded', lease_until = NULL, provider_refund_id = CONCAT('re_', operation_key) WHERE operation_key = ? AND state = 'running' AND attempt = ?"
		settle   = "UPDATE refunds SET status = 'refunded', provider_refund_id = CONCAT('re_', operation_key) WHERE operation_key = ? AND status = 'requested'"
	)
	for _, c := range []struct {
		name, q string
		args    []any
	}{
		{"a zombie's undeclared write", "UPDATE refund_jobs SET state = 'failed' WHERE operation_key = ?", []any{key(0)}},                       //fencelint:allow the attack the floor fence must refuse
		{"a stale declaration", "UPDATE refund_jobs SET writer_attempt = ?, state = 'failed' WHERE operation_key = ?", []any{5, key(0)}},        //fencelint:allow the attack the floor fence must refuse
		{"an attempt that jumps by two", "UPDATE refund_jobs SET writer_attempt = ?, attempt = ? WHERE operation_key = ?", []any{0, 2, key(0)}}, //fencelint:allow the attack the floor fence must refuse
		{"a ledger row settled before its job", settle, []any{key(0)}},
	} {
		err := write(c.q, c.args...)
		if me := (*mysql.MySQLError)(nil); !errors.As(err, &me) || me.Number != 1644 {
			t.Errorf("%s: %v, want the floor fence's refusal (error 1644)", c.name, err)
		}
	}
	// A claim before the job is due: the job is made due in an hour first
	// (ready → ready, declared), which the floor accepts.
	if err := write("UPDATE refund_jobs SET writer_attempt = ?, next_run_at = UTC_TIMESTAMP(6) + INTERVAL 1 HOUR WHERE operation_key = ? AND state = 'ready' AND attempt = ?", 0, key(1), 0); err != nil {
		t.Fatal(err)
	}
	if err := write(claim, 0, 1, key(1), 0); err == nil {
		t.Error("a claim before the job is due was accepted")
	}
	// The worker's path.
	for _, w := range []struct {
		q    string
		args []any
	}{{claim, []any{0, 1, key(2), 0}}, {complete, []any{1, key(2), 1}}, {settle, []any{key(2)}}} {
		if err := write(w.q, w.args...); err != nil {
			t.Fatalf("the worker's path: %v", err)
		}
	}
	var state, status string
	var writer *int64
	if err := raw.QueryRowContext(ctx, "SELECT j.state, j.writer_attempt, r.status FROM refund_jobs j JOIN refunds r USING (operation_key) WHERE operation_key = ?", key(2)).Scan(&state, &writer, &status); err != nil {
		t.Fatal(err)
	}
	if state != "succeeded" || writer != nil || status != "refunded" {
		t.Errorf("after the path: job %s (writer_attempt %v), ledger %s; want succeeded (cleared), refunded", state, writer, status)
	}
}
