-- The refund queue of the team in DESIGN.md's story, before fencekit: the
-- article's refund_jobs (operation_key, attempt, state, lease_until,
-- next_action, provider_refund_id) with the team's own columns beside them
-- (the payment, the amount and the currency under the team's names, a note,
-- a flag, a creation time). No trigger, no fence: any UPDATE goes through.
-- Runs on MySQL 8.x and MariaDB 10.6+.
CREATE TABLE refund_jobs (
  id                 BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY,
  operation_key      VARCHAR(64)  NOT NULL,
  payment_id         VARCHAR(64)  NOT NULL,
  amount_cents       INT          NOT NULL,
  currency           CHAR(3)      NOT NULL,
  attempt            INT          NOT NULL DEFAULT 0,
  state              VARCHAR(32)  NOT NULL DEFAULT 'ready',
  lease_until        DATETIME     NULL,
  next_action        VARCHAR(16)  NOT NULL DEFAULT 'refund',
  provider_refund_id VARCHAR(128) NULL,
  merchant_note      TEXT         NULL,
  legacy_flag        TINYINT      NOT NULL DEFAULT 0,
  created            DATETIME     NOT NULL DEFAULT CURRENT_TIMESTAMP,
  UNIQUE KEY uk_operation_key (operation_key),
  KEY idx_state_lease (state, lease_until)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4;
