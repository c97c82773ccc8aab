r"""Density matrices from semantic embeddings: eigenvalues as probabilities, the matrix log
score, matrix temperature scaling and the calibration diagnostics of Gruber, Walha, Bach and
Buettner, "Eigenvalue Calibration for Semantic Embeddings of Large Language Models",
arXiv preprint arXiv:2607.08377 (2026).

The setting
-----------
A language model answers question :math:`x` with sampled answers :math:`a_1, \dots, a_m`; a
sentence embedder maps each to a unit vector :math:`e(a_j) \in \mathbb{R}^d`. The *predicted
density matrix* is

.. math:: \hat d(x) = \frac1m \sum_{j=1}^m e(a_j)\, e(a_j)^\top = \tfrac1m E^\top E,
   \qquad E \in \mathbb{R}^{m\times d},

positive semi-definite with unit trace, so its eigenvalues lie on the simplex and are read as
probabilities of latent semantic outcomes. The target is the unit embedding :math:`y` of the
true answer. Matrix temperature scaling with :math:`\alpha = 1/T` is

.. math:: h_T(M) = \frac{M^\alpha}{\operatorname{tr} M^\alpha}
   = \sum_k \frac{\lambda_k^\alpha}{\sum_l \lambda_l^\alpha}\, u_k u_k^\top ,

the matrix log score is :math:`y^\top S(M)\, y` with :math:`S(M) = -\log M` (a spectral function),
its entropy is the von Neumann entropy :math:`H(M) = -\sum_k \lambda_k \log \lambda_k`, and the
matrix divergence is the quantum relative entropy
:math:`D(M_1, M_2) = \operatorname{tr}[M_1 \log M_1] - \operatorname{tr}[M_1 \log M_2]`.

Gram space: no :math:`d \times d` matrix is ever formed
-----------------------------------------------------------
:math:`\hat d(x)` has rank at most :math:`m`. Its non-zero eigenvalues are those of the
:math:`m \times m` Gram matrix :math:`G = E E^\top / m`; an eigenpair :math:`(\lambda_k, v_k)` of
:math:`G` lifts to the unit eigenvector :math:`u_k = E^\top v_k / \sqrt{m \lambda_k}` of
:math:`\hat d(x)`. Hence, for a unit target :math:`y`,

.. math:: y^\top(-\log h_T(\hat d))\,y = \sum_{\lambda_k > 0} -\log \mu_k\,
   \frac{(v_k^\top E y)^2}{m\lambda_k} \;+\; (-\log\varepsilon)\Bigl(1 - \sum_{\lambda_k>0}
   \frac{(v_k^\top E y)^2}{m\lambda_k}\Bigr),

where :math:`\mu_k` are the scaled eigenvalues and the second term is the part of :math:`y`
outside the span of the answers, whose eigenvalues are zero and receive :math:`\varepsilon`
(as in the paper, :math:`\varepsilon = 10^{-10}`). Eigenvalues of :math:`G` at or below
:data:`ZERO` (``1e-12``; the trace is one, so this is an absolute scale) are treated as exactly
zero: repeated answers make :math:`G` exactly singular, and floating-point round-off must not be
amplified by temperature scaling. Frobenius inner products between two predicted matrices come
from cross-Gram blocks :math:`E_i E_j^\top`. Every function processes questions in chunks, so
memory stays bounded for any number of questions.

Inputs
------
``answers``: array ``(n, m, d)`` of answer embeddings (``n`` questions, ``m >= 2`` answers each);
``targets``: array ``(n, d)``. Rows are unit-normalised inside (each row is first divided by
its largest absolute entry, so rows at any finite scale normalise without overflow or
underflow); a zero or non-finite row is an error.

The authors' computation
------------------------
The paper's numbers come from a different computation, which this module also offers as
explicit options (the defaults stay exact):

* ``arithmetic="authors"`` (:func:`log_score`, :func:`risk`, :func:`entropy`,
  :func:`risk_curve`, :func:`fit_temperature`): each :math:`d \times d` density matrix is
  built and eigendecomposed in float32; the absolute value of every eigenvalue is raised to
  :math:`1/T` and renormalised over all :math:`d`, giving the scaled eigenvalues
  :math:`\mu_k`; the log score is :math:`-\sum_{k=1}^{d} p_k \log\max(\mu_k, \varepsilon)`
  with :math:`p_k = (u_k^\top y)^2` (the floor applies to *every* scaled eigenvalue, not only
  to exact zeros: their code, not the paper's sentence about zero eigenvalues, produced their
  numbers), and the entropy is :math:`-\sum_k \mu_k\log\mu_k` with :math:`0\log 0 = 0` and
  no floor. The fitted temperature is the argmin over :data:`AUTHORS_GRID` (log-spaced).
  Two halves of that recipe are available separately: ``"float64-abs"`` (float64
  decomposition, absolute values) and ``"float32-clip"`` (float32 decomposition, negative
  eigenvalues set to zero); both use the same floor.
* ``variant="authors"`` (:func:`reliability`, :func:`calibration_error`, :func:`auroc`,
  :func:`kernel_language_entropy`): the conventions of their Algorithm 1, Cal_S, AUROC and KLE
  (see each function).
"""

from __future__ import annotations

import os

import numpy as np
from scipy import optimize, sparse
from scipy.cluster import hierarchy
from scipy.spatial.distance import pdist, squareform
from scipy.special import logsumexp
from scipy.stats import rankdata

from . import _checks

#: Eigenvalues of the Gram matrix at or below this value are exact zeros of the density matrix.
ZERO = 1e-12
#: The paper's replacement for zero eigenvalues inside the logarithm.
EPS = 1e-10
#: The authors' grid of temperatures for fitting T: 11 log-spaced values,
#: ``np.round([10**(i/10) for i in range(-3, 8)], 2)`` = 0.5, 0.63, 0.79, 1.0, 1.26, 1.58, 2.0,
#: 2.51, 3.16, 3.98, 5.01 (the paper's T = 2.51 lies on it).
AUTHORS_GRID = np.round([10 ** (i / 10) for i in range(-3, 8)], 2)
#: The authors' grid of *sampling* temperatures for the Lamb et al. (2025) baseline: 20 values,
#: ``np.logspace(np.log10(0.1), np.log10(3.0), 20)``.
LAMB_GRID = np.logspace(np.log10(0.1), np.log10(3.0), 20)
#: The arithmetics of the per-question quantities: ours, and the authors' with its two halves.
ARITHMETICS = ("exact", "authors", "float64-abs", "float32-clip")
#: Rough working-memory budget (bytes) for one chunk of questions.
_CHUNK_BYTES = 1 << 25

__all__ = [
    "ZERO", "EPS", "AUTHORS_GRID", "LAMB_GRID", "ARITHMETICS", "null_share", "outside_share",
    "eigenvalues", "entropy", "log_score", "risk", "risk_curve", "fit_temperature",
    "Spectrum", "spectrum",
    "temperature_interval", "auroc_difference", "similarity", "cluster", "calibration_error",
    "calibration_curve",
    "naive_reliability",
    "reliability", "reliability_grid", "max_eigenvalue_subsample", "auroc", "semantic_entropy",
    "kernel_language_entropy",
]


# --------------------------------------------------------------------------------------
# Validation
# --------------------------------------------------------------------------------------


def _answers(answers, name: str = "answers") -> np.ndarray:
    a = _checks.array(answers, name, ndim=3)
    n, m, d = a.shape
    if m < 2:
        raise ValueError(
            f"{name} must hold at least m = 2 answers per question (axis 1); got shape {a.shape}"
        )
    top = np.abs(a).max(axis=2)
    bad = np.argwhere(top <= 0)
    if bad.size:
        q, j = bad[0]
        raise ValueError(
            f"{name} has {len(bad)} zero-norm embedding(s), first at question {q}, answer {j}; "
            "a zero vector has no direction: drop or re-embed those answers"
        )
    return _unit(a, top)


def _unit(a: np.ndarray, top: np.ndarray) -> np.ndarray:
    """Rows divided by their largest absolute entry, then by their norm (no overflow or
    underflow at any finite scale)."""
    a = a / top[..., None]
    return a / np.linalg.norm(a, axis=-1, keepdims=True)


def _targets(targets, n: int, d: int, name: str = "targets") -> np.ndarray:
    y = _checks.array(targets, name, ndim=2)
    if y.shape != (n, d):
        raise ValueError(
            f"{name} must have shape (n, d) = ({n}, {d}) to match answers; got {y.shape}"
        )
    top = np.abs(y).max(axis=1)
    bad = np.flatnonzero(top <= 0)
    if bad.size:
        raise ValueError(f"{name} has {bad.size} zero-norm row(s), first at {bad[0]}; drop them")
    return _unit(y, top)


def _temperature(t, name: str = "temperature") -> float:
    """A temperature > 0 whose reciprocal (the exponent 1/T) is finite."""
    v = _checks.temperature(t, name)
    if not np.isfinite(1.0 / v):
        raise ValueError(f"{name} is too small: 1/{name} = 1/{t!r} is not a finite number")
    return v


def _arithmetic(arithmetic) -> str:
    if arithmetic not in ARITHMETICS:
        raise ValueError(f"arithmetic must be one of {ARITHMETICS}, got {arithmetic!r}")
    return arithmetic


def _variant(variant) -> str:
    if variant not in ("ours", "authors"):
        raise ValueError(f"variant must be 'ours' or 'authors', got {variant!r}")
    return variant


def _eps(eps) -> float:
    try:
        v = float(eps)
    except (TypeError, ValueError):
        raise ValueError(f"eps must be a number in (0, 1), got {eps!r}") from None
    if not 0 < v < 1:
        raise ValueError(f"eps must lie strictly between 0 and 1, got {eps!r}")
    return v


def _count(v, name: str, low: int = 1) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {v!r}")
    return int(v)


def _chunk(m: int, d: int) -> int:
    return max(1, _CHUNK_BYTES // (8 * m * max(d, m)))


# --------------------------------------------------------------------------------------
# The Gram-space eigendecomposition
# --------------------------------------------------------------------------------------


def _spectrum(a: np.ndarray, y: np.ndarray | None = None, *, vectors: bool = False) -> dict:
    """Eigenvalues (descending, exact zeros below :data:`ZERO`) of every question's density
    matrix; with targets, the squared projections of each target on the lifted eigenvectors."""
    n, m, d = a.shape
    lam = np.empty((n, m))
    proj = np.zeros((n, m)) if y is not None else None
    vec = np.empty((n, m, m)) if vectors else None
    step = _chunk(m, d)
    for s in range(0, n, step):
        e = a[s:s + step]
        e = e / np.linalg.norm(e, axis=2, keepdims=True)
        g = e @ e.transpose(0, 2, 1) / m
        w, v = np.linalg.eigh(g)
        w, v = w[:, ::-1], v[:, :, ::-1]
        pos = w > ZERO
        w = np.where(pos, w, 0.0)
        lam[s:s + step] = w
        if vectors:
            vec[s:s + step] = v
        if y is not None:
            z = np.einsum("qjd,qd->qj", e, y[s:s + step])
            c = np.einsum("qjk,qj->qk", v, z)
            proj[s:s + step] = np.where(pos, c * c / (m * np.where(pos, w, 1.0)), 0.0)
    return {"lam": lam, "proj": proj, "vec": vec}


def _log_scaled(lam: np.ndarray, alpha: float):
    """``(mu, log mu)`` of temperature-scaled eigenvalues, computed in log space (exact zeros
    stay zero; ``log mu`` is ``-inf`` there)."""
    pos = lam > 0
    s = np.where(pos, alpha * np.log(np.where(pos, lam, 1.0)), -np.inf)
    logmu = s - logsumexp(s, axis=-1, keepdims=True)
    return np.exp(logmu), logmu


def _finite(logmu):
    """``log mu`` with ``-inf`` (exact zeros) replaced by 0, for products that vanish there."""
    return np.where(np.isfinite(logmu), logmu, 0.0)


def _entropy_from(lam, alpha):
    mu, logmu = _log_scaled(lam, alpha)
    return -np.sum(mu * _finite(logmu), axis=-1)


def _score_from(lam, proj, alpha, eps):
    mu, logmu = _log_scaled(lam, alpha)
    pos = lam > 0
    inside = np.sum(np.where(pos, -_finite(logmu) * proj, 0.0), axis=-1)
    outside = np.clip(1.0 - proj.sum(axis=-1), 0.0, None)
    return inside - np.log(eps) * outside


# --------------------------------------------------------------------------------------
# Per-question quantities
# --------------------------------------------------------------------------------------


def eigenvalues(answers, temperature: float = 1.0) -> np.ndarray:
    r"""Eigenvalues of each predicted density matrix after matrix temperature scaling.

    .. math:: \mu_k = \lambda_k^{1/T} \Big/ \sum_l \lambda_l^{1/T}

    Parameters
    ----------
    answers : array (n, m, d)
        Answer embeddings; rows are unit-normalised inside.
    temperature : float
        :math:`T > 0`; ``1`` returns the plain eigenvalues.

    Returns
    -------
    ndarray (n, m)
        Descending; each row sums to one. Only the ``m`` eigenvalues that can be non-zero are
        returned (the other :math:`d - m` are exactly zero).
    """
    a = _answers(answers)
    t = _temperature(temperature)
    mu, _ = _log_scaled(_spectrum(a)["lam"], 1.0 / t)
    return mu


def entropy(answers, temperature: float = 1.0, *, arithmetic: str = "exact") -> np.ndarray:
    r"""Von Neumann entropy :math:`-\sum_k \mu_k \log \mu_k` (natural log) of each
    temperature-scaled predicted density matrix; shape ``(n,)``. ``arithmetic`` is ``"exact"``
    (Gram space) or one of the authors' (see the module docstring): then the sum runs over all
    :math:`d` eigenvalues of the dense decomposition."""
    a = _answers(answers)
    t = _temperature(temperature)
    ar = _arithmetic(arithmetic)
    if ar == "exact":
        return _entropy_from(_spectrum(a)["lam"], 1.0 / t)
    return _entropy_from(_dense(a, None, ar)["lam"], 1.0 / t)


def log_score(answers, targets, temperature: float = 1.0, eps: float = EPS, *,
              arithmetic: str = "exact") -> np.ndarray:
    r"""Matrix log score :math:`y^\top (-\log h_T(\hat d(x)))\, y` per question, shape ``(n,)``.

    Exact (default): zero eigenvalues are replaced by ``eps`` inside the logarithm, as the
    paper's text says; only the component of :math:`y` outside the span of the answers meets
    them. With an authors' ``arithmetic`` the score is
    :math:`\sum_{k=1}^{d} (u_k^\top y)^2 \bigl(-\log \max(\mu_k, \varepsilon)\bigr)` over
    the dense decomposition: as in their code, the floor applies to every scaled eigenvalue.
    """
    a = _answers(answers)
    n, _, d = a.shape
    y = _targets(targets, n, d)
    t = _temperature(temperature)
    e = _eps(eps)
    ar = _arithmetic(arithmetic)
    sp = _spectrum(a, y) if ar == "exact" else _dense(a, y, ar)
    return _score_any(sp, 1.0 / t, e)


class Spectrum(dict):
    """The exact Gram-space spectra of ``n`` questions (made by :func:`spectrum`): ``lam``
    (n, m) eigenvalues, descending, exact zeros at or below :data:`ZERO`; ``proj`` (n, m)
    squared projections of each unit target on the lifted unit eigenvectors. Everything the
    log score, the risk curve and the temperature fit need, in ``2 n m`` floats."""


def spectrum(chunks) -> Spectrum:
    r"""Exact spectra of many questions, streamed: the input of :func:`risk_curve` and
    :func:`fit_temperature` when the answers do not fit in memory.

    ``chunks`` is one ``(answers, targets)`` pair or an iterable of such pairs (shapes
    ``(n_c, m, d)`` and ``(n_c, d)``, the same ``m`` and ``d`` in every chunk), e.g. a
    generator that reads or embeds one block of questions at a time. Each chunk is validated,
    decomposed in the ``m x m`` Gram space and dropped; memory is one chunk plus the
    ``2 n m`` floats kept. Each question's arithmetic is the same as when all the questions
    are decomposed at once (products and decompositions run per question), so the results
    agree to round-off (tested; bit for bit on the machines tried).
    """
    if isinstance(chunks, tuple) and len(chunks) == 2 and not isinstance(chunks[0], tuple):
        chunks = [chunks]
    lam, proj, shape = [], [], None
    for k, pair in enumerate(chunks):
        try:
            answers, targets = pair
        except (TypeError, ValueError):
            raise ValueError(f"chunks must yield (answers, targets) pairs; chunk {k} is "
                             f"{type(pair).__name__}") from None
        a = _answers(answers, f"answers (chunk {k})")
        n, m, d = a.shape
        if shape is not None and (m, d) != shape:
            raise ValueError(f"answers (chunk {k}) has m, d = {(m, d)} but earlier chunks "
                             f"have {shape}; every chunk needs the same m and d")
        shape = (m, d)
        y = _targets(targets, n, d, f"targets (chunk {k})")
        sp = _spectrum(a, y)
        lam.append(sp["lam"])
        proj.append(sp["proj"])
    if shape is None:
        raise ValueError("chunks is empty: pass at least one (answers, targets) pair")
    return Spectrum(lam=np.concatenate(lam), proj=np.concatenate(proj))


def _spectrum_of(answers, targets, arithmetic: str) -> dict:
    """The spectrum that the risk, curve and fit read: from a :class:`Spectrum`, or from the
    arrays under ``arithmetic``."""
    if isinstance(answers, Spectrum):
        if targets is not None:
            raise ValueError("targets must be None when answers is a Spectrum (it holds them)")
        if arithmetic != "exact":
            raise ValueError("a Spectrum is exact: pass arrays for the authors' arithmetic")
        return answers
    a = _answers(answers)
    n, _, d = a.shape
    y = _targets(targets, n, d)
    return _spectrum(a, y) if arithmetic == "exact" else _dense(a, y, arithmetic)


def risk(answers, targets, temperature: float = 1.0, eps: float = EPS, *,
         arithmetic: str = "exact") -> float:
    r"""Empirical risk :math:`R_S = \frac1n \sum_i y_i^\top S(h_T(\hat d(x_i)))\, y_i`."""
    return float(np.mean(log_score(answers, targets, temperature, eps, arithmetic=arithmetic)))


def risk_curve(answers, targets, temperatures, eps: float = EPS, *,
               arithmetic: str = "exact") -> dict:
    """Risk and average entropy over a grid of temperatures, from one eigendecomposition
    (``arithmetic`` as in :func:`log_score`).

    ``answers`` may also be a :class:`Spectrum` from :func:`spectrum` (then ``targets`` is
    ``None`` and the arithmetic exact): the curve of any number of questions, streamed.

    Returns
    -------
    dict
        ``temperature`` (k,), ``risk`` (k,), ``risk_se`` (standard error over questions),
        ``entropy`` (k,) average entropy, ``entropy_se``, ``gap`` = risk - entropy.
    """
    e = _eps(eps)
    ar = _arithmetic(arithmetic)
    ts = np.atleast_1d(_checks.array(temperatures, "temperatures", ndim=None))
    for t in ts:
        _temperature(t, "temperatures")
    sp = _spectrum_of(answers, targets, ar)
    n = sp["lam"].shape[0]
    scores = np.array([_score_any(sp, 1.0 / t, e) for t in ts])  # (k, n)
    ent = np.array([_entropy_from(sp["lam"], 1.0 / t) for t in ts])
    root = np.sqrt(n)
    return {
        "temperature": ts,
        "risk": scores.mean(1),
        "risk_se": scores.std(1, ddof=1) / root if n > 1 else np.zeros(len(ts)),
        "entropy": ent.mean(1),
        "entropy_se": ent.std(1, ddof=1) / root if n > 1 else np.zeros(len(ts)),
        "gap": scores.mean(1) - ent.mean(1),
    }


def fit_temperature(answers, targets, *, bounds=(0.05, 50.0), eps: float = EPS,
                    arithmetic: str = "exact", grid=None) -> dict:
    r"""Matrix temperature scaling: the :math:`T` minimising the matrix log-score risk.

    Fit on a development split and apply to the test split. The risk is a smooth function of
    :math:`\log T` computed from a single eigendecomposition (``answers`` may be a
    :class:`Spectrum` from :func:`spectrum`, with ``targets=None``). How it is minimised:

    * ``grid=None`` (default): continuously with :func:`scipy.optimize.minimize_scalar`
      (bounded) over :math:`\log T` for ``arithmetic="exact"``; the argmin over
      :data:`AUTHORS_GRID` (the authors' fit) for the authors' arithmetics;
    * ``grid="continuous"``: continuously, whatever the arithmetic;
    * ``grid=array``: the argmin over those temperatures (the first one on ties).

    Returns
    -------
    dict
        ``temperature``, ``alpha`` (= 1/T), ``risk`` (at the fit), ``risk_at_one``,
        ``entropy`` (average, at the fit), ``at_bound`` (True when the optimum sits on a bound
        or on the end of the grid), ``arithmetic``, ``grid`` (None when continuous),
        ``grid_risk`` (the risk at each grid temperature, or None).
    """
    e = _eps(eps)
    ar = _arithmetic(arithmetic)
    if grid is None:
        grid = "continuous" if ar == "exact" else AUTHORS_GRID
    if isinstance(grid, str):
        if grid != "continuous":
            raise ValueError(f"grid must be None, 'continuous' or an array of temperatures, got {grid!r}")
        gr = None
        lo, hi = (_temperature(b, "bounds") for b in bounds)
        if not lo < hi:
            raise ValueError(f"bounds must be (low, high) with low < high, got {bounds!r}")
    else:
        gr = np.atleast_1d(_checks.array(grid, "grid", ndim=None)).astype(float)
        if gr.ndim != 1:
            raise ValueError(f"grid must be one-dimensional, got shape {gr.shape}")
        for g in gr:
            _temperature(g, "grid")
    sp = _spectrum_of(answers, targets, ar)

    def objective(logt):
        return float(np.mean(_score_any(sp, np.exp(-logt), e)))

    if gr is None:
        res = optimize.minimize_scalar(objective, bounds=(np.log(lo), np.log(hi)),
                                       method="bounded", options={"xatol": 1e-7})
        t, r, grisk = float(np.exp(res.x)), float(res.fun), None
        at_bound = bool(np.isclose(res.x, np.log(lo), atol=1e-4) or
                        np.isclose(res.x, np.log(hi), atol=1e-4))
    else:
        grisk = np.array([float(np.mean(_score_any(sp, 1.0 / g, e))) for g in gr])
        k = int(np.argmin(grisk))
        t, r = float(gr[k]), float(grisk[k])
        at_bound = bool(t in (gr.min(), gr.max()))
    return {
        "temperature": t,
        "alpha": 1.0 / t,
        "risk": r,
        "risk_at_one": objective(0.0),
        "entropy": float(np.mean(_entropy_from(sp["lam"], 1.0 / t))),
        "at_bound": at_bound,
        "arithmetic": ar,
        "grid": gr,
        "grid_risk": grisk,
    }


#: Default grid for :func:`temperature_interval`: 2% steps in T from 0.2 to 5.
_INTERVAL_GRID = np.exp(np.arange(np.log(0.2), np.log(5.0) + 1e-9, np.log(1.02)))


def temperature_interval(answers, targets, *, bootstrap: int = 1000, seed: int = 0,
                         level: float = 0.95, grid=None, eps: float = EPS,
                         arithmetic: str = "exact") -> dict:
    r"""Bootstrap interval of the fitted matrix temperature over questions.

    The per-question log scores are computed once at every temperature of ``grid`` (from one
    eigendecomposition); each of ``bootstrap`` draws resamples the questions with replacement
    and takes the argmin of its mean score over the grid. ``grid=None`` is a fine grid (2%
    steps from 0.2 to 5), so the interval is that of the continuous fit to within 2%;
    pass :data:`AUTHORS_GRID` for the authors' discrete fit.

    Returns
    -------
    dict
        ``temperature`` (the grid argmin on all questions), ``low``, ``high`` (percentile
        interval at ``level``), ``draws`` (the argmin of each draw), ``grid``, ``at_edge``
        (share of draws on the first or last grid temperature).
    """
    a = _answers(answers)
    n, _, d = a.shape
    y = _targets(targets, n, d)
    e = _eps(eps)
    ar = _arithmetic(arithmetic)
    nb = _count(bootstrap, "bootstrap", low=2)
    lv = _level(level)
    gr = _INTERVAL_GRID if grid is None else np.atleast_1d(
        _checks.array(grid, "grid", ndim=None)).astype(float)
    if gr.ndim != 1:
        raise ValueError(f"grid must be one-dimensional, got shape {gr.shape}")
    for g in gr:
        _temperature(g, "grid")
    sp = _spectrum(a, y) if ar == "exact" else _dense(a, y, ar)
    scores = np.array([_score_any(sp, 1.0 / g, e) for g in gr])  # (k, n)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(nb, n))
    counts = np.bincount((idx + n * np.arange(nb)[:, None]).ravel(),
                         minlength=nb * n).reshape(nb, n).astype(float)
    best = gr[np.argmin(counts @ scores.T, axis=1)]
    lo, hi = np.quantile(best, [(1 - lv) / 2, (1 + lv) / 2], method="inverted_cdf")
    return {"temperature": float(gr[int(np.argmin(scores.mean(1)))]), "low": float(lo),
            "high": float(hi), "draws": best, "grid": gr,
            "at_edge": float(np.mean((best == gr.min()) | (best == gr.max())))}


def outside_share(answers, targets) -> np.ndarray:
    r"""Share of each unit target outside the span of its answers,
    :math:`1 - \lVert P_{\mathrm{span}}\, y\rVert^2`, shape ``(n,)`` (exact, Gram space). This is
    the mass that meets the zero eigenvalues, at :math:`-\log\varepsilon` nats per unit."""
    a = _answers(answers)
    n, _, d = a.shape
    y = _targets(targets, n, d)
    return np.clip(1.0 - _spectrum(a, y)["proj"].sum(1), 0.0, 1.0)


def null_share(answers, temperature: float = 1.0, *, arithmetic: str = "authors") -> np.ndarray:
    r"""Share of the temperature-scaled spectrum that lies in the null space of each predicted
    density matrix, shape ``(n,)``: the sum of the scaled eigenvalues :math:`\mu_k` beyond the
    :math:`r` largest, where :math:`r` is the exact rank (Gram eigenvalues above :data:`ZERO`).
    Exactly zero for ``arithmetic="exact"``; under the authors' arithmetic it is the share that
    round-off eigenvalues take after scaling."""
    a = _answers(answers)
    t = _temperature(temperature)
    ar = _arithmetic(arithmetic)
    rank = (_spectrum(a)["lam"] > 0).sum(1)
    if ar == "exact":
        return np.zeros(a.shape[0])
    mu, _ = _log_scaled(_dense(a, None, ar)["lam"], 1.0 / t)
    mu = -np.sort(-mu, axis=1)
    keep = np.arange(mu.shape[1])[None, :] < rank[:, None]
    return np.clip(1.0 - np.sum(np.where(keep, mu, 0.0), axis=1), 0.0, 1.0)


# --------------------------------------------------------------------------------------
# The authors' arithmetic: dense d x d decompositions
# --------------------------------------------------------------------------------------

#: Dense decompositions already made, keyed by (precision, content of the answers); each
#: serves every temperature and eps (the authors' computation is by design d x d, so it is
#: made once per set of answers and reused).
_DENSE_CACHE: dict = {}
_DENSE_CACHE_SIZE = 8


def _digest(x: np.ndarray) -> str:
    import hashlib

    h = hashlib.blake2b(digest_size=16)
    h.update(str(x.shape).encode())
    h.update(np.ascontiguousarray(x).view(np.uint8))
    return h.hexdigest()


#: Threads that share the per-question dense decompositions (each question is still one
#: single-threaded product and one LAPACK call, so the results do not depend on this number).
_DENSE_WORKERS = min(4, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                     else os.cpu_count() or 1)


def _decomposed(e: np.ndarray, m) -> tuple[np.ndarray, np.ndarray]:
    """``eigh`` of every question's :math:`E^\top E / m` (one plain product per question),
    the questions shared out among :data:`_DENSE_WORKERS` threads (numpy releases the GIL in
    both). Call under ``threadpool_limits(1)``."""
    def part(block):
        dense = np.stack([q.T @ q for q in block]) / m
        return np.linalg.eigh(dense)  # with vectors always, so eigenvalues never differ

    parts = np.array_split(e, min(_DENSE_WORKERS, len(e)))
    if len(parts) == 1:
        return part(e)
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(len(parts)) as pool:
        done = list(pool.map(part, parts))
    return np.concatenate([w for w, _ in done]), np.concatenate([u for _, u in done])


def _dense_raw(a: np.ndarray, y: np.ndarray | None, precision: str) -> dict:
    """Signed eigenvalues (n, d) of every dense density matrix :math:`E^\top E / m`, built and
    decomposed in ``precision``; with targets, the squared projections (n, d) of each target on
    the eigenvectors. Cached."""
    key = (precision, _digest(a))
    hy = None if y is None else _digest(y)
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
    ``"authors"`` float32 + absolute value, ``"float64-abs"``, ``"float32-clip"``."""
    precision = "float64" if arithmetic == "float64-abs" else "float32"
    raw = _dense_raw(a, y, precision)
    w = raw["w"]
    lam = np.clip(w, 0.0, None) if arithmetic == "float32-clip" else np.abs(w)
    return {"lam": lam, "proj": raw["proj"], "dense": True}


def _score_any(sp: dict, alpha, eps: float) -> np.ndarray:
    r"""Per-question log score from an exact (Gram) or a dense spectrum. Dense (the authors'):
    :math:`-\sum_k p_k \log\max(\mu_k, \varepsilon)`, the floor on every scaled eigenvalue."""
    if not sp.get("dense"):
        return _score_from(sp["lam"], sp["proj"], alpha, eps)
    _, logmu = _log_scaled(sp["lam"], alpha)
    logmu = np.maximum(logmu, np.log(eps))  # max(mu, eps), exact zeros (-inf) included
    return -np.sum(sp["proj"] * logmu, axis=-1)


# --------------------------------------------------------------------------------------
# Factors, similarities, clusters
# --------------------------------------------------------------------------------------


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
    rows, owner = [], []
    step = _chunk(m, d)
    for s in range(0, n, step):
        e = a[s:s + step]
        e = e / np.linalg.norm(e, axis=2, keepdims=True)
        f = np.einsum("qjk,qjd->qkd", coef[s:s + step], e)
        keep = pos[s:s + step]
        rows.append(f[keep])
        owner.append(np.nonzero(keep)[0] + s)
    return np.concatenate(rows), np.concatenate(owner), lam, mu


def _inner(F: np.ndarray, owner: np.ndarray, n: int) -> np.ndarray:
    r"""Frobenius inner products :math:`\langle F_i^\top F_i, F_j^\top F_j\rangle
    = \lVert F_i F_j^\top\rVert_F^2` for all pairs, in row chunks."""
    starts = np.searchsorted(owner, np.arange(n + 1))
    R = len(F)
    out = np.empty((n, n))
    budget = max(1, _CHUNK_BYTES // (8 * max(R, 1)))
    q0 = 0
    while q0 < n:
        q1 = q0 + 1
        while q1 < n and starts[q1 + 1] - starts[q0] <= budget:
            q1 += 1
        r0, r1 = starts[q0], starts[q1]
        p = F[r0:r1] @ F.T
        p *= p
        s = np.add.reduceat(p, starts[:-1], axis=1)
        out[q0:q1] = np.add.reduceat(s, starts[q0:q1] - r0, axis=0)
        q0 = q1
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


def _cosine(a: np.ndarray, alpha: float) -> np.ndarray:
    ip = _inner_distinct(a) if alpha == 1.0 else None
    if ip is None:
        F, owner, _, mu = _factors(a, alpha)
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
    return _cosine(a, 1.0 / t)


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


# --------------------------------------------------------------------------------------
# Target density matrices
# --------------------------------------------------------------------------------------


def _rows_spectrum(rows: np.ndarray):
    r"""Eigenpairs of the density matrix :math:`\frac1n\sum_j r_j r_j^\top` of unit rows,
    through the Gram matrix of the distinct rows (repeated rows are merged with their counts).

    Returns ``(lam, uniq, coef)``: eigenvalues above :data:`ZERO`, the distinct rows, and
    coefficients with eigenvectors ``u_k = uniq.T @ coef[:, k]`` (never formed)."""
    uniq, _, counts = _unique_rows(rows)
    sw = np.sqrt(counts / len(rows))
    b = uniq * sw[:, None]
    lam, v = np.linalg.eigh(b @ b.T)
    keep = lam > ZERO
    lam, v = lam[keep], v[:, keep]
    return lam, uniq, (v / np.sqrt(lam)) * sw[:, None]


def _lambda_max_rows(rows: np.ndarray) -> float:
    """Largest eigenvalue of the density matrix of unit rows (mean outer product)."""
    g = rows @ rows.T / len(rows)
    return float(np.linalg.eigvalsh(g)[-1])


def _neg_entropy_rows(rows: np.ndarray) -> float:
    lam = _rows_spectrum(rows)[0]
    return float(np.sum(lam * np.log(lam)))


def calibration_error(answers, targets, temperature: float = 1.0, *, clusters: int = 20,
                      labels=None, method: str = "average", eps: float = EPS,
                      variant: str = "ours", weighting: str | None = None,
                      distance: str | None = None) -> dict:
    r"""Matrix calibration error :math:`\mathrm{Cal}_S` and the calibration-sharpness
    decomposition (the paper's Lemma 2) for the matrix log score.

    Conditioning on :math:`d(X)` is approximated by a partition of the questions (hierarchical
    clusters of the predicted matrices, or ``labels``). For each cluster :math:`c` with target
    density matrix :math:`\bar Y_c = \frac{1}{n_c}\sum_{i\in c} y_i y_i^\top` and mean prediction
    :math:`\bar D_c = \frac1{n_c}\sum_{i \in c} h_T(\hat d(x_i))`:

    .. math:: \widehat{\mathrm{Cal}}_S = \sum_c \tfrac{n_c}{n} D(\bar Y_c, \bar D_c),\quad
       \widehat{\mathrm{Sharp}} = \sum_c \tfrac{n_c}{n} D(\bar Y_c, \bar Y),\quad
       \widehat{\mathrm{Noise}} = H(\bar Y),

    with :math:`D(M_1, M_2) = \operatorname{tr}[M_1\log M_1] - \operatorname{tr}[M_1 \log M_2]`
    (zero eigenvalues of :math:`M_2` replaced by ``eps``). A cluster mean is the one place where
    the rank can reach :math:`d`: when a cluster's stacked factor rows outnumber :math:`d`, its
    mean is decomposed by a thin SVD of those rows (right singular vectors, at most
    :math:`d \times d`); otherwise through their Gram matrix. Per-question quantities never
    leave the :math:`m \times m` Gram space. When every cluster holds identical
    predictions, ``risk == calibration - sharpness + noise`` exactly.

    Parameters
    ----------
    clusters : int
        Number of clusters when ``labels`` is not given (clustered at ``temperature``).
    labels : array (n,), optional
        A fixed partition; pass the same labels across temperatures to hold the conditioning
        fixed (temperature scaling is injective, so it does not change what it conditions on).
    variant : ``"ours"`` or ``"authors"``
        Ours weights clusters by size (``weighting="size"``) and clusters on ``1 - similarity``
        (``distance="cosine"``); the authors' takes the unweighted mean over clusters
        (``"uniform"``) and clusters on the Euclidean distance between rows of the similarity
        matrix (``"rows"``, as in their Algorithm 1), re-clustering at each temperature when
        ``labels`` is not given. ``weighting`` and ``distance`` override one part.

    Returns
    -------
    dict
        ``calibration``, ``sharpness``, ``noise``, ``risk`` (mean log score),
        ``decomposed`` (= calibration - sharpness + noise), ``labels``, ``sizes``.
    """
    return calibration_curve(answers, targets, (temperature,), clusters=clusters, labels=labels,
                             method=method, eps=eps, variant=variant, weighting=weighting,
                             distance=distance)[0]


def calibration_curve(answers, targets, temperatures, *, clusters: int = 20, labels=None,
                      method: str = "average", eps: float = EPS, variant: str = "ours",
                      weighting: str | None = None, distance: str | None = None) -> list[dict]:
    """:func:`calibration_error` at each of ``temperatures``: a list of its results.

    What does not depend on the temperature is computed once: the Gram spectra of the
    answers, the targets' density matrices and, with fixed ``labels``, every cluster's target
    terms (its entropy and sharpness). Without ``labels`` the questions are re-clustered at
    each temperature, as :func:`calibration_error` does.
    """
    a = _answers(answers)
    n, _, d = a.shape
    y = _targets(targets, n, d)
    ts = [_temperature(t) for t in np.atleast_1d(np.asarray(temperatures, dtype=object))]
    e = _eps(eps)
    authors = _variant(variant) == "authors"
    weighting = weighting or ("uniform" if authors else "size")
    if weighting not in ("uniform", "size"):
        raise ValueError(f"weighting must be 'uniform' or 'size', got {weighting!r}")
    distance = _distance(distance or ("rows" if authors else "cosine"))
    if labels is None:
        k = _count(clusters, "clusters")
        if k > n:
            raise ValueError(f"clusters must be <= the number of questions ({n}), got {k}")
        method = _method(method)
        fixed = None
    else:
        fixed = np.asarray(labels)
        if fixed.shape != (n,) or not np.issubdtype(fixed.dtype, np.integer):
            raise ValueError(f"labels must be {n} integers (one cluster id per question)")
        _, fixed = np.unique(fixed, return_inverse=True)
    sp = _spectrum(a, y, vectors=True)
    # Sharpness and noise: all targets' density matrix.
    lam_all, uniq_all, coef_all = _rows_spectrum(y)
    neg_h_all = float(np.sum(lam_all * np.log(lam_all)))

    def target_terms(lab):
        """Per cluster of ``lab``: -H of its targets' density matrix, and its sharpness."""
        kk = lab.max() + 1
        neg_h, sharp = np.empty(kk), np.empty(kk)
        for c in range(kk):
            yc = y[lab == c]
            neg_h[c] = _neg_entropy_rows(yc)
            p = ((yc @ uniq_all.T) @ coef_all) ** 2  # (n_c, r)
            sharp[c] = neg_h[c] - float(np.mean(p @ np.log(lam_all)))
        return neg_h, sharp

    terms = target_terms(fixed) if fixed is not None else None
    out = []
    for t in ts:
        alpha = 1.0 / t
        lab = fixed if fixed is not None else _hcluster(_cosine(a, alpha), k, method, distance)
        neg_h, sharp = terms if fixed is not None else target_terms(lab)
        F, owner, lam, mu = _factors(a, alpha, sp)
        score = _score_from(sp["lam"], sp["proj"], alpha, e)
        row_lab = lab[owner]
        kk = lab.max() + 1
        sizes = np.bincount(lab, minlength=kk)
        cal = np.empty(kk)
        for c in range(kk):
            members = np.flatnonzero(lab == c)
            yc = y[members]
            fc = F[row_lab == c] / np.sqrt(len(members))
            if len(fc) <= d:  # Gram route: eigenpairs of fc fc^T lift to d-space
                w, v = np.linalg.eigh(fc @ fc.T)
                pos = w > ZERO
                w, v = w[pos], v[:, pos]
                p = (v.T @ (fc @ yc.T)) ** 2 / w[:, None]  # (r, n_c) squared projections
            else:  # the cluster mean may have full rank d: thin SVD of the factor rows
                _, sv, vt = np.linalg.svd(fc, full_matrices=False)
                w = sv * sv
                pos = w > ZERO
                w = w[pos]
                p = (vt[pos] @ yc.T) ** 2
            cross = np.log(w) @ p + np.log(e) * np.clip(1.0 - p.sum(0), 0.0, None)
            cal[c] = neg_h[c] - cross.mean()
        wts = sizes / n if weighting == "size" else np.full(kk, 1.0 / kk)
        calibration = float(wts @ cal)
        sharpness = float(wts @ sharp)
        noise = -neg_h_all
        out.append({
            "calibration": calibration,
            "sharpness": sharpness,
            "noise": noise,
            "risk": float(score.mean()),
            "decomposed": calibration - sharpness + noise,
            "labels": lab,
            "sizes": sizes,
        })
    return out


# --------------------------------------------------------------------------------------
# Reliability diagrams
# --------------------------------------------------------------------------------------


def _equal_mass(values: np.ndarray, bins: int) -> list[np.ndarray]:
    order = np.argsort(values, kind="stable")
    return np.array_split(order, bins)


def naive_reliability(answers, targets, temperature: float = 1.0, bins: int = 8) -> dict:
    r"""Reliability diagram for eigenvalue calibration as in the paper's Eq. 10: equal-mass
    bins of the predicted :math:`\lambda_{\max}`; per bin, the largest eigenvalue of the
    bin's target density matrix :math:`\frac{1}{n_b}\sum_{i\in b} y_i y_i^\top`.

    By the paper's Theorem 1 this target is *at most* the prediction even for a matrix-calibrated
    predictor, so this diagram can show a gap that is not miscalibration.

    Returns
    -------
    dict
        ``predicted`` (B,) mean predicted :math:`\lambda_{\max}` per bin, ``target`` (B,),
        ``count`` (B,), ``ece`` = :math:`\sum_b \frac{n_b}{n}|\mathrm{predicted}_b - \mathrm{target}_b|`,
        ``bins`` (list of index arrays).
    """
    a = _answers(answers)
    n, _, d = a.shape
    y = _targets(targets, n, d)
    t = _temperature(temperature)
    b = _count(bins, "bins")
    if b > n:
        raise ValueError(f"bins must be <= the number of questions ({n}), got {b}")
    top = _log_scaled(_spectrum(a)["lam"], 1.0 / t)[0][:, 0]
    groups = _equal_mass(top, b)
    pred = np.array([top[g].mean() for g in groups])
    targ = np.array([_lambda_max_rows(y[g]) for g in groups])
    count = np.array([len(g) for g in groups])
    return {"predicted": pred, "target": targ, "count": count,
            "ece": float(count @ np.abs(pred - targ) / n), "bins": groups}


def _quantile_bins(values: np.ndarray, bins: int) -> list[np.ndarray]:
    """The authors' bins: equal-mass edges from :func:`numpy.quantile`, duplicate edges merged
    with :func:`numpy.unique`, values assigned with :func:`numpy.digitize` on the inner edges
    (so tied values share a bin, and fewer than ``bins`` bins may remain)."""
    edges = np.unique(np.quantile(values, np.linspace(0.0, 1.0, bins + 1)))
    idx = np.digitize(values, edges[1:-1])
    return [np.flatnonzero(idx == b) for b in range(len(edges) - 1) if np.any(idx == b)]


def reliability(answers, targets, temperature: float = 1.0, bins: int = 8, clusters: int = 5, *,
                method: str = "average", weighting: str = "uniform", variant: str = "ours",
                binning: str | None = None, distance: str | None = None,
                cluster_on: str | None = None, min_cluster: int | None = None) -> dict:
    r"""Algorithm 1 of the paper: a reliability diagram for eigenvalues that conditions on the
    predicted density matrix.

    1. :math:`\lambda_{\max}` of every (scaled) prediction; ``bins`` equal-mass bins.
    2. In each bin, hierarchical clusters (``clusters`` of them) of the predicted matrices by
       their Frobenius cosine similarity (:func:`scipy.cluster.hierarchy.linkage`, ``method``).
    3. Per cluster, the largest eigenvalue of its targets' density matrix
       :math:`\lambda_{\max}(\frac{1}{n_c} Y_c^\top Y_c)`.
    4. Per bin: the mean predicted :math:`\lambda_{\max}`, and the average of the cluster
       targets (``weighting="uniform"``, as written in Algorithm 1, or ``"size"``, weighting each
       cluster by its number of questions).

    ``variant="ours"`` and ``variant="authors"`` differ in four places, each of which can be
    set on its own (``None`` follows the variant):

    ================ ===================================== ==========================================
    option           ours                                  authors'
    ================ ===================================== ==========================================
    ``binning``      ``"split"``: sorted, ``array_split``  ``"quantile"``: ``np.quantile`` edges,
                     (ties split by question order)        ``np.unique``, ``np.digitize`` (ties share)
    ``distance``     ``"cosine"``: ``1 - similarity``      ``"rows"``: Euclidean between rows of the
                                                           similarity matrix (``pdist``)
    ``cluster_on``   ``"scaled"`` matrices                 ``"unscaled"`` (T = 1) matrices
    ``min_cluster``  1 (singletons kept)                   2 (smaller clusters dropped)
    ================ ===================================== ==========================================

    With the authors' variant a bin may hold fewer questions than ``clusters`` (then it gets one
    cluster per question), and a bin whose clusters are all dropped has no target (NaN) and is
    left out of the ECE.

    Returns
    -------
    dict
        ``predicted`` (B,), ``target`` (B,), ``count`` (B,), ``ece`` (count-weighted mean
        absolute gap over bins with a target), ``cluster_targets`` (list of arrays),
        ``cluster_sizes`` (list of arrays, before dropping), ``within_cluster`` and
        ``within_bin`` (mean pairwise similarity of the matrices clustered, over distinct pairs
        sharing a cluster / a bin; the paper's Table 4), ``bins``.
    """
    return reliability_grid(answers, targets, temperature, (bins,), (clusters,), method=method,
                            weighting=weighting, variant=variant, binning=binning,
                            distance=distance, cluster_on=cluster_on,
                            min_cluster=min_cluster)[bins, clusters]


def reliability_grid(answers, targets, temperature: float = 1.0, bins=(8,), clusters=(5,), *,
                     method: str = "average", weighting: str = "uniform", variant: str = "ours",
                     binning: str | None = None, distance: str | None = None,
                     cluster_on: str | None = None, min_cluster: int | None = None) -> dict:
    """:func:`reliability` for every pair of ``bins`` and ``clusters``: ``{(B, C): result}``.

    Each bin's similarity matrix and linkage are computed once and cut at every ``C`` (the
    clustering of a bin does not depend on how many clusters are asked for), so a grid costs
    about one call per ``B``; each result is the one :func:`reliability` returns (it calls
    this function).
    """
    a = _answers(answers)
    n, m, d = a.shape
    y = _targets(targets, n, d)
    t = _temperature(temperature)
    bs = [_count(b, "bins") for b in np.atleast_1d(np.asarray(bins, dtype=object))]
    ks = [_count(k, "clusters") for k in np.atleast_1d(np.asarray(clusters, dtype=object))]
    method = _method(method)
    authors = _variant(variant) == "authors"
    binning = binning or ("quantile" if authors else "split")
    if binning not in ("split", "quantile"):
        raise ValueError(f"binning must be 'split' or 'quantile', got {binning!r}")
    distance = _distance(distance or ("rows" if authors else "cosine"))
    cluster_on = cluster_on or ("unscaled" if authors else "scaled")
    if cluster_on not in ("scaled", "unscaled"):
        raise ValueError(f"cluster_on must be 'scaled' or 'unscaled', got {cluster_on!r}")
    low = _count(min_cluster if min_cluster is not None else (2 if authors else 1), "min_cluster")
    if weighting not in ("uniform", "size"):
        raise ValueError(f"weighting must be 'uniform' or 'size', got {weighting!r}")
    for b in bs:
        if b > n:
            raise ValueError(f"bins must be <= the number of questions ({n}), got {b}")
        for k in ks:
            if binning == "split" and k > n // b:
                raise ValueError(f"clusters must be <= the smallest bin's {n // b} questions "
                                 f"(n={n}, bins={b}), got {k}")
    alpha = 1.0 / t
    top = _log_scaled(_spectrum(a)["lam"], alpha)[0][:, 0]
    out = {}
    for b in bs:
        groups = _equal_mass(top, b) if binning == "split" else _quantile_bins(top, b)
        per_k = {k: ([], [], [], [], [0.0, 0], [0.0, 0]) for k in ks}
        for g in groups:
            sim = _cosine(a[g], alpha if cluster_on == "scaled" else 1.0)
            iu = np.triu_indices(len(g), 1)
            tree = _Linkage(sim, method, distance)
            for k in ks:
                pred, targ, ctargets, csizes, pair_c, pair_b = per_k[k]
                lab = tree.cut(min(k, len(g)))
                same = lab[iu[0]] == lab[iu[1]]
                pair_b[0] += sim[iu].sum()
                pair_b[1] += len(iu[0])
                pair_c[0] += sim[iu][same].sum()
                pair_c[1] += int(same.sum())
                kk = lab.max() + 1
                tc = np.array([_lambda_max_rows(y[g][lab == c]) for c in range(kk)])
                sc = np.bincount(lab, minlength=kk)
                kept = sc >= low
                pred.append(top[g].mean())
                if not kept.any():
                    targ.append(np.nan)
                elif weighting == "uniform":
                    targ.append(tc[kept].mean())
                else:
                    targ.append(float(sc[kept] @ tc[kept] / sc[kept].sum()))
                ctargets.append(tc)
                csizes.append(sc)
        count = np.array([len(g) for g in groups])
        for k, (pred, targ, ctargets, csizes, pair_c, pair_b) in per_k.items():
            pred, targ = np.array(pred), np.array(targ)
            has = np.isfinite(targ)
            out[b, k] = {
                "predicted": pred, "target": targ, "count": count,
                "ece": float(count[has] @ np.abs(pred[has] - targ[has]) / count[has].sum()),
                "cluster_targets": ctargets, "cluster_sizes": csizes,
                "within_cluster": pair_c[0] / pair_c[1] if pair_c[1] else float("nan"),
                "within_bin": pair_b[0] / pair_b[1] if pair_b[1] else float("nan"),
                "bins": groups,
            }
    return out


# --------------------------------------------------------------------------------------
# The estimator of lambda_max from m samples
# --------------------------------------------------------------------------------------


def max_eigenvalue_subsample(answers, sizes, *, draws: int = 20, seed: int = 0) -> dict:
    r"""How :math:`\lambda_{\max}(\hat d_s(x))` estimated from ``s`` of the ``m`` answers
    behaves as ``s`` grows (the paper's Fig. 6): ``draws`` random subsets (without replacement)
    per question and size, eigenvalues of the ``s x s`` sub-Gram.

    Returns
    -------
    dict
        ``sizes``, ``mean`` (over questions and draws), ``std`` (over draws, averaged over
        questions), ``bias`` (mean minus the full-``m`` value, averaged over questions),
        ``reference`` (per-question :math:`\lambda_{\max}` from all ``m`` answers).
    """
    a = _answers(answers)
    n, m, d = a.shape
    ss = np.atleast_1d(np.asarray(sizes))
    if ss.ndim != 1 or not np.issubdtype(ss.dtype, np.integer) or ss.min() < 1 or ss.max() > m:
        raise ValueError(f"sizes must be integers in [1, m={m}], got {sizes!r}")
    r = _count(draws, "draws")
    rng = np.random.default_rng(seed)
    full = _unit_gram(a)
    reference = np.linalg.eigvalsh(full / m)[:, -1]
    mean, std, bias = [], [], []
    for size in ss:
        idx = np.argsort(rng.random((r, n, m)), axis=2)[:, :, :size]  # (r, n, s)
        est = np.empty((r, n))
        per = max(1, _CHUNK_BYTES // (8 * n * size * size))
        qi = np.arange(n)[None, :, None, None]
        for s0 in range(0, r, per):
            ii = idx[s0:s0 + per]
            sub = full[qi, ii[..., :, None], ii[..., None, :]]
            est[s0:s0 + per] = np.linalg.eigvalsh(sub / size)[..., -1]
        mean.append(est.mean())
        std.append(est.std(0, ddof=1).mean() if r > 1 else 0.0)
        bias.append((est.mean(0) - reference).mean())
    return {"sizes": ss, "mean": np.array(mean), "std": np.array(std), "bias": np.array(bias),
            "reference": reference}


# --------------------------------------------------------------------------------------
# Downstream: AUROC, and the two baselines
# --------------------------------------------------------------------------------------


def _auc_rows(scores: np.ndarray, correct: np.ndarray) -> np.ndarray:
    """Mann-Whitney AUROC per row (ties count one half), vectorised over rows."""
    r = rankdata(scores, axis=-1)
    pos = correct.sum(-1)
    neg = correct.shape[-1] - pos
    with np.errstate(invalid="ignore", divide="ignore"):
        return (np.sum(r * correct, axis=-1) - pos * (pos + 1) / 2) / (pos * neg)


def _scores_correct(scores, correct, name: str = "scores"):
    s = _checks.array(scores, name, ndim=1)
    c = np.asarray(correct)
    if c.shape != s.shape:
        raise ValueError(f"correct must have the same shape as {name} {s.shape}, got {c.shape}")
    if not np.all((c == 0) | (c == 1)):
        raise ValueError("correct must hold 0/1 (or booleans)")
    c = c.astype(float)
    if c.min() == c.max():
        raise ValueError("correct must contain both correct and incorrect answers for an AUROC")
    return s, c


def _level(level) -> float:
    try:
        v = float(level)
    except (TypeError, ValueError):
        raise ValueError(f"level must be a number in (0, 1), got {level!r}") from None
    if not 0 < v < 1:
        raise ValueError(f"level must lie strictly between 0 and 1, got {level!r}")
    return v


def auroc(scores, correct, *, bootstrap: int = 20, seed: int = 0, variant: str = "ours") -> dict:
    """AUROC of a confidence score for answer correctness, with bootstrap error bars.

    Higher ``scores`` must mean "more likely correct" (pass ``-entropy`` for an entropy).
    Agrees with :func:`sklearn.metrics.roc_auc_score`; the bootstrap resamples questions with
    replacement ``bootstrap`` times (at least 2: a standard deviation needs two draws).

    ``variant="ours"`` reports the full-sample AUROC and the bootstrap standard deviation
    (``ddof=1``); draws containing a single class have no AUROC and are skipped, and fewer than
    two usable draws is an error. ``variant="authors"`` reports the *mean* of the bootstrap
    AUROCs and, as ``se``, their standard deviation with ``ddof=1`` (pandas' default) divided
    by the number of draws (20 by default), which is what the authors' ± is; as in their code
    (:func:`sklearn.metrics.roc_auc_score` raises on one class), a draw with a single class
    is an error there, not skipped.

    Returns
    -------
    dict
        ``auroc``, ``se`` (standard deviation over bootstrap draws), ``draws``.
    """
    s, c = _scores_correct(scores, correct)
    nb = _count(bootstrap, "bootstrap", low=2)
    authors = _variant(variant) == "authors"
    value = float(_auc_rows(s, c))
    idx = np.random.default_rng(seed).integers(0, len(s), size=(nb, len(s)))
    draws = _auc_rows(s[idx], c[idx])
    usable = np.isfinite(draws)
    if authors:
        if not usable.all():
            raise ValueError(
                f"variant='authors': {int((~usable).sum())} of {nb} bootstrap draws hold a "
                "single class of correct, where the authors' AUROC is undefined; use "
                "variant='ours' (which skips them) or more questions")
        return {"auroc": float(draws.mean()), "se": float(draws.std(ddof=1) / nb),
                "draws": draws}
    draws = draws[usable]
    if len(draws) < 2:
        raise ValueError(
            f"only {len(draws)} of {nb} bootstrap draws hold both classes of correct; a "
            "standard deviation needs two: raise bootstrap or use more questions")
    return {"auroc": value, "se": float(draws.std(ddof=1)), "draws": draws}


def auroc_difference(first, second, correct, *, bootstrap: int = 1000, seed: int = 0,
                     level: float = 0.95) -> dict:
    r"""Paired bootstrap of the AUROC difference of two confidence scores on the same
    questions: :math:`\mathrm{AUROC}(\text{first}) - \mathrm{AUROC}(\text{second})`.

    Each draw resamples the questions with replacement once and computes both AUROCs on that
    same resample, so the spread is that of the *difference* (the two scores' errors are
    correlated; their separate spreads overstate it). Draws with a single class are skipped.

    Returns
    -------
    dict
        ``difference`` (full sample), ``low``, ``high`` (percentile interval at ``level``),
        ``se`` (standard deviation of the paired draws, ``ddof=1``), ``draws``.
    """
    a, c = _scores_correct(first, correct, "first")
    b, _ = _scores_correct(second, correct, "second")
    nb = _count(bootstrap, "bootstrap", low=2)
    lv = _level(level)
    idx = np.random.default_rng(seed).integers(0, len(a), size=(nb, len(a)))
    d = _auc_rows(a[idx], c[idx]) - _auc_rows(b[idx], c[idx])
    d = d[np.isfinite(d)]
    if len(d) < 2:
        raise ValueError(f"only {len(d)} of {nb} bootstrap draws hold both classes of correct")
    lo, hi = np.quantile(d, [(1 - lv) / 2, (1 + lv) / 2])
    return {"difference": float(_auc_rows(a, c) - _auc_rows(b, c)), "low": float(lo),
            "high": float(hi), "se": float(d.std(ddof=1)), "draws": d}


def _unit_gram(a: np.ndarray) -> np.ndarray:
    n, m, d = a.shape
    out = np.empty((n, m, m))
    step = _chunk(m, d)
    for s in range(0, n, step):
        e = a[s:s + step]
        e = e / np.linalg.norm(e, axis=2, keepdims=True)
        out[s:s + step] = e @ e.transpose(0, 2, 1)
    return out


def semantic_entropy(answers, threshold: float = 0.9) -> dict:
    r"""Discrete semantic entropy (Kuhn et al., 2023) with embedding equivalence.

    Two answers are taken to mean the same thing when the cosine similarity of their
    embeddings is at least ``threshold`` (our stand-in for bidirectional entailment); the
    semantic classes are the connected components of that relation within each question
    (:func:`scipy.sparse.csgraph.connected_components`), and

    .. math:: \mathrm{SE}(x) = -\sum_c p_c \log p_c, \qquad p_c = |c| / m.

    Returns
    -------
    dict
        ``entropy`` (n,), ``classes`` (n,) number of classes, ``largest`` (n,) the largest
        class's share (the confidence of Lamb et al., 2025).
    """
    a = _answers(answers)
    n, m, _ = a.shape
    try:
        th = float(threshold)
    except (TypeError, ValueError):
        raise ValueError(f"threshold must be a number in (-1, 1], got {threshold!r}") from None
    if not -1 < th <= 1:
        raise ValueError(f"threshold must lie in (-1, 1], got {threshold!r}")
    g = _unit_gram(a)
    q, i, j = np.nonzero(g >= th - 1e-12)
    adj = sparse.coo_matrix((np.ones(len(q)), (q * m + i, q * m + j)), shape=(n * m, n * m))
    _, comp = sparse.csgraph.connected_components(adj, directed=False)
    comp = comp.reshape(n, m)
    # Renumber components within each question: count members per (question, component).
    first = np.sort(comp, axis=1)
    new = np.concatenate([np.ones((n, 1), bool), first[:, 1:] != first[:, :-1]], axis=1)
    # class sizes: run lengths of the sorted component ids
    flat = first + (np.arange(n) * n * m)[:, None]
    _, counts = np.unique(flat, return_counts=True)
    owner = np.repeat(np.arange(n), new.sum(1))
    p = counts / m
    ent = -np.bincount(owner, weights=p * np.log(p), minlength=n)
    largest = np.zeros(n)
    np.maximum.at(largest, owner, p)
    return {"entropy": ent, "classes": new.sum(1), "largest": largest}


def kernel_language_entropy(answers, time: float | None = None, *,
                            variant: str = "ours") -> np.ndarray:
    r"""Kernel language entropy (Nikitin et al., 2024) with an embedding-similarity graph.

    Per question, the weighted graph on the ``m`` answers has weights
    :math:`W_{jk} = \max(0, \cos(e_j, e_k))` for :math:`j \neq k`; with the Laplacian
    :math:`L = \operatorname{diag}(W\mathbf 1) - W`, the heat kernel
    :math:`K = \exp(-tL)` is normalised to unit trace and its von Neumann entropy is returned:
    :math:`\mathrm{KLE} = -\sum_k \kappa_k \log \kappa_k` with
    :math:`\kappa = \operatorname{softmax}(-t\,\lambda(L))`. (The plain cosine kernel
    :math:`E E^\top / m` would give back :func:`entropy` exactly.)

    ``variant="ours"``: ``time`` defaults to 1 and the kernel is divided by its trace.
    ``variant="authors"``: ``time`` defaults to 0.4 and the kernel is normalised entrywise,
    :math:`K_{jk} / (\sqrt{K_{jj} K_{kk}}\, m)` (unit trace, but a different matrix unless the
    diagonal of :math:`K` is constant).
    """
    a = _answers(answers)
    authors = _variant(variant) == "authors"
    t = _temperature((0.4 if authors else 1.0) if time is None else time, "time")
    g = _unit_gram(a)
    m = g.shape[1]
    w = np.clip(g, 0.0, None)
    w[:, np.arange(m), np.arange(m)] = 0.0
    lap = -w
    lap[:, np.arange(m), np.arange(m)] = w.sum(2)
    if authors:
        lam, v = np.linalg.eigh(lap)
        k = np.einsum("qjk,qk,qlk->qjl", v, np.exp(-t * (lam - lam[:, :1])), v)
        dia = np.sqrt(np.einsum("qjj->qj", k))
        kappa = np.linalg.eigvalsh(k / (dia[:, :, None] * dia[:, None, :] * m))
        kappa = np.clip(kappa, 0.0, None)
        logk = np.log(np.where(kappa > 0, kappa, 1.0))
        return -np.sum(kappa * logk, axis=1)
    lam = np.linalg.eigvalsh(lap)
    logk = -t * lam - logsumexp(-t * lam, axis=1, keepdims=True)
    return -np.sum(np.exp(logk) * logk, axis=1)
