-- The database fence of the calls log (refund_job_calls, the previous file):
-- the provider call of each attempt of a job, as the worker that held the
-- attempt wrote it back, in the write-back's own transaction.
--
-- Hand-written; Atlas does not inspect triggers. After editing this file run
-- `go run ./internal/cmd/migdiff -rehash`. TiDB has no triggers: there the
-- log keeps its grants only (INSERT and SELECT for the application).
--
-- The rules:
--   1. A call's time is the database's real clock, whatever the writer says
--      (SET timestamp moves nothing). The row names its job and attempt; the
--      job's own fence decides whether the write-back that records it lands
--      (a write-back it refuses rolls its call back with it, and the answer
--      is kept as evidence in refund_observations). No read of the job here:
--      a locking read per call would add to every write-back's cost, and a
--      log is not a fence (checking the attempt here would also hide a
--      broken job fence from the chaos run's history check,
--      TestChaosCatchesABrokenFence).
--   2. Rows never change and are never deleted, whoever writes (the
--      migration account too).

DROP TRIGGER IF EXISTS `refund_job_calls_held`;
DROP TRIGGER IF EXISTS `refund_job_calls_append_only`;
DROP TRIGGER IF EXISTS `refund_job_calls_no_delete`;

DELIMITER //

CREATE TRIGGER `refund_job_calls_held` BEFORE INSERT ON `refund_job_calls` FOR EACH ROW
BEGIN
  SET NEW.`answered_at` = TIMESTAMPADD(MICROSECOND, CAST(UNIX_TIMESTAMP(SYSDATE(6)) * 1000000 AS SIGNED), TIMESTAMP'1970-01-01 00:00:00');
END//

CREATE TRIGGER `refund_job_calls_append_only` BEFORE UPDATE ON `refund_job_calls` FOR EACH ROW
BEGIN
  SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'refund_job_calls: the calls log is append-only; rows never change';
END//

CREATE TRIGGER `refund_job_calls_no_delete` BEFORE DELETE ON `refund_job_calls` FOR EACH ROW
BEGIN
  SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'refund_job_calls: the calls log is append-only; rows are never deleted';
END//

DELIMITER ;
