#!/usr/bin/env bash
# Build the book fresh: set up .venv, execute every page, check every pin, fail on any warning.
# The site lands in _build/html (open _build/html/index.html).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
rm -rf _build
start=$(date +%s)
.venv/bin/jupyter-book build . --all -W --keep-going "$@"
echo "book: built fresh in $(( $(date +%s) - start )) s -> _build/html/index.html"
