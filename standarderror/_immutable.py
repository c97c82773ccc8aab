"""Arrays whose numbers cannot change: recognised, and made.

The spectral caches key arrays by content (SHA-256 of their bytes). An immutable array cannot
change after it was hashed, so its digest is computed once (``spectral._gram.content_key``).
"""

from __future__ import annotations

import numpy as np


def immutable(x) -> bool:
    """True when nobody can change the numbers of the array ``x``: ``x`` and every array it is
    a view of are read-only, and the memory at the end of that chain is a ``bytes`` object.
    Python's ``bytes`` cannot be changed in place, and numpy refuses to make an array on it
    writeable again. A read-only array is not enough: whoever owns its memory may set
    ``writeable`` back and write."""
    base = x
    while isinstance(base, np.ndarray):
        if base.flags.writeable:
            return False
        base = base.base
    return isinstance(base, bytes)


def frozen(x: np.ndarray) -> np.ndarray:
    """A copy of ``x`` on immutable memory (:func:`immutable`): the same shape, dtype and
    numbers, never writeable (so hashed only once by the spectral caches)."""
    x = np.ascontiguousarray(x)
    return np.frombuffer(x.tobytes(), dtype=x.dtype).reshape(x.shape)
