//go:build !tidb

package dbtest

// tidbRun: built for MySQL and MariaDB, with the tests of the database's
// fence.
const tidbRun = false
