r"""Temperature scaling: softmax at a temperature in log space, the confidence scores, and the
fitted temperature.

.. math::

    \log p_T(k \mid x) = \frac{z_k}{T} - \log \sum_j e^{z_j / T}.

:func:`scale` is the one softmax at :math:`T` of the calibration modules;
:func:`fit_temperature` the maximum-likelihood temperature of one set of predictions and
:func:`fitted_temperature` its resampled form over sequences. Predictions too many to hold at
once (:mod:`standarderror.experiments.measure` streams them) are fitted on a fixed grid of
temperatures instead: :func:`grid_nll_sums` gives one block of rows' summed NLL at every grid
temperature (blocks add up), and :func:`fit_temperature_on_grid` the minimum of the grid,
refined by a parabola in :math:`\log T`.
"""

from __future__ import annotations

import warnings

import numpy as np
from scipy import optimize

from standarderror import _checks
from standarderror._parallel import WORKERS
from standarderror.uncertainty._inputs import (
    _log_of,
    _sequence_index,
)

#: The three confidence scores, in the order they are reported.
CONFIDENCE_SCORES = ("max probability", "entropy", "margin")


def scale(logp_or_logits, temperature) -> np.ndarray:
    r"""Temperature-scale logits (or log-probabilities) and return log-probabilities.

    .. math::

        \log p_T(k) = \frac{z_k - z_{\max}}{T}
        - \log\Bigl(1 + \sum_{j \ne \arg\max} e^{(z_j - z_{\max})/T}\Bigr)

    Shifting by the row maximum before dividing keeps every exponent <= 0, and the top entry
    is excluded from the sum so that ``log1p`` keeps the top log-probability accurate when the
    rivals are tiny (a cold temperature); no probability is ever floored. Log-probabilities
    are valid input because a per-row constant cancels in the softmax.

    Parameters
    ----------
    logp_or_logits : array_like, shape (..., classes)
        Logits or log-probabilities; ``-inf`` (a zero probability) is allowed, NaN and
        ``+inf`` are not.
    temperature : float
        :math:`T > 0`.

    Returns
    -------
    numpy.ndarray
        Float64 log-probabilities of the same shape.
    """
    z = _checks.log_array(logp_or_logits, "logp_or_logits")
    t = _checks.temperature(temperature)
    shape = z.shape
    return _scale(z.reshape(-1, shape[-1]), t).reshape(shape)


def _scale(z: np.ndarray, t: float) -> np.ndarray:
    """:func:`scale` on validated 2-D input (hot loops skip re-validation)."""
    rows = np.arange(z.shape[0])
    top = z.argmax(axis=1)
    with np.errstate(over="ignore"):  # a gap or ratio past float64's range is -inf: p = 0
        shifted = (z - z[rows, top][:, None]) / t
    e = np.exp(shifted)
    e[rows, top] = 0.0
    return shifted - np.log1p(e.sum(axis=1))[:, None]


def confidence_scores(logp, temperature=1.0) -> dict:
    r"""The three confidence scores of each row at temperature :math:`T`; higher is more confident.

    * ``"max probability"``: :math:`\log \max_k p_T(k)`, the top probability on a log scale.
      The log is a strictly increasing map, so every ranking (abstention, Kendall's tau,
      the top 1%) is the ranking by the top probability itself; on the log scale it keeps
      the distinctions that ``exp`` rounds to 1.0 near certainty.
    * ``"entropy"``: the negative entropy :math:`\sum_k p_T(k) \log p_T(k)` (so that higher
      is more confident), with :math:`0 \log 0 = 0`.
    * ``"margin"``: :math:`(\log p_{(1)} - \log p_{(2)})/T = (z_{(1)} - z_{(2)})/T`, the gap
      between the two largest log-probabilities (equivalently logits) of the scaled
      distribution. Temperature divides it by :math:`T` in every row, so its order across
      rows cannot change.

    **Why the margin is computed as gap / T, in extended precision.** Two routes give the
    same number in real arithmetic: the gap of the scaled log-probabilities
    (``confidence_scores(scale(logp, T))``), or the unscaled gap divided by :math:`T`. In
    float64 neither keeps the order exactly. The first subtracts a per-row normaliser, adding
    rounding noise of about 1e-16 to each margin; the second rounds :math:`g/T` and can merge
    two gaps one unit in the last place apart into a tie. A float32 model produces many
    margins that are exactly equal or one ulp apart (its logit gaps live on a coarse grid),
    and those rounding effects reorder them and move the AURC in the eighth decimal. So the
    gap is taken from the unscaled input once and divided by :math:`T` in ``numpy.longdouble``
    (64-bit mantissa on x86-64 Linux), where distinct float64 gaps stay distinct and equal
    ones stay equal; the margin array has that dtype. Where ``longdouble`` is plain double
    (Windows, macOS on Apple silicon) the order is exact only up to such merges.

    Parameters
    ----------
    logp : array_like, shape (rows, classes)
        Normalised log-probabilities (rows of ``exp(logp)`` sum to one), e.g. from :func:`scale`.
    temperature : float
        :math:`T > 0`; the scores are those of ``scale(logp, T)``.

    Returns
    -------
    dict
        ``{"max probability": ..., "entropy": ..., "margin": ...}``, one score per row
        (float64; the margin ``numpy.longdouble``).
    """
    return _scores(_checks.normalised_logp(logp), _checks.temperature(temperature))


def _scores(logp: np.ndarray, t: float = 1.0, which=CONFIDENCE_SCORES) -> dict:
    """:func:`confidence_scores` on validated input (only the scores in ``which``)."""
    out = {}
    if "margin" in which:
        two = np.partition(logp, -2, axis=1)[:, -2:]
        out["margin"] = (two[:, 1] - two[:, 0]).astype(np.longdouble) / np.longdouble(t)
    if "entropy" in which:
        lt = logp if t == 1.0 else _scale(logp, t)
        p = np.exp(lt)
        plogp = np.where(p > 0, p * np.where(np.isfinite(lt), lt, 0.0), 0.0)
        out["entropy"] = plogp.sum(axis=1)
        out["max probability"] = lt.max(axis=1)
    elif "max probability" in which:
        if t == 1.0:
            out["max probability"] = logp.max(axis=1)
        else:  # the top log-probability of scale(logp, t) without the full array
            z = logp - logp.max(axis=1, keepdims=True)
            e = np.exp(z / t)
            e[np.arange(z.shape[0]), logp.argmax(axis=1)] = 0.0
            out["max probability"] = -np.log1p(e.sum(axis=1))
    return {k: out[k] for k in CONFIDENCE_SCORES if k in which}


#: Threads that share an NLL evaluation's rows, and the entries below which one thread does
#: all of them. Every row is computed whole by one thread and the mean is taken over all rows
#: at once, so the value does not depend on either number (tested).
_WORKERS = WORKERS
_ENTRIES_PER_THREAD = 1 << 17
_POOL: list = []


def _pool():
    if not _POOL:
        from concurrent.futures import ThreadPoolExecutor

        _POOL.append(ThreadPoolExecutor(_WORKERS, thread_name_prefix="nll"))
    return _POOL[0]


def _nll_curve(logp: np.ndarray, y: np.ndarray):
    r"""NLL as a function of T: :math:`\frac1n\sum_i \log\sum_j e^{d_{ij}/T} - d_{iy_i}/T`,
    with :math:`d = z - z_{\max}` computed once (every exponent stays <= 0)."""
    d = logp - logp.max(axis=1, keepdims=True)
    dy = d[np.arange(y.size), y].mean()
    buf = np.empty_like(d)  # one work array for every evaluation (the optimiser makes ~25)
    parts = min(_WORKERS, max(1, d.size // _ENTRIES_PER_THREAD))
    cut = np.linspace(0, len(d), parts + 1).astype(int)
    blocks = [slice(a, b) for a, b in zip(cut[:-1], cut[1:])]

    def f(t: float) -> float:
        inv = 1.0 / t

        def logsum(rows):  # each row's log-sum-exp: rows are independent
            b = buf[rows]
            np.multiply(d[rows], inv, out=b)
            np.exp(b, out=b)
            return np.log(b.sum(axis=1))

        per_row = logsum(blocks[0]) if parts == 1 else np.concatenate(
            list(_pool().map(logsum, blocks)))
        return float(per_row.mean() - dy / t)

    return f


class TemperatureAtBoundWarning(RuntimeWarning):
    """A fitted temperature sits at the edge of its search interval: the NLL keeps falling
    beyond it (separable data drives :math:`T \\to 0`; a label the model rules out drives
    :math:`T \\to \\infty`), so the reported value is the bound, not an optimum."""


def _fit_on(logp: np.ndarray, y: np.ndarray, lo: float, hi: float, what: str) -> float:
    """The bounded NLL fit on validated log-probabilities or logits; warns at a bound."""
    f = _nll_curve(logp, y)
    res = optimize.minimize_scalar(f, bounds=(lo, hi), method="bounded", options={"xatol": 1e-5})
    t = float(res.x)
    at_bound = min(t - lo, hi - t) < 1e-3 * t
    if not at_bound:  # a curve flat to rounding towards a bound (separable data) ends anywhere
        for b in (lo, hi):
            if f(b) <= f(t):
                t, at_bound = b, True
                break
    if at_bound:
        warnings.warn(
            f"{what}: the fitted temperature {t:.4g} is at the edge of bounds=({lo:g}, {hi:g}); "
            "the NLL keeps falling beyond it, so this is the bound, not an optimum (widen "
            "bounds, or check for separable data or a ruled-out true label)",
            TemperatureAtBoundWarning, stacklevel=3)
    return t


def _bounds(bounds) -> tuple[float, float]:
    try:
        lo, hi = bounds
    except (TypeError, ValueError):
        raise ValueError(f"bounds must be a pair (low, high), got {bounds!r}") from None
    lo, hi = _checks.temperature(lo, "bounds"), _checks.temperature(hi, "bounds")
    if not lo < hi:
        raise ValueError(f"bounds must be increasing, got {bounds!r}")
    return lo, hi


def fit_temperature(logits, y, *, bounds=(0.05, 20.0)) -> float:
    r"""The maximum-likelihood temperature of logits (or log-probabilities) on labelled rows.

    :math:`\hat T = \arg\min_T -\frac{1}{n}\sum_i \log \mathrm{softmax}(z_i / T)_{y_i}`,
    by ``scipy.optimize.minimize_scalar(method="bounded")`` over ``bounds``. The NLL is computed
    from the logits directly in log space (never through probabilities), so a true label whose
    softmax underflows to zero still counts with its finite log-probability. Rows are treated
    as independent; :func:`fitted_temperature` adds the resampling over sequences.

    Warns
    -----
    TemperatureAtBoundWarning
        When the fit lands on a bound (e.g. 0.05 on separable data): that value is not an
        optimum.
    """
    z = _checks.log_array(logits, "logits")
    if z.ndim != 2:
        raise ValueError(f"logits must have 2 dimensions (rows x classes), got shape {z.shape}")
    y = _checks.labels(y, z.shape[1], z.shape[0])
    _ruled_out(z, y, "logits")
    lo, hi = _bounds(bounds)
    return _fit_on(z, y, lo, hi, "fit_temperature")


def grid_nll_sums(logits, y, grid) -> np.ndarray:
    r"""The summed NLL of labelled rows at every temperature of ``grid``:
    :math:`\sum_i \log \sum_j e^{d_{ij}/T} - d_{iy_i}/T` with :math:`d = z - z_{\max}`, one
    float per temperature.

    Sums rather than means, so that the sums of blocks of rows streamed one after another add
    up to the sums of all of them (divide by the number of rows at the end); with
    :func:`fit_temperature_on_grid` this is the fit of predictions too many to hold at once,
    which :func:`fit_temperature` needs in memory.
    """
    z = _checks.log_array(logits, "logits")
    if z.ndim != 2:
        raise ValueError(f"logits must have 2 dimensions (rows x classes), got shape {z.shape}")
    y = _checks.labels(y, z.shape[1], z.shape[0])
    grid = [_checks.temperature(t, "grid") for t in np.atleast_1d(np.asarray(grid, dtype=float))]
    d = z - z.max(axis=1, keepdims=True)
    dy = d[np.arange(y.size), y]
    return np.array([float((np.log(np.exp(d / t).sum(axis=1)) - dy / t).sum()) for t in grid])


def fit_temperature_on_grid(grid, nll) -> dict:
    r"""The temperature that minimises an NLL known on a grid of temperatures only: the grid's
    minimum, refined by the vertex of the parabola through it and its two neighbours in
    :math:`\log T` (the grid point itself where that parabola opens downwards).

    ``grid`` is an increasing array of temperatures, ``nll`` the mean NLL at each (for
    example :func:`grid_nll_sums` over every row, divided by the number of rows). Returns
    ``temperature``, ``nll`` (the parabola's value there) and ``at_bound``: True when the
    minimum is an end of the grid, which then is no optimum (the NLL may keep falling beyond
    it).
    """
    grid = np.asarray(grid, dtype=float)
    nll = np.asarray(nll, dtype=float)
    if grid.ndim != 1 or len(grid) < 3 or nll.shape != grid.shape:
        raise ValueError(f"grid and nll must be 1-D arrays of the same length >= 3, got shapes "
                         f"{grid.shape} and {nll.shape}")
    if not (np.all(np.isfinite(grid)) and grid[0] > 0 and np.all(np.diff(grid) > 0)):
        raise ValueError("grid must hold increasing finite temperatures > 0")
    if not np.all(np.isfinite(nll)):
        raise ValueError("nll must be finite at every grid temperature")
    i = int(np.argmin(nll))
    x = np.log(grid)
    if 0 < i < len(x) - 1:
        a, b, c = np.polyfit(x[i - 1:i + 2], nll[i - 1:i + 2], 2)
        t = float(np.exp(-b / (2 * a))) if a > 0 else float(grid[i])
        return {"temperature": t, "nll": float(np.polyval([a, b, c], np.log(t))),
                "at_bound": False}
    return {"temperature": float(grid[i]), "nll": float(nll[i]), "at_bound": True}


def _ruled_out(logp: np.ndarray, y: np.ndarray, name: str) -> None:
    bad = ~np.isfinite(logp[np.arange(y.size), y])
    if bad.any():
        raise ValueError(
            f"{name} gives {int(bad.sum())} true label(s) probability zero (log -inf), first at row "
            f"{int(np.flatnonzero(bad)[0])}: the NLL is infinite at every temperature. Pass "
            "log-probabilities or logits computed in log space (log_softmax), not probabilities "
            "that underflowed")


def fitted_temperature(p, y, sequence, halves: int = 40, seed: int = 0,
                       bounds=(0.05, 20.0)) -> dict:
    r"""Temperature scaling as it is used: :math:`T` fitted by minimising NLL on held-out data.

    Each of ``halves`` fits uses a random half of the *sequences* (all predictions of the
    chosen windows), minimising :math:`\mathrm{NLL}(T)` with
    ``scipy.optimize.minimize_scalar(method="bounded")`` over ``bounds`` (as
    :func:`fit_temperature` does on one set of rows).

    Raises
    ------
    ValueError
        If a true label has probability exactly zero (its NLL is infinite at every T; pass
        logits to :func:`fit_temperature` instead).

    Warns
    -----
    TemperatureAtBoundWarning
        When a fit lands on a bound.

    Returns
    -------
    dict
        ``mean``, ``low`` (min) and ``high`` (max) of the fitted temperatures, ``values``
        (one per half), ``all`` (the fit on every row).
    """
    logp = _log_of(p)
    n = logp.shape[0]
    y = _checks.labels(y, logp.shape[1], n)
    seq_idx, n_seq = _sequence_index(sequence, n)
    halves = _checks.draws(halves, "halves")
    lo, hi = _bounds(bounds)
    _ruled_out(logp, y, "p")
    rng = np.random.default_rng(seed)

    def fit(rows):
        return _fit_on(logp[rows], y[rows], lo, hi, "fitted_temperature")

    values = []
    for _ in range(halves):
        chosen = rng.permutation(n_seq)[: n_seq // 2]
        values.append(fit(np.isin(seq_idx, chosen)))
    values = np.array(values)
    return {"mean": float(values.mean()), "low": float(values.min()),
            "high": float(values.max()), "values": values, "all": fit(np.ones(n, bool))}
