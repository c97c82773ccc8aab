#!/usr/bin/env bash
# Run the test suite: set up .venv, then pytest. Extra arguments go to pytest, e.g.
#   bash scripts/test.sh -m "not slow"          # the fast tier only (no notebook execution)
#   bash scripts/test.sh -m notebook            # only the notebook pages, through nbval
# Every notebook page of the book is executed once, through nbval (tests/nbval_pages.py): from
# its source (jupytext, lax: every cell runs; the default, NOTEBOOKS_FROM=source), or, with
# NOTEBOOKS_FROM=build after `bash scripts/book.sh` (as .ci/run does), by re-executing the
# build's fresh notebook strictly (every output, pin and figure must come out as in the build);
# NOTEBOOKS_FROM=auto takes the build's notebook where it is fresh. The pytest header says
# which pages ran which way.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/python -m pytest "$@"
