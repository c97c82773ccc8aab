#!/usr/bin/env bash
# Create .venv (if needed) and install standarderror with its book and test extras.
# Called by scripts/book.sh and scripts/test.sh; safe to run repeatedly.
#
# torch: the package needs a CPU build of PyTorch. We install torch first, pinned, so that the
# dependency resolver never replaces it with a multi-GB CUDA build:
#   - TORCH_SPEC (default "torch==2.13.0") is what gets installed;
#   - TORCH_PIP_ARGS (default empty) is passed to that one pip call, e.g. the CPU-only wheel
#     index from PyTorch's installation page on a Linux laptop where PyPI serves CUDA builds.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
TORCH_SPEC=${TORCH_SPEC:-torch==2.13.0}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
PIP=".venv/bin/python -m pip"
if ! .venv/bin/python -c "import torch" 2>/dev/null; then
  echo "setup: installing $TORCH_SPEC (CPU build)"
  # shellcheck disable=SC2086
  $PIP install -q ${TORCH_PIP_ARGS:-} "$TORCH_SPEC"
fi
stamp=".venv/.standarderror-installed"
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  echo "setup: installing standarderror[book,test] (editable)"
  $PIP install -q -e ".[book,test]"
  touch "$stamp"
fi
# Guard: the resolver must not have swapped torch for a CUDA build.
.venv/bin/python - <<'PY'
import torch
assert torch.version.cuda is None or torch.version.cuda == "", (
    f"a CUDA build of torch ({torch.__version__}) was installed; reinstall a CPU build")
print(f"setup: torch {torch.__version__} (CPU), python", __import__("platform").python_version())
PY
# Jupyter (README, "Reading a lecture in Jupyter"), in this venv only: a double click opens a
# lecture as a notebook (jupytext's documented default viewer, as a JupyterLab settings override
# of our own in overrides.d, which also turns autosave off), and a {pin} quote reads as its
# number (the standarderror-pins extension, prebuilt: plain files to copy).
share=.venv/share/jupyter
mkdir -p "$share/lab/settings/overrides.d" "$share/labextensions"
cp jupyterlab/overrides.json "$share/lab/settings/overrides.d/standarderror.json"
rm -rf "$share/labextensions/standarderror-pins"
cp -R jupyterlab/standarderror-pins "$share/labextensions/standarderror-pins"
