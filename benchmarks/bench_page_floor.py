"""A page's execution time as a multiple of its embedder floor.

    .venv/bin/python benchmarks/bench_page_floor.py [lectures/ep5_eigenvalues.md]

Executes the page's code cells in order in one IPython shell (``scripts/profile_page.py``
without cProfile), then, in the same process, times sentence-transformers' ``encode`` on the
page's unique strings (``data["strings"]`` in the page's namespace: every distinct answer and
target it embedded, the sampling baseline's included) with the embedder the page loaded, and
once more with a freshly loaded embedder (load time reported apart). The floor is what no
speed-up of our code can remove: the embedder's own throughput on these strings. Prints the
page's time, the floor and the multiple. Timings are the machine's (load average printed).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("page", nargs="?", type=Path, default=ROOT / "lectures" / "ep5_eigenvalues.md")
    ap.add_argument("--repeats", type=int, default=3, help="encode timings, best of (3)")
    args = ap.parse_args(argv)
    import profile_page

    ns: dict = {}
    load0 = os.getloadavg()[0]
    t0 = time.perf_counter()
    rc = profile_page.profile(args.page.resolve(), 3, 1, profiled=False, progress=True,
                              namespace=ns)
    page = time.perf_counter() - t0
    if rc:
        return rc
    data = ns.get("data")
    if not isinstance(data, dict) or "strings" not in data:
        print(f"{args.page}: no data['strings'] in the page's namespace: nothing to embed")
        return 1
    strings = list(data["strings"])
    from standarderror.llm import semantic as se

    best = float("inf")
    for _ in range(max(1, args.repeats)):
        t1 = time.perf_counter()
        e = se.embed(strings)
        best = min(best, time.perf_counter() - t1)
    same = bool((e == data["embeddings"]).all())
    diff = float(abs(e - data["embeddings"]).max())
    se._EMBEDDER.clear()
    t2 = time.perf_counter()
    se.embedder()
    load = time.perf_counter() - t2
    print(f"\n{args.page.name}: page {page:.1f} s (load average {load0:.2f} at the start, "
          f"{os.getloadavg()[0]:.2f} at the end)")
    print(f"embedder floor: encode of the page's {len(strings)} unique strings {best:.2f} s "
          f"(best of {args.repeats}); loading the embedder {load:.2f} s")
    print(f"the vectors, all strings in one call vs the page's calls: "
          f"{'bit-identical' if same else f'differ by up to {diff:.1e}'}")
    print(f"page / encode = {page / best:.1f}x; page / (encode + load) = "
          f"{page / (best + load):.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
