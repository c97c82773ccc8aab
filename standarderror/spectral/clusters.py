r"""Similarities and clusters of predicted density matrices: the factors
:math:`h_T(\hat d_i) = F_i^\top F_i`, Frobenius inner products from cross-Gram blocks (or
through the distinct answer vectors), the Frobenius cosine similarity, and hierarchical
clusters of it."""

from __future__ import annotations

import numpy as np
from scipy.cluster import hierarchy
from scipy.spatial.distance import pdist, squareform

from .._parallel import ordered_map
from ._gram import (
    _CHUNK_BYTES,
    _answers,
    _chunk,
    _count,
    _log_scaled,
    _memo,
    _spectrum,
    _temperature,
    _unit_rows,
)


def _factors(a: np.ndarray, alpha: float, sp: dict | None = None):
    r"""Rows :math:`\sqrt{\mu_k}\, u_k^\top` of each scaled density matrix (so that
    :math:`h_T(\hat d_i) = F_i^\top F_i`), stacked over questions, with ``owner`` (question of
    each row), the eigenvalues and the scaled eigenvalues. Zero eigenvalues are dropped.
    ``sp`` is ``_spectrum(a, vectors=True)`` when the caller already holds it."""
    n, m, d = a.shape
    if sp is None:
        sp = _spectrum(a, vectors=True)
    lam = sp["lam"]
    mu, _ = _log_scaled(lam, alpha)
    pos = lam > 0
    coef = sp["vec"] * np.sqrt(np.where(pos, mu / (m * np.where(pos, lam, 1.0)), 0.0))[:, None, :]
    step = _chunk(m, d)

    def part(s):  # the chunks are independent: shared out among the threads
        e = _unit_rows(a[s:s + step])
        f = np.matmul(coef[s:s + step].transpose(0, 2, 1), e)  # rows sum_j coef[j, k] e_j
        keep = pos[s:s + step]
        return f[keep], np.nonzero(keep)[0] + s

    parts = ordered_map(part, range(0, n, step))
    return (np.concatenate([f for f, _ in parts]), np.concatenate([o for _, o in parts]),
            lam, mu)


def _inner(F: np.ndarray, owner: np.ndarray, n: int) -> np.ndarray:
    r"""Frobenius inner products :math:`\langle F_i^\top F_i, F_j^\top F_j\rangle
    = \lVert F_i F_j^\top\rVert_F^2` for all pairs, in row chunks: each chunk of questions
    against itself and the questions after it (the matrix is symmetric; the pairs ``j < i``
    are copied from ``i < j``, so the result is exactly symmetric)."""
    starts = np.searchsorted(owner, np.arange(n + 1))
    R = len(F)
    out = np.empty((n, n))
    budget = max(1, _CHUNK_BYTES // (8 * max(R, 1)))
    chunks, q0 = [], 0
    while q0 < n:
        q1 = q0 + 1
        while q1 < n and starts[q1 + 1] - starts[q0] <= budget:
            q1 += 1
        chunks.append((q0, q1))
        q0 = q1

    def block(chunk):  # the chunks are independent: shared out among the threads
        q0, q1 = chunk
        r0, r1 = starts[q0], starts[q1]
        p = F[r0:r1] @ F[r0:].T
        p *= p
        s = np.add.reduceat(p, starts[q0:-1] - r0, axis=1)
        out[q0:q1, q0:] = np.add.reduceat(s, starts[q0:q1] - r0, axis=0)

    ordered_map(block, chunks)
    upper = np.triu_indices(n, 1)
    out[upper[::-1]] = out[upper]
    return out


#: Largest number of distinct answer vectors for the shared-vocabulary route of :func:`_cosine`.
_MAX_DISTINCT = 6000


def _inner_distinct(a: np.ndarray):
    r"""Frobenius inner products at :math:`T = 1` through the distinct answer vectors.

    With :math:`U` the distinct unit answers over all questions and :math:`w_{iu}` the share
    of question :math:`i`'s answers equal to :math:`u`, :math:`\hat d_i = \sum_u w_{iu} u u^\top`
    and :math:`\langle \hat d_i, \hat d_j\rangle_F = w_i^\top Q\, w_j` with
    :math:`Q = (U U^\top)^{\circ 2}`. Returns ``None`` when answers rarely repeat (then the
    per-question factor route is cheaper)."""
    n, m, d = a.shape
    flat = a.reshape(n * m, d)
    flat = flat / np.linalg.norm(flat, axis=1, keepdims=True)
    uniq, inv, _ = _unique_rows(flat)
    if len(uniq) > min(_MAX_DISTINCT, (n * m) // 2):
        return None
    w = np.zeros((n, len(uniq)))
    np.add.at(w, (np.repeat(np.arange(n), m), inv.ravel()), 1.0 / m)
    q = uniq @ uniq.T
    q *= q
    return w @ q @ w.T


def _unique_rows(x: np.ndarray):
    """``numpy.unique(x, axis=0, return_inverse=True, return_counts=True)``: the same sorted
    distinct rows, inverse and counts, with only the distinct rows sorted.

    ``np.unique`` sorts every row lexicographically, field by field; answers repeat (34,000
    rows may hold 4,000 distinct ones), so rows with the same bytes are merged first, in one
    pass through a dictionary, and ``np.unique`` then orders the few that remain (and merges
    any that are equal as numbers but not as bytes, such as ``-0.0`` and ``0.0``)."""
    rows = np.ascontiguousarray(x)
    if rows.ndim != 2:
        raise ValueError(f"rows must be a 2-D array, got shape {rows.shape}")
    first: dict = {}
    code = np.fromiter((first.setdefault(r.tobytes(), len(first)) for r in rows),
                       dtype=np.int64, count=len(rows))
    pick = np.empty(len(first), dtype=np.int64)
    pick[code[::-1]] = np.arange(len(code))[::-1]  # the first row of each byte pattern
    uniq, inv = np.unique(rows[pick], axis=0, return_inverse=True)
    inv = inv.ravel()[code]
    return uniq, inv, np.bincount(inv, minlength=len(uniq))


def _cosine(a: np.ndarray, alpha: float, sp: dict | None = None, rows=None) -> np.ndarray:
    """The similarity matrix of :func:`similarity` at exponent ``alpha`` (= 1/T) between the
    questions ``rows`` of ``a`` (all when None); ``sp`` as in :func:`_factors`, for all of
    ``a``. Read-only: a page asks for the same bins' similarities at the same temperature
    from several variants of Algorithm 1, so the matrix is kept with the cached answers
    (:func:`._gram._memo`) and computed once."""
    key = ("cosine", float(alpha),
           None if rows is None else np.asarray(rows, dtype=np.int64).tobytes())
    return _memo(a, key, lambda: _cosine_of(a, alpha, sp, rows))


def _cosine_of(a: np.ndarray, alpha: float, sp: dict | None, rows) -> np.ndarray:
    if rows is not None:
        a = a[rows]
        if sp is not None:
            sp = {"lam": sp["lam"][rows], "vec": sp["vec"][rows]}
    ip = _inner_distinct(a) if alpha == 1.0 else None
    if ip is None:
        F, owner, _, mu = _factors(a, alpha, sp)
        ip = _inner(F, owner, a.shape[0])
        norm = np.sqrt(np.sum(mu * mu, axis=1))
    else:
        norm = np.sqrt(np.diag(ip))
    sim = ip / np.outer(norm, norm)
    np.fill_diagonal(sim, 1.0)
    return sim


def similarity(answers, temperature: float = 1.0) -> np.ndarray:
    r"""Frobenius cosine similarity between predicted density matrices, shape ``(n, n)``.

    .. math:: s_{ij} = \frac{\langle D_i, D_j\rangle_F}{\lVert D_i\rVert_F \lVert D_j\rVert_F},
       \qquad \langle D_i, D_j\rangle_F = \tfrac{1}{m^2}\lVert E_i E_j^\top\rVert_F^2
       \;\text{ at } T = 1,

    with :math:`D_i = h_T(\hat d(x_i))`. Values lie in [0, 1] (both matrices are p.s.d.).
    """
    a = _answers(answers)
    t = _temperature(temperature)
    return _cosine(a, 1.0 / t).copy()  # the caller's to change; the kept one stays read-only


class _Linkage:
    """Hierarchical clusters of a similarity matrix: on ``1 - sim`` (``distance="cosine"``,
    ours) or on the Euclidean distance between the *rows* of ``sim`` (``"rows"``, the
    authors': :func:`scipy.spatial.distance.pdist`). The linkage is computed on the first
    :meth:`cut` that needs it and reused by the others."""

    def __init__(self, sim: np.ndarray, method: str, distance: str = "cosine"):
        self.sim, self.method, self.distance, self._z = sim, method, distance, None

    def cut(self, k: int) -> np.ndarray:
        """Labels ``0..k'-1`` of the ``maxclust`` cut at ``k`` clusters (``k' <= k``)."""
        n = len(self.sim)
        if k == 1:
            return np.zeros(n, dtype=np.int64)
        if k == n:
            return np.arange(n, dtype=np.int64)
        if self._z is None:
            if self.distance == "rows":
                cond = pdist(self.sim, metric="euclidean")
            else:
                dist = np.clip(1.0 - self.sim, 0.0, None)
                dist = (dist + dist.T) / 2
                np.fill_diagonal(dist, 0.0)
                cond = squareform(dist, checks=False)
            self._z = hierarchy.linkage(cond, method=self.method)
        labels = hierarchy.fcluster(self._z, t=k, criterion="maxclust")
        _, labels = np.unique(labels, return_inverse=True)
        return labels.astype(np.int64)


def _hcluster(sim: np.ndarray, k: int, method: str, distance: str = "cosine") -> np.ndarray:
    """One cut of :class:`_Linkage`."""
    return _Linkage(sim, method, distance).cut(k)


def _distance(distance) -> str:
    if distance not in ("cosine", "rows"):
        raise ValueError(f"distance must be 'cosine' (1 - similarity) or 'rows' (Euclidean "
                         f"between rows of the similarity matrix), got {distance!r}")
    return distance


def _method(method: str) -> str:
    allowed = ("average", "complete", "single", "weighted")
    if method not in allowed:
        raise ValueError(f"method must be one of {allowed} (linkage on 1 - similarity), got {method!r}")
    return method


def cluster(answers, clusters: int, temperature: float = 1.0, method: str = "average") -> np.ndarray:
    """Hierarchical clusters (:func:`scipy.cluster.hierarchy.linkage` on ``1 - similarity``,
    cut with ``fcluster(criterion="maxclust")``) of the predicted density matrices.

    Returns integer labels ``0..k-1`` (``k <= clusters``; ``maxclust`` may return fewer when
    distances tie)."""
    a = _answers(answers)
    k = _count(clusters, "clusters")
    if k > a.shape[0]:
        raise ValueError(f"clusters must be <= the number of questions ({a.shape[0]}), got {k}")
    t = _temperature(temperature)
    return _hcluster(_cosine(a, 1.0 / t), k, _method(method))
