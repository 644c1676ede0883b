package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// commands are the commands `refundd help` knows, in the order it lists
// them, each with its synopsis.
var commands = []struct{ name, synopsis string }{
	{"run", "serve the queue: workers, the webhook endpoint, /metrics and /healthz"},
	{"enqueue", "enqueue an approved refund request (amount in major units: 12.50)"},
	{"jobs", "search jobs, the manual-review queue (-state manual_review), the jobs that left it (-left), or one job's timeline (-id N)"},
	{"resolve", "resolve a job in manual review: verified with the provider, audited, fenced on the attempt seen"},
	{"approve", "approve (or -decline) a resend or override request as a second operator; -list the pending ones"},
	{"migrate", "apply the migrations to the database"},
	{"console-user", "a line of the console's users file for one operator (refundd run -console-users): the password read from stdin, bcrypt-hashed"},
	{"adopt", "bring an existing refund_jobs table to fencekit's schema (plan|apply), or undo it (rollback plan|apply): docs/adopting.md"},
	{"fence", "the fence's rollout mode (mode observe|enforce -reason TEXT) and the writes it let through (report)"},
	{"fakeprovider", "serve the fake payment provider over HTTP, for refundd run -provider-url on a laptop"},
	{"demo", "the demo at scale, or the article's scene (-scene zombie)"},
	{"chaos", "a fleet of refundd run processes under injected faults, checked"},
	{"help", "this list, or one command's flags: refundd help jobs"},
}

// helpSink catches the flag set of a command asked for help (-h), so that
// run prints that command's flags once.
type helpSink struct{ fs *flag.FlagSet }

type helpKey struct{}

// newFlagSet returns the flag set of one command. It prints nothing by
// itself: run prints a parse error as one line, and -h as the command's
// help.
func newFlagSet(ctx context.Context, name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {
		if sink, ok := ctx.Value(helpKey{}).(*helpSink); ok {
			sink.fs = fs
		}
	}
	return fs
}

// run runs the command args[0] with its arguments. `help`, `-h` and a
// command's -h print help on out and succeed; a flag the command does not
// know, or a value it cannot read, is one error naming the flag and the
// value.
func run(ctx context.Context, args []string, out io.Writer) error {
	if len(args) == 0 {
		return errors.New("missing command: see refundd help")
	}
	switch args[0] {
	case "help", "-h", "-help", "--help":
		return help(ctx, args[1:], out)
	}
	sink := &helpSink{}
	err := command(context.WithValue(ctx, helpKey{}, sink), args, out)
	switch {
	case errors.Is(err, flag.ErrHelp) && sink.fs != nil:
		printHelp(out, args[0], sink.fs)
		return nil
	case err != nil && isFlagError(err):
		return fmt.Errorf("%s: %w (see refundd help %s)", args[0], err, args[0])
	}
	return err
}

// isFlagError reports whether err is the flag package's parse error: its
// messages already name the flag, and the value when there is one.
func isFlagError(err error) bool {
	msg := err.Error()
	for _, p := range []string{"flag provided but not defined: ", "flag needs an argument: ", "bad flag syntax: "} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return strings.HasPrefix(msg, "invalid value ") && strings.Contains(msg, " for flag -")
}

// help prints the list of commands, or one command's synopsis and flags.
func help(ctx context.Context, args []string, out io.Writer) error {
	if len(args) == 0 {
		usage(out)
		return nil
	}
	if len(args) > 1 {
		return fmt.Errorf("help: one command at a time, got %q", strings.Join(args, " "))
	}
	name := args[0]
	if name == "help" {
		fmt.Fprintln(out, "usage: refundd help [command]")
		return nil
	}
	for _, c := range commands {
		if c.name != name {
			continue
		}
		sink := &helpSink{}
		err := command(context.WithValue(ctx, helpKey{}, sink), []string{name, "-h"}, out)
		if errors.Is(err, flag.ErrHelp) && sink.fs != nil {
			printHelp(out, name, sink.fs)
			return nil
		}
		if err != nil {
			return fmt.Errorf("help %s: %w", name, err)
		}
		return nil
	}
	return fmt.Errorf("help: unknown command %q: see refundd help", name)
}

// printHelp prints a command's synopsis and its flags, sorted by name.
func printHelp(out io.Writer, name string, fs *flag.FlagSet) {
	for _, c := range commands {
		if c.name == name {
			fmt.Fprintf(out, "refundd %s: %s\n", name, c.synopsis)
		}
	}
	fmt.Fprintln(out, "flags:")
	fs.SetOutput(out)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
}
