#!/usr/bin/env bash
# On a machine with a CUDA GPU and vLLM installed (pip install vllm): the three measurements run
# by vLLM's offline engine (--backend vllm) on the exported tiny model and on a random Llama,
# compared with the in-process path on the same weights (tests/test_vllm.py; VLLM_REQUIRED=1
# makes a missing vLLM or GPU a failure, not a skip).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
"$PY" -c "import torch, vllm; assert torch.cuda.is_available(), 'no CUDA GPU'; print('vllm', vllm.__version__, torch.cuda.get_device_name())"
VLLM_REQUIRED=1 "$PY" -m pytest -n0 -q tests/test_vllm.py "$@"
