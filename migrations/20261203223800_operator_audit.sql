-- The operators' tables (package operator; docs/operators.md): the audit of
-- every operator action, and the requests that wait for a second operator's
-- approval (four eyes). Tables only, so that TiDB gets this file unchanged;
-- the triggers that make them append-only are in the next file.
--
-- Hand-written; the tables live outside the Ent schema (schemadiff never plans
-- dropping them). After editing this file run `go run ./internal/cmd/migdiff -rehash`
-- and `go run ./internal/cmd/migdiff -dir migrations/tidb -rehash`.
--
-- refund_audit: one row per action, never changed, never deleted. Who
-- (operator, never empty; requested_by for an approved request), when
-- (recorded_at, stamped by the trigger from the server's real clock), which job,
-- the action and its outcome, the reason, the evidence shown, the refund id and
-- whether it was an override, and the job's state and attempt before and after.
-- The application's account holds INSERT and SELECT only (migrations.AppGrants).
--
-- refund_approvals: a request is born pending and decided once (approved,
-- declined, or stale when the job moved first); the approver of an approved
-- request is never its requester (CHECK here, trigger in the next file, and
-- package operator).
--
-- The CHECK constraints are enforced by MySQL 8.0.16+ and MariaDB 10.2+.
CREATE TABLE `refund_audit` (
  `id` bigint NOT NULL AUTO_INCREMENT,
  `job_id` bigint NOT NULL,
  `operation_key` varchar(128) NOT NULL,
  `action` enum('resolve_succeeded','resolve_reconcile','resolve_refund','request_approval','decline','wake') NOT NULL,
  `outcome` enum('done','requested','refused','declined','stale') NOT NULL,
  `operator` varchar(128) NOT NULL,
  `requested_by` varchar(128) NULL,
  `approval_id` bigint NULL,
  `reason` text NOT NULL,
  `refund_id` varchar(255) NULL,
  `override` bool NOT NULL DEFAULT 0,
  `evidence_shown` mediumtext NOT NULL,
  `state_before` varchar(16) NOT NULL,
  `attempt_before` bigint NOT NULL,
  `state_after` varchar(16) NOT NULL,
  `attempt_after` bigint NOT NULL,
  `recorded_at` datetime(6) NOT NULL,
  PRIMARY KEY (`id`),
  INDEX `refund_audit_job` (`job_id`),
  INDEX `refund_audit_left` (`state_before`, `outcome`),
  CONSTRAINT `refund_audit_operator` CHECK (CHAR_LENGTH(TRIM(`operator`)) > 0),
  CONSTRAINT `refund_audit_reason` CHECK (CHAR_LENGTH(TRIM(`reason`)) > 0),
  CONSTRAINT `refund_audit_override` CHECK (`override` = 0 OR (`requested_by` IS NOT NULL AND `requested_by` <> `operator`))
) CHARSET utf8mb4 COLLATE utf8mb4_bin;
CREATE TABLE `refund_approvals` (
  `id` bigint NOT NULL AUTO_INCREMENT,
  `job_id` bigint NOT NULL,
  `operation_key` varchar(128) NOT NULL,
  `resolve_as` enum('succeeded','refund') NOT NULL,
  `refund_id` varchar(255) NULL,
  `override` bool NOT NULL DEFAULT 0,
  `reason` text NOT NULL,
  `requested_by` varchar(128) NOT NULL,
  `seen_attempt` bigint NOT NULL,
  `requested_at` datetime(6) NOT NULL,
  `status` enum('pending','approved','declined','stale') NOT NULL DEFAULT 'pending',
  `decided_by` varchar(128) NULL,
  `decided_at` datetime(6) NULL,
  PRIMARY KEY (`id`),
  INDEX `refund_approvals_status` (`status`),
  INDEX `refund_approvals_job` (`job_id`),
  CONSTRAINT `refund_approvals_requester` CHECK (CHAR_LENGTH(TRIM(`requested_by`)) > 0),
  CONSTRAINT `refund_approvals_reason` CHECK (CHAR_LENGTH(TRIM(`reason`)) > 0),
  CONSTRAINT `refund_approvals_decided` CHECK ((`status` = 'pending') = (`decided_by` IS NULL)),
  CONSTRAINT `refund_approvals_four_eyes` CHECK (`status` <> 'approved' OR `decided_by` <> `requested_by`)
) CHARSET utf8mb4 COLLATE utf8mb4_bin;
