#!/usr/bin/env bash
# Runs fencekit's conformance suites against TiDB (docs/tidb.md): the data
# layer's and the worker's tests, the same code that runs against MariaDB,
# built with -tags tidb, which leaves out the tests of the database's fence
# (TiDB has no triggers) and keeps the tests that state what TiDB lacks.
#
# It builds tidb-server into the user's cache when it is not there
# (scripts/tidb.sh; 10 to 15 minutes the first time), starts it on a free
# port of its own (from 4000 up, or FENCEKIT_TIDB_PORT), runs the suites
# under the race detector with go test, and stops the server.
#
#   scripts/test-tidb.sh            # every suite
#   scripts/test-tidb.sh -run Zombie # extra go test flags
set -euo pipefail
cd "$(dirname "$0")/.."

# The packages whose tests make up the suites. internal/dbtest checks that
# every difference the suite states (dbtest.Engine) is true of the server.
suites=(
  ./internal/dbtest/
  ./fencedwrite/...
  ./evidence/
  ./ledger/
  ./migrations/
  ./worker/...
)

step() { printf '\n== %s\n' "$*"; }

in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

port=${FENCEKIT_TIDB_PORT:-}
if [ -z "$port" ]; then
  for p in $(seq 4000 4099); do
    if ! in_use "$p" && ! in_use $((p + 6080)); then port=$p; break; fi
  done
  if [ -z "$port" ]; then
    echo "test-tidb: no free port between 4000 and 4099" >&2
    exit 1
  fi
fi

step "tidb-server"
start=$SECONDS
scripts/tidb.sh build
echo "build or cache check: $((SECONDS - start)) s"
trap 'scripts/tidb.sh stop "$port"' EXIT
scripts/tidb.sh start "$port"

step "go vet -tags tidb, and fencelint over the files only the TiDB run builds"
go vet -tags tidb "${suites[@]}"
mkdir -p bin
go build -o bin/ ./cmd/fencelint ./cmd/fencelint-sql
go vet -tags tidb -vettool="$PWD/bin/fencelint" "${suites[@]}"

step "go test -tags tidb -race against TiDB on 127.0.0.1:$port"
start=$SECONDS
FENCEKIT_TEST_DSN="root@tcp(127.0.0.1:$port)/" \
  go test -tags tidb -race -count=1 -timeout 15m "$@" "${suites[@]}"
echo "suites: $((SECONDS - start)) s"
