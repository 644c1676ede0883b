#!/usr/bin/env bash
# Runs fencekit's demo, doing its own set-up: brings up a local
# MySQL-compatible server when none answers, then recreates and migrates the
# fencekit_demo database and runs the demo at scale against it: real workers,
# a fake provider with faults at random, one worker paused past its lease.
# Arguments go to refundd demo (-scene zombie plays the article's story).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/ensure-db.sh
exec go run ./cmd/refundd demo "$@"
