-- The database fences of the companion tables: the ledger follows its job,
-- and the observation log is append-only with times stamped by the server.
--
-- Hand-written; Atlas does not inspect triggers, so later diffs leave them
-- alone. After editing this file run `go run ./internal/cmd/migdiff -rehash`.
-- Times come from the server's real clock, which no session can move:
-- TIMESTAMPADD(MICROSECOND, CAST(UNIX_TIMESTAMP(SYSDATE(6)) * 1000000 AS SIGNED), TIMESTAMP'1970-01-01 00:00:00')
-- (fencedrt.ClockUTC; NOW() and UTC_TIMESTAMP() follow SET timestamp).
--
-- The rules for refunds (the ledger):
--   1. A ledger row is opened requested, with its job already in refund_jobs,
--      for the same request.
--   2. It becomes refunded only while its job is succeeded with the same
--      provider refund id, and failed only while its job is failed: in
--      practice, in the transaction that settles the job.
--   3. A settled row (refunded, failed) never changes again; no row is ever
--      deleted. The request's identity never changes.
-- The rules for refund_observations (the evidence log):
--   4. Evidence is born unprocessed, stamped with the server's time.
--   5. It is append-only: only processed_at may be set, once, by the server's
--      clock; rows are never deleted.

DROP TRIGGER IF EXISTS `refunds_opened_with_job`;
DROP TRIGGER IF EXISTS `refunds_follow_job`;
DROP TRIGGER IF EXISTS `refunds_no_delete`;
DROP TRIGGER IF EXISTS `refund_observations_born_unprocessed`;
DROP TRIGGER IF EXISTS `refund_observations_append_only`;
DROP TRIGGER IF EXISTS `refund_observations_no_delete`;

DELIMITER //

CREATE TRIGGER `refunds_opened_with_job` BEFORE INSERT ON `refunds` FOR EACH ROW
BEGIN
  DECLARE now DATETIME(6) DEFAULT TIMESTAMPADD(MICROSECOND, CAST(UNIX_TIMESTAMP(SYSDATE(6)) * 1000000 AS SIGNED), TIMESTAMP'1970-01-01 00:00:00');
  IF NEW.`status` <> 'requested' OR NEW.`provider_refund_id` IS NOT NULL OR NEW.`settled_at` IS NOT NULL THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'refunds: a ledger row is opened requested, unsettled';
  END IF;
  IF NOT EXISTS (SELECT 1 FROM `refund_jobs` j WHERE j.`operation_key` = NEW.`operation_key` AND j.`payment_ref` = NEW.`payment_ref`
                 AND j.`amount_minor` = NEW.`amount_minor` AND j.`currency` = NEW.`currency`) THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'refunds: a ledger row is opened with its job, for the same request';
  END IF;
  SET NEW.`created_at` = now, NEW.`updated_at` = now;
END//

CREATE TRIGGER `refunds_follow_job` BEFORE UPDATE ON `refunds` FOR EACH ROW
BEGIN
  DECLARE now DATETIME(6) DEFAULT TIMESTAMPADD(MICROSECOND, CAST(UNIX_TIMESTAMP(SYSDATE(6)) * 1000000 AS SIGNED), TIMESTAMP'1970-01-01 00:00:00');
  DECLARE msg VARCHAR(255);
  IF OLD.`status` <> 'requested' THEN
    SET msg = CONCAT('refunds#', OLD.`id`, ': ', OLD.`status`, ' is settled and never changes');
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = msg;
  END IF;
  IF NOT (NEW.`id` <=> OLD.`id` AND NEW.`operation_key` <=> OLD.`operation_key` AND NEW.`payment_ref` <=> OLD.`payment_ref`
          AND NEW.`amount_minor` <=> OLD.`amount_minor` AND NEW.`currency` <=> OLD.`currency` AND NEW.`created_at` <=> OLD.`created_at`) THEN
    SET msg = CONCAT('refunds#', OLD.`id`, ': the request and its creation time never change');
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = msg;
  END IF;
  IF NEW.`status` = 'refunded' AND NOT EXISTS (SELECT 1 FROM `refund_jobs` j WHERE j.`operation_key` = NEW.`operation_key`
                                                AND j.`state` = 'succeeded' AND j.`provider_refund_id` = NEW.`provider_refund_id`) THEN
    SET msg = CONCAT('refunds#', OLD.`id`, ': refunded only with its job succeeded, with the same provider refund id');
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = msg;
  END IF;
  IF NEW.`status` = 'failed' AND NOT EXISTS (SELECT 1 FROM `refund_jobs` j WHERE j.`operation_key` = NEW.`operation_key` AND j.`state` = 'failed') THEN
    SET msg = CONCAT('refunds#', OLD.`id`, ': failed only with its job failed');
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = msg;
  END IF;
  IF NEW.`status` = 'requested' AND NOT (NEW.`provider_refund_id` <=> OLD.`provider_refund_id` AND NEW.`settled_at` <=> OLD.`settled_at`) THEN
    SET msg = CONCAT('refunds#', OLD.`id`, ': a requested row records a refund only by settling');
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = msg;
  END IF;
  IF NEW.`status` <> 'requested' THEN
    SET NEW.`settled_at` = now;
  END IF;
  SET NEW.`updated_at` = now;
END//

CREATE TRIGGER `refunds_no_delete` BEFORE DELETE ON `refunds` FOR EACH ROW
BEGIN
  SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'refunds: ledger rows are never deleted';
END//

CREATE TRIGGER `refund_observations_born_unprocessed` BEFORE INSERT ON `refund_observations` FOR EACH ROW
BEGIN
  IF NEW.`processed_at` IS NOT NULL THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'refund_observations: evidence is born unprocessed';
  END IF;
  SET NEW.`received_at` = TIMESTAMPADD(MICROSECOND, CAST(UNIX_TIMESTAMP(SYSDATE(6)) * 1000000 AS SIGNED), TIMESTAMP'1970-01-01 00:00:00');
END//

CREATE TRIGGER `refund_observations_append_only` BEFORE UPDATE ON `refund_observations` FOR EACH ROW
BEGIN
  IF NOT (NEW.`id` <=> OLD.`id` AND NEW.`dedup_key` <=> OLD.`dedup_key` AND NEW.`operation_key` <=> OLD.`operation_key`
          AND NEW.`job_id` <=> OLD.`job_id` AND NEW.`attempt` <=> OLD.`attempt` AND NEW.`source` <=> OLD.`source`
          AND NEW.`provider_refund_id` <=> OLD.`provider_refund_id` AND NEW.`provider_status` <=> OLD.`provider_status`
          AND NEW.`payload` <=> OLD.`payload` AND NEW.`received_at` <=> OLD.`received_at`) THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'refund_observations: evidence is append-only; only processed_at may be set';
  END IF;
  IF OLD.`processed_at` IS NOT NULL OR NEW.`processed_at` IS NULL THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'refund_observations: processed_at is set once and never changes';
  END IF;
  SET NEW.`processed_at` = TIMESTAMPADD(MICROSECOND, CAST(UNIX_TIMESTAMP(SYSDATE(6)) * 1000000 AS SIGNED), TIMESTAMP'1970-01-01 00:00:00');
END//

CREATE TRIGGER `refund_observations_no_delete` BEFORE DELETE ON `refund_observations` FOR EACH ROW
BEGIN
  SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'refund_observations: evidence is append-only; rows are never deleted';
END//

DELIMITER ;
