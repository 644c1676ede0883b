-- Completes a job.
UPDATE refund_jobs
SET state = 'succeeded', writer_attempt = ?
WHERE id = ? AND state = 'running' AND attempt = ?;
