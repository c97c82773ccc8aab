"""The book's notebook pages one at a time against N at a time (sphinxext/ahead.py).

    .venv/bin/python benchmarks/bench_pages_at_once.py [--at-once 2] [--wait PASSIVE]
                                                        [--pages book/model.md ...]

Executes every notebook page of the book (or ``--pages``) with nbclient in the page's
directory, as MyST-NB does, in the build's arithmetic (``OMP_NUM_THREADS=2`` unless set,
``OPENBLAS_NUM_THREADS=1``): first one page after another, then ``--at-once`` pages at a time
(a process pool, the pages in the order given; by default the build's, ``se_slowest_pages``
first), each time with idle OpenMP threads told ``--wait`` (``PASSIVE``: they sleep;
``default``: OpenMP's own, which spins). Prints each page's time in both runs, the two walls
and their ratio, and whether every output of every page is the same in both runs (its pins at
full precision, printed text and tables, figures' bytes: ``scripts/glue.py``'s record, which
leaves out the cells marked ``NBVAL_IGNORE_OUTPUT``, wall-clock seconds). Exits 1 if an
output differs. Timings are the machine's: the load average is printed.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _book_order() -> list[str]:
    """The book's notebook pages in the order the build starts them (``ahead.order``: the
    pages of ``se_slowest_pages`` in ``_config.yml`` first, then the others by name)."""
    import yaml

    from standarderror_book.sphinxext.ahead import FIRST, order

    sys.path.insert(0, str(ROOT / "tests"))
    import nbval_pages

    config = yaml.safe_load((ROOT / "_config.yml").read_text())["sphinx"]["config"]
    docs = sorted(p[:-3] for p in nbval_pages.notebook_pages())
    return [f"{d}.md" for d in order(docs, config.get(FIRST))]


def _execute(page: str) -> tuple[str, float, dict]:
    """Execute one page in a fresh kernel; its time and its pins, printed outputs and figures
    (``scripts/glue.py``'s record of a page, which leaves out the cells marked
    ``NBVAL_IGNORE_OUTPUT``)."""
    import jupytext
    from nbclient import NotebookClient

    sys.path.insert(0, str(ROOT / "scripts"))
    import glue

    nb = jupytext.read(ROOT / page)
    t = time.perf_counter()
    NotebookClient(nb, timeout=1800, kernel_name="python3",
                   resources={"metadata": {"path": str((ROOT / page).parent)}}).execute()
    took = time.perf_counter() - t
    return page, took, glue.dump_notebook(nb)


def _run(pages: list[str], at_once: int) -> tuple[float, dict]:
    t = time.perf_counter()
    with ProcessPoolExecutor(at_once) as pool:
        done = {page: (took, cells) for page, took, cells in pool.map(_execute, pages)}
    return time.perf_counter() - t, done


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--at-once", type=int, default=2, help="pages at a time in the second run (2)")
    ap.add_argument("--wait", default="PASSIVE",
                    help="OMP_WAIT_POLICY for the kernels: PASSIVE (default), ACTIVE, or default "
                         "(left unset)")
    ap.add_argument("--pages", nargs="+", default=None,
                    help="pages, in the order they are started (default: the book's, slowest "
                         "first)")
    args = ap.parse_args(argv)
    args.pages = args.pages or _book_order()
    if args.at_once < 2:
        ap.error("--at-once must be at least 2")
    os.environ.setdefault("OMP_NUM_THREADS", "2")
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    if args.wait == "default":
        os.environ.pop("OMP_WAIT_POLICY", None)
    else:
        os.environ["OMP_WAIT_POLICY"] = args.wait
    print(f"{len(args.pages)} pages; OMP_NUM_THREADS={os.environ['OMP_NUM_THREADS']}, "
          f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', '(unset)')}; "
          f"load average {os.getloadavg()[0]:.2f}", flush=True)
    one, alone = _run(args.pages, 1)
    print(f"one at a time: {one:.1f} s; load average {os.getloadavg()[0]:.2f}", flush=True)
    many, together = _run(args.pages, args.at_once)
    print(f"{args.at_once} at a time: {many:.1f} s; load average {os.getloadavg()[0]:.2f}\n")
    differ = [p for p in args.pages if alone[p][1] != together[p][1]]
    print(f"{'page':34s} {'alone':>8s} {'shared':>8s}  outputs")
    for page in args.pages:
        same = "differ" if page in differ else "same"
        print(f"{page:34s} {alone[page][0]:7.1f}s {together[page][0]:7.1f}s  {same}")
    print(f"\nwall: {one:.1f} s one at a time, {many:.1f} s {args.at_once} at a time: "
          f"ratio {many / one:.2f}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
