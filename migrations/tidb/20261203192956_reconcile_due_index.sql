-- Modify "refund_jobs" table
ALTER TABLE `refund_jobs` ADD INDEX `refund_jobs_reconcile_due` (`state`, `next_action`, `next_run_at`);
