#!/usr/bin/env bash
# Print the built book to PDF: _build/pdf/book.pdf (title page, contents with page numbers,
# bookmarks, page numbers, solutions open) and one PDF per page (_build/pdf/<page>.pdf), also
# copied into the site (_build/html/pdf/), where the landing page and every page's download
# menu link them: the site's _static/pdfs.js then lists the printed files, and a page links a
# PDF only where it is listed (standarderror_book/sphinxext/site.py; the build lists none). Run it
# after `bash scripts/book.sh` (which runs it itself where the browser is installed): nothing
# is executed again, the pages are the build's HTML, printed by headless Chromium
# (`bash scripts/setup_browser.sh` installs it).
# Extra arguments go to scripts/pdf.py (--jobs N: browsers printing at once; --html DIR).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -f _build/html/index.html ]; then
  echo "pdf: no built site in _build/html: build the book first (bash scripts/book.sh)" >&2
  exit 1
fi
.venv/bin/python scripts/pdf.py "$@"
html=_build/html
args=("$@")
for i in "${!args[@]}"; do
  case ${args[$i]} in
    --html) html=${args[$((i + 1))]} ;;
    --html=*) html=${args[$i]#--html=} ;;
  esac
done
.venv/bin/python - "$html" <<'PY'
import sys
from standarderror_book.sphinxext.site import write_pdf_manifest
print(f"pdf: the site links {len(write_pdf_manifest(sys.argv[1]))} PDFs "
      f"({sys.argv[1]}/_static/pdfs.js)")
PY
