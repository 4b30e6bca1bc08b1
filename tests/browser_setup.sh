#!/usr/bin/env bash
# Install Debian's Chromium for the browser test (Playwright drives it; it never downloads one).
set -euo pipefail
if [ -x /usr/bin/chromium ]; then exit 0; fi
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
