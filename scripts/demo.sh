#!/usr/bin/env bash
# Runs fencekit's demo, doing its own set-up: brings up a local
# MySQL-compatible server when none answers, then recreates and migrates the
# fencekit_demo database and plays the article's zombie scenario against it.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/ensure-db.sh
exec go run ./cmd/refundd demo "$@"
