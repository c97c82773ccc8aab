#!/usr/bin/env bash
# Run the test suite: set up .venv, then pytest. Extra arguments go to pytest, e.g.
#   bash scripts/test.sh -m "not slow"     # the fast tier only (no lecture execution)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/python -m pytest "$@"
