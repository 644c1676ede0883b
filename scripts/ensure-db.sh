#!/usr/bin/env bash
# Makes sure a MySQL-compatible server answers for the tests and the demo.
#
# With FENCEKIT_TEST_DSN set, it only checks that server. Otherwise it wants
# root without a password on 127.0.0.1:3306 and, when nothing answers there,
# starts the installed MariaDB (or MySQL) server, installing Debian's
# mariadb-server package first if no server is installed (needs root). It
# says what it did on stderr. It changes an account only where root has no
# password at all (a server it just installed, or Debian's default of root
# through the Unix socket only), to let root in without a password over TCP
# from this machine, and says so; a root with a password is never changed.
set -euo pipefail

host=127.0.0.1
port=3306
log() { printf 'ensure-db: %s\n' "$*" >&2; }

client=
for c in mariadb mysql; do
  if command -v "$c" >/dev/null 2>&1; then client=$c; break; fi
done

if [ -n "${FENCEKIT_TEST_DSN:-}" ]; then
  log "using FENCEKIT_TEST_DSN; not starting a server"
  exit 0
fi

answers() {
  [ -n "$client" ] && "$client" --protocol=tcp -h"$host" -P"$port" -uroot -e 'SELECT 1' >/dev/null 2>&1
}

version() {
  "$client" --protocol=tcp -h"$host" -P"$port" -uroot -N -e 'SELECT VERSION()' 2>/dev/null
}

if answers; then
  log "$(version) answers on $host:$port as root without a password: nothing to do"
  exit 0
fi

as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi
}

server=
find_server() {
  for s in /usr/sbin/mariadbd /usr/sbin/mysqld /usr/bin/mariadbd /usr/bin/mysqld; do
    if [ -x "$s" ]; then server=$s; return 0; fi
  done
  return 1
}

fresh=
if ! find_server; then
  fresh=1
  log "no MySQL-compatible server is installed; installing Debian's mariadb-server"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q mariadb-server mariadb-client
  find_server
  client=mariadb
fi

if [ ! -d /var/lib/mysql/mysql ] && command -v mariadb-install-db >/dev/null 2>&1; then
  fresh=1
  log "initialising the data directory /var/lib/mysql"
  as_root mariadb-install-db --user=mysql --datadir=/var/lib/mysql >/dev/null
fi

log "starting $server"
as_root mkdir -p /run/mysqld
as_root chown mysql:mysql /run/mysqld 2>/dev/null || true
as_root start-stop-daemon --start --oknodo --background --exec "$server"

# socket_root runs the client as root through the Unix socket.
socket_root() { as_root "$client" -uroot "$@"; }

altered=
for _ in $(seq 1 120); do
  if answers; then
    log "$(version) is up on $host:$port"
    exit 0
  fi
  # A fresh Debian install lets root in through the Unix socket only; the
  # tests want root without a password over TCP from this machine.
  if [ -z "$altered" ] && socket_root -e 'SELECT 1' >/dev/null 2>&1; then
    altered=1
    auth=$(socket_root -N -e "SELECT COALESCE(authentication_string, '') FROM mysql.user WHERE user = 'root' AND host = 'localhost'" 2>/dev/null || true)
    if [ -z "$fresh" ] && [ -n "$auth" ] && [ "$auth" != invalid ]; then
      log "root@localhost has a password on this server: not changing it. Set FENCEKIT_TEST_DSN to an account"
      log "that may create and drop databases (go-sql-driver form, such as 'user:pw@tcp($host:$port)/')"
      exit 1
    fi
    if [ -n "$fresh" ]; then
      log "the server was just installed: letting root in without a password over TCP from this machine, as the tests expect"
    else
      log "root@localhost has no password and logs in through the Unix socket only (Debian's default): changing the account"
      log "to also accept no password over TCP from this machine, as the tests expect (ALTER USER 'root'@'localhost')"
    fi
    socket_root -e "ALTER USER 'root'@'localhost' IDENTIFIED VIA unix_socket OR mysql_native_password USING PASSWORD('')" >/dev/null 2>&1 ||
      socket_root -e "ALTER USER 'root'@'localhost' IDENTIFIED BY ''" >/dev/null 2>&1 || true
  fi
  sleep 0.5
done
log "no server answers on $host:$port as root without a password after 60s"
exit 1
