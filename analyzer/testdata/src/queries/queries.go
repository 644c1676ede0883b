// Package queries holds SQL constants used from another package.
package queries

// Constants are judged where they are used, not where they are declared.
const (
	Unfenced = "UPDATE refund_jobs SET state = 'ready' WHERE id = ?"
	Fenced   = "UPDATE refund_jobs SET state = 'succeeded' WHERE id = ? AND state = 'running' AND attempt = ?"
	Table    = "refund_jobs"
)
