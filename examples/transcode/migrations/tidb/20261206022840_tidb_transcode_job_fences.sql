-- The database fence of `transcode_jobs` on TiDB, which has no triggers and no
-- stored procedures: only the keys table and the archive of the generated fence
-- (the file of the same version in examples/transcode/migrations/), as
-- migrations/tidb/20261203120000_tidb_fences.sql does for `refund_jobs`.
-- Hand-written; after editing it run
-- `go run ./internal/cmd/migdiff -dir examples/transcode/migrations/tidb -rehash`.
--
-- What this leaves to the database on TiDB is what it leaves for `refund_jobs`
-- (docs/tidb.md): the WHERE clause of every fenced write (state + attempt), the
-- primary-key lock of claims, and `transcode_jobs_keys`' primary key.
-- TestTiDBDirectoryFollowsMigrations (migrations/tidb_test.go, for every
-- schema) checks that this file creates the generated fence's tables with the
-- generated statements.

CREATE TABLE IF NOT EXISTS `transcode_jobs_keys` (
  `job_key` varchar(128) NOT NULL,
  `source_uri` varchar(512) NOT NULL,
  `preset` varchar(128) NOT NULL,
  `duration_ms` bigint NOT NULL,
  `registered_at` datetime(6) NOT NULL,
  `job_created_at` datetime(6) NULL,
  PRIMARY KEY (`job_key`)
) CHARSET utf8mb4 COLLATE utf8mb4_bin;

CREATE TABLE IF NOT EXISTS `transcode_jobs_archive` LIKE `transcode_jobs`;

-- Every key already enqueued or archived stays known.
INSERT INTO `transcode_jobs_keys` (`job_key`, `source_uri`, `preset`, `duration_ms`, `registered_at`, `job_created_at`)
  SELECT j.`job_key`, j.`source_uri`, j.`preset`, j.`duration_ms`, j.`created_at`, j.`created_at` FROM `transcode_jobs` j
  WHERE NOT EXISTS (SELECT 1 FROM `transcode_jobs_keys` k WHERE k.`job_key` = j.`job_key`);
INSERT INTO `transcode_jobs_keys` (`job_key`, `source_uri`, `preset`, `duration_ms`, `registered_at`, `job_created_at`)
  SELECT j.`job_key`, j.`source_uri`, j.`preset`, j.`duration_ms`, j.`created_at`, j.`created_at` FROM `transcode_jobs_archive` j
  WHERE NOT EXISTS (SELECT 1 FROM `transcode_jobs_keys` k WHERE k.`job_key` = j.`job_key`);
