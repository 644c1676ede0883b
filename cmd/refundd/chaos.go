package main

import (
	"context"
	"flag"
	"io"
	"log"
	"os"
	"strings"

	"github.com/go-sql-driver/mysql"

	"github.com/fencekit/fencekit/internal/chaos"
)

// chaosCommand is refundd chaos: the harness in internal/chaos, on its own
// database (the demo's name with _chaos, unless -dsn names one).
func chaosCommand(ctx context.Context, fs *flag.FlagSet, dsn *string, args []string, out io.Writer) error {
	var c chaos.Config
	c.RegisterFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if cfg, err := mysql.ParseDSN(*dsn); err == nil && !flagSet(fs, "dsn") && !strings.HasSuffix(cfg.DBName, "_chaos") {
		// chaos drops and recreates its database: never the demo's.
		cfg.DBName = strings.TrimSuffix(cfg.DBName, "_demo") + "_chaos"
		*dsn = cfg.FormatDSN()
	}
	// The harness's proxies break connections on purpose; the driver would
	// log each one. Its logger is global, so it is set here, once per
	// process, before any connection (chaos.Run leaves it alone: parallel
	// runs in one test binary would race on it).
	_ = mysql.SetLogger(log.New(io.Discard, "", 0))
	return chaos.Run(ctx, *dsn, c, out)
}

// chaosAgentCommand is the hidden command refundd chaos runs its fleet
// with (chaos.AgentCommand): refundd run with the harness's hooks, which
// record the process's history and hold it at each step boundary. It is
// listed nowhere, and refundd run carries none of its flags.
func chaosAgentCommand(ctx context.Context, fs *flag.FlagSet, dsn *string, args []string) error {
	var f runFlags
	f.register(fs)
	var a chaos.AgentFlags
	a.Register(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	agent, err := a.Open()
	if err != nil {
		return err
	}
	defer agent.Close()
	f.dsn, f.hooks = *dsn, agent.Hooks()
	return runWorker(ctx, f, os.Stderr)
}
