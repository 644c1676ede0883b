package fencedrt

import "time"

// timeLayout formats a time as a UTC DATETIME(6) literal, whatever the
// driver's loc says.
const timeLayout = "2006-01-02 15:04:05.000000"

// SQLTime formats t, in UTC, as the text of a DATETIME(6) value.
func SQLTime(t time.Time) string { return t.UTC().Format(timeLayout) }
