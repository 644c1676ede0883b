#!/usr/bin/env bash
# Makes sure stripe-mock (Stripe's official mock server, which validates
# every request against Stripe's OpenAPI specification) answers for
# provider/stripe's tests, and says what it did on stderr.
#
# With FENCEKIT_TEST_STRIPE_MOCK set (a URL), it only checks that stripe-mock
# answers there. Otherwise it wants one on 127.0.0.1:12111 (the tests'
# default) and, when nothing listens there, starts one detached, installing
# it first when none is installed: `go install
# github.com/stripe/stripe-mock@v0.203.0` through the Go module proxy, into
# $(go env GOPATH)/bin. Its log goes to ${TMPDIR:-/tmp}/fencekit-stripe-mock.log.
# It fails, never skips, when no stripe-mock answers: the tests would fail.
set -euo pipefail

version=v0.203.0
host=127.0.0.1
port=12111
log() { printf 'ensure-stripe-mock: %s\n' "$*" >&2; }

url=${FENCEKIT_TEST_STRIPE_MOCK:-http://$host:$port}

# answers: stripe-mock marks every answer with a Stripe-Mock-Version header.
answers() {
  curl -s -o /dev/null -D - --max-time 3 -u sk_test_123: "$url/v1/charges" 2>/dev/null | grep -qi '^stripe-mock-version:'
}

if [ -n "${FENCEKIT_TEST_STRIPE_MOCK:-}" ]; then
  if answers; then
    log "using FENCEKIT_TEST_STRIPE_MOCK: stripe-mock answers at $url; not starting anything"
    exit 0
  fi
  log "FENCEKIT_TEST_STRIPE_MOCK is set but no stripe-mock answers at $url: fix it or unset it"
  exit 1
fi

if answers; then
  log "stripe-mock answers at $url: nothing to do"
  exit 0
fi
if (exec 3<>"/dev/tcp/$host/$port") 2>/dev/null; then
  log "something listens on $host:$port but it is not stripe-mock: not starting one; set FENCEKIT_TEST_STRIPE_MOCK"
  exit 1
fi

bin=$(command -v stripe-mock || true)
if [ -z "$bin" ]; then
  bin="$(go env GOPATH)/bin/stripe-mock"
fi
if [ ! -x "$bin" ]; then
  log "stripe-mock is not installed: go install github.com/stripe/stripe-mock@$version"
  GOFLAGS=-trimpath go install "github.com/stripe/stripe-mock@$version" >&2
fi

logfile="${TMPDIR:-/tmp}/fencekit-stripe-mock.log"
log "starting $bin on $host:$port, detached (its log: $logfile)"
# HTTPS on a port the system chooses: the tests speak HTTP only.
setsid nohup "$bin" -http-addr "$host:$port" -https-addr "$host:0" >"$logfile" 2>&1 < /dev/null &
for _ in $(seq 1 60); do
  if answers; then
    log "stripe-mock is up at $url"
    exit 0
  fi
  sleep 0.5
done
log "no stripe-mock answers at $url after 30s; see $logfile"
exit 1
