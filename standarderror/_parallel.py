"""How many threads the package's thread pools use: one number for every pool.

The pools share out independent items (questions, checkpoints, blocks of rows) while each
item's own arithmetic stays as it was, so no result depends on this number; it only bounds
how many cores a page uses (at most four, and never more than the process may run on).
"""

from __future__ import annotations

import os
import threading

WORKERS = min(4, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
              else os.cpu_count() or 1)


#: Set in the pool's threads: an ordered_map called from one of them runs its items in turn.
_INSIDE = threading.local()


def ordered_map(fn, items) -> list:
    """``[fn(x) for x in items]``, the items shared out among :data:`WORKERS` threads (numpy
    releases the GIL in its linear algebra), with numpy's BLAS on one thread throughout, the
    serial case included: each item is computed by the same single-threaded operations
    wherever it runs, so the results are those of the plain loop, bit for bit, whatever
    :data:`WORKERS` or the BLAS's own thread setting. Called from one of its own threads (a map
    inside a map's item), it runs the items in turn: the cores are already in use."""
    items = list(items)
    if getattr(_INSIDE, "worker", False):  # called from one of this pool's threads: the
        return [fn(x) for x in items]      # cores are taken (and the BLAS is on one thread)
    from threadpoolctl import threadpool_limits

    with threadpool_limits(1, user_api="blas"):
        if WORKERS == 1 or len(items) < 2:
            return [fn(x) for x in items]
        from concurrent.futures import ThreadPoolExecutor

        def work(x):
            _INSIDE.worker = True
            return fn(x)

        with ThreadPoolExecutor(min(WORKERS, len(items))) as pool:
            return list(pool.map(work, items))
