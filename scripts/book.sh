#!/usr/bin/env bash
# Build the book fresh: set up .venv, execute every page, check every pin, fail on any warning.
# The site lands in _build/html (open _build/html/index.html); the executed notebooks, which
# `bash scripts/test.sh` then re-executes strictly (tests/nbval_pages.py), in _build/jupyter_execute.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# Two threads unless told otherwise: the thread count the pins were measured with, and the one
# the tests use (tests/conftest.py), so a strict re-execution reduces in the build's order.
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
rm -rf _build
start=$(date +%s)
.venv/bin/jupyter-book build . --all -W --keep-going "$@"
echo "book: built fresh in $(( $(date +%s) - start )) s -> _build/html/index.html"
