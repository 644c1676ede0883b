// Package analyzer is a placeholder.
package analyzer

const Name = "fencelint"
