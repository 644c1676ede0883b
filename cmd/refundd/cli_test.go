package main

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"
)

// Every command refundd's usage lists has its help: `refundd help NAME`
// prints its synopsis and its flags (adopt answered "unknown command").
func TestEveryListedCommandHasHelp(t *testing.T) {
	var usageText bytes.Buffer
	usage(&usageText)
	listed := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^  refundd ([a-z-]+)`).FindAllStringSubmatch(usageText.String(), -1) {
		listed[m[1]] = true
	}
	for _, c := range commands {
		delete(listed, c.name)
	}
	if len(listed) > 0 {
		t.Fatalf("usage lists commands that help does not know: %v", listed)
	}
	for _, c := range commands {
		t.Run(c.name, func(t *testing.T) {
			var out bytes.Buffer
			if err := run(context.Background(), []string{"help", c.name}, &out); err != nil {
				t.Fatalf("refundd help %s: %v", c.name, err)
			}
			if c.name == "help" {
				return
			}
			if !strings.HasPrefix(out.String(), "refundd "+c.name+": ") || !strings.Contains(out.String(), "\nflags:\n") || !strings.Contains(out.String(), "-dsn") &&
				c.name != "fakeprovider" && c.name != "console-user" {
				t.Fatalf("refundd help %s:\n%s", c.name, out.String())
			}
		})
	}
}

// A command that reaches a database needs one named: without -dsn and
// $FENCEKIT_DSN it is refused by name, instead of writing fencekit_demo.
// Only demo and chaos (which recreate a throw-away database of their own)
// keep a default.
func TestCommandsThatReachADatabaseNeedADSN(t *testing.T) {
	t.Setenv("FENCEKIT_DSN", "")
	for _, args := range [][]string{
		{"run", "-provider-url", "http://127.0.0.1:1"},
		{"enqueue", "-key", "k", "-payment", "p", "-amount", "1.00", "-currency", "EUR"},
		{"jobs"},
		{"resolve", "-id", "1", "-as", "reconcile", "-reason", "r"},
		{"approve", "-list"},
		{"migrate"},
		{"adopt", "plan"},
		{"adopt", "apply"},
		{"adopt", "rollback", "plan"},
		{"fence", "mode"},
		{"fence", "mode", "enforce", "-reason", "r"},
		{"fence", "report"},
	} {
		err := run(context.Background(), args, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), "-dsn") || !strings.Contains(err.Error(), "required") {
			t.Errorf("refundd %s without a DSN: %v, want -dsn required", strings.Join(args, " "), err)
		}
	}
	var out bytes.Buffer
	if err := run(context.Background(), []string{"help", "demo"}, &out); err != nil || !strings.Contains(out.String(), "fencekit_demo") {
		t.Errorf("refundd demo keeps its default: %v\n%s", err, out.String())
	}
}

// An argument of 10,000 characters is not echoed back in full by an error
// on the terminal, whichever check refuses it.
func TestALongArgumentIsNotEchoedInFull(t *testing.T) {
	long := strings.Repeat("A", 10_000)
	for _, args := range [][]string{
		{"adopt", "plan", "-dsn", "root@tcp(127.0.0.1:1)/payments", "-states", long},
		{"jobs", "-dsn", "root@tcp(127.0.0.1:1)/payments", "-limit", long},
		{"fence", "mode", long, "-dsn", "root@tcp(127.0.0.1:1)/payments"},
	} {
		out, err := refundd(t, args...)
		if err == nil {
			t.Fatalf("refundd %s: succeeded", args[0])
		}
		if strings.Contains(out, long) || len(out) > 2000 || !strings.Contains(out, "more bytes not shown") {
			t.Errorf("refundd %s %s …: %d bytes printed:\n%.300s", args[0], args[1], len(out), out)
		}
	}
}
