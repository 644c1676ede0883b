package fencedwrite

// SetBeforeClaimCommit installs a hook that runs right before a claim's or a
// takeover's COMMIT is sent, and returns a function that removes it.
func SetBeforeClaimCommit(f func()) (restore func()) {
	beforeClaimCommit = f
	return func() { beforeClaimCommit = nil }
}
