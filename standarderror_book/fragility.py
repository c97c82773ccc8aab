"""Fragility of the book's pins and printed numbers under a change of CPU arithmetic.

Executes notebook pages (every notebook page of ``_toc.yml`` by default) once per *setting*, a
torch kernel choice and a thread count, records every pinned value, every printed output and a
digest of every figure, then reports per page how the pins move against the first setting,
which quotes in the prose (any page's ``{pin}`` quote of the value, parsed with the book's own
quote parser) would render differently, and how far every printed number moves in units of its
last printed digit (read as the strict re-execution reads it)::

    .venv/bin/python scripts/fragility.py                       # all pages, the default settings
    .venv/bin/python scripts/fragility.py --pages book/model.md lectures/ep3_temperature.md \\
        --settings native/2 default/1 avx2/1
    .venv/bin/python scripts/fragility.py --report              # the table again, no execution

A setting is ``CAPABILITY/THREADS``: ``CAPABILITY`` is ``native`` (torch picks the best kernels
the CPU offers: ``ATEN_CPU_CAPABILITY`` unset) or a value of ``ATEN_CPU_CAPABILITY``
(``default``, ``avx2``, ``avx512``; torch falls back to the best the CPU has if asked for more),
or an emulated CPU (``laptop``: AVX2 without AVX-512; ``old``: SSE4.2; ``amd``: an AMD EPYC
with AVX-512, MKL on its AVX2 paths; each forces torch's
capability and the BLAS's and oneDNN's kernels together,
:data:`standarderror_book.page.EMULATED_CPUS`), and ``THREADS`` is
``OMP_NUM_THREADS``. The first setting is the reference: the build's
(``native/2``, what ``scripts/book.sh`` uses). Each execution runs in its own process under
``nice``, pages one after the other, so the tool can share a busy machine; pass the cheap pages
first. One JSON per page and setting is kept under ``--out`` (default ``_build/fragility``),
with a SHA-256 of the page's code cells: a page already executed under a setting is not
executed again unless its code changed or ``--force`` is given, so a long run can be
interrupted and resumed. A
cell may take ``FRAGILITY_TIMEOUT_FACTOR`` (default 4) times its page's per-cell timeout, as
a shared machine runs it slower than the book's budget assumes.

The report (printed, and written to ``<out>/report.md``) says per page and setting: how many
pins, how many changed value at all, the largest relative change, how many quotes cross a
rounding boundary (render differently at the precision written than under the reference), and
how many of those the pin check's margin (:data:`standarderror_book.page.BOUNDARY_MARGIN`) absorbs;
then every quote that fails under some setting; per page and setting, how many printed
numbers there are, how many move and the largest move in units of the last printed digit,
then every printed number that moves more than one unit (the strict re-execution in another
arithmetic fails on it) and every one that moves by one (it sits within the arithmetic's noise
of a rounding boundary); and the printed outputs and figures that changed. It exits 1 if some
quote fails the pin check or some printed number moves more than one unit under some setting.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from standarderror_book.page import (  # noqa: E402  (after the path set-up)
    GLUE_PREFIX,
    arithmetic_env,
    parse_arithmetic,
)

#: The build's arithmetic first (the reference), then the emulated AVX2 laptop, the emulated
#: AMD EPYC, the emulated older CPU on one thread (CI's strict re-execution), and the thread
#: count alone. Not ``default/1``: torch's capability forced alone stops the own-model page's
#: bfloat16 cell on a CPU with AMX (docs/ci.md); ``old`` forces oneDNN's ISA with it.
DEFAULT_SETTINGS = ["native/2", "laptop/2", "amd/2", "old/1", "native/1"]
CAPABILITY_CELL = "import torch as _t; print(_t.backends.cpu.get_cpu_capability())"


def parse_setting(text: str) -> tuple[str, int]:
    """:func:`standarderror_book.page.parse_arithmetic`, for argparse."""
    try:
        return parse_arithmetic(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"setting {e}") from None


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def code_sha256(page: str) -> str:
    """A digest of the page's code cells: what an execution depends on (the prose, quotes
    included, is read afresh by every report)."""
    import jupytext

    nb = jupytext.read(ROOT / page)
    code = "\0".join(c.source for c in nb.cells if c.cell_type == "code")
    return hashlib.sha256(code.encode()).hexdigest()


# --------------------------------------------------------------------------------------------
# One execution (runs in a child process, under the setting's environment)


def _text(value) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


def execute(page: str, target: Path) -> None:
    import jupytext
    import nbformat
    from nbclient import NotebookClient

    source = ROOT / page
    nb = jupytext.read(source)
    timeouts = re.findall(r"execution_timeout:\s*(\d+)", source.read_text()[:2000])
    nb.cells.append(nbformat.v4.new_code_cell(CAPABILITY_CELL))
    start = time.time()
    # the page's per-cell guard against hangs, stretched: on a shared machine a cell runs slower
    factor = float(os.environ.get("FRAGILITY_TIMEOUT_FACTOR", "4"))
    timeout = int(max([int(t) for t in timeouts] or [300]) * factor)
    NotebookClient(nb, timeout=timeout, kernel_name="python3",
                   resources={"metadata": {"path": str(source.parent)}}).execute()
    wall = time.time() - start
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    pins, outputs, figures = {}, [], []
    for k, cell in enumerate(c for c in nb.cells[:-1] if c.cell_type == "code"):
        # a cell that nbval does not compare (a timing) is not compared here either
        ignored = "NBVAL_IGNORE_OUTPUT" in cell.source or "nbval-ignore-output" in cell.get(
            "metadata", {}).get("tags", [])
        shown = []   # the cell's text outputs in order, joined: chunking does not matter
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            name = out.get("metadata", {}).get("scrapbook", {}).get("name")
            if name and GLUE_PREFIX + "text/plain" in data:
                pins[name] = _text(data[GLUE_PREFIX + "text/plain"])
            elif ignored:
                continue
            elif out.get("output_type") == "stream":
                shown.append(_text(out["text"]))
            elif "image/png" in data:
                figures.append([k, hashlib.sha256(_text(data["image/png"]).encode()).hexdigest()])
            elif "text/plain" in data or "text/markdown" in data or "text/html" in data:
                mime = next(m for m in ("text/markdown", "text/html", "text/plain") if m in data)
                shown.append(_text(data[mime]))
        if shown:
            outputs.append([k, "".join(shown)])
    capability = _text(nb.cells[-1].outputs[0]["text"]).strip()
    target.write_text(json.dumps({
        "page": page, "code_sha256": code_sha256(page), "env": {
            k: os.environ.get(k) for k in ("ATEN_CPU_CAPABILITY", "OMP_NUM_THREADS")},
        "capability": capability, "wall_s": round(wall, 1),
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 1),
        "pins": pins, "outputs": outputs, "figures": figures}, indent=1))


# --------------------------------------------------------------------------------------------
# Running the pages


def result_path(out: Path, setting: str, page: str) -> Path:
    return out / setting.replace("/", "-") / (page[:-3].replace("/", "__") + ".json")


def run(pages: list[str], settings: list[str], out: Path, force: bool, nice: int) -> None:
    for page in pages:          # page by page, so that a page's table is complete early
        for setting in settings:
            target = result_path(out, setting, page)
            if target.is_file() and not force:
                try:
                    kept = json.loads(target.read_text())
                    if kept.get("code_sha256", kept.get("sha256")) in (
                            code_sha256(page), sha256(ROOT / page)):
                        print(f"fragility: {setting:10} {page}: kept (executed before)")
                        continue
                except (ValueError, KeyError):
                    pass
            target.parent.mkdir(parents=True, exist_ok=True)
            print(f"fragility: {setting:10} {page}: executing ...", flush=True)
            t0 = time.time()
            proc = subprocess.run(
                ["nice", "-n", str(nice), sys.executable, "-m", "standarderror_book.fragility",
                 "--execute", page,
                 "--to", str(target)], env=arithmetic_env(setting), cwd=ROOT,
                capture_output=True, text=True)
            if proc.returncode:
                target.unlink(missing_ok=True)
                sys.stderr.write(proc.stdout[-4000:] + proc.stderr[-4000:])
                raise SystemExit(f"fragility: {page} failed under {setting}")
            res = json.loads(target.read_text())
            print(f"fragility: {setting:10} {page}: {len(res['pins'])} pins, torch kernels "
                  f"{res['capability']}, {time.time() - t0:.0f} s wall, {res['cpu_s']:.0f} s CPU",
                  flush=True)


# --------------------------------------------------------------------------------------------
# The report


def all_quotes() -> dict[tuple[str, str], list[tuple[str, int, str]]]:
    """(docname, name) -> [(quoting page, line, quoted literal)] over every page of the book."""
    import nbval_pages

    out: dict = {}
    for qpage, line, doc, name, quoted in nbval_pages.book_quotes():
        out.setdefault((doc, name), []).append((qpage, line, quoted))
    return out


def rel_change(a: float, b: float) -> float:
    if a == b:
        return 0.0
    return abs(a - b) / max(abs(a), abs(b))


def report(pages: list[str], settings: list[str], out: Path) -> int:
    from standarderror_book.page import BOUNDARY_MARGIN, check_quote, parse_quote, render

    quotes = all_quotes()
    ref_setting = settings[0]
    lines = [f"# Fragility of the pins (reference {ref_setting})", ""]
    results = {}
    for s in settings:
        for p in pages:
            path = result_path(out, s, p)
            if path.is_file():
                results[s, p] = json.loads(path.read_text())
    caps = sorted({f"{s} -> {r['capability']}" for (s, _), r in results.items()})
    lines += ["torch kernels used: " + "; ".join(caps), ""]
    head = ("| page | pins | setting | changed | max rel. change | quotes crossed | absorbed by "
            "margin | quotes failing | outputs changed | printed numbers | printed moved | "
            "largest move (units) | figures changed | wall s | CPU s |")
    lines += [head, "|" + "---|" * (head.count("|") - 1)]
    failing: list[str] = []
    printed_bad: list[str] = []
    printed_edge: list[str] = []
    sanitize = _sanitizer()
    crossings: list[str] = []
    changes: list[str] = []
    largest: list[str] = []
    for p in pages:
        doc = p[:-3]
        ref = results.get((ref_setting, p))
        if ref is None:
            continue
        for s in settings:
            res = results.get((s, p))
            if res is None:
                continue
            pins = res["pins"]
            changed = [n for n in pins if n in ref["pins"] and pins[n] != ref["pins"][n]]
            rel, worst = max([(rel_change(float(ref["pins"][n]), float(pins[n])), n)
                              for n in changed], default=(0.0, ""))
            if worst:
                largest.append(f"- {s}: {p}: {worst} {ref['pins'][worst]} -> {pins[worst]}")
            crossed = absorbed = bad = 0
            for n, raw in sorted(pins.items()):
                for qpage, line, quoted in quotes.get((doc, n), []):
                    q = parse_quote(quoted)
                    now, was = render(float(raw), q), render(float(ref["pins"].get(n, raw)), q)
                    ok = check_quote(quoted, float(raw))[0]
                    where = f"{qpage}:{line} {n}={quoted}"
                    if now != was:
                        crossed += 1
                        absorbed += ok
                        crossings.append(f"- {s}: {where}: {was} -> {now} (value {ref['pins'][n]}"
                                         f" -> {raw}){'' if not ok else ', within the margin'}")
                    if not ok:
                        bad += 1
                        failing.append(f"- {s}: {where}: computed {now} (exact value {raw})")
            mine, theirs = _by_cell(res["outputs"]), _by_cell(ref["outputs"])
            outs = sum(mine.get(k) != theirs.get(k) for k in set(mine) | set(theirs))
            nums = printed_moves(theirs, mine, sanitize)
            moved_nums = [m for m in nums if m[2] != 0]
            units = max((m[2] for m in moved_nums), default=0)
            for k, line, u, was, now in moved_nums:
                where = f"- {s}: {p}, code cell {k}: {was!r} -> {now!r}"
                if u > 1:
                    printed_bad.append(f"{where} ({_units(u)} in the last printed digit)")
                else:
                    printed_edge.append(f"{where} (one unit: a rounding boundary, in {line!r})")
            figs = sum(a != b for a, b in zip(res["figures"], ref["figures"]))
            figs += abs(len(res["figures"]) - len(ref["figures"]))
            for k in sorted(set(mine) | set(theirs)):
                if mine.get(k) != theirs.get(k):
                    changes.append(f"- {s}: {p}, code cell {k}: " + _first_difference(
                        theirs.get(k, ""), mine.get(k, "")))
            lines.append(f"| {p} | {len(pins)} | {s} | {len(changed)} | {rel:.1e} | {crossed} | "
                         f"{absorbed} | {bad} | {outs} | {len(nums)} | {len(moved_nums)} | "
                         f"{_units(units)} | {figs} | {res['wall_s']:.0f} | {res['cpu_s']:.0f} |")
    lines += ["", f"Margin of the pin check: {BOUNDARY_MARGIN} of the quote's last unit.", "",
              "## Quotes that cross a rounding boundary", ""] + (crossings or ["none"])
    lines += ["", "## Quotes that fail the pin check", ""] + (failing or ["none"])
    lines += ["", "## The pin that moved most, per page and setting", ""] + (largest or ["none"])
    lines += ["", "## Quotes near a boundary (a change ten times the largest measured would "
              "carry the value past the margin, or the value moves and lies within the margin's "
              "width of a boundary: another CPU, with other BLAS kernels too, moves more)",
              ""] + (
        _near(pages, settings, results, quotes) or ["none"])
    lines += ["", "## Printed numbers that move more than one unit of their last digit (or "
              "whose text changes): these fail the strict re-execution", ""] + (
        printed_bad or ["none"])
    lines += ["", "## Printed numbers that cross a rounding boundary (one unit): they sit within "
              "the arithmetic's noise of the boundary", ""] + (printed_edge or ["none"])
    lines += ["", "## Printed outputs that changed (first differing line)", ""] + (
        changes or ["none"])
    text = "\n".join(lines) + "\n"
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.md").write_text(text)
    print(text)
    return 1 if failing or printed_bad else 0


def _sanitizer():
    """The strict re-execution's sanitisers in another arithmetic (tests/nbval_sanitize.cfg,
    then tests/nbval_sanitize_arithmetic.cfg), as one function over a text."""
    import nbval_pages

    patterns = [(re.compile(r), t) for path in (nbval_pages.SANITIZE,
                                                nbval_pages.SANITIZE_ARITHMETIC)
                for r, t in nbval_pages.sanitize_patterns(path)]

    def sanitize(text: str) -> str:
        for regex, repl in patterns:
            text = regex.sub(repl, text)
        return text
    return sanitize


def printed_moves(ref: dict[int, str], new: dict[int, str], sanitize=lambda t: t
                  ) -> list[tuple[int, str, float, str, str]]:
    """Every printed number of every cell, read as the strict re-execution reads it
    (``nbval_pages._NUMBER``, after its sanitisers), as (cell, line, move, was, now): the move
    in units of the number's last printed digit, 0 when it is printed the same, ``inf`` when
    the text around the numbers or a number's form (digits after the point, exponent) differs,
    so that the two cannot be compared number by number (the strict comparison then fails)."""
    import nbval_pages

    out = []
    for k in sorted(set(ref) | set(new)):
        a_lines = sanitize(ref.get(k, "")).splitlines()
        b_lines = sanitize(new.get(k, "")).splitlines()
        if len(a_lines) != len(b_lines):
            out.append((k, "", float("inf"), f"{len(a_lines)} lines", f"{len(b_lines)} lines"))
            continue
        for a_line, b_line in zip(a_lines, b_lines):
            a, b = nbval_pages._NUMBER.split(a_line), nbval_pages._NUMBER.split(b_line)
            if len(a) != len(b) or a[::2] != b[::2]:
                out.append((k, a_line.strip()[:100], float("inf"), a_line.strip()[:100],
                            b_line.strip()[:100]))
                continue
            for x, y in zip(a[1::2], b[1::2]):
                out.append((k, a_line.strip()[:100], round(nbval_pages.printed_move(x, y), 6), x, y))
    return out


def _units(u: float) -> str:
    return "text" if u == float("inf") else f"{u:g}"


def _near(pages, settings, results, quotes) -> list[str]:
    """Quotes that a larger change of arithmetic (another CPU) could carry across a boundary."""
    from standarderror_book.page import BOUNDARY_MARGIN, parse_quote

    out = []
    for p in pages:
        ref = results.get((settings[0], p))
        if ref is None:
            continue
        for n, raw in sorted(ref["pins"].items()):
            values = [float(r["pins"][n]) for (s, q), r in results.items()
                      if q == p and n in r["pins"]]
            for qpage, line, quoted in quotes.get((p[:-3], n), []):
                q = parse_quote(quoted)
                scale = (100 if q.percent else 1) * 10.0 ** q.decimals
                v = float(raw) * scale
                inside = 0.5 - abs(v - float(quoted.replace(",", "").rstrip("%")) *
                                   10.0 ** q.decimals)
                moved = (max(values) - min(values)) * scale
                if inside + BOUNDARY_MARGIN < 10 * moved or (moved > 0
                                                              and inside < BOUNDARY_MARGIN):
                    out.append(f"- {qpage}:{line} {n}={quoted}: value {raw}, {inside:.3f} units "
                               f"inside the boundary; moved {moved:.1e} units across settings")
    return out


def _by_cell(outputs: list) -> dict[int, str]:
    out: dict[int, str] = {}
    for k, text in outputs:
        out[k] = out.get(k, "") + text
    return out


def _first_difference(a: str, b: str) -> str:
    for x, y in zip(a.splitlines(), b.splitlines()):
        if x != y:
            return f"{x.strip()[:100]!r} -> {y.strip()[:100]!r}"
    return f"{len(a.splitlines())} lines -> {len(b.splitlines())} lines"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/fragility.py", description=__doc__.split(
        "\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pages", nargs="+", help="pages (default: every notebook page)")
    parser.add_argument("--settings", nargs="+", default=DEFAULT_SETTINGS,
                        help="CAPABILITY/THREADS, the first is the reference (default: %(default)s)")
    parser.add_argument("--out", type=Path, default=ROOT / "_build" / "fragility")
    parser.add_argument("--force", action="store_true", help="execute again what was kept")
    parser.add_argument("--report", action="store_true", help="only report, execute nothing")
    parser.add_argument("--nice", type=int, default=10, help="niceness of the executions")
    parser.add_argument("--execute", help=argparse.SUPPRESS)
    parser.add_argument("--to", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.execute:
        execute(args.execute, args.to)
        return 0
    for s in args.settings:
        parse_setting(s)
    import nbval_pages

    pages = args.pages or nbval_pages.notebook_pages()
    for p in pages:
        if not (ROOT / p).is_file():
            parser.error(f"no such page: {p}")
    if not args.report:
        run(pages, args.settings, args.out, args.force, args.nice)
    return report(pages, args.settings, args.out)


if __name__ == "__main__":
    raise SystemExit(main())
