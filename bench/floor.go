package main

import (
	"context"
	"database/sql"
)

// The floor fence (issue 21): the least per-row work DESIGN.md's database
// fence ("The database fences too") asks of a job's hot writes, as two
// triggers and nothing else. It is not a fence fencekit could ship: it
// keeps only
//   - on refund_jobs, BEFORE UPDATE: the writer declares the row's attempt,
//     the attempt stays or grows by one, a move into running is due (or its
//     lease expired) by a clock no session moves (SYSDATE(6), which the
//     fenced layer's '+00:00' session reads as UTC), and writer_attempt is
//     cleared;
//   - on refunds, BEFORE UPDATE: a ledger row becomes refunded only while
//     its job is succeeded with the same refund id (a locking read of the
//     job, as the shipped trigger's).
//
// Every other rule of the shipped fence is gone: the moves of the state
// machine, the key window, the identity and terminal rows, the stamps, the
// time zone test, observe mode and its refusal procedure, and the other
// tables' triggers (the attempts log's, the keys'). A trigger fence that
// holds DESIGN.md's rules does at least this work for each row, so what the
// floor costs is a lower bound of what any such fence costs: the bench's
// floor_* figures are that bound, measured beside the shipped fence and no
// triggers in the same run.
var floorTriggers = []string{
	"CREATE TRIGGER `refund_jobs_fence` BEFORE UPDATE ON `refund_jobs` FOR EACH ROW\n" +
		"BEGIN\n" +
		"  IF NEW.`writer_attempt` <=> OLD.`attempt` AND NEW.`attempt` IN (OLD.`attempt`, OLD.`attempt` + 1)\n" +
		"     AND (NEW.`state` <> 'running' OR OLD.`next_run_at` <= SYSDATE(6) OR OLD.`lease_until` <= SYSDATE(6)) THEN\n" +
		"    SET NEW.`writer_attempt` = NULL;\n" +
		"  ELSE\n" +
		"    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'floor fence: refused';\n" +
		"  END IF;\n" +
		"END",
	"CREATE TRIGGER `refunds_follow_job` BEFORE UPDATE ON `refunds` FOR EACH ROW\n" +
		"BEGIN\n" +
		"  IF NEW.`status` = 'refunded' AND NOT EXISTS (SELECT 1 FROM `refund_jobs` j WHERE j.`operation_key` = NEW.`operation_key`\n" +
		"      AND j.`state` = 'succeeded' AND j.`provider_refund_id` = NEW.`provider_refund_id` LOCK IN SHARE MODE) THEN\n" +
		"    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'floor fence: the ledger follows its job';\n" +
		"  END IF;\n" +
		"END",
}

// installFloor replaces every trigger of database name with the floor
// fence's two.
func installFloor(ctx context.Context, raw *sql.DB, name string) error {
	if err := dropTriggers(ctx, raw, name); err != nil {
		return err
	}
	for _, t := range floorTriggers {
		if _, err := raw.ExecContext(ctx, t); err != nil {
			return err
		}
	}
	return nil
}

// fenceKind is the fence a diagnostic side's schema holds once its jobs are
// loaded.
type fenceKind int

const (
	shippedFence fenceKind = iota // the migrated triggers: fencekit itself
	noFence                       // every trigger dropped
	floorFence                    // the floor fence alone (floorTriggers)
)

// prepare gives database name the fence k.
func (k fenceKind) prepare(ctx context.Context, raw *sql.DB, name string) error {
	switch k {
	case noFence:
		return dropTriggers(ctx, raw, name)
	case floorFence:
		return installFloor(ctx, raw, name)
	}
	return nil
}
