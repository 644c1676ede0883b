// Package assert is a minimal stand-in for testify's assert.
package assert

// TestingT is what assertions report to.
type TestingT interface {
	Errorf(format string, args ...any)
}

// Equal reports when expected and actual differ.
func Equal(t TestingT, expected, actual any, msgAndArgs ...any) bool {
	if expected != actual {
		t.Errorf("not equal: %v != %v", expected, actual)
		return false
	}
	return true
}
