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

// NewTestWrite builds a write the way LeaseWrite and ReadWrite do, for any
// transition, without a lease: the classification tests draw them.
func NewTestWrite(t *Table, op Op, id, attempt int64, vals Values) *Write {
	return newWrite(t, op, id, attempt, vals)
}
