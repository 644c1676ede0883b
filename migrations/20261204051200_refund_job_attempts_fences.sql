-- The database fence of the attempts log (refund_job_attempts, the previous
-- file): which process claimed or took over each attempt of a job, or which
-- operator's resolution took it. The fenced runtime writes its rows in the
-- claim's own transaction (fencedrt.recordClaims, RecordResolution).
--
-- Hand-written; Atlas does not inspect triggers. After editing this file run
-- `go run ./internal/cmd/migdiff -rehash`. TiDB has no triggers: there the
-- log keeps its grants only (INSERT and SELECT for the application), and the
-- fenced runtime writes it the same way (docs/tidb.md).
--
-- The rules:
--   1. A row is written only by the transaction that took its attempt: the
--      job must be at that attempt (a locking read, in share mode: the claim
--      holds the row already, and FOR UPDATE here is refused with error 1442
--      inside the claim's INSERT … SELECT from refund_jobs), and the holder
--      is 1 to 255 printable ASCII characters.
--   2. Rows never change and are never deleted, whoever writes (the
--      migration account too).

DROP TRIGGER IF EXISTS `refund_job_attempts_taken`;
DROP TRIGGER IF EXISTS `refund_job_attempts_append_only`;
DROP TRIGGER IF EXISTS `refund_job_attempts_no_delete`;

DELIMITER //

CREATE TRIGGER `refund_job_attempts_taken` BEFORE INSERT ON `refund_job_attempts` FOR EACH ROW
BEGIN
  DECLARE job_attempt BIGINT DEFAULT NULL;
  IF NEW.`holder` IS NULL OR NOT (NEW.`holder` REGEXP BINARY '^[ -~]{1,255}$') THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'refund_job_attempts: the holder is 1 to 255 printable ASCII characters';
  END IF;
  SELECT `attempt` INTO job_attempt FROM `refund_jobs` WHERE `id` = NEW.`job_id` LOCK IN SHARE MODE;
  IF job_attempt IS NULL OR job_attempt <> NEW.`attempt` THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'refund_job_attempts: only the transaction that took an attempt records it';
  END IF;
END//

CREATE TRIGGER `refund_job_attempts_append_only` BEFORE UPDATE ON `refund_job_attempts` FOR EACH ROW
BEGIN
  SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'refund_job_attempts: the attempts log is append-only; rows never change';
END//

CREATE TRIGGER `refund_job_attempts_no_delete` BEFORE DELETE ON `refund_job_attempts` FOR EACH ROW
BEGIN
  SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'refund_job_attempts: the attempts log is append-only; rows are never deleted';
END//

DELIMITER ;
