package operator

// BeforeApply sets the test signal that runs after an action read and
// verified the job, just before its fenced write.
func BeforeApply(s *Service, f func(jobID int64)) { s.hooks.beforeApply = f }
