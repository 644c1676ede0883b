package fencedrt

// TestRow exposes row to the external tests.
type TestRow = row

// NewTestRow builds a re-read row.
func NewTestRow(found bool, state string, attempt int64, cols map[string]*string) TestRow {
	return row{found: found, state: state, attempt: attempt, cols: cols}
}

// Classify exposes classify.
func (w *Write) Classify(r TestRow, afterCommit bool, cause error) error {
	return w.classify(r, afterCommit, cause)
}

// SameWrite exposes sameWrite.
func (w *Write) SameWrite(r TestRow) bool { return w.sameWrite(r) }
