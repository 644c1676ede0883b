-- The ledger reads its job under a lock: the companion fences' triggers that
-- read refund_jobs (20261203120100_companion_fences.sql) again, with every
-- read of the job a locking read.
--
-- Hand-written; Atlas does not inspect triggers, so later diffs leave them
-- alone. After editing this file run `go run ./internal/cmd/migdiff -rehash`.
--
-- Why: InnoDB does not lock the reads of an UPDATE (nor of an INSERT … SELECT)
-- under READ UNCOMMITTED and READ COMMITTED. A session that chose READ
-- UNCOMMITTED settled a ledger row as refunded on a completion it could see
-- but that was not committed, and rolled back: the job stayed running, the
-- ledger said refunded, and every later write-back failed. A locking read
-- (LOCK IN SHARE MODE: MySQL 8 and MariaDB both accept it, FOR SHARE is
-- MySQL's only) waits for the job's writer to commit or roll back, and reads
-- what was committed, whatever isolation level the session chose. The
-- transaction that settles the job holds its row already, so its own ledger
-- write never waits.
--
-- The rules are unchanged:
--   1. A ledger row is opened requested, with its job already in refund_jobs,
--      for the same request.
--   2. It becomes refunded only while its job is succeeded with the same
--      provider refund id, and failed only while its job is failed.
--   3. A settled row never changes again; the request's identity never
--      changes (refunds_no_delete, unchanged, keeps every row).

DROP TRIGGER IF EXISTS `refunds_opened_with_job`;
DROP TRIGGER IF EXISTS `refunds_follow_job`;

DELIMITER //

CREATE TRIGGER `refunds_opened_with_job` BEFORE INSERT ON `refunds` FOR EACH ROW
BEGIN
  DECLARE now DATETIME(6) DEFAULT TIMESTAMPADD(MICROSECOND, CAST(UNIX_TIMESTAMP(SYSDATE(6)) * 1000000 AS SIGNED), TIMESTAMP'1970-01-01 00:00:00');
  IF NEW.`status` <> 'requested' OR NEW.`provider_refund_id` IS NOT NULL OR NEW.`settled_at` IS NOT NULL THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'refunds: a ledger row is opened requested, unsettled';
  END IF;
  IF NOT EXISTS (SELECT 1 FROM `refund_jobs` j WHERE j.`operation_key` = NEW.`operation_key` AND j.`payment_ref` = NEW.`payment_ref`
                 AND j.`amount_minor` = NEW.`amount_minor` AND j.`currency` = NEW.`currency` LOCK IN SHARE MODE) THEN
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
                                                AND j.`state` = 'succeeded' AND j.`provider_refund_id` = NEW.`provider_refund_id`
                                                LOCK IN SHARE MODE) THEN
    SET msg = CONCAT('refunds#', OLD.`id`, ': refunded only with its job succeeded, with the same provider refund id');
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = msg;
  END IF;
  IF NEW.`status` = 'failed' AND NOT EXISTS (SELECT 1 FROM `refund_jobs` j WHERE j.`operation_key` = NEW.`operation_key` AND j.`state` = 'failed'
                                              LOCK IN SHARE MODE) THEN
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

DELIMITER ;
