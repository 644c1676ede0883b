package operator

// BeforeApply sets the test signal that runs after an action read and
// verified the job, just before its fenced write.
func BeforeApply(s *Service, f func(jobID int64)) { s.hooks.beforeApply = f }

// Plans are the statements of the views, with their arguments, and the
// index each must read (checked with EXPLAIN).
func Plans() []struct {
	Name, Query, Index string
	Args               []any
} {
	type plan = struct {
		Name, Query, Index string
		Args               []any
	}
	return []plan{
		{"queue", jobsQuery(queueWhere, "`updated_at`, `id`"), "refund_jobs_state_changed", []any{51}},
		{"queue, next page", jobsQuery(queueWhere+" AND "+afterChange, "`updated_at`, `id`"), "refund_jobs_state_changed", []any{0, 0, 0, 51}},
		{"a state's jobs", jobsQuery("`state` = ?", "`updated_at`, `id`"), "refund_jobs_state_changed", []any{"failed", 51}},
		{"by payment", jobsQuery("`payment_ref` = ?", "`id`"), "refund_jobs_payment", []any{"pay-7", 51}},
		{"by provider refund id", jobsQuery("`provider_refund_id` = ?", "`id`"), "refund_jobs_provider_refund", []any{"re_7", 51}},
		{"by operation key", jobsQuery("`operation_key` = ?", "`id`"), "operation_key", []any{"k-7", 51}},
		// Prefix searches read their column's index in its order.
		{"by a key's prefix", jobsQuery("`operation_key` LIKE ?", "`operation_key`, `id`"), "operation_key", []any{"k-7%", 51}},
		{"by a payment's prefix", jobsQuery("`payment_ref` LIKE ?", "`payment_ref`, `id`"), "refund_jobs_payment", []any{"pay-7%", 51}},
		{"by a refund id's prefix", jobsQuery("`provider_refund_id` LIKE ?", "`provider_refund_id`, `id`"), "refund_jobs_provider_refund", []any{"re_7%", 51}},
	}
}

// BeforeCommit sets the test signal that runs inside a resolution's
// transaction after its last statement: an error rolls it back.
func BeforeCommit(s *Service, f func(jobID int64) error) { s.hooks.beforeCommit = f }
