-- The database fences of the operators' tables (see the previous file).
--
-- Hand-written; Atlas does not inspect triggers. After editing this file run
-- `go run ./internal/cmd/migdiff -rehash`. TiDB has no triggers: there the
-- tables keep their CHECK constraints and grants only (docs/tidb.md).
-- Times come from the server's real clock, which no session can move
-- (fencedrt.ClockUTC; NOW() and UTC_TIMESTAMP() follow SET timestamp).
--
-- The rules:
--   1. An audit entry is stamped with the server's time when it is written, and
--      never changes or disappears, whoever writes (the migration account too).
--   2. An approval request is born pending, undecided, stamped with the server's
--      time. It is decided once: pending -> approved | declined | stale, with
--      a decider, stamped; an approved request's decider is not its requester.
--      What was requested never changes; requests are never deleted.

DROP TRIGGER IF EXISTS `refund_audit_stamped`;
DROP TRIGGER IF EXISTS `refund_audit_append_only`;
DROP TRIGGER IF EXISTS `refund_audit_no_delete`;
DROP TRIGGER IF EXISTS `refund_approvals_born_pending`;
DROP TRIGGER IF EXISTS `refund_approvals_decided_once`;
DROP TRIGGER IF EXISTS `refund_approvals_no_delete`;

DELIMITER //

CREATE TRIGGER `refund_audit_stamped` BEFORE INSERT ON `refund_audit` FOR EACH ROW
BEGIN
  IF CHAR_LENGTH(TRIM(NEW.`operator`)) = 0 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'refund_audit: the operator is never empty';
  END IF;
  SET NEW.`recorded_at` = TIMESTAMPADD(MICROSECOND, CAST(UNIX_TIMESTAMP(SYSDATE(6)) * 1000000 AS SIGNED), TIMESTAMP'1970-01-01 00:00:00');
END//

CREATE TRIGGER `refund_audit_append_only` BEFORE UPDATE ON `refund_audit` FOR EACH ROW
BEGIN
  SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'refund_audit: the audit is append-only; entries never change';
END//

CREATE TRIGGER `refund_audit_no_delete` BEFORE DELETE ON `refund_audit` FOR EACH ROW
BEGIN
  SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'refund_audit: the audit is append-only; entries are never deleted';
END//

CREATE TRIGGER `refund_approvals_born_pending` BEFORE INSERT ON `refund_approvals` FOR EACH ROW
BEGIN
  IF NEW.`status` <> 'pending' OR NEW.`decided_by` IS NOT NULL OR NEW.`decided_at` IS NOT NULL THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'refund_approvals: a request is born pending, undecided';
  END IF;
  IF CHAR_LENGTH(TRIM(NEW.`requested_by`)) = 0 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'refund_approvals: the requester is never empty';
  END IF;
  SET NEW.`requested_at` = TIMESTAMPADD(MICROSECOND, CAST(UNIX_TIMESTAMP(SYSDATE(6)) * 1000000 AS SIGNED), TIMESTAMP'1970-01-01 00:00:00');
END//

CREATE TRIGGER `refund_approvals_decided_once` BEFORE UPDATE ON `refund_approvals` FOR EACH ROW
BEGIN
  IF NOT (NEW.`id` <=> OLD.`id` AND NEW.`job_id` <=> OLD.`job_id` AND NEW.`operation_key` <=> OLD.`operation_key`
          AND NEW.`resolve_as` <=> OLD.`resolve_as` AND NEW.`refund_id` <=> OLD.`refund_id` AND NEW.`override` <=> OLD.`override`
          AND NEW.`reason` <=> OLD.`reason` AND NEW.`requested_by` <=> OLD.`requested_by`
          AND NEW.`seen_attempt` <=> OLD.`seen_attempt` AND NEW.`requested_at` <=> OLD.`requested_at`) THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'refund_approvals: what was requested never changes';
  END IF;
  IF OLD.`status` <> 'pending' OR NEW.`status` = 'pending' THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'refund_approvals: a request is decided once, from pending';
  END IF;
  IF NEW.`decided_by` IS NULL OR CHAR_LENGTH(TRIM(NEW.`decided_by`)) = 0 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'refund_approvals: a decision names who decided';
  END IF;
  IF NEW.`status` = 'approved' AND NEW.`decided_by` = OLD.`requested_by` THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'refund_approvals: the approver is never the requester';
  END IF;
  SET NEW.`decided_at` = TIMESTAMPADD(MICROSECOND, CAST(UNIX_TIMESTAMP(SYSDATE(6)) * 1000000 AS SIGNED), TIMESTAMP'1970-01-01 00:00:00');
END//

CREATE TRIGGER `refund_approvals_no_delete` BEFORE DELETE ON `refund_approvals` FOR EACH ROW
BEGIN
  SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'refund_approvals: requests are never deleted';
END//

DELIMITER ;
