// Package readme holds the test that README.md's Go snippets compile: each
// ```go block is a complete file, type-checked and vetted as shown.
package readme
