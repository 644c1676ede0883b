// Package ent stands for the code fencedwrite/entext generates for a
// schema fenced under its own names: the constants are all fencelint needs.
package ent

const (
	PayoutFencedTable        = "payouts"
	PayoutFencedStateColumn  = "status"
	PayoutFencedTokenColumn  = "version"
	PayoutFencedWriterColumn = "declared_version"
	PayoutFencedLeaseColumn  = "held_until"
)
