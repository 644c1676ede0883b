#!/usr/bin/env bash
# Makes sure a RabbitMQ broker answers for the broker dispatch's tests
# (dispatch/rabbitmq, refundd chaos --dispatch rabbitmq), and says what it
# did on stderr.
#
# With FENCEKIT_TEST_AMQP set, it only checks that the host and port of that
# URL listen. Otherwise it wants a broker on 127.0.0.1:5672 (the tests' URL is
# amqp://guest:guest@127.0.0.1:5672/, RabbitMQ's default account, which it
# accepts from this machine only) and, when nothing listens there, starts the
# installed rabbitmq-server detached, installing Debian's rabbitmq-server
# package first when none is installed (needs root). It changes no account,
# password or configuration.
set -euo pipefail

host=127.0.0.1
port=5672
log() { printf 'ensure-rabbitmq: %s\n' "$*" >&2; }

if [ -n "${FENCEKIT_TEST_AMQP:-}" ]; then
  # amqp://user:pass@host:port/vhost: take host and port.
  hp=${FENCEKIT_TEST_AMQP#*://}
  hp=${hp#*@}
  hp=${hp%%/*}
  host=${hp%%:*}
  if [ "$hp" != "$host" ]; then port=${hp#*:}; else port=5672; fi
fi

listening() {
  (exec 3<>"/dev/tcp/$host/$port") 2>/dev/null
}

# speaks_amqp sends the AMQP 0-9-1 protocol header; a broker answers with a
# Connection.Start frame (frame type 1).
speaks_amqp() {
  local first
  first=$({ exec 3<>"/dev/tcp/$host/$port" && printf 'AMQP\x00\x00\x09\x01' >&3 && timeout 3 head -c 1 <&3 | od -An -tx1 | tr -d ' \n'; } 2>/dev/null) || return 1
  [ "$first" = 01 ]
}

if [ -n "${FENCEKIT_TEST_AMQP:-}" ]; then
  if speaks_amqp; then
    log "using FENCEKIT_TEST_AMQP: a broker answers on $host:$port; not starting anything"
    exit 0
  fi
  log "FENCEKIT_TEST_AMQP is set but no AMQP broker answers on $host:$port: fix it or unset it"
  exit 1
fi

version() {
  rabbitmqctl -q version 2>/dev/null || echo RabbitMQ
}

if speaks_amqp; then
  log "$(version) answers on $host:$port: nothing to do"
  exit 0
fi
if listening; then
  log "something listens on $host:$port but does not answer AMQP 0-9-1: not starting a broker; set FENCEKIT_TEST_AMQP"
  exit 1
fi

as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi
}

if ! command -v rabbitmq-server >/dev/null 2>&1 && [ ! -x /usr/sbin/rabbitmq-server ]; then
  log "RabbitMQ is not installed: installing Debian's rabbitmq-server package"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q >&2
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q rabbitmq-server >&2
fi
export PATH="$PATH:/usr/sbin"

# A package install may have started it already (where services run).
if ! speaks_amqp; then
  log "starting rabbitmq-server detached (rabbitmq-server -detached)"
  as_root rabbitmq-server -detached >&2
fi
for _ in $(seq 1 120); do
  if speaks_amqp; then
    # The port opens before the broker has started its applications.
    as_root rabbitmqctl -q await_startup >/dev/null 2>&1 || true
    log "$(version) is up on $host:$port"
    exit 0
  fi
  sleep 0.5
done
log "no broker answers on $host:$port after 60s; see /var/log/rabbitmq/"
exit 1
