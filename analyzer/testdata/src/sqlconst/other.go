package sqlconst

const fencedElsewhere = "UPDATE refund_jobs SET state = 'manual_review' WHERE id = ? AND state = 'running' AND attempt = ?"

// A package-level variable initialised with a constant: judged at its
// declaration.
var resetQuery = "UPDATE refund_jobs SET state = 'ready' WHERE id = ?" // want `unfenced UPDATE of refund_jobs`

func use() string { return resetQuery }
