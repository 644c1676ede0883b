// Command noopvet is a vet tool that does nothing: fencebench's baseline
// for go vet -vettool.
package main

import (
	"golang.org/x/tools/go/analysis"
	"golang.org/x/tools/go/analysis/unitchecker"
)

var noop = &analysis.Analyzer{
	Name: "noop",
	Doc:  "does nothing: the baseline",
	Run:  func(*analysis.Pass) (any, error) { return nil, nil },
}

func main() { unitchecker.Main(noop) }
