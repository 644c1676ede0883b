package main

import (
	"fmt"

	"github.com/fencekit/fencekit/analyzer"
)

func main() { fmt.Println(analyzer.Name) }
