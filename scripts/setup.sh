#!/usr/bin/env bash
# Create .venv (if needed) and install standarderror with its book, test and serve extras.
# Called by scripts/book.sh and scripts/test.sh; safe to run repeatedly.
#
# Versions: by default every package is installed at the exact version of lock.txt, the versions
# the book's numbers were measured with (a constraints file: `pip install -c lock.txt`; see the
# docs/install.md, "The lock file"). LOCK=0 installs the newest releases that pyproject.toml's ranges
# allow instead (upgrading what is installed), torch excepted; scripts/lock.sh rewrites lock.txt
# from a clean install.
#
# torch: the package needs a CPU build of PyTorch. We install torch first, pinned, so that the
# dependency resolver never replaces it with a multi-GB CUDA build:
#   - TORCH_SPEC (default: lock.txt's torch, "torch==2.13.0") is what gets installed;
#   - TORCH_PIP_ARGS (default empty) is passed to that one pip call, e.g. the CPU-only wheel
#     index from PyTorch's installation page on a Linux laptop where PyPI serves CUDA builds.
#
# Installer: the locked install runs through uv (UV_SPEC, default uv==0.13.9, itself installed
# by pip into .venv), which installs the same exact versions as pip in about a third of the
# time (measured on a clean clone: 46 s against 145 s, bytecode compiled as pip does). uv reads
# no pip configuration; if it cannot be installed or its install fails, pip does the install.
# INSTALLER=pip skips uv. LOCK=0 always uses pip (its resolver's upgrade strategy).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
LOCK=${LOCK:-1}
LOCKFILE=lock.txt
TORCH_SPEC=${TORCH_SPEC:-$(grep -m1 '^torch==' "$LOCKFILE")}
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
PIP=".venv/bin/python -m pip"
# The extras: the book, the tests, and [serve] (llama-cpp-python's server, for the served
# backend's tests). llama-cpp-python ships as a source distribution only: it is built once with
# cmake and a C++ compiler (-DGGML_NATIVE=OFF: kernels for any x86-64 CPU, not this one's) into
# a wheel kept in WHEELHOUSE, outside the checkout, which every later install of any clone on
# this machine takes instead of building again (uv's cache of built source distributions is not
# reused across installs from a local index).
EXTRAS=${EXTRAS:-book,test,serve}
export CMAKE_ARGS=${CMAKE_ARGS:--DGGML_NATIVE=OFF}
WHEELHOUSE=${WHEELHOUSE:-$HOME/.cache/standarderror/wheels}
mkdir -p "$WHEELHOUSE"
serve_wheel() {
  local spec
  spec=$(grep -m1 -i '^llama[-_]cpp[-_]python==' "$LOCKFILE" || true)
  case ",$EXTRAS," in *,serve,*) ;; *) return 0 ;; esac
  [ -n "$spec" ] || return 0
  if ! ls "$WHEELHOUSE"/llama_cpp_python-"${spec#*==}"-*.whl >/dev/null 2>&1; then
    echo "setup: building ${spec} once into $WHEELHOUSE (cmake; a few minutes)"
    $PIP wheel -q --no-deps --no-cache-dir -w "$WHEELHOUSE" "$spec"
  fi
}
# Whether torch is installed, from its metadata (importing torch takes seconds, on every run of
# the two commands).
installed=0
if ! .venv/bin/python -c "import importlib.metadata as m; m.version('torch')" 2>/dev/null; then
  echo "setup: installing $TORCH_SPEC (CPU build)"
  installed=1
  # shellcheck disable=SC2086
  $PIP install -q ${TORCH_PIP_ARGS:-} "$TORCH_SPEC"
fi
stamp=".venv/.standarderror-installed"
if [ "$LOCK" = 0 ]; then
  # The newest releases, except torch: the one installed stays (a constraint on its version).
  echo "setup: LOCK=0: installing standarderror[book,test,serve] (editable) at the newest releases"
  installed=1
  keep=$(mktemp)
  .venv/bin/python -c "import torch; print('torch==' + torch.__version__.split('+')[0])" > "$keep"
  $PIP install -q -U --upgrade-strategy eager -c "$keep" -e ".[$EXTRAS]"
  rm -f "$keep"
  echo "newest" > "$stamp"
else
  # the checkout too: an editable install points at one checkout, and a .venv shared with
  # another (a symlink) must be pointed back at this one
  want="lock $(sha256sum "$LOCKFILE" | cut -c1-64) at $(pwd -P)"
  if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    echo "setup: installing standarderror[book,test,serve] (editable) at the versions of $LOCKFILE"
    installed=1
    serve_wheel
    if [ "${INSTALLER:-uv}" = uv ] && $PIP install -q "${UV_SPEC:-uv==0.13.9}" \
        && .venv/bin/python -m uv pip install -q --compile-bytecode --python .venv/bin/python \
             --find-links "$WHEELHOUSE" -c "$LOCKFILE" -e ".[$EXTRAS]"; then
      echo "setup: installed with uv"
    else
      if [ "${INSTALLER:-uv}" = uv ]; then echo "setup: uv unavailable or failed; installing with pip"; fi
      $PIP install -q --find-links "$WHEELHOUSE" -c "$LOCKFILE" -e ".[$EXTRAS]"
    fi
    echo "$want" > "$stamp"
  fi
fi
# rfc3987-syntax: an optional extra of jsonschema (the "iri" string formats), pulled in through
# jupyter-events. jsonschema imports it when present, and it builds 38 lark grammars on import,
# seconds in every process that loads nbformat (each pytest process and xdist worker, the book
# build). Nothing here validates an IRI; jsonschema skips the format without it. Checked on
# every run, so any venv loses it.
if .venv/bin/python -c "import importlib.util as u, sys; sys.exit(u.find_spec('rfc3987_syntax') is None)"; then
  $PIP uninstall -q -y rfc3987-syntax
fi
# Guard: the resolver must not have swapped torch for a CUDA build. After an install, torch
# itself is asked; otherwise its metadata (a CUDA wheel requires nvidia-* packages or carries a
# +cu version), without importing it.
.venv/bin/python - "$installed" <<'PY'
import importlib.metadata as md
import platform
import sys

if sys.argv[1] == "1":
    import torch

    version, cuda = torch.__version__, torch.version.cuda or ""
else:
    version = md.version("torch")
    cuda = ",".join(r for r in md.requires("torch") or [] if r.lower().startswith("nvidia"))
    cuda += "+cu" if "+cu" in version else ""
assert not cuda, f"a CUDA build of torch ({version}: {cuda}) is installed; reinstall a CPU build"
print(f"setup: torch {version} (CPU), python", platform.python_version())
PY
# Jupyter (docs/jupyter.md), in this venv only: a double click opens a
# lecture as a notebook (jupytext's documented default viewer, as a JupyterLab settings override
# of our own in overrides.d, which also turns autosave off), and a {pin} quote reads as its
# number (the standarderror-pins extension, prebuilt: plain files to copy).
share=.venv/share/jupyter
mkdir -p "$share/lab/settings/overrides.d" "$share/labextensions"
cp jupyterlab/overrides.json "$share/lab/settings/overrides.d/standarderror.json"
rm -rf "$share/labextensions/standarderror-pins"
cp -R jupyterlab/standarderror-pins "$share/labextensions/standarderror-pins"
