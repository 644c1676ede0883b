//go:build ignore

// The generator of this package: go generate ./examples/transcode/ent/...
// runs it. The drift test runs it with -target to compare its output with the
// committed code.
package main

import (
	"flag"
	"log"

	"entgo.io/ent/entc"
	"entgo.io/ent/entc/gen"

	"github.com/fencekit/fencekit/fencedwrite/entext"
)

func main() {
	target := flag.String("target", "", "write the code to this directory instead of ./ (for the drift test)")
	flag.Parse()
	cfg := &gen.Config{
		Features: []gen.Feature{
			gen.FeatureLock,
			gen.FeatureExecQuery,
			gen.FeatureVersionedMigration,
		},
	}
	if *target != "" {
		cfg.Target = *target
		cfg.Package = "github.com/fencekit/fencekit/examples/transcode/ent"
	}
	if err := entc.Generate("./schema", cfg, entc.Extensions(entext.New())); err != nil {
		log.Fatalf("running ent codegen: %v", err)
	}
}
