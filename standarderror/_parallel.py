"""How many threads the package's thread pools use: one number for every pool.

The pools share out independent items (questions, checkpoints, blocks of rows) while each
item's own arithmetic stays as it was, so no result depends on this number; it only bounds
how many cores a page uses (at most four, and never more than the process may run on).
"""

from __future__ import annotations

import os

WORKERS = min(4, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
              else os.cpu_count() or 1)
