#!/usr/bin/env bash
# Build ONE page in isolation (fresh execution, pins checked, warnings are errors), in a
# temporary book, so several pages can be worked on at once:
#   bash scripts/page.sh lectures/ep3_temperature.md
# The page lands in /tmp/page-<name>/_build/html/.
set -euo pipefail
cd "$(dirname "$0")/.."
page=${1:?usage: scripts/page.sh lectures/NAME.md}
name=$(basename "$page" .md)
dir=$(dirname "$page")
tmp=/tmp/page-$name
rm -rf "$tmp"; mkdir -p "$tmp/$dir" "$tmp/book"
cp _config.yml "$tmp/"
cp book/references.bib "$tmp/book/"
cp -r book/_static "$tmp/book/"
cp "$page" "$tmp/$dir/"
printf 'format: jb-book\nroot: %s/%s\n' "$dir" "$name" > "$tmp/_toc.yml"
start=$(date +%s)
.venv/bin/jupyter-book build "$tmp" --all -W --keep-going
echo "page: $page built in $(( $(date +%s) - start )) s -> $tmp/_build/html/$dir/$name.html"
