// Package bulkload checks LOAD DATA, REPLACE and MySQL statements that
// fencelint's parser reads or not, in the shapes of a nightly
// reconciliation job: a provider's settlement file loaded into the jobs
// table, statements with hints, CTEs, JSON paths and escapes.
package bulkload

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
)

const loadSettlements = `LOAD DATA LOCAL INFILE 'Reader::settlements'
REPLACE INTO TABLE refund_jobs
CHARACTER SET utf8mb4
FIELDS TERMINATED BY ',' OPTIONALLY ENCLOSED BY '"' ESCAPED BY '\\'
LINES TERMINATED BY '\n'
IGNORE 1 LINES
(id, operation_key, @state)
SET state = IF(@state = '', 'ready', @state)`

// Loading new jobs only: rows whose key exists are skipped, none is
// overwritten.
const loadNewJobs = "LOAD DATA LOCAL INFILE 'Reader::new_jobs' IGNORE INTO TABLE refund_jobs FIELDS TERMINATED BY ',' (id, operation_key, state)"

func reconcile(ctx context.Context, db *sql.DB, dir string) error {
	if _, err := db.ExecContext(ctx, loadSettlements); err != nil { // want `LOAD DATA … REPLACE writes existing refund_jobs rows and cannot be fenced`
		return err
	}
	if _, err := db.ExecContext(ctx, loadNewJobs); err != nil {
		return err
	}
	// The file name is a run-time value: the REPLACE is in the constant part.
	q := fmt.Sprintf("LOAD DATA LOCAL INFILE '%s' REPLACE INTO TABLE refund_jobs FIELDS TERMINATED BY ','", filepath.Join(dir, "jobs.csv"))
	if _, err := db.ExecContext(ctx, q); err != nil { // want `query built at run time writes refund_jobs \(LOAD DATA … REPLACE\)`
		return err
	}
	q = fmt.Sprintf("LOAD DATA LOCAL INFILE '%s' INTO TABLE refund_jobs", filepath.Join(dir, "new.csv"))
	if _, err := db.ExecContext(ctx, q); err != nil {
		return err
	}
	_, err := db.ExecContext(ctx, "REPLACE INTO refund_jobs (id, operation_key, state) SELECT id, operation_key, 'ready' FROM refund_jobs_staging") // want `REPLACE writes existing refund_jobs rows and cannot be fenced`
	return err
}

// MySQL statements that fencelint reads: none is reported when fenced.
func mysqlSyntax(ctx context.Context, db *sql.DB, j job) {
	db.ExecContext(ctx, "UPDATE /*+ MAX_EXECUTION_TIME(1000) */ LOW_PRIORITY IGNORE `refund_jobs` SET `state` = ? WHERE `id` = ? AND `state` = ? AND `attempt` = ? ORDER BY id LIMIT 1", "sent", j.ID, j.State, j.Attempt)
	db.ExecContext(ctx, `WITH stale AS (
		SELECT id, ROW_NUMBER() OVER (PARTITION BY merchant_id ORDER BY created_at) AS rn FROM refund_jobs
	)
	UPDATE refund_jobs j JOIN stale s ON s.id = j.id
	SET j.state = 'held' # oldest first
	WHERE s.rn > 10 AND j.state = ? AND j.attempt = ? -- fenced`, j.State, j.Attempt)
	db.ExecContext(ctx, "UPDATE refund_jobs SET note = _utf8mb4'it\\'s' COLLATE utf8mb4_bin, token = X'0A0B', flags = b'101' WHERE meta->>'$.provider' = ? AND state = ? AND attempt = ?", "acme", j.State, j.Attempt)
	db.ExecContext(ctx, "SET @n := 0; UPDATE refund_jobs SET seq = (@n := @n + 1) WHERE id = ? AND state = ? AND attempt = ?", j.ID, j.State, j.Attempt)
	// The same, unfenced: judged, not "cannot read".
	db.ExecContext(ctx, "WITH c AS (SELECT id FROM refund_jobs WHERE merchant_id = ?) UPDATE refund_jobs SET state = 'held' WHERE id IN (SELECT id FROM c)", 7) // want `^unfenced UPDATE of refund_jobs: WHERE lacks state = \? and attempt = \?`
	db.ExecContext(ctx, "INSERT INTO refund_jobs (id, state) VALUES (?, ?) AS new ON DUPLICATE KEY UPDATE state = new.state", j.ID, j.State)                    // want `^INSERT … ON DUPLICATE KEY UPDATE writes existing refund_jobs rows and cannot be fenced`
}

// MySQL reads these and TiDB's parser does not: fencelint rewrites them
// (SOUNDS LIKE → LIKE, JSON_TABLE(…) → a derived table, JSON_VALUE's
// RETURNING dropped) and judges them.
func repairedMySQL(ctx context.Context, db *sql.DB, j job) {
	db.ExecContext(ctx, "UPDATE refund_jobs SET state = 'held' WHERE id IN (SELECT t.id FROM JSON_TABLE(?, '$[*]' COLUMNS(id BIGINT PATH '$')) t) AND state = ? AND attempt = ?", "[1]", j.State, j.Attempt)
	db.ExecContext(ctx, "UPDATE refund_jobs SET state = 'held' WHERE payee SOUNDS LIKE ? AND state = ? AND attempt = ?", "smith", j.State, j.Attempt)
	db.ExecContext(ctx, "UPDATE refund_jobs SET amount = JSON_VALUE(meta, '$.amount' RETURNING DECIMAL(12,2)) WHERE id = ? AND state = ? AND attempt = ?", j.ID, j.State, j.Attempt)
	db.ExecContext(ctx, "UPDATE refund_jobs r JOIN JSON_TABLE(?, '$[*]' COLUMNS(id BIGINT PATH '$')) t ON t.id = r.id SET r.state = 'held'", "[1]") // want `^unfenced UPDATE of refund_jobs: WHERE lacks state = \? and attempt = \? qualified with r`
	// Where the parser still stops, the message names the construct.
	db.ExecContext(ctx, "UPDATE refund_jobs SET state = 'held' WHERE payee SOUNDS LIKE AND state = ? AND attempt = ?", j.State, j.Attempt) // want `UPDATE of refund_jobs that fencelint cannot read \(SOUNDS LIKE at offset 50\)`
}

type job struct {
	ID      int64
	State   string
	Attempt int64
}
