#!/usr/bin/env bash
# Re-execute the notebooks of the last book build under strict nbval: every printed output, every
# pinned value and every figure must come out as the build made them (tests/nbval_pages.py;
# sanitisers in tests/nbval_sanitize.cfg). Run after `bash scripts/book.sh`; a page whose built
# notebook is missing or stale fails. Extra arguments go to pytest, e.g. -k ep3.
set -euo pipefail
cd "$(dirname "$0")/.."
NOTEBOOKS_FROM=build exec bash scripts/test.sh tests/test_lectures.py -m notebook "$@"
