#!/usr/bin/env bash
# Rewrite lock.txt: the exact version of every package that the book and the tests install,
# taken from a clean install of standarderror[book,test,serve] (torch first, as scripts/setup.sh does)
# into a temporary virtualenv at the newest releases pyproject.toml allows. Run it to move the
# book to newer releases, then rebuild the book (every pin must still hold) and commit both.
#   bash scripts/lock.sh            # about three minutes; nothing in .venv changes
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
TORCH_SPEC=${TORCH_SPEC:-torch==2.13.0}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$PYTHON" -m venv "$tmp/venv"
pip="$tmp/venv/bin/python -m pip"
# shellcheck disable=SC2086
$pip install -q ${TORCH_PIP_ARGS:-} "$TORCH_SPEC"
CMAKE_ARGS="-DGGML_NATIVE=OFF" $pip install -q -e ".[book,test,serve]"
$pip freeze --exclude-editable > "$tmp/freeze.txt"
"$tmp/venv/bin/python" scripts/lock_format.py "$tmp/freeze.txt" > lock.txt
echo "lock: wrote lock.txt ($(grep -c '==' lock.txt) packages)"
