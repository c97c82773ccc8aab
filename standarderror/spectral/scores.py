"""Per-question quantities of the predicted density matrices and what is fitted from them:
eigenvalues, entropy, the matrix log score and risk, the risk curve over temperatures, the
fitted matrix temperature and its bootstrap interval, the share of a target outside the
answers' span and the share of a scaled spectrum in the null space; :class:`Spectrum`
streams the exact spectra of many questions."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from scipy import optimize

from .. import _checks
from ._gram import (
    EPS,
    _answers,
    _arithmetic,
    _count,
    _entropy_from,
    _eps,
    _level,
    _log_scaled,
    _spectrum,
    _targets,
    _temperature,
)
from .authors import _dense, _score_any

#: The authors' grid of temperatures for fitting T: 11 log-spaced values,
#: ``np.round([10**(i/10) for i in range(-3, 8)], 2)`` = 0.5, 0.63, 0.79, 1.0, 1.26, 1.58, 2.0,
#: 2.51, 3.16, 3.98, 5.01 (the paper's T = 2.51 lies on it).
AUTHORS_GRID = np.round([10 ** (i / 10) for i in range(-3, 8)], 2)


def eigenvalues(answers, temperature: float = 1.0, *, arithmetic: str = "exact") -> np.ndarray:
    r"""Eigenvalues of each predicted density matrix after matrix temperature scaling.

    .. math:: \mu_k = \lambda_k^{1/T} \Big/ \sum_l \lambda_l^{1/T}

    Parameters
    ----------
    answers : array (n, m, d)
        Answer embeddings; rows are unit-normalised inside.
    temperature : float
        :math:`T > 0`; ``1`` returns the plain eigenvalues.

    arithmetic : str
        ``"exact"`` (Gram space) or one of the authors' (see the module docstring): then all
        :math:`d` eigenvalues of the dense decomposition are scaled and renormalised.

    Returns
    -------
    ndarray (n, m), or (n, d) for the authors' arithmetics
        Descending; each row sums to one. Exactly, only the ``m`` eigenvalues that can be
        non-zero are returned (the other :math:`d - m` are exactly zero).
    """
    a = _answers(answers)
    t = _temperature(temperature)
    ar = _arithmetic(arithmetic)
    lam = _spectrum(a)["lam"] if ar == "exact" else _dense(a, None, ar)["lam"]
    mu, _ = _log_scaled(lam, 1.0 / t)
    return mu if ar == "exact" else -np.sort(-mu, axis=1)


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
    :func:`fit_spectral_temperature` when the answers do not fit in memory.

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
        a = _answers(answers, f"answers (chunk {k})", cache=False)
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


def fit_spectral_temperature(answers, targets, *, bounds=(0.05, 50.0), eps: float = EPS,
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


def _bootstrap_fits(answers, targets, *, bootstrap, seed, grid, eps, arithmetic):
    """(grid, argmin on all questions, argmin of each bootstrap draw) of the matrix log-score
    risk over ``grid``. The draws resample question indices with ``default_rng(seed)``, so two
    calls on as many questions with one seed resample the same questions (a paired bootstrap)."""
    a = _answers(answers)
    n, _, d = a.shape
    y = _targets(targets, n, d)
    e = _eps(eps)
    ar = _arithmetic(arithmetic)
    nb = _count(bootstrap, "bootstrap", low=2, high=_checks.MAX_DRAWS)
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
    return gr, float(gr[int(np.argmin(scores.mean(1)))]), best


def _quantiles(draws, lv: float) -> tuple[float, float]:
    lo, hi = np.quantile(draws, [(1 - lv) / 2, (1 + lv) / 2], method="inverted_cdf")
    return float(lo), float(hi)


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
    lv = _level(level)
    gr, t, best = _bootstrap_fits(answers, targets, bootstrap=bootstrap, seed=seed, grid=grid,
                                  eps=eps, arithmetic=arithmetic)
    lo, hi = _quantiles(best, lv)
    return {"temperature": t, "low": lo, "high": hi, "draws": best, "grid": gr,
            "at_edge": float(np.mean((best == gr.min()) | (best == gr.max())))}


def temperature_difference(first, first_targets, second, second_targets, *,
                           bootstrap: int = 1000, seed: int = 0, level: float = 0.95,
                           grid=None, eps: float = EPS, arithmetic: str = "exact") -> dict:
    r"""Paired bootstrap interval of :math:`T_1 - T_2`, the difference between the matrix
    temperatures fitted to two predictors of the same questions (two embedders, two ``m``).

    Each draw resamples the questions once and refits both on that resample, as
    :func:`temperature_interval` does for each (the same ``seed`` gives the same draws), so the
    interval is of the difference on the same questions, not of two independent fits.

    Returns
    -------
    dict
        ``difference`` (of the grid argmins on all questions), ``low``, ``high``, ``draws``
        (the difference in each draw), ``share_at_most_zero`` (share of draws with
        :math:`T_1 \le T_2`).
    """
    lv = _level(level)
    n1, n2 = _answers(first, "first").shape[0], _answers(second, "second").shape[0]
    if n1 != n2:
        raise ValueError(f"first and second must answer the same questions, got {n1} and {n2}")
    kw = dict(bootstrap=bootstrap, seed=seed, grid=grid, eps=eps, arithmetic=arithmetic)
    _, t1, b1 = _bootstrap_fits(first, first_targets, **kw)
    _, t2, b2 = _bootstrap_fits(second, second_targets, **kw)
    draws = b1 - b2
    lo, hi = _quantiles(draws, lv)
    return {"difference": t1 - t2, "low": lo, "high": hi, "draws": draws,
            "share_at_most_zero": float(np.mean(draws <= 0))}


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


def _tail(level: float) -> float:
    """The lower tail of a central interval at ``level``, rounded so that 0.95 gives 0.025."""
    if not 0 < level < 1:
        raise ValueError(f"level must lie in (0, 1), got {level!r}")
    return round((1 - level) / 2, 12)


@dataclass(frozen=True)
class TemperatureEffect:
    """A matrix temperature fitted on one split (``fit_*``) and applied to another.

    Number fields: the fitted ``t_fit``; on the fitting split the risk at T = 1 and at the fit
    and the average entropy at the fit; on the applied split the risk at T = 1 and at the fit,
    their paired difference per question (mean, and a central bootstrap interval over
    questions), and the average entropy at T = 1 and at the fit. ``fit`` is
    :func:`fit_spectral_temperature`'s dict."""

    t_fit: float
    risk_dev_1: float
    risk_dev_fit: float
    entropy_dev_fit: float
    risk_test_1: float
    risk_test_fit: float
    d_risk_test: float
    d_risk_lo: float
    d_risk_hi: float
    entropy_test_1: float
    entropy_test_fit: float
    fit: dict = field(repr=False)


def temperature_effect(fit_answers, fit_targets, answers, targets, *, seed: int = 0,
                       bootstrap: int = 1000, level: float = 0.95) -> TemperatureEffect:
    """Fit the matrix temperature on ``fit_answers`` and measure what it changes on
    ``answers``: the risk at T = 1 and at the fit, paired per question, with a bootstrap
    interval of the mean change (``bootstrap`` resamples of the questions drawn with
    ``default_rng(seed)``), and the average entropy."""
    fit = fit_spectral_temperature(fit_answers, fit_targets)
    t = fit["temperature"]
    scores = np.array([log_score(answers, targets, s) for s in (1.0, t)])
    change = scores[1] - scores[0]  # per question: fitted T minus T = 1
    nb = _count(bootstrap, "bootstrap", low=2, high=_checks.MAX_DRAWS)
    boot = np.random.default_rng(seed).integers(0, len(change), size=(nb, len(change)))
    means = change[boot].mean(1)
    q = _tail(level)
    return TemperatureEffect(
        t_fit=t, risk_dev_1=fit["risk_at_one"], risk_dev_fit=fit["risk"],
        entropy_dev_fit=fit["entropy"], risk_test_1=scores[0].mean(),
        risk_test_fit=scores[1].mean(), d_risk_test=change.mean(),
        d_risk_lo=np.quantile(means, q), d_risk_hi=np.quantile(means, 1 - q),
        entropy_test_1=entropy(answers).mean(), entropy_test_fit=entropy(answers, t).mean(),
        fit=fit)


@dataclass(frozen=True)
class ConstantPredictor:
    """The constant predictor built from ``n`` targets (each of the ``n`` questions predicted
    by the density matrix of all the targets), scored on those targets: ``const_argmin_t`` is
    the temperature of ``temperatures`` with the lowest risk; ``curve`` is
    :func:`risk_curve`'s dict."""

    const_argmin_t: float
    curve: dict = field(repr=False)


def constant_predictor(targets, temperatures) -> ConstantPredictor:
    """The risk curve of the constant predictor built from ``targets`` (calibrated on them by
    construction, so its risk is lowest at T = 1 and equals its average entropy there)."""
    y = np.asarray(targets)
    n, d = y.shape
    curve = risk_curve(np.broadcast_to(y, (n, n, d)), y, temperatures)
    ts = np.asarray(temperatures)
    return ConstantPredictor(const_argmin_t=ts[np.argmin(curve["risk"])], curve=curve)
