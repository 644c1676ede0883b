#!/usr/bin/env bash
# Makes sure a headless Chromium is installed for the console's browser tests
# (internal/console, driven with chromedp). It looks for $FENCEKIT_CHROMIUM,
# then /usr/bin/chromium; when neither exists it installs Debian's chromium
# package (needs root, or sudo) and says so. The tests fail, never skip,
# when no browser is found.
set -euo pipefail

log() { printf 'ensure-chromium: %s\n' "$*" >&2; }

for b in "${FENCEKIT_CHROMIUM:-}" /usr/bin/chromium; do
  if [ -n "$b" ] && [ -x "$b" ]; then
    exit 0
  fi
done

as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi
}

log "no Chromium at /usr/bin/chromium; installing Debian's chromium package (apt-get install --no-install-recommends chromium)"
as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q
as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium
log "installed: $(/usr/bin/chromium --version 2>/dev/null || echo '/usr/bin/chromium')"
