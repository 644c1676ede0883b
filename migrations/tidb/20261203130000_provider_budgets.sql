-- The provider's outbound budget (DESIGN.md, "Scheduling and budgets"): one
-- token bucket per provider, shared by every worker process of the fleet.
-- First sends, resends and reconciles all take their tokens here, each in a
-- short transaction of its own (worker/internal/budget), never inside a claim.
--
-- Hand-written; the table lives outside the Ent schema (schemadiff never plans
-- dropping it). After editing this file run `go run ./internal/cmd/migdiff -rehash`.
--
--   tokens       whole tokens are calls the fleet may still make, as of refilled_at
--   capacity     the burst: tokens never exceed it
--   rate         tokens added per second, continuously, up to capacity
--   refilled_at  when tokens was last brought up to date, on the database's real
--                clock (UNIX_TIMESTAMP(SYSDATE(6)), fencedrt.ClockMicros), as UTC
--
-- The CHECK constraints are the last line: MySQL 8.0.16+ and MariaDB 10.2+
-- enforce them; older servers parse and ignore them.
CREATE TABLE `provider_budgets` (
  `name` varchar(64) NOT NULL,
  `tokens` double NOT NULL,
  `capacity` double NOT NULL,
  `rate` double NOT NULL,
  `refilled_at` datetime(6) NOT NULL,
  PRIMARY KEY (`name`),
  CONSTRAINT `provider_budgets_tokens` CHECK (`tokens` >= 0 AND `tokens` <= `capacity`),
  CONSTRAINT `provider_budgets_capacity` CHECK (`capacity` >= 1),
  CONSTRAINT `provider_budgets_rate` CHECK (`rate` > 0)
) CHARSET utf8mb4 COLLATE utf8mb4_bin;
