-- The database fences too (DESIGN.md, "The database fences too").
--
-- Hand-written; Atlas does not inspect triggers or procedures, so later diffs
-- leave them alone. After editing this file run `go run ./internal/cmd/migdiff -rehash`.
-- Every refusal raises SQLSTATE 45000 (MySQL and MariaDB report error 1644)
-- with a message that names the rule it enforces, at most 128 characters
-- (MySQL's MESSAGE_TEXT limit; MariaDB allows more). Engines without triggers
-- (TiDB) keep the fenced WHERE clause only.
--
-- The rules for refund_jobs:
--   1. A job is born ready at attempt 0, holding no lease and declaring no writer.
--   2. Every UPDATE declares the attempt it holds by setting writer_attempt; it
--      must equal the row's current attempt. The trigger clears it afterwards, so
--      the next write must declare again.
--   3. The new attempt is the same or exactly one more.
--   4. succeeded and failed rows never change again, in any column.
--   5. The refund request's identity and parameters never change.
--   6. Rows are not deleted (REPLACE included: it deletes first), except old
--      terminal rows through CALL refund_jobs_archive(cutoff).

-- Where archived jobs go: same columns as refund_jobs. A change to refund_jobs'
-- columns needs the same change here, or archiving fails (and deletes nothing).
CREATE TABLE `refund_jobs_archive` LIKE `refund_jobs`;

DELIMITER //

CREATE TRIGGER `refund_jobs_born_ready` BEFORE INSERT ON `refund_jobs` FOR EACH ROW
BEGIN
  IF NEW.`state` <> 'ready' OR NEW.`attempt` <> 0 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'refund_jobs: a job is born ready at attempt 0';
  END IF;
  IF NEW.`writer_attempt` IS NOT NULL OR NEW.`lease_until` IS NOT NULL THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'refund_jobs: a new job holds no lease and declares no writer';
  END IF;
END//

CREATE TRIGGER `refund_jobs_fence` BEFORE UPDATE ON `refund_jobs` FOR EACH ROW
BEGIN
  DECLARE msg VARCHAR(255);
  IF OLD.`state` IN ('succeeded', 'failed') THEN
    SET msg = CONCAT('refund_jobs#', OLD.`id`, ': ', OLD.`state`, ' is terminal and never changes');
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = msg;
  END IF;
  IF NEW.`writer_attempt` IS NULL THEN
    SET msg = CONCAT('refund_jobs#', OLD.`id`, ': an UPDATE must declare the attempt it holds: SET writer_attempt = ', OLD.`attempt`);
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = msg;
  END IF;
  IF NEW.`writer_attempt` <> OLD.`attempt` THEN
    SET msg = CONCAT('refund_jobs#', OLD.`id`, ': stale writer declares attempt ', NEW.`writer_attempt`, ', row is at ', OLD.`attempt`);
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = msg;
  END IF;
  IF NEW.`attempt` <> OLD.`attempt` AND NEW.`attempt` <> OLD.`attempt` + 1 THEN
    SET msg = CONCAT('refund_jobs#', OLD.`id`, ': attempt may only stay or grow by one, not go ', OLD.`attempt`, ' -> ', NEW.`attempt`);
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = msg;
  END IF;
  IF NEW.`id` <> OLD.`id` OR NEW.`operation_key` <> OLD.`operation_key` OR NEW.`payment_ref` <> OLD.`payment_ref`
     OR NEW.`amount_minor` <> OLD.`amount_minor` OR NEW.`currency` <> OLD.`currency` OR NEW.`created_at` <> OLD.`created_at` THEN
    SET msg = CONCAT('refund_jobs#', OLD.`id`, ': id, operation_key, payment_ref, amount_minor, currency, created_at never change');
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = msg;
  END IF;
  SET NEW.`writer_attempt` = NULL;
END//

CREATE TRIGGER `refund_jobs_no_delete` BEFORE DELETE ON `refund_jobs` FOR EACH ROW
BEGIN
  DECLARE msg VARCHAR(255);
  IF @refund_jobs_archive_cutoff IS NULL THEN
    SET msg = CONCAT('refund_jobs#', OLD.`id`, ': jobs are never deleted or replaced (archive: CALL refund_jobs_archive)');
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = msg;
  END IF;
  IF OLD.`state` NOT IN ('succeeded', 'failed') OR OLD.`updated_at` >= @refund_jobs_archive_cutoff
     OR OLD.`updated_at` >= UTC_TIMESTAMP(6) - INTERVAL 30 DAY THEN
    SET msg = CONCAT('refund_jobs#', OLD.`id`, ': only terminal jobs older than 30 days and the cutoff are archived');
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = msg;
  END IF;
END//

-- The archival path: moves succeeded and failed jobs last changed before
-- cutoff (at least 30 days ago) into refund_jobs_archive, in one transaction.
CREATE PROCEDURE `refund_jobs_archive`(IN cutoff DATETIME(6))
BEGIN
  DECLARE EXIT HANDLER FOR SQLEXCEPTION
  BEGIN
    ROLLBACK;
    SET @refund_jobs_archive_cutoff = NULL;
    RESIGNAL;
  END;
  IF cutoff IS NULL OR cutoff > UTC_TIMESTAMP(6) - INTERVAL 30 DAY THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'refund_jobs_archive: the cutoff must be at least 30 days in the past';
  END IF;
  START TRANSACTION;
  SET @refund_jobs_archive_cutoff = cutoff;
  INSERT INTO `refund_jobs_archive`
    SELECT * FROM `refund_jobs` WHERE `state` IN ('succeeded', 'failed') AND `updated_at` < cutoff;
  DELETE FROM `refund_jobs` WHERE `state` IN ('succeeded', 'failed') AND `updated_at` < cutoff;
  SET @refund_jobs_archive_cutoff = NULL;
  COMMIT;
END//

-- The observation log is append-only: a row may only be marked processed, once.
CREATE TRIGGER `refund_observations_append_only` BEFORE UPDATE ON `refund_observations` FOR EACH ROW
BEGIN
  IF NOT (NEW.`id` <=> OLD.`id` AND NEW.`dedup_key` <=> OLD.`dedup_key` AND NEW.`operation_key` <=> OLD.`operation_key`
          AND NEW.`job_id` <=> OLD.`job_id` AND NEW.`attempt` <=> OLD.`attempt` AND NEW.`source` <=> OLD.`source`
          AND NEW.`provider_refund_id` <=> OLD.`provider_refund_id` AND NEW.`provider_status` <=> OLD.`provider_status`
          AND NEW.`payload` <=> OLD.`payload` AND NEW.`received_at` <=> OLD.`received_at`) THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'refund_observations: evidence is append-only; only processed_at may be set';
  END IF;
  IF OLD.`processed_at` IS NOT NULL AND NOT (NEW.`processed_at` <=> OLD.`processed_at`) THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'refund_observations: processed_at is set once and never changes';
  END IF;
END//

CREATE TRIGGER `refund_observations_no_delete` BEFORE DELETE ON `refund_observations` FOR EACH ROW
BEGIN
  SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'refund_observations: evidence is append-only; rows are never deleted';
END//

DELIMITER ;
