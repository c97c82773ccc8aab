#!/usr/bin/env bash
# Install the headless browser the site test (tests/test_site.py) drives: Debian's Chromium and
# its matching chromedriver. Idempotent: does nothing when both are already installed.
# Needs root (CI runs as root) and the Debian package mirror; Selenium itself comes from the
# test extra of pyproject.toml (installed by scripts/setup.sh).
set -euo pipefail
if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; then
  echo "setup_browser: $(/usr/bin/chromium --version 2>/dev/null || echo chromium) already installed"
  exit 0
fi
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends chromium chromium-driver fonts-dejavu-core
echo "setup_browser: $(/usr/bin/chromium --version)"
