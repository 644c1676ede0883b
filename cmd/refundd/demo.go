package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/fencekit/fencekit/internal/demo"
)

// demoCommand is refundd demo: the demo at scale, or with -scene zombie the
// article's scene step by step (internal/demo).
func demoCommand(ctx context.Context, fs *flag.FlagSet, dsn *string, args []string, out io.Writer) error {
	scene := fs.String("scene", "", "play a scripted scene instead: zombie (the article's story, step by step)")
	var c demo.Config
	c.RegisterFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch *scene {
	case "zombie":
		return demo.Zombie(ctx, *dsn, out)
	case "":
		return demo.Scale(ctx, *dsn, c, out)
	default:
		return fmt.Errorf("demo: unknown -scene %q (zombie)", *scene)
	}
}
