#!/usr/bin/env bash
# Runs every test of fencekit, doing its own set-up and saying what it did:
# it brings up every server and tool the tests need, each script starting
# or installing only what is missing and changing no existing account or
# password without saying so:
#   - a MySQL-compatible server on 127.0.0.1:3306 (scripts/ensure-db.sh);
#   - PostgreSQL on 127.0.0.1:5432 for the benchmark's River side
#     (scripts/ensure-pg.sh, which prints the URL it exports as
#     FENCEKIT_BENCH_PG);
#   - Chromium for the console's browser tests (scripts/ensure-chromium.sh);
#   - a RabbitMQ broker on 127.0.0.1:5672 for the broker dispatch's tests
#     (scripts/ensure-rabbitmq.sh; FENCEKIT_TEST_AMQP names another);
#   - stripe-mock, Stripe's official mock, on 127.0.0.1:12111 for the Stripe
#     adapter's request shapes (scripts/ensure-stripe-mock.sh;
#     FENCEKIT_TEST_STRIPE_MOCK names another).
# Kafka's dispatch tests need no server: each starts an in-process cluster
# that speaks Kafka's wire protocol (franz-go's kfake); FENCEKIT_TEST_KAFKA
# (host:port,...) runs them against a real one.
# Then it checks formatting, vets, lints the repository with fencelint,
# runs all tests of the three modules against that server, under the race
# detector (the linter's without it, below), and runs the benchmark once at
# a tiny size (bench/) to keep it compiling and honest: not a timed test.
# When a tidb-server is already built in the cache (scripts/tidb.sh), it
# also runs the conformance suites against TiDB (scripts/test-tidb.sh); it
# never builds one, which takes 10 to 15 minutes.
set -euo pipefail
cd "$(dirname "$0")/.."

# Each step says when it started, in seconds since the command began.
step() { printf '\n== %s (at %ds)\n' "$*" "$SECONDS"; }
trap 'printf "\n== done in %ds\n" "$SECONDS"' EXIT

step "MySQL-compatible server (scripts/ensure-db.sh)"
scripts/ensure-db.sh

step "PostgreSQL for the benchmark (scripts/ensure-pg.sh)"
FENCEKIT_BENCH_PG=$(scripts/ensure-pg.sh)
export FENCEKIT_BENCH_PG

step "Chromium for the console's tests (scripts/ensure-chromium.sh)"
scripts/ensure-chromium.sh

step "RabbitMQ for the broker dispatch's tests (scripts/ensure-rabbitmq.sh)"
scripts/ensure-rabbitmq.sh

step "stripe-mock for the Stripe adapter's tests (scripts/ensure-stripe-mock.sh)"
scripts/ensure-stripe-mock.sh

step "gofmt"
unformatted=$(gofmt -l $(git ls-files "*.go" | grep -v "/testdata/"))
if [ -n "$unformatted" ]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi

# -trimpath (go vet, the self-lint and its binary, the race tests and the
# binaries they build with go build: GOFLAGS): compiled packages do not
# embed the checkout's directory, so a clean clone elsewhere on the same
# machine reuses the build cache of an earlier run instead of compiling
# every package again (a clone's race test binaries: 168 s of compiling
# cold, 33 s warm), and go vet keeps the self-lint's results of unchanged
# packages (it keys them by the tool's build ID, which then no longer
# names the checkout); the linter's tests too.
trim=-trimpath

step "go vet"
go vet $trim ./... ./analyzer/... ./bench/...

step "fencelint (the project lints itself)"
mkdir -p bin
go build $trim -o bin/ ./cmd/fencelint ./cmd/fencelint-sql  # fencelint starts fencelint-sql from beside it
go vet $trim -vettool="$PWD/bin/fencelint" ./... ./analyzer/... ./bench/...

step "go test -race (every test but the linter's, which follow)"
# The default -p (2 here). -p 3 was faster (the database tests wait on the
# server and on leases) but in two clean runs of four MariaDB 10.11 then left
# a trigger file's backup (*.TRG-) in a database's directory, so that DROP
# DATABASE failed with error 1010.
GOFLAGS="$trim ${GOFLAGS:-}" go test -race -count=1 -timeout 15m $(go list ./... | grep -v '/cmd/fencelint$') ./bench/...

# The linter's own tests run without the race detector: fencelint has no
# goroutines of its own, and go vet runs it in one process per package;
# -race makes building SSA five to six times slower (analyzer/: 8 s
# against 50 s).
step "the linter's tests"
# -trimpath as a flag, not in GOFLAGS: the analyzer's tests load their
# test packages with go/packages, which would inherit it (and then sees
# the standard library's files under other names).
go test $trim -count=1 -timeout 15m ./cmd/fencelint/ ./analyzer/...

# Every section once (one round, no sweep): it keeps the benchmark
# compiling and running; its figures at this size mean nothing. (Beside
# the linter's tests it gained nothing: both are CPU-bound here.)
step "benchmark at a tiny size (docs/benchmarks.md has the real run)"
(cd bench && go run $trim . -jobs 200 -rounds 1 -sweep "" -json)

if scripts/tidb.sh path >/dev/null 2>&1; then
  step "TiDB (the cached tidb-server)"
  scripts/test-tidb.sh
else
  step "TiDB: no tidb-server in the cache; scripts/test-tidb.sh builds one (10 to 15 minutes) and runs the suites"
fi
