#!/usr/bin/env bash
# Print the built book to PDF: _build/pdf/book.pdf (title page, contents with page numbers,
# bookmarks, page numbers, solutions open) and one PDF per page (_build/pdf/<page>.pdf), also
# copied into the site (_build/html/pdf/), where the landing page and every page's download
# menu link them. Run it after `bash scripts/book.sh`: nothing is executed again, the pages are
# the build's HTML, printed by headless Chromium (`bash scripts/setup_browser.sh` installs it).
# Extra arguments go to scripts/pdf.py (--jobs N: browsers printing at once).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -f _build/html/index.html ]; then
  echo "pdf: no built site in _build/html: build the book first (bash scripts/book.sh)" >&2
  exit 1
fi
.venv/bin/python scripts/pdf.py "$@"
