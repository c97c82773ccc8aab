"""Where a page's time goes: execute one notebook page cell by cell and profile every cell.

    .venv/bin/python scripts/profile_page.py lectures/ep5_eigenvalues.md [--cells 5] [--calls 8]

The page is read with jupytext and its code cells run in order in one IPython shell (as a
kernel would run them, magics included, outputs swallowed), from the page's own folder, each
under ``cProfile``. The script prints the page's total, the slowest cells (index, seconds,
share, first line), and for each of those cells two lists:

- *package calls*: the ``standarderror`` functions with the largest cumulative time inside the
  cell (where to look in our code);
- *leaves*: the functions anywhere (torch, numpy, sentence-transformers, ...) with the largest
  time spent in their own body (what the time is actually spent on).

Each cell's time is printed to stderr as it finishes (``--quiet`` to stop), and the header
gives wall and CPU seconds and the load average at the start and the end. ``--no-profile``
times the cells without cProfile (no overhead; the slowest cells only). ``--serial`` runs the
package's thread pools on one thread (``WORKERS`` of ``standarderror._parallel``, and the copies
that the NLL pool of ``uncertainty.scaling`` and the checkpoint pool of
``experiments.multiple_choice`` take at import; no result depends on them): cProfile sees only
the main thread, so without it the work shared out among the pools' threads shows as
``acquire`` of a lock, and with it as the package calls that do it.

Timings are the machine's: they change with load and thread count (``OMP_NUM_THREADS``, two by
default as in the build). Profiling adds overhead to Python-heavy cells, so a cell's share is
the number to read, not its absolute seconds. A cell that raises stops the run with its
traceback and exit status 1.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _label(func: tuple) -> str:
    filename, line, name = func
    path = Path(filename)
    parts = path.parts
    if "standarderror" in parts:
        short = "/".join(parts[parts.index("standarderror"):])
    elif "site-packages" in parts:
        short = "/".join(parts[parts.index("site-packages") + 1:])
    else:
        short = path.name or filename
    return f"{short}:{line}({name})"


def _top(stats: pstats.Stats, key: int, keep, count: int) -> list[tuple[float, str]]:
    """The ``count`` functions with the largest ``key`` (2: own time, 3: cumulative) that
    ``keep`` admits, as (seconds, label)."""
    rows = [(row[key], func) for func, row in stats.stats.items() if keep(func)]
    rows.sort(key=lambda r: r[0], reverse=True)
    return [(seconds, _label(func)) for seconds, func in rows[:count]]


def profile(page: Path, cells: int, calls: int, *, profiled: bool = True,
            progress: bool = True, namespace: dict | None = None, serial: bool = False) -> int:
    import jupytext
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output

    os.environ.setdefault("MPLBACKEND", "Agg")
    os.environ.setdefault("OMP_NUM_THREADS", "2")
    notebook = jupytext.read(page)
    code = [c for c in notebook.cells if c.cell_type == "code"]
    shell = InteractiveShell.instance()
    if serial:  # before the page's cells run (the imports are not timed)
        from standarderror import _parallel
        from standarderror.experiments import multiple_choice
        from standarderror.uncertainty import scaling

        _parallel.WORKERS = scaling._WORKERS = multiple_choice._WORKERS = 1
    os.chdir(page.parent)
    results = []
    load = os.getloadavg()[0]
    start, cpu0 = time.perf_counter(), time.process_time()
    for index, cell in enumerate(code):
        profiler = cProfile.Profile() if profiled else None
        t0 = time.perf_counter()
        with capture_output():
            if profiler:
                profiler.enable()
            outcome = shell.run_cell(cell.source, store_history=True)
            if profiler:
                profiler.disable()
        seconds = time.perf_counter() - t0
        if progress:
            print(f"  cell {index:>3} {seconds:7.2f} s", file=sys.stderr, flush=True)
        if not outcome.success:
            print(f"{page}: code cell {index} raised; output below", file=sys.stderr)
            shell.run_cell(cell.source)  # again, visibly, for the traceback
            return 1
        results.append((seconds, index, cell.source,
                        pstats.Stats(profiler) if profiler else None))
    total = time.perf_counter() - start
    cpu = time.process_time() - cpu0
    print(f"{page}: {len(code)} code cells in {total:.1f} s wall, {cpu:.1f} s CPU "
          f"(OMP_NUM_THREADS={os.environ['OMP_NUM_THREADS']}, "
          f"{'profiled' if profiled else 'not profiled'}{', pools serial' if serial else ''}; "
          f"load average "
          f"{load:.2f} at the start, {os.getloadavg()[0]:.2f} at the end)")
    for seconds, index, source, stats in sorted(results, key=lambda r: r[0], reverse=True)[:cells]:
        first = next((line for line in source.splitlines() if line.strip()
                      and not line.lstrip().startswith("#")), "")[:70]
        print(f"\ncell {index:>3}  {seconds:7.2f} s  {100 * seconds / total:5.1f}%  {first}")
        if stats is None:
            continue
        ours = _top(stats, 3, lambda f: "standarderror" in Path(f[0]).parts, calls)
        if ours:
            print("  package calls (cumulative):")
            for s, label in ours:
                print(f"    {s:7.2f} s  {label}")
        print("  leaves (own time):")
        for s, label in _top(stats, 2, lambda f: True, calls):
            print(f"    {s:7.2f} s  {label}")
    if namespace is not None:
        namespace.update(shell.user_ns)
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("page", type=Path, help="a notebook page, e.g. lectures/ep3_temperature.md")
    parser.add_argument("--cells", type=int, default=5, help="slowest cells to show (5)")
    parser.add_argument("--calls", type=int, default=8, help="functions per list (8)")
    parser.add_argument("--no-profile", action="store_true",
                        help="time the cells only, without cProfile (no overhead)")
    parser.add_argument("--quiet", action="store_true",
                        help="no per-cell progress lines on stderr")
    parser.add_argument("--serial", action="store_true",
                        help="the package's thread pools on one thread, so the profile sees "
                             "the work they share out")
    args = parser.parse_args(argv)
    if not args.page.is_file():
        parser.error(f"page: no such file {args.page}")
    if args.cells < 1 or args.calls < 1:
        parser.error("--cells and --calls must be at least 1")
    return profile(args.page.resolve(), args.cells, args.calls,
                   profiled=not args.no_profile, progress=not args.quiet, serial=args.serial)


if __name__ == "__main__":
    sys.exit(main())
