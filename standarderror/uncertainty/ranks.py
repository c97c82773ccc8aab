r"""Rank statistics of two scores: Kendall's :math:`\tau_b` and its pair counts, in
:math:`O(n \log n)` by merge counting."""

from __future__ import annotations

import numpy as np

from standarderror import _checks
from standarderror.uncertainty._inputs import (
    _score,
)


def kendall_tau(x, y) -> dict:
    r"""Kendall's :math:`\tau_b` between two scores, in :math:`O(n \log n)`.

    .. math::

        \tau_b = \frac{C - D}{\sqrt{(n_0 - n_x)(n_0 - n_y)}}

    with :math:`n_0 = n(n-1)/2` pairs, :math:`C` concordant and :math:`D` discordant pairs,
    and :math:`n_x, n_y` the pairs tied in ``x`` and in ``y``. :math:`D` is the number of
    inversions of ``y`` once rows are sorted by ``(x, y)``, counted by a vectorised bottom-up
    merge (Knight, 1966). The same quantity as ``scipy.stats.kendalltau`` (variant "b").
    Only the order of the values matters: scores, mean set sizes or ranks may be passed
    (the one Kendall's tau of the package: every page and experiment calls this function).

    Returns
    -------
    dict
        ``tau``, ``discordant`` (pairs in opposite order), ``concordant``, ``pairs``
        (:math:`n_0`), ``ties_x``, ``ties_y``, ``ties_both``.

    Raises
    ------
    ValueError
        With fewer than two entries, or when ``x`` or ``y`` is constant (tau is undefined).
    """
    x = _score(x, "x")
    y = _score(y, "y")
    n = _checks.same_length(x=x, y=y)
    if n < 2:
        raise ValueError("x and y need at least two entries for Kendall's tau")
    r = pair_counts(x, y)
    total, ties_x, ties_y = r["pairs"], r["ties_x"], r["ties_y"]
    con, dis = r["concordant"], r["discordant"]
    denom = (total - ties_x) * (total - ties_y)
    if denom == 0:
        raise ValueError("x or y is constant; Kendall's tau is undefined")
    if ties_x == ties_y:  # exact 1.0 for identical orders
        tau = (con - dis) / (total - ties_x)
    else:
        tau = (con - dis) / np.sqrt(float(total - ties_x)) / np.sqrt(float(total - ties_y))
    return {"tau": float(tau), **r}


def pair_counts(x, y) -> dict:
    """Concordant, discordant and tied pair counts of two validated 1-D arrays (n >= 1), in
    :math:`O(n \\log n)` time and :math:`O(n)` memory: the counting behind :func:`kendall_tau`
    and :func:`standarderror.uncertainty.set_size.inversions`."""
    x, y = _score(x, "x"), _score(y, "y")
    n = _checks.same_length(x=x, y=y)
    order = np.lexsort((y, x))
    xs, ys = x[order], y[order]

    def tied(*cols):
        changes = np.ones(n + 1, dtype=bool)
        if n > 1:
            changes[1:-1] = np.logical_or.reduce([c[1:] != c[:-1] for c in cols])
        t = np.diff(np.flatnonzero(changes)).astype(np.int64)
        return int((t * (t - 1) // 2).sum())

    ties_x = tied(xs)
    ties_both = tied(xs, ys)
    ties_y = tied(np.sort(y))
    ranks = np.unique(ys, return_inverse=True)[1].reshape(-1).astype(np.int64)
    dis = _inversions(ranks)
    total = n * (n - 1) // 2
    con = total - ties_x - ties_y + ties_both - dis
    return {"discordant": dis, "concordant": con, "pairs": total,
            "ties_x": ties_x, "ties_y": ties_y, "ties_both": ties_both}


def _inversions(a: np.ndarray) -> int:
    """Number of pairs i < j with a[i] > a[j], for non-negative integers, by bottom-up merging."""
    n = a.size
    size = 1 << max(0, int(np.ceil(np.log2(n))))
    big = int(a.max()) + 1
    cur = np.full(size, big, dtype=np.int64)  # padding sorts last and adds no inversions
    cur[:n] = a
    total = 0
    half = 1
    while half < size:
        blocks = size // (2 * half)
        pairs = cur.reshape(blocks, 2, half)
        offset = (np.arange(blocks, dtype=np.int64) * (big + 1))[:, None]
        left = (pairs[:, 0, :] + offset).ravel()  # globally sorted: each half is sorted
        right = pairs[:, 1, :] + offset
        not_greater = np.searchsorted(left, right.ravel(), side="right").reshape(blocks, half)
        not_greater -= (np.arange(blocks) * half)[:, None]
        total += int((half - not_greater).sum())
        cur = np.sort(pairs.reshape(blocks, 2 * half), axis=1).ravel()
        half *= 2
    return total
