"""Memory settings for this workload: the C allocator keeps freed memory for the next
allocation, and the interpreter skips its final garbage collection at exit.

The pages allocate and free, thousands of times, tensors and arrays of a few to some tens of
megabytes (each sampling step's key/value caches, activations, probabilities, per-question
blocks of the spectral computations). glibc's ``malloc`` returns such memory to the operating
system when it is freed (``mmap`` above a threshold, heap trimming above another), and the
next allocation of the same size then pays one page fault per 4 KiB page touched: on two
cores, sampling Episode 5's test answers took 1.3 to 1.6 times as long as with the memory kept
(``/usr/bin/time -f %R`` counts the faults: 2.5 to 3.6 million
against 0.2 million for the same sampling).

:func:`keep_freed_memory`, called when :mod:`standarderror_book.page` prepares a page's kernel
(:mod:`standarderror_book.kernel`; the library alone never calls it), asks glibc
(``mallopt``) to serve allocations from its heap (:data:`MMAP_THRESHOLD`, :data:`MMAP_MAX`) and to keep up
to :data:`TRIM_THRESHOLD` of freed heap for reuse, with :data:`TOP_PAD` of slack each time the
heap grows. It changes no number any computation produces, only where memory comes from;
the cost is that a process may hold up to :data:`TRIM_THRESHOLD` more memory than it uses.
It does nothing on other C libraries (macOS, musl), when the reader sets any of glibc's own
``MALLOC_*_`` variables for these settings (theirs win), or when
``STANDARDERROR_KEEP_MEMORY=0``.

:func:`skip_final_collection`, called at the same point, freezes the
garbage collector's objects (:func:`gc.freeze`) as the interpreter exits, so that its last
collection does not walk them: a process that has imported transformers and
sentence-transformers holds millions, and that walk took 1.4 s of every such page's kernel
shutdown (1.7 s against 0.25 s to exit, measured with both imported). Memory goes back to the
system with the process either way; what is lost is only the ``__del__`` of objects that were
already unreachable garbage in reference cycles at exit, which Python does not promise to run.
``STANDARDERROR_KEEP_MEMORY=0`` turns this off too.
"""

from __future__ import annotations

import atexit
import ctypes
import gc
import os
import platform

#: Allocations up to this size come from the heap (glibc's largest allowed threshold).
MMAP_THRESHOLD = 32 << 20
#: How many allocations may be mapped on their own at once: none, so that the larger ones
#: (the 100-answer sampling's caches reach 200 MB) come from the heap too (glibc still maps
#: memory itself when the heap cannot grow).
MMAP_MAX = 0
#: Freed memory at the top of the heap is kept up to this size before it is returned.
TRIM_THRESHOLD = 1 << 30
#: Extra memory requested each time the heap grows.
TOP_PAD = 64 << 20
#: glibc's ``mallopt`` parameter numbers (``malloc.h``).
_PARAMETERS = {"MALLOC_TRIM_THRESHOLD_": (-1, TRIM_THRESHOLD),
               "MALLOC_TOP_PAD_": (-2, TOP_PAD),
               "MALLOC_MMAP_THRESHOLD_": (-3, MMAP_THRESHOLD),
               "MALLOC_MMAP_MAX_": (-4, MMAP_MAX)}
#: Set to ``"0"`` to leave the allocator as it is.
SWITCH = "STANDARDERROR_KEEP_MEMORY"


def keep_freed_memory() -> bool:
    """Apply the settings above; True when glibc accepted all of them, False when they were
    not applied (another C library, the reader's own ``MALLOC_*_`` settings, or
    ``STANDARDERROR_KEEP_MEMORY=0``)."""
    if os.environ.get(SWITCH, "1") == "0":
        return False
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return False
    if any(name in os.environ for name in _PARAMETERS):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # pragma: no cover - a glibc without mallopt
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return all(mallopt(number, value) == 1 for number, value in _PARAMETERS.values())


def skip_final_collection() -> bool:
    """Register :func:`gc.freeze` to run at exit (see the module's docstring); False when
    ``STANDARDERROR_KEEP_MEMORY=0``. Idempotent."""
    if os.environ.get(SWITCH, "1") == "0":
        return False
    atexit.unregister(gc.freeze)
    atexit.register(gc.freeze)
    return True
