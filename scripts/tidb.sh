#!/usr/bin/env bash
# Builds and runs a TiDB server for fencekit's TiDB suites (docs/tidb.md).
#
#   scripts/tidb.sh build         build tidb-server into the cache unless it is there
#   scripts/tidb.sh path          print the cached binary's path (exit 1 when not built)
#   scripts/tidb.sh start [PORT]  build if needed, then start on 127.0.0.1:PORT (default
#                                 4000; status port PORT+6080) in the background
#   scripts/tidb.sh stop [PORT]   stop the server this script started on PORT
#
# The server is built in its own throw-away module outside the repository,
# under ${XDG_CACHE_HOME:-$HOME/.cache}/fencekit/tidb/<version>/, from the Go
# module proxy: the module requires TiDB and its parser at the pinned
# versions and copies the replace directives of TiDB's own go.mod (a replace
# in a dependency's go.mod does not apply to the module that requires it).
# A cold build takes 10 to 15 minutes on 2 cores, a warm one (Go build cache full) about a minute.
#
# The server keeps its data in memory (unistore, -path ""): every start is
# an empty server, and stopping it loses everything.
set -euo pipefail

tidb_version=v1.1.0-beta.0.20251126154744-e4e814fdc0af
parser_version=v0.0.0-20251126154744-e4e814fdc0af

cache=${XDG_CACHE_HOME:-$HOME/.cache}/fencekit/tidb/${tidb_version##*-}
bin=$cache/bin/tidb-server

log() { printf 'tidb: %s\n' "$*" >&2; }

build() {
  if [ -x "$bin" ]; then
    return 0
  fi
  mkdir -p "$cache/src" "$cache/bin"
  cat >"$cache/src/go.mod" <<EOF
// Throw-away module of scripts/tidb.sh: builds tidb-server, nothing else.
module fencekit.local/tidbserver

go 1.23.6

require (
	github.com/pingcap/tidb $tidb_version
	github.com/pingcap/tidb/pkg/parser $parser_version
)

// The replace directives of TiDB's go.mod at that version, but its parser's
// (./pkg/parser), which the require above stands for.
replace (
	github.com/go-ldap/ldap/v3 => github.com/YangKeao/ldap/v3 v3.4.5-0.20230421065457-369a3bab1117
	sourcegraph.com/sourcegraph/appdash => github.com/sourcegraph/appdash v0.0.0-20190731080439-ebfcffb1b5c0
	sourcegraph.com/sourcegraph/appdash-data => github.com/sourcegraph/appdash-data v0.0.0-20151005221446-73f23eafcf67
)
EOF
  log "building tidb-server $tidb_version into $cache (cold: 10 to 15 minutes)"
  local start=$SECONDS
  # GOWORK=off: the build must not see this repository's go.work.
  # -mod=mod: the module resolves (and records in go.sum) what TiDB needs.
  (cd "$cache/src" &&
    GOWORK=off GOFLAGS=-mod=mod go build -o "$bin.tmp" github.com/pingcap/tidb/cmd/tidb-server)
  mv "$bin.tmp" "$bin"
  log "built $bin in $((SECONDS - start)) s"
}

pidfile() { echo "$cache/run/$1/tidb-server.pid"; }

answers() {
  # The status port answers once the SQL port does; no client needed.
  local status=$(($1 + 6080))
  if command -v curl >/dev/null 2>&1; then
    curl -fsS "http://127.0.0.1:$status/status" >/dev/null 2>&1
  else
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
  fi
}

start() {
  local port=${1:-4000}
  build
  local run=$cache/run/$port
  local pf
  pf=$(pidfile "$port")
  if [ -f "$pf" ] && kill -0 "$(cat "$pf")" 2>/dev/null; then
    log "already running on 127.0.0.1:$port (pid $(cat "$pf"))"
    return 0
  fi
  rm -rf "$run"
  mkdir -p "$run/tmp"
  # What fencekit needs of the server, set at bootstrap (every start: the
  # store is in memory): CHECK constraints enforced, as MySQL 8.0.16+ and
  # MariaDB enforce them. provider_budgets relies on them; with TiDB's
  # default (OFF), CREATE TABLE parses them and drops them.
  echo "SET GLOBAL tidb_enable_check_constraint = ON;" >"$run/init.sql"
  echo "initialize-sql-file = \"$run/init.sql\"" >"$run/config.toml"
  # The status port sits next to the SQL port, so that servers on other
  # ports can run side by side; the server runs in its own directory, where
  # it writes its logs.
  (cd "$run" && exec "$bin" -config "$run/config.toml" -store unistore -path "" \
    -P "$port" -host 127.0.0.1 -status $((port + 6080)) -status-host 127.0.0.1 -socket "" \
    -temp-dir "$run/tmp" -log-file "$run/tidb.log" -log-slow-query "$run/slow.log" \
    >"$run/stdout.log" 2>&1) &
  echo $! >"$pf"
  for _ in $(seq 1 120); do
    if ! kill -0 "$(cat "$pf")" 2>/dev/null; then
      log "tidb-server exited; see $run/tidb.log and $run/stdout.log"
      tail -n 20 "$run/stdout.log" >&2 || true
      exit 1
    fi
    if answers "$port"; then
      log "up on 127.0.0.1:$port (pid $(cat "$pf"), log $run/tidb.log)"
      return 0
    fi
    sleep 0.5
  done
  log "no answer on 127.0.0.1:$port after 60 s; see $run/tidb.log"
  exit 1
}

stop() {
  local port=${1:-4000}
  local pf
  pf=$(pidfile "$port")
  if [ ! -f "$pf" ]; then
    return 0
  fi
  local pid
  pid=$(cat "$pf")
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid"
    for _ in $(seq 1 40); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.25
    done
    kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$pf"
}

case "${1:-}" in
  build) build ;;
  path) if [ -x "$bin" ]; then echo "$bin"; else exit 1; fi ;;
  start) start "${2:-}" ;;
  stop) stop "${2:-}" ;;
  *)
    echo "usage: $0 build|path|start [PORT]|stop [PORT]" >&2
    exit 2
    ;;
esac
