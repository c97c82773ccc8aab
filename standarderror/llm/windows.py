"""The window rule: disjoint slots of held-out text, drawn by a seeded permutation.

* :func:`windows` cuts any token sequence into ``block + 1``-token slots and draws batches of
  them (one implementation for every held-out measurement in the book).
* :func:`batches` applies it to a split of the corpus (:mod:`standarderror.llm.corpus`).
"""

from __future__ import annotations

import numpy as np
import torch

from standarderror import _checks

from .corpus import encode, split, vocabulary


def windows(ids, count: int, size: int, seed: int, *, block: int):
    """Yield ``count`` batches of ``size`` non-overlapping windows of a token sequence: the
    window rule of every held-out measurement in the book (one implementation).

    The sequence is cut into ``block + 1``-token slots, ``count * size`` slots are drawn
    without replacement by ``numpy.random.default_rng(seed).permutation``, so no two windows
    share a token, and each batch is ``(x, y)``, int64 arrays of shape ``(size, block)`` with
    ``y`` the next token of ``x``. :func:`batches` applies it to a split of the corpus.
    """
    count = _checks.positive_int(count, "count")
    size = _checks.positive_int(size, "size")
    block = _checks.positive_int(block, "block")
    data = np.asarray(ids, dtype=np.int64)
    slots = (len(data) - 1) // (block + 1)
    need = count * size
    if need > slots:
        raise ValueError(f"count * size = {need} windows of {block + 1} tokens exceed the "
                         f"{slots} the text holds; lower count, size or block")
    starts = np.random.default_rng(seed).permutation(slots)[:need] * (block + 1)
    offsets = np.arange(block + 1)
    for b in range(count):
        rows = data[starts[b * size:(b + 1) * size, None] + offsets]
        yield rows[:, :-1].copy(), rows[:, 1:].copy()


def batches(split_name: str = "test", count: int = 10, size: int = 16, seed: int = 0, *,
            block: int = 64, stoi: dict[str, int] | None = None):
    """Yield ``count`` batches of ``size`` non-overlapping windows from a split.

    Each item is ``(x, y)``: int64 tensors of shape ``(size, block)``, ``y`` being ``x``
    shifted by one character; the windows are those of :func:`windows` on the split's
    encoded text.
    """
    stoi = stoi or {c: i for i, c in enumerate(vocabulary())}
    for x, y in windows(encode(split(split_name), stoi), count, size, seed, block=block):
        yield torch.from_numpy(x), torch.from_numpy(y)
