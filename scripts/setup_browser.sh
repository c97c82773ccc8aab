#!/usr/bin/env bash
# Install the headless browser the site test (tests/test_site.py) drives and the PDF of the
# book (scripts/pdf.sh) prints with: Debian's Chromium and its matching chromedriver; and
# poppler-utils (pdfinfo, pdftotext, pdftoppm, pdfimages), with which tests/test_pdf.py reads
# the PDF. Idempotent: does nothing when all are already installed.
# Needs root (CI runs as root) and the Debian package mirror; Selenium itself comes from the
# test extra of pyproject.toml (installed by scripts/setup.sh).
set -euo pipefail
if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ] && [ -x /usr/bin/pdftotext ]; then
  echo "setup_browser: $(/usr/bin/chromium --version 2>/dev/null || echo chromium) already installed"
  exit 0
fi
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends chromium chromium-driver fonts-dejavu-core \
  poppler-utils
echo "setup_browser: $(/usr/bin/chromium --version)"
