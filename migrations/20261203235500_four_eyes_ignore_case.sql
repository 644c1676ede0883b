-- Four eyes ignore case in the database too (the review of issue 19).
--
-- The operators' columns compare bytes (utf8mb4_bin), so the triggers of the
-- previous file let "ALICE" approve alice's request, while package operator
-- (strings.EqualFold) refuses it. Operator identities are ASCII login names
-- (operator.CheckOperator), so LOWER() is the whole of case folding here.
-- The same on MySQL 8 and MariaDB; TiDB has no triggers and keeps its CHECK
-- constraint, which compares bytes (docs/tidb.md).
--
-- Hand-written; Atlas does not inspect triggers. After editing this file run
-- `go run ./internal/cmd/migdiff -rehash`.

DROP TRIGGER IF EXISTS `refund_audit_stamped`;
DROP TRIGGER IF EXISTS `refund_approvals_decided_once`;

DELIMITER //

-- An override's entry names two operators (CHECK refund_audit_override
-- compares bytes): not the same one in another case.
CREATE TRIGGER `refund_audit_stamped` BEFORE INSERT ON `refund_audit` FOR EACH ROW
BEGIN
  IF CHAR_LENGTH(TRIM(NEW.`operator`)) = 0 THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'refund_audit: the operator is never empty';
  END IF;
  IF NEW.`override` <> 0 AND LOWER(TRIM(NEW.`requested_by`)) = LOWER(TRIM(NEW.`operator`)) THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'refund_audit: an override is approved by a second operator';
  END IF;
  SET NEW.`recorded_at` = TIMESTAMPADD(MICROSECOND, CAST(UNIX_TIMESTAMP(SYSDATE(6)) * 1000000 AS SIGNED), TIMESTAMP'1970-01-01 00:00:00');
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
  IF NEW.`status` = 'approved' AND LOWER(TRIM(NEW.`decided_by`)) = LOWER(TRIM(OLD.`requested_by`)) THEN
    SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'refund_approvals: the approver is never the requester';
  END IF;
  SET NEW.`decided_at` = TIMESTAMPADD(MICROSECOND, CAST(UNIX_TIMESTAMP(SYSDATE(6)) * 1000000 AS SIGNED), TIMESTAMP'1970-01-01 00:00:00');
END//

DELIMITER ;
