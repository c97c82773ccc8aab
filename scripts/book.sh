#!/usr/bin/env bash
# Build the book fresh: set up .venv, execute every page, check every pin, fail on any warning,
# then print the PDFs where the browser is installed (bash scripts/pdf.sh: _build/pdf, linked
# from the site). The site lands in _build/html (open _build/html/index.html); the executed
# notebooks, which `bash scripts/test.sh` then re-executes strictly (tests/nbval_pages.py), in
# _build/jupyter_execute.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# Two threads unless told otherwise: the thread count the pins were measured with, and the one
# the tests use (tests/conftest.py), so a strict re-execution reduces in the build's order.
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
# numpy's and scipy's BLAS (OpenBLAS) on one thread whatever OMP_NUM_THREADS says: the pages'
# matrices are small (a 20 x 20 Gram, a 384-column SVD), and OpenBLAS's second thread made
# them slower, up to tens of times when another process wants the cores (its idle threads
# spin). torch keeps OMP_NUM_THREADS. The tests' kernels do the same (tests/conftest.py).
export OPENBLAS_NUM_THREADS=1
rm -rf _build
start=$(date +%s)
.venv/bin/jupyter-book build . --all -W --keep-going "$@"
# Which arithmetic executed the pages (torch's CPU kernels, the thread count): the strict
# re-execution of the tests compares outputs exactly only in the same one (tests/nbval_pages.py).
.venv/bin/python - <<'PY'
import json, os, torch
from standarderror_book.page import KERNEL_VARIABLES
json.dump({"ATEN_CPU_CAPABILITY": os.environ.get("ATEN_CPU_CAPABILITY"),
           "OMP_NUM_THREADS": os.environ["OMP_NUM_THREADS"],
           "OPENBLAS_NUM_THREADS": os.environ["OPENBLAS_NUM_THREADS"],
           "capability": torch.backends.cpu.get_cpu_capability(),
           # the BLAS's and oneDNN's kernels, where forced
           "kernels": {k: os.environ[k] for k in KERNEL_VARIABLES if os.environ.get(k)}},
          open("_build/jupyter_execute/arithmetic.json", "w"))
PY
echo "book: built fresh in $(( $(date +%s) - start )) s -> _build/html/index.html"
# The PDFs, where the browser is installed (bash scripts/setup_browser.sh); BOOK_PDF=0 skips
# them. Without them the site links no PDF (_static/pdfs.js lists none), so no link is broken.
if [ "${BOOK_PDF:-1}" != 0 ] && .venv/bin/python -c "from standarderror_book.browser import require; require()" 2>/dev/null; then
  bash scripts/pdf.sh
else
  echo "book: no PDF printed (no browser, or BOOK_PDF=0), so the site links none; to print them: bash scripts/setup_browser.sh, then bash scripts/pdf.sh"
fi
