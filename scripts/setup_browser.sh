#!/usr/bin/env bash
# Installs headless Chromium (Debian's `chromium`) for the Conversation Explorer's browser test
# (tests/system/test_explore_browser.py, driven by Playwright with executable_path=/usr/bin/chromium). Idempotent and
# quiet: does nothing when it is installed; without root or apt-get it says what to install and leaves the test
# to skip.
set -euo pipefail
if [ -x /usr/bin/chromium ]; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null; then
  echo "setup_browser: no /usr/bin/chromium; install Debian's chromium package as root" \
    "(the browser test is skipped until then)" >&2
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq --no-install-recommends chromium >/dev/null
echo "setup_browser: installed $(/usr/bin/chromium --version 2>/dev/null || echo chromium)"
