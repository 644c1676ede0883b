#!/usr/bin/env bash
# Tidies the root module (and, with --all, the analyzer module).
#
# The root module requires the analyzer module, which lives in ./analyzer and
# is tied in by go.work. `go mod tidy` and `go get` ignore go.work, so the
# root is tidied with a temporary replace directive that is dropped again
# afterwards: a replace directive in go.mod would break
# `go install github.com/fencekit/fencekit/cmd/fencelint@latest`.
#
#   scripts/tidy.sh [--all] [module@version ...]   # extra args are passed to go get first
set -euo pipefail
cd "$(dirname "$0")/.."
all=
if [ "${1:-}" = --all ]; then all=1; shift; fi
if [ -n "$all" ]; then (cd analyzer && GOWORK=off go mod tidy); fi
go mod edit -replace=github.com/fencekit/fencekit/analyzer=./analyzer
trap 'go mod edit -dropreplace=github.com/fencekit/fencekit/analyzer' EXIT
if [ $# -gt 0 ]; then GOWORK=off go get "$@"; fi
GOWORK=off go mod tidy
