package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/fencekit/fencekit/internal/dbtest"
	"github.com/fencekit/fencekit/migrations"
)

// demoDSN returns the DSN of a fresh *_demo database name on the test server,
// dropped when t ends.
func demoDSN(t *testing.T) string {
	t.Helper()
	return dbtest.ScratchDSN(t, "_demo")
}

// refundd demo and refundd chaos are wired to internal/demo and
// internal/chaos (their tests are there): their flags reach them, and they
// refuse to drop a database whose name does not say it is theirs.
func TestDemoAndChaosAreWired(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"demo", "-dsn", "root@tcp(127.0.0.1:3306)/payments"}, "must end in _demo"},
		{[]string{"demo", "-scene", "bogus"}, `unknown -scene "bogus"`},
		{[]string{"demo", "-workers", "1"}, "-workers at least 2"},
		{[]string{"chaos", "-dsn", "root@tcp(127.0.0.1:3306)/payments"}, "must end in _chaos"},
		{[]string{"chaos", "--workers", "1"}, "--workers must be at least 2"},
		{[]string{"chaos", "--dispatch", "sqs"}, `--dispatch "sqs": must be scan, rabbitmq or kafka`},
		{[]string{"chaos-agent", "-no-webhooks"}, "-chaos-history, -chaos-control and -chaos-proc are all required"},
	} {
		err := run(context.Background(), tc.args, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("refundd %v: %v, want an error containing %q", tc.args, err, tc.want)
		}
	}
}

func TestMigrateCreatesAndIsIdempotent(t *testing.T) {
	dsn := demoDSN(t)
	var out bytes.Buffer
	if err := run(context.Background(), []string{"migrate", "-create", "-dsn", dsn}, &out); err != nil {
		t.Fatal(err)
	}
	dir, err := migrations.Dir()
	if err != nil {
		t.Fatal(err)
	}
	files, err := dir.Files()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(out.String(), "migrate: applied") != len(files) {
		t.Fatalf("first migrate:\n%s", out.String())
	}
	out.Reset()
	if err := run(context.Background(), []string{"migrate", "-dsn", dsn}, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "is up to date") {
		t.Fatalf("second migrate:\n%s", out.String())
	}
	if err := run(context.Background(), []string{"bogus"}, &out); err == nil {
		t.Fatal("an unknown command succeeded")
	}
}
