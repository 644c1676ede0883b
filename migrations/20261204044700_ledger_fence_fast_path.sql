-- The ledger's settlement at a fraction of its cost (issue 21): the
-- trigger of 20261203195800_companion_fences_locked_reads.sql again, with
-- one condition first for what a fenced writer does by the thousand.
--
-- Hand-written; Atlas does not inspect triggers, so later diffs leave them
-- alone. After editing this file run `go run ./internal/cmd/migdiff -rehash`.
--
-- A stored program pays for every instruction it runs, per row: the old
-- trigger ran about ten (its declarations, five checks, two stamps) for a
-- row that breaks no rule. A requested row settled as refunded (or failed)
-- with its job succeeded with the same refund id (or failed), its request
-- untouched, is now accepted by one condition that reads the job once, with
-- a lock (LOCK IN SHARE MODE, as before), then stamped from the real clock
-- read once: SYSDATE(6), which is UTC in a session on time_zone '+00:00'
-- (the fenced layer's; compared byte for byte, as the zone's name pads with
-- spaces in its collation and a named zone loaded as '+00:00' and set as
-- '+00:00 ' is no offset); another zone takes the checks below. Any other
-- write, and any write the condition does not accept, takes the checks of
-- the old trigger, unchanged, rule by rule, with their messages: the fast
-- path only ever accepts what they accept.
--
-- The rules are unchanged:
--   1. A ledger row is opened requested, with its job already in refund_jobs,
--      for the same request (refunds_opened_with_job).
--   2. It becomes refunded only while its job is succeeded with the same
--      provider refund id, and failed only while its job is failed.
--   3. A settled row never changes again; the request's identity never
--      changes (refunds_no_delete, unchanged, keeps every row).
--   4. Every read of the job is a locking read.
--   5. Text is compared byte for byte (CAST(… AS BINARY)): the tables'
--      collation, utf8mb4_bin, pads with spaces, so 'k' = 'k ' in it, and
--      a ledger row for 'k ' or settled with 're_1 ' is not the job's. The
--      collation's comparison stays beside it in each lookup, for the index.
--      This is why refunds_opened_with_job is created again here: its rule
--      is unchanged, its comparisons are byte for byte.

DROP TRIGGER IF EXISTS `refunds_opened_with_job`;
DROP TRIGGER IF EXISTS `refunds_follow_job`;

DELIMITER //

CREATE TRIGGER `refunds_opened_with_job` BEFORE INSERT ON `refunds` FOR EACH ROW
BEGIN
  DECLARE now DATETIME(6) DEFAULT TIMESTAMPADD(MICROSECOND, CAST(UNIX_TIMESTAMP(SYSDATE(6)) * 1000000 AS SIGNED), TIMESTAMP'1970-01-01 00:00:00');
  IF NEW.`status` <> 'requested' OR NEW.`provider_refund_id` IS NOT NULL OR NEW.`settled_at` IS NOT NULL THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'refunds: a ledger row is opened requested, unsettled';
  END IF;
  IF NOT EXISTS (SELECT 1 FROM `refund_jobs` j WHERE j.`operation_key` = NEW.`operation_key` AND CAST(j.`operation_key` AS BINARY) = CAST(NEW.`operation_key` AS BINARY)
                 AND CAST(j.`payment_ref` AS BINARY) = CAST(NEW.`payment_ref` AS BINARY)
                 AND j.`amount_minor` = NEW.`amount_minor` AND CAST(j.`currency` AS BINARY) = CAST(NEW.`currency` AS BINARY) LOCK IN SHARE MODE) THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'refunds: a ledger row is opened with its job, for the same request';
  END IF;
  SET NEW.`created_at` = now, NEW.`updated_at` = now;
END//

CREATE TRIGGER `refunds_follow_job` BEFORE UPDATE ON `refunds` FOR EACH ROW
main: BEGIN
  DECLARE utc DATETIME(6) DEFAULT IF(BINARY @@session.time_zone = '+00:00', SYSDATE(6), NULL);
  IF utc IS NOT NULL AND OLD.`status` = 'requested'
     AND NEW.`id` <=> OLD.`id` AND CAST(NEW.`operation_key` AS BINARY) <=> CAST(OLD.`operation_key` AS BINARY) AND CAST(NEW.`payment_ref` AS BINARY) <=> CAST(OLD.`payment_ref` AS BINARY)
     AND NEW.`amount_minor` <=> OLD.`amount_minor` AND CAST(NEW.`currency` AS BINARY) <=> CAST(OLD.`currency` AS BINARY) AND NEW.`created_at` <=> OLD.`created_at`
     AND ((NEW.`status` = 'refunded' AND EXISTS (SELECT 1 FROM `refund_jobs` j WHERE j.`operation_key` = NEW.`operation_key` AND CAST(j.`operation_key` AS BINARY) = CAST(NEW.`operation_key` AS BINARY)
                                                 AND j.`state` = 'succeeded' AND CAST(j.`provider_refund_id` AS BINARY) = CAST(NEW.`provider_refund_id` AS BINARY)
                                                 LOCK IN SHARE MODE))
          OR (NEW.`status` = 'failed' AND EXISTS (SELECT 1 FROM `refund_jobs` j WHERE j.`operation_key` = NEW.`operation_key` AND CAST(j.`operation_key` AS BINARY) = CAST(NEW.`operation_key` AS BINARY) AND j.`state` = 'failed'
                                                  LOCK IN SHARE MODE))) THEN
    SET NEW.`settled_at` = utc, NEW.`updated_at` = utc;
    LEAVE main;
  END IF;
  BEGIN
  DECLARE now DATETIME(6) DEFAULT TIMESTAMPADD(MICROSECOND, CAST(UNIX_TIMESTAMP(SYSDATE(6)) * 1000000 AS SIGNED), TIMESTAMP'1970-01-01 00:00:00');
  DECLARE msg VARCHAR(255);
  IF OLD.`status` <> 'requested' THEN
    SET msg = CONCAT('refunds#', OLD.`id`, ': ', OLD.`status`, ' is settled and never changes');
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = msg;
  END IF;
  IF NOT (NEW.`id` <=> OLD.`id` AND CAST(NEW.`operation_key` AS BINARY) <=> CAST(OLD.`operation_key` AS BINARY) AND CAST(NEW.`payment_ref` AS BINARY) <=> CAST(OLD.`payment_ref` AS BINARY)
          AND NEW.`amount_minor` <=> OLD.`amount_minor` AND CAST(NEW.`currency` AS BINARY) <=> CAST(OLD.`currency` AS BINARY) AND NEW.`created_at` <=> OLD.`created_at`) THEN
    SET msg = CONCAT('refunds#', OLD.`id`, ': the request and its creation time never change');
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = msg;
  END IF;
  IF NEW.`status` = 'refunded' AND NOT EXISTS (SELECT 1 FROM `refund_jobs` j WHERE j.`operation_key` = NEW.`operation_key` AND CAST(j.`operation_key` AS BINARY) = CAST(NEW.`operation_key` AS BINARY)
                                                AND j.`state` = 'succeeded' AND CAST(j.`provider_refund_id` AS BINARY) = CAST(NEW.`provider_refund_id` AS BINARY)
                                                LOCK IN SHARE MODE) THEN
    SET msg = CONCAT('refunds#', OLD.`id`, ': refunded only with its job succeeded, with the same provider refund id');
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = msg;
  END IF;
  IF NEW.`status` = 'failed' AND NOT EXISTS (SELECT 1 FROM `refund_jobs` j WHERE j.`operation_key` = NEW.`operation_key` AND CAST(j.`operation_key` AS BINARY) = CAST(NEW.`operation_key` AS BINARY) AND j.`state` = 'failed'
                                              LOCK IN SHARE MODE) THEN
    SET msg = CONCAT('refunds#', OLD.`id`, ': failed only with its job failed');
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = msg;
  END IF;
  IF NEW.`status` = 'requested' AND NOT (CAST(NEW.`provider_refund_id` AS BINARY) <=> CAST(OLD.`provider_refund_id` AS BINARY) AND NEW.`settled_at` <=> OLD.`settled_at`) THEN
    SET msg = CONCAT('refunds#', OLD.`id`, ': a requested row records a refund only by settling');
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = msg;
  END IF;
  IF NEW.`status` <> 'requested' THEN
    SET NEW.`settled_at` = now;
  END IF;
  SET NEW.`updated_at` = now;
  END;
END//

DELIMITER ;
