// Package baselinebad imports nothing: it loads fast, for the tests of a
// baseline that fails before any finding.
package baselinebad
