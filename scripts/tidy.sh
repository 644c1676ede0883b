#!/usr/bin/env bash
# Tidies both modules. The root module requires the analyzer module, which
# lives in ./analyzer and is tied in by go.work; `go mod tidy` ignores go.work,
# so the root is tidied with a temporary replace directive that is dropped
# again afterwards (a replace directive would break
# `go install github.com/fencekit/fencekit/cmd/fencelint@latest`).
set -euo pipefail
cd "$(dirname "$0")/.."
(cd analyzer && GOWORK=off go mod tidy)
go mod edit -replace=github.com/fencekit/fencekit/analyzer=./analyzer
trap 'go mod edit -dropreplace=github.com/fencekit/fencekit/analyzer' EXIT
GOWORK=off go mod tidy
