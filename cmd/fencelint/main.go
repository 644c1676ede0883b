// Command fencelint reports writes of fenced tables (by default
// refund_jobs) that lack the state + attempt fence.
//
// It runs standalone:
//
//	fencelint ./...
//
// and as a vet tool:
//
//	go vet -vettool=$(which fencelint) ./...
//
// See docs/fencelint.md for flags and suppression.
package main

import (
	"github.com/fencekit/fencekit/analyzer"
	"golang.org/x/tools/go/analysis/singlechecker"
)

func main() { singlechecker.Main(analyzer.Analyzer) }
