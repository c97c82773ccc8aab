"""How many threads the package's thread pools use: one number for every pool.

The pools share out independent items (questions, checkpoints, blocks of rows) while each
item's own arithmetic stays as it was, so no result depends on this number; it only bounds
how many cores a page uses (at most four, and never more than the process may run on).
"""

from __future__ import annotations

import os

WORKERS = min(4, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
              else os.cpu_count() or 1)


def ordered_map(fn, items) -> list:
    """``[fn(x) for x in items]``, the items shared out among :data:`WORKERS` threads (numpy
    releases the GIL in its linear algebra), with numpy's BLAS on one thread throughout, the
    serial case included: each item is computed by the same single-threaded operations
    wherever it runs, so the results are those of the plain loop, bit for bit, whatever
    :data:`WORKERS` or the BLAS's own thread setting."""
    from threadpoolctl import threadpool_limits

    items = list(items)
    with threadpool_limits(1, user_api="blas"):
        if WORKERS == 1 or len(items) < 2:
            return [fn(x) for x in items]
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(min(WORKERS, len(items))) as pool:
            return list(pool.map(fn, items))
