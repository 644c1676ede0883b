-- The database fence of `refund_jobs` on TiDB, which has no triggers and no
-- stored procedures: only the tables of the generated fence
-- (20261203120000_job_fences.sql in migrations/), without its triggers and its
-- archival procedure. Hand-written; after editing it run
-- `go run ./internal/cmd/migdiff -dir migrations/tidb -rehash`.
--
-- What this leaves to the database on TiDB (docs/tidb.md):
--   - the WHERE clause of every fenced write (state + attempt), the primary-key
--     lock of claims, and refund_jobs_keys' primary key: a key takes one job,
--     ever, and stays registered after its job is archived;
--   - nothing else. No rule of 20261203120000_job_fences.sql or
--     20261203120100_companion_fences.sql holds against a writer that bypasses
--     the fenced layer: undeclared or stale writes, moves outside the state
--     machine, changes to terminal rows, deletes and REPLACE are not refused,
--     and the ledger and the observation log are not append-only.
--
-- migrations_test.go's TestTiDBDirectoryFollowsMigrations checks that this
-- directory holds every file of migrations/ that has neither triggers nor
-- procedures, unchanged, and that this file creates the generated fence's
-- tables with the generated statements.

CREATE TABLE IF NOT EXISTS `refund_jobs_keys` (
  `operation_key` varchar(128) NOT NULL,
  `payment_ref` varchar(128) NOT NULL,
  `amount_minor` bigint NOT NULL,
  `currency` char(3) NOT NULL,
  `registered_at` datetime(6) NOT NULL,
  `job_created_at` datetime(6) NULL,
  PRIMARY KEY (`operation_key`)
) CHARSET utf8mb4 COLLATE utf8mb4_bin;

CREATE TABLE IF NOT EXISTS `refund_jobs_archive` LIKE `refund_jobs`;

-- Every key already enqueued or archived stays known.
INSERT INTO `refund_jobs_keys` (`operation_key`, `payment_ref`, `amount_minor`, `currency`, `registered_at`, `job_created_at`)
  SELECT j.`operation_key`, j.`payment_ref`, j.`amount_minor`, j.`currency`, j.`created_at`, j.`created_at` FROM `refund_jobs` j
  WHERE NOT EXISTS (SELECT 1 FROM `refund_jobs_keys` k WHERE k.`operation_key` = j.`operation_key`);
INSERT INTO `refund_jobs_keys` (`operation_key`, `payment_ref`, `amount_minor`, `currency`, `registered_at`, `job_created_at`)
  SELECT j.`operation_key`, j.`payment_ref`, j.`amount_minor`, j.`currency`, j.`created_at`, j.`created_at` FROM `refund_jobs_archive` j
  WHERE NOT EXISTS (SELECT 1 FROM `refund_jobs_keys` k WHERE k.`operation_key` = j.`operation_key`);
