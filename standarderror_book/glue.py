"""Dump the pinned values and printed outputs of executed notebooks, and compare two dumps.

Speed work and restructuring must leave every pin bit-identical; this makes that checkable:

    .venv/bin/python scripts/glue.py dump _build/jupyter_execute > before.json
    ...change the code, rebuild...
    .venv/bin/python scripts/glue.py dump _build/jupyter_execute > after.json
    .venv/bin/python scripts/glue.py diff before.json after.json

``dump`` walks a folder for executed ``.ipynb`` files (a full build's ``_build/jupyter_execute``
or one page's ``/tmp/page-*/_build/jupyter_execute``) and records, per page: each pinned
name's stored value (its ``repr``, full precision; myst-nb keeps them in ``NAME.glue.json``
beside the notebook); every printed output in cell order (stream text, Markdown or HTML
tables, ``text/plain``); and a digest of each figure. A stream that Jupyter delivered in
several pieces counts as one text (how a kernel splits its output into messages depends on
timing, not on what was printed), and the cells marked ``NBVAL_IGNORE_OUTPUT`` (wall-clock
times) are left out of the printed outputs and figures; their pins are kept.

``diff`` reports pins that changed, vanished or appeared, pages whose printed outputs differ,
and pages whose figures' bytes differ. It exits 1 when a pin both dumps hold changed or
vanished, or a printed output changed; new pins and figure bytes are reported only.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

from standarderror_book.page import GLUE_PREFIX


def _text(value) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


def dump_notebook(notebook) -> dict:
    """The pins, printed outputs and figure digests of one executed notebook: a path (with
    myst-nb's ``NAME.glue.json`` beside it, if any) or a notebook already read (a dict)."""
    pins: dict[str, str] = {}
    if isinstance(notebook, dict):
        nb = notebook
    else:
        nb = json.loads(Path(notebook).read_text())
        # myst-nb moves glued outputs out of the executed notebook into NAME.glue.json
        sidecar = Path(notebook).with_suffix(".glue.json")
        if sidecar.exists():
            for name, out in json.loads(sidecar.read_text()).items():
                pins[name] = _text(out.get("data", {}).get("text/plain", ""))
    outputs: list[str] = []
    figures: list[str] = []
    for cell in nb.get("cells", []):
        if cell.get("cell_type") != "code":
            continue
        shown = "NBVAL_IGNORE_OUTPUT" not in _text(cell.get("source", ""))
        last_stream = None  # the stream (stdout, stderr) of the output just before
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            name = out.get("metadata", {}).get("scrapbook", {}).get("name")
            stream = out.get("name") if out.get("output_type") == "stream" else None
            if name is not None and GLUE_PREFIX + "text/plain" in data:
                pins[name] = _text(data[GLUE_PREFIX + "text/plain"])
            elif not shown:
                pass
            elif stream is not None:
                if stream == last_stream:  # one more piece of the same stream
                    outputs[-1] += _text(out.get("text", ""))
                else:
                    outputs.append(_text(out.get("text", "")))
            else:   # tables are Markdown or HTML; figures are compared by their bytes
                for mime in ("text/markdown", "text/html", "text/plain"):
                    if mime in data:
                        outputs.append(_text(data[mime]))
                        break
                if "image/png" in data:
                    digest = hashlib.sha256(_text(data["image/png"]).encode()).hexdigest()
                    figures.append(digest[:16])
            last_stream = stream if shown else None
    return {"pins": pins, "outputs": outputs, "figures": figures}


def dump(folder: Path) -> dict:
    pages = {}
    for path in sorted(folder.rglob("*.ipynb")):
        if ".ipynb_checkpoints" in path.parts:
            continue
        pages[path.relative_to(folder).with_suffix("").as_posix()] = dump_notebook(path)
    if not pages:
        raise SystemExit(f"glue: no executed notebooks under {folder}")
    return pages


def diff(before: dict, after: dict) -> int:
    failed = False
    same = 0
    for page in sorted(set(before) | set(after)):
        if page not in after or page not in before:
            print(f"{page}: only in {'before' if page in before else 'after'}")
            continue
        b, a = before[page]["pins"], after[page]["pins"]
        for name in sorted(set(b) | set(a)):
            if name not in a:
                print(f"{page}: pin {name} vanished (was {b[name]})")
                failed = True
            elif name not in b:
                print(f"{page}: pin {name} new ({a[name]})")
            elif a[name] != b[name]:
                print(f"{page}: pin {name} changed {b[name]} -> {a[name]}")
                failed = True
            else:
                same += 1
        if before[page]["outputs"] != after[page]["outputs"]:
            bo, ao = before[page]["outputs"], after[page]["outputs"]
            print(f"{page}: printed outputs differ ({len(bo)} before, {len(ao)} after)")
            for i, (x, y) in enumerate(zip(bo, ao)):
                if x != y:
                    print(f"  first difference at output {i}:\n  - {x[:300]!r}\n  + {y[:300]!r}")
                    break
            failed = True
        if before[page].get("figures") != after[page].get("figures"):
            print(f"{page}: figure bytes differ (reported, not failed: a figure may change "
                  "its bytes without its data)")
    print(f"glue: {same} pins bit-identical; {'CHANGED' if failed else 'no pin or output changed'}")
    return 1 if failed else 0


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "dump":
        json.dump(dump(Path(argv[1])), sys.stdout, indent=1, sort_keys=True)
        return 0
    if len(argv) == 3 and argv[0] == "diff":
        return diff(json.loads(Path(argv[1]).read_text()), json.loads(Path(argv[2]).read_text()))
    print(__doc__.split("\n\n")[1], file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
