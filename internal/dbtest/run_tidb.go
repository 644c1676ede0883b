//go:build tidb

package dbtest

// tidbRun: built for the TiDB run (scripts/test-tidb.sh), without the tests
// of the database's fence.
const tidbRun = true
