package main

import (
	"flag"
	"os/user"
	"testing"
)

// resolve and approve record who decided: by default the login name of the
// account running refundd, never empty, never another's.
func TestOperatorDefaultsToTheLoginName(t *testing.T) {
	u, err := user.Current()
	if err != nil || u.Username == "" {
		t.Fatalf("this account has no login name (%v): the default cannot be checked", err)
	}
	var r resolveFlags
	fs := flag.NewFlagSet("resolve", flag.ContinueOnError)
	r.register(fs)
	var a approveFlags
	fa := flag.NewFlagSet("approve", flag.ContinueOnError)
	a.register(fa)
	if r.operator != u.Username || a.operator != u.Username {
		t.Fatalf("-operator defaults: resolve %q, approve %q, want the login name %q", r.operator, a.operator, u.Username)
	}
	if err := fs.Parse([]string{"-operator", "alice"}); err != nil || r.operator != "alice" {
		t.Fatalf("-operator alice: %q, %v", r.operator, err)
	}
}
