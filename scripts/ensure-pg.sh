#!/usr/bin/env bash
# Makes sure a PostgreSQL server answers for the benchmark's River side
# (bench/, which creates and drops its own databases), and prints on stdout
# the URL to reach it with (FENCEKIT_BENCH_PG); what it did goes to stderr.
#
#   FENCEKIT_BENCH_PG=$(scripts/ensure-pg.sh)
#
# With FENCEKIT_BENCH_PG set, it only checks that server. Otherwise it wants
# a server on 127.0.0.1:5432:
#   - one that answers as root (postgres://root@127.0.0.1:5432/test, the
#     benchmark's default) or as the role this script creates is used as is;
#   - when nothing listens there, it starts the installed cluster on port
#     5432, creating one when none exists, and installs Debian's postgresql
#     package first when PostgreSQL is not installed (needs root);
#   - on a server where neither account works, it creates the role
#     fencekit_bench (LOGIN CREATEDB, password fencekit_bench) through the
#     local superuser, and says so. It never changes an existing role or
#     password: when fencekit_bench exists but cannot log in, it stops and
#     says why.
set -euo pipefail

host=127.0.0.1
port=${ENSURE_PG_PORT:-5432} # another port only to try this script on a scratch cluster
default_url="postgres://root@$host:$port/test"
role=fencekit_bench
role_url="postgres://$role:$role@$host:$port/postgres"
log() { printf 'ensure-pg: %s\n' "$*" >&2; }

as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi
}

# as_postgres runs a command as the cluster's superuser, over its Unix socket.
as_postgres() {
  if [ "$(id -un)" = postgres ]; then "$@"; else as_root runuser -u postgres -- "$@"; fi
}

answers() { # url
  command -v psql >/dev/null 2>&1 && PGCONNECT_TIMEOUT=3 psql "$1" -Atqc 'SELECT 1' >/dev/null 2>&1
}

version() { # url
  PGCONNECT_TIMEOUT=3 psql "$1" -Atqc 'SHOW server_version' 2>/dev/null | cut -d' ' -f1
}

shown() { # url, without its password
  printf '%s' "$1" | sed -E 's#^postgres://([^:@/]+)(:[^@]*)?@#\1@#'
}

listening() {
  (exec 3<>"/dev/tcp/$host/$port") 2>/dev/null
}

if [ -n "${FENCEKIT_BENCH_PG:-}" ]; then
  if answers "$FENCEKIT_BENCH_PG"; then
    log "using FENCEKIT_BENCH_PG (PostgreSQL $(version "$FENCEKIT_BENCH_PG")); not starting or changing anything"
    echo "$FENCEKIT_BENCH_PG"
    exit 0
  fi
  log "FENCEKIT_BENCH_PG is set but no PostgreSQL answers there (or psql is missing): fix it or unset it"
  exit 1
fi

for url in "$default_url" "$role_url"; do
  if answers "$url"; then
    log "PostgreSQL $(version "$url") answers on $host:$port as $(shown "$url"): nothing to do"
    echo "$url"
    exit 0
  fi
done

if ! listening; then
  if ! command -v pg_ctlcluster >/dev/null 2>&1; then
    log "PostgreSQL is not installed: installing Debian's postgresql package"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q >&2
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql >&2
  fi
  cluster=$(pg_lsclusters -h 2>/dev/null | awk -v p="$port" '$3 == p {print $1" "$2; exit}')
  if [ -z "$cluster" ]; then
    if [ -n "$(pg_lsclusters -h 2>/dev/null)" ]; then
      log "no PostgreSQL cluster is on port $port (pg_lsclusters lists others): not moving one; set FENCEKIT_BENCH_PG"
      exit 1
    fi
    ver=$(ls /usr/lib/postgresql | sort -n | tail -1)
    log "no PostgreSQL cluster exists: creating $ver/main on port $port"
    as_root pg_createcluster --port "$port" "$ver" main >&2
    cluster="$ver main"
  fi
  log "starting the PostgreSQL cluster $cluster (pg_ctlcluster $cluster start)"
  # shellcheck disable=SC2086
  as_root pg_ctlcluster $cluster start >&2
  for _ in $(seq 1 60); do
    listening && break
    sleep 0.5
  done
  if ! listening; then
    log "the cluster $cluster did not listen on $host:$port within 30s; see /var/log/postgresql/"
    exit 1
  fi
  for url in "$default_url" "$role_url"; do
    if answers "$url"; then
      log "PostgreSQL $(version "$url") is up on $host:$port; using it as $(shown "$url")"
      echo "$url"
      exit 0
    fi
  done
fi

# A server answers on the port, but neither account logs in.
if ! command -v psql >/dev/null 2>&1; then
  log "a server listens on $host:$port but psql is not installed to check it: install postgresql-client, or set FENCEKIT_BENCH_PG"
  exit 1
fi
if ! as_postgres psql -p "$port" -Atqc 'SELECT 1' >/dev/null 2>&1; then
  log "a server listens on $host:$port, but neither root (database test) nor $role logs in, and its local superuser is out of reach: set FENCEKIT_BENCH_PG"
  exit 1
fi
exists=$(as_postgres psql -p "$port" -Atqc "SELECT 1 FROM pg_roles WHERE rolname = '$role'")
if [ "$exists" = 1 ]; then
  log "the role $role exists on the server at $host:$port but cannot log in with its usual password over TCP;"
  log "not changing an existing role's password: fix it (or its pg_hba.conf line), or set FENCEKIT_BENCH_PG"
  exit 1
fi
log "creating the role $role (LOGIN CREATEDB, password $role) on the PostgreSQL server at $host:$port for the benchmark,"
log "which creates and drops its own databases with it; no existing role or password is changed"
as_postgres psql -p "$port" -v ON_ERROR_STOP=1 -Atqc "CREATE ROLE $role LOGIN CREATEDB PASSWORD '$role'" >/dev/null
if answers "$role_url"; then
  log "PostgreSQL $(version "$role_url") answers on $host:$port as $role"
  echo "$role_url"
  exit 0
fi
log "created $role, but it cannot log in over TCP (see the server's pg_hba.conf for host $host): set FENCEKIT_BENCH_PG"
exit 1
