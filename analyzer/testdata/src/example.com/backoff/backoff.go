// Package backoff is a minimal stand-in for a retry library
// (cenkalti/backoff's shape): it runs an operation until it succeeds.
package backoff

// Retry runs op until it returns nil or attempts run out.
func Retry(op func() error, attempts int) error {
	var err error
	for i := 0; i < attempts; i++ {
		if err = op(); err == nil {
			return nil
		}
	}
	return err
}
