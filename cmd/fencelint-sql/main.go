// Command fencelint-sql is fencelint's SQL checker: it judges, with the TiDB
// parser's MySQL grammar, the SQL text fencelint finds. fencelint starts it
// and talks to it on its standard input and output; it is not run by hand.
//
// It is a command of its own so that fencelint does not link the parser:
// go vet starts fencelint once for every package and dependency, and the
// parser's start-up would be paid by all of them, where only the packages
// whose text names a fenced table need it. Install it with fencelint, from
// the same version:
//
//	go install github.com/fencekit/fencekit/cmd/fencelint@VERSION github.com/fencekit/fencekit/cmd/fencelint-sql@VERSION
//
// fencelint looks for it in $FENCELINT_SQL, then beside its own executable,
// then on PATH.
package main

import (
	"fmt"
	"os"

	"github.com/fencekit/fencekit/analyzer/sqlparse"
)

func main() {
	if len(os.Args) > 1 {
		fmt.Fprintln(os.Stderr, "fencelint-sql takes no arguments: fencelint starts it and asks it on its standard input (see go doc github.com/fencekit/fencekit/cmd/fencelint-sql)")
		os.Exit(2)
	}
	if err := sqlparse.Serve(os.Stdin, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "fencelint-sql: %v\n", err)
		os.Exit(1)
	}
}
