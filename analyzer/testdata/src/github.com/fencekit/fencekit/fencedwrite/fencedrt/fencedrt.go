// Package fencedrt stands for the fenced layer's runtime.
package fencedrt

// Lease is a write right.
type Lease struct{ id int64 }

// Registered stands for a runtime helper.
func Registered(name string) bool { return name != "" }
