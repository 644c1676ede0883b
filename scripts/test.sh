#!/usr/bin/env bash
# Runs every test of fencekit, doing its own set-up: it brings up a local
# MySQL-compatible server when none answers (scripts/ensure-db.sh) and
# installs Debian's chromium for the console's browser tests when it is
# missing (scripts/ensure-chromium.sh), then
# checks formatting, vets, lints the repository with fencelint, runs all
# tests of the three modules under the race detector against that server,
# and runs the benchmark once at a tiny size (bench/, which also needs the
# local PostgreSQL) to keep it compiling and honest: not a timed test.
# When a tidb-server is already built in the cache (scripts/tidb.sh), it
# also runs the conformance suites against TiDB (scripts/test-tidb.sh); it
# never builds one, which takes 10 to 15 minutes.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n== %s\n' "$*"; }

step "database"
scripts/ensure-db.sh

step "headless Chromium for the console's browser tests"
scripts/ensure-chromium.sh

step "gofmt"
unformatted=$(gofmt -l $(git ls-files "*.go" | grep -v "/testdata/"))
if [ -n "$unformatted" ]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi

step "go vet"
go vet ./... ./analyzer/... ./bench/...

step "fencelint (the project lints itself)"
mkdir -p bin
go build -o bin/fencelint ./cmd/fencelint
go vet -vettool="$PWD/bin/fencelint" ./... ./analyzer/... ./bench/...

step "go test -race"
go test -race -count=1 -timeout 15m ./... ./analyzer/... ./bench/...

step "benchmark at a tiny size (docs/benchmarks.md has the real run)"
(cd bench && go run . -jobs 200 -json)

if scripts/tidb.sh path >/dev/null 2>&1; then
  step "TiDB (the cached tidb-server)"
  scripts/test-tidb.sh
else
  step "TiDB: no tidb-server in the cache; scripts/test-tidb.sh builds one (10 to 15 minutes) and runs the suites"
fi
