//go:build ignore

package main

import (
	"log"

	"entgo.io/ent/entc"
	"entgo.io/ent/entc/gen"

	"github.com/fencekit/fencekit/fencedwrite/entext"
)

func main() {
	err := entc.Generate("./schema", &gen.Config{
		Features: []gen.Feature{
			gen.FeatureLock,
			gen.FeatureExecQuery,
			gen.FeatureVersionedMigration,
		},
	}, entc.Extensions(entext.New()))
	if err != nil {
		log.Fatalf("running ent codegen: %v", err)
	}
}
