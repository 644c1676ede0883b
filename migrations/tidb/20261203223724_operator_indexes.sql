-- Modify "refund_jobs" table
ALTER TABLE `refund_jobs` ADD INDEX `refund_jobs_payment` (`payment_ref`), ADD INDEX `refund_jobs_provider_refund` (`provider_refund_id`), ADD INDEX `refund_jobs_state_changed` (`state`, `updated_at`);
