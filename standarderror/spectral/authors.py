"""The authors' arithmetic: each question's ``d x d`` density matrix built and decomposed
densely (float32 or float64), the decompositions cached and shared out among threads, and
the log score with the floor on every scaled eigenvalue (see the facade's docstring,
"The authors' computation")."""

from __future__ import annotations

import numpy as np

from .. import _parallel
from .._parallel import ordered_map
from ._gram import _CHUNK_BYTES, _log_scaled, _score_from, answers_key, content_key

#: Dense decompositions already made, keyed by (precision, content of the answers); each
#: serves every temperature and eps (the authors' computation is by design d x d, so it is
#: made once per set of answers and reused).
_DENSE_CACHE: dict = {}
_DENSE_CACHE_SIZE = 8


def _decomposed(e: np.ndarray, m) -> tuple[np.ndarray, np.ndarray]:
    r"""``eigh`` of every question's :math:`E^\top E / m` (one plain product per question),
    in as many parts as the package has threads, shared out among them
    (:func:`~standarderror._parallel.ordered_map`; numpy releases the GIL in both, and each
    question is one single-threaded product and one LAPACK call wherever it runs, so the
    results do not depend on the thread count)."""
    def part(block):
        dense = np.stack([q.T @ q for q in block]) / m
        return np.linalg.eigh(dense)  # with vectors always, so eigenvalues never differ

    done = ordered_map(part, np.array_split(e, max(1, min(_parallel.WORKERS, len(e)))))
    return np.concatenate([w for w, _ in done]), np.concatenate([u for _, u in done])


def _dense_raw(a: np.ndarray, y: np.ndarray | None, precision: str) -> dict:
    r"""Signed eigenvalues (n, d) of every dense density matrix :math:`E^\top E / m`, built and
    decomposed in ``precision``; with targets, the squared projections (n, d) of each target on
    the eigenvectors. Cached."""
    key = (precision, answers_key(a))
    hy = None if y is None else content_key(y)
    hit = _DENSE_CACHE.get(key)
    if hit is not None and (y is None or hy in hit["proj"]):
        return {"w": hit["w"], "proj": None if y is None else hit["proj"][hy]}
    n, m, d = a.shape
    dt = np.float32 if precision == "float32" else np.float64
    w_all = np.empty((n, d))
    p_all = np.empty((n, d)) if y is not None else None
    step = max(1, _CHUNK_BYTES // (np.dtype(dt).itemsize * d * d * 2))
    from threadpoolctl import threadpool_limits

    for s in range(0, n, step):
        e = a[s:s + step].astype(dt)
        # one plain product per question (E^T E / m), as a per-question implementation does:
        # the null-space round-off depends on how the matrix is summed
        # one thread: many small decompositions only contend for threads, and the round-off
        # left in the null space depends on the blocking that the thread count chooses
        with threadpool_limits(1):
            w, u = _decomposed(e, dt(m))
        w_all[s:s + step] = w
        if y is not None:
            c = np.einsum("qdk,qd->qk", u, y[s:s + step].astype(dt)).astype(float)
            p_all[s:s + step] = c * c
    if hit is None:
        if len(_DENSE_CACHE) >= _DENSE_CACHE_SIZE:
            _DENSE_CACHE.pop(next(iter(_DENSE_CACHE)))
        hit = _DENSE_CACHE[key] = {"w": w_all, "proj": {}}
    if y is not None:
        hit["proj"][hy] = p_all
    return {"w": w_all, "proj": p_all}


def _dense(a: np.ndarray, y: np.ndarray | None, arithmetic: str) -> dict:
    """Eigenvalues (n, d) and squared projections under one of the authors' arithmetics:
    ``"authors"`` float32 + absolute value, ``"float64-abs"``, ``"float32-clip"``,
    ``"float64-clip"`` (negative eigenvalues set to zero)."""
    precision = "float64" if arithmetic.startswith("float64") else "float32"
    raw = _dense_raw(a, y, precision)
    w = raw["w"]
    lam = np.clip(w, 0.0, None) if arithmetic.endswith("-clip") else np.abs(w)
    return {"lam": lam, "proj": raw["proj"], "dense": True}


def _score_any(sp: dict, alpha, eps: float) -> np.ndarray:
    r"""Per-question log score from an exact (Gram) or a dense spectrum. Dense (the authors'):
    :math:`-\sum_k p_k \log\max(\mu_k, \varepsilon)`, the floor on every scaled eigenvalue."""
    if not sp.get("dense"):
        return _score_from(sp["lam"], sp["proj"], alpha, eps)
    _, logmu = _log_scaled(sp["lam"], alpha)
    logmu = np.maximum(logmu, np.log(eps))  # max(mu, eps), exact zeros (-inf) included
    return -np.sum(sp["proj"] * logmu, axis=-1)
