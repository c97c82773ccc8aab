#!/usr/bin/env bash
# Build ONE page in isolation (fresh execution, pins checked, warnings are errors), in a
# temporary book, so several pages can be worked on at once:
#   bash scripts/page.sh lectures/ep3_temperature.md
# The page lands in /tmp/page-<checkout>-<name>/_build/html/.
set -euo pipefail
cd "$(dirname "$0")/.."
page=${1:?usage: scripts/page.sh lectures/NAME.md}
# The book's arithmetic (scripts/book.sh): torch on two threads unless told otherwise, numpy's
# BLAS on one, so that a page built alone computes the pins the book computes, bit for bit.
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
export OPENBLAS_NUM_THREADS=1
name=$(basename "$page" .md)
dir=$(dirname "$page")
# One temporary book per checkout and page, so that several checkouts (git worktrees) can build
# the same page at once.
tmp=/tmp/page-$(basename "$PWD")-$name
rm -rf "$tmp"; mkdir -p "$tmp/$dir" "$tmp/book"
cp _config.yml "$tmp/"
cp book/references.bib book/references.md "$tmp/book/"
cp -r book/_static "$tmp/book/"
cp "$page" "$tmp/$dir/"
# The references page comes along so that {cite} roles resolve.
printf 'format: jb-book\nroot: %s/%s\nchapters:\n- file: book/references\n' "$dir" "$name" \
  > "$tmp/_toc.yml"
# Alone, a page's links to the other pages cannot resolve: tolerate only that warning here
# (the full build, scripts/book.sh, checks every cross-reference).
.venv/bin/python - "$tmp/_config.yml" <<'PY'
import sys, yaml
path = sys.argv[1]
cfg = yaml.safe_load(open(path))
cfg.setdefault("sphinx", {}).setdefault("config", {})["suppress_warnings"] = ["ref.doc"]
yaml.safe_dump(cfg, open(path, "w"), sort_keys=False)
PY
start=$(date +%s)
.venv/bin/jupyter-book build "$tmp" --all -W --keep-going
echo "page: $page built in $(( $(date +%s) - start )) s -> $tmp/_build/html/$dir/$name.html"
