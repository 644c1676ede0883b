package fencedrt

import "time"

// The database clock that no session can move. NOW(), UTC_TIMESTAMP() and
// UNIX_TIMESTAMP() follow a session's `SET timestamp = …`, and NOW() and
// SYSDATE() follow its time_zone. SYSDATE() reads the server's real clock,
// and UNIX_TIMESTAMP(SYSDATE(6)) turns it back into seconds since the epoch
// through the session's own time zone, so the result is the same whatever
// either setting says. MySQL and MariaDB both behave so, unless the server
// runs with --sysdate-is-now (docs/mysql-mariadb.md).
const (
	// ClockMicros is the real time, in microseconds since the Unix epoch.
	ClockMicros = "CAST(UNIX_TIMESTAMP(SYSDATE(6)) * 1000000 AS SIGNED)"
	// ClockUTC is the real time as a UTC DATETIME(6).
	ClockUTC = "TIMESTAMPADD(MICROSECOND, " + ClockMicros + ", TIMESTAMP'1970-01-01 00:00:00')"
)

// Micros is the SQL that turns a UTC DATETIME(6) column into microseconds
// since the epoch: readers then never depend on the driver's loc setting.
func Micros(col string) string {
	return "TIMESTAMPDIFF(MICROSECOND, TIMESTAMP'1970-01-01 00:00:00', " + col + ")"
}

// timeLayout formats a time as a UTC DATETIME(6) literal, whatever the
// driver's loc says.
const timeLayout = "2006-01-02 15:04:05.000000"

// SQLTime formats t, in UTC, as the text of a DATETIME(6) value.
func SQLTime(t time.Time) string { return t.UTC().Format(timeLayout) }
