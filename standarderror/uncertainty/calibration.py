r"""Calibration, temperature scaling, and what temperature does to abstention.

Temperature scaling divides every logit by one positive number :math:`T` before the softmax,

.. math::

    \log p_T(k \mid x) = \frac{z_k}{T} - \log \sum_j e^{z_j / T}.

Within one prediction this is a strictly increasing map of the logits, so the predicted
label (the argmax) cannot move and accuracy is unchanged at every :math:`T`. Between
predictions nothing is guaranteed: a confidence score such as the top probability or the
entropy can change its *order across rows*, and anything that sorts predictions by
confidence (abstention, review queues) sees a different queue. The logit margin
:math:`z_{(1)} - z_{(2)}` is divided by :math:`T` in every row, so its order is invariant.

Everything here works in log space. Probabilities given as input are turned into
log-probabilities once (``np.log(p)``; zeros become ``-inf``, which the functions handle) and
never floored, so the invariances above hold exactly in floating point, not approximately.

Main entry points (the API of Episode 3):

* :func:`temperature_table` and :func:`reordering` -- accuracy, NLL, ECE and the
  confidence order across temperatures, on held-out predictions of the committed model;
* :func:`swap_pair` -- two constructed predictions whose confidence order flips with T;
* :func:`abstention`, :func:`fitted_temperature`, :func:`best_temperature` -- the
  risk-coverage consequences, with a sequence-level bootstrap;
* :func:`shared_shape` -- a control in which temperature cannot reorder anything.

Building blocks: :func:`scale`, :func:`confidence_scores`, :func:`ece`, :func:`nll`,
:func:`brier`, :func:`risk_coverage`, :func:`aurc`, :func:`kendall_tau`.
"""

from __future__ import annotations

import warnings

import numpy as np
from scipy import optimize

from standarderror import _checks

#: Temperatures of the temperature table (Episode 3).
TEMPERATURES = (0.5, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0)
#: Temperatures of the abstention table (Episode 3).
ABSTENTION_TEMPERATURES = (0.5, 1.0, 1.25, 1.5, 2.0, 3.0)
#: The grid searched by :func:`best_temperature`: 0.2, 0.3, ..., 3.0 (29 points).
GRID = np.round(np.arange(2, 31) / 10, 1)
#: The three confidence scores, in the order they are reported.
SCORES = ("max probability", "entropy", "margin")


# --------------------------------------------------------------------------------------
# Validation helpers (local: log-probabilities may legitimately hold -inf)
# --------------------------------------------------------------------------------------


# Shared with binning, training and coverage: :func:`standarderror._checks.log_array` and
# :func:`standarderror._checks.log_probabilities` (the local names are kept for this module).
_log_array = _checks.log_array
_normalised_logp = _checks.log_probabilities
normalised_logp = _checks.log_probabilities


def _log_of(p, name: str = "p") -> np.ndarray:
    """Validate probabilities and take their logarithm once (zeros become -inf; no floor)."""
    p = _checks.probabilities(p, name)
    with np.errstate(divide="ignore"):
        return np.log(p)


def _correct(correct, name: str = "correct") -> np.ndarray:
    """A 1-D boolean array (bools or 0/1 values)."""
    a = _checks.real(correct, name)
    if a.ndim != 1 or a.size == 0:
        raise ValueError(f"{name} must be a non-empty one-dimensional array, got shape {a.shape}")
    if a.dtype == bool:
        return a
    a = _checks.array(a, name, ndim=1)
    if not np.isin(a, (0, 1)).all():
        raise ValueError(f"{name} must hold booleans or 0/1 values")
    return a.astype(bool)


def _score(score, name: str = "score") -> np.ndarray:
    """A 1-D float array without NaN (infinite scores are allowed: they sort first or last)."""
    a = _checks.real(score, name)
    if a.dtype.kind != "f":  # keep float64 or longdouble as given
        a = a.astype(float)
    if a.ndim != 1 or a.size == 0:
        raise ValueError(f"{name} must be a non-empty one-dimensional array, got shape {a.shape}")
    if np.isnan(a).any():
        raise ValueError(f"{name} contains NaN; a confidence score must be comparable")
    return a


def _temperatures(ts, name: str = "temperatures") -> tuple[float, ...]:
    try:
        values = tuple(ts)
    except TypeError:
        raise ValueError(f"{name} must be a sequence of temperatures, got {ts!r}") from None
    if not values:
        raise ValueError(f"{name} is empty; pass at least one temperature")
    return tuple(_checks.temperature(t, name) for t in values)


def _sequence_index(sequence, rows: int, name: str = "sequence") -> tuple[np.ndarray, int]:
    """Dense 0..S-1 ids of the sequences (windows) rows belong to; needs S >= 2."""
    s = np.asarray(sequence)
    if s.dtype.kind not in "biuf":
        s = _checks.real(s, name) if s.dtype.kind in "cO" else s  # ids may be strings
    if s.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {s.shape}")
    if s.shape[0] != rows:
        raise ValueError(f"{name} has {s.shape[0]} entries but there are {rows} rows; "
                         "pass one sequence id per prediction")
    if s.dtype.kind == "f" and np.isnan(s).any():
        raise ValueError(f"{name} contains NaN; pass an integer window id per row")
    _, idx = np.unique(s, return_inverse=True)
    count = int(idx.max()) + 1
    if count < 2:
        raise ValueError(f"{name} holds {count} distinct sequence; the bootstrap resamples whole "
                         "sequences and needs at least two")
    return idx.reshape(-1), count


# --------------------------------------------------------------------------------------
# Building blocks
# --------------------------------------------------------------------------------------


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
    z = _log_array(logp_or_logits, "logp_or_logits")
    t = _checks.temperature(temperature)
    shape = z.shape
    return _scale(z.reshape(-1, shape[-1]), t).reshape(shape)


def _scale(z: np.ndarray, t: float) -> np.ndarray:
    """:func:`scale` on validated 2-D input (hot loops skip re-validation)."""
    rows = np.arange(z.shape[0])
    top = z.argmax(axis=1)
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
    return _scores(_normalised_logp(logp), _checks.temperature(temperature))


def _scores(logp: np.ndarray, t: float = 1.0, which=SCORES) -> dict:
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
    return {k: out[k] for k in SCORES if k in which}


def ece(confidence, correct, bins: int = 15, adaptive: bool = False) -> float:
    r"""Expected calibration error.

    .. math::

        \mathrm{ECE} = \sum_{b=1}^{B} \frac{n_b}{n}\,\bigl|\mathrm{acc}_b - \mathrm{conf}_b\bigr|

    With ``adaptive=False`` (Guo et al., 2017) bin :math:`b` holds the confidences in
    :math:`(e_{b-1}, e_b]` with edges ``numpy.linspace(0, 1, B + 1)``, the first bin also
    holding exactly 0. With ``adaptive=True``
    the bins hold equal numbers of predictions: rows are sorted by confidence and split into
    ``bins`` consecutive groups whose sizes differ by at most one (``numpy.array_split``),
    except that every copy of a tied confidence joins the bin of its first copy, so the result
    does not depend on the order of the rows. Empty bins contribute nothing.

    Parameters
    ----------
    confidence : array_like, shape (rows,)
        Confidence of the predicted label, in [0, 1].
    correct : array_like of bool, shape (rows,)
        Whether each prediction was right.
    bins : int
        Number of bins :math:`B`.
    adaptive : bool
        Equal-mass bins instead of equal-width bins.

    Returns
    -------
    float
    """
    conf = _checks.array(confidence, "confidence", ndim=1)
    ok = _correct(correct)
    _checks.same_length(confidence=conf, correct=ok)
    bins = _checks.positive_int(bins, "bins")
    if conf.min() < 0 or conf.max() > 1:
        raise ValueError(f"confidence must lie in [0, 1]; got [{conf.min():.3g}, {conf.max():.3g}]")
    which = _bins(conf, bins, adaptive)
    gap = np.bincount(which, weights=conf - ok, minlength=bins)
    return float(np.abs(gap).sum() / conf.size)


def bin_index(confidence, bins: int = 15, adaptive: bool = False) -> np.ndarray:
    r"""The bin :func:`ece` puts every confidence in (0-based); rows of a 2-D array are binned
    independently.

    Equal width (``adaptive=False``): bin :math:`b` holds :math:`(e_b, e_{b+1}]` with edges
    ``numpy.linspace(0, 1, B + 1)``, the first bin also holding 0. (Comparing with the stored
    edges, not computing ``ceil(c * B)``, keeps a confidence such as 0.4 with B = 35 in the bin
    whose upper edge it is.) Equal mass (``adaptive=True``): values sorted by confidence
    are cut into ``bins`` consecutive groups whose sizes differ by at most one, larger groups
    first (``numpy.array_split``); all copies of a tied value then join the bin of the first
    copy, so the bins do not depend on the order of the rows (a bin may grow, or stay empty).

    Parameters
    ----------
    confidence : array_like, shape (rows,) or (draws, rows)
        Confidences in [0, 1].
    bins : int
        Number of bins :math:`B`.
    adaptive : bool
        Equal-mass bins instead of equal-width bins.
    """
    c = _checks.array(confidence, "confidence")
    if c.ndim not in (1, 2):
        raise ValueError(f"confidence must be one- or two-dimensional (draws x rows), got shape {c.shape}")
    if c.min() < 0 or c.max() > 1:
        raise ValueError(f"confidence must lie in [0, 1]; got [{c.min():.3g}, {c.max():.3g}]")
    return _bins(c, _checks.positive_int(bins, "bins"), adaptive)


def _bins(c: np.ndarray, bins: int, adaptive: bool) -> np.ndarray:
    """:func:`bin_index` on validated input: the one binning rule of the package."""
    if not adaptive:
        edges = np.linspace(0.0, 1.0, bins + 1)
        return np.clip(np.searchsorted(edges, c, side="left") - 1, 0, bins - 1)
    c2 = np.atleast_2d(c)
    n = c2.shape[1]
    sizes = np.array([len(a) for a in np.array_split(np.arange(n), bins)])
    slot = np.repeat(np.arange(bins), sizes)  # the bin of each position in sorted order
    order = np.argsort(c2, axis=1, kind="stable")
    ranked = np.take_along_axis(c2, order, axis=1)
    # every copy of a tied value goes to the bin of its first copy (row order cannot matter)
    first = np.zeros(c2.shape, dtype=np.int64)
    np.copyto(first[:, 1:], np.arange(1, n), where=ranked[:, 1:] != ranked[:, :-1])
    np.maximum.accumulate(first, axis=1, out=first)
    which = np.empty(c2.shape, dtype=np.int64)
    np.put_along_axis(which, order, slot[first], axis=1)
    return which.reshape(c.shape)


def nll(p, y) -> float:
    r"""Mean negative log-likelihood of the true labels, :math:`-\frac1n\sum_i \log p_i(y_i)`.

    No floor: a zero probability on a true label gives ``inf``, honestly.

    Parameters
    ----------
    p : array_like, shape (rows, classes)
        Probabilities; rows sum to one.
    y : array_like of int, shape (rows,)
        True labels in ``[0, classes)``.
    """
    logp = _log_of(p)
    y = _checks.labels(y, logp.shape[1], logp.shape[0])
    return float(-logp[np.arange(y.size), y].mean())


def brier(p, y) -> float:
    r"""Multi-class Brier score, :math:`\frac1n\sum_i\sum_k (p_i(k) - [y_i = k])^2` (in [0, 2]).

    Parameters
    ----------
    p : array_like, shape (rows, classes)
        Probabilities; rows sum to one.
    y : array_like of int, shape (rows,)
        True labels in ``[0, classes)``.
    """
    p = _checks.probabilities(p)
    y = _checks.labels(y, p.shape[1], p.shape[0])
    d = p.copy()
    d[np.arange(y.size), y] -= 1.0
    return float((d * d).sum(axis=1).mean())


def _sorted_groups(score: np.ndarray):
    """Descending order of ``score`` (stable) and the start of each run of tied scores."""
    order = np.argsort(-score, kind="stable")
    s = score[order]
    starts = np.flatnonzero(np.r_[True, s[1:] != s[:-1]])
    return order, starts


def risk_coverage(score, correct) -> dict:
    r"""The risk-coverage curve of abstaining on ``score`` (Geifman and El-Yaniv, 2017).

    Predictions are kept in order of decreasing ``score``. After keeping :math:`k` of
    :math:`n`, coverage is :math:`k/n` and risk is the error rate among those kept.

    **Ties.** Rows with equal scores cannot be ordered by the score, so within a run of
    tied rows the curve uses the *expected* number of errors under a uniformly random order
    of that run: if the run starts after :math:`K_0` kept rows with :math:`E_0` errors and
    holds :math:`m` rows with :math:`e` errors, keeping :math:`j` of them gives
    :math:`E_0 + j\,e/m` expected errors. The curve (and :func:`aurc`) therefore does not
    depend on how the input happens to be ordered.

    Parameters
    ----------
    score : array_like, shape (rows,)
        Confidence; higher is kept first. Infinite values are allowed, NaN is not.
    correct : array_like of bool, shape (rows,)

    Returns
    -------
    dict
        ``coverage`` (:math:`k/n`, k = 1..n), ``risk`` (expected error rate of the top k),
        ``order`` (row indices, most confident first; ties in input order).
    """
    s = _score(score)
    ok = _correct(correct)
    n = _checks.same_length(score=s, correct=ok)
    order, starts = _sorted_groups(s)
    err = (~ok[order]).astype(float)
    sizes = np.diff(np.r_[starts, n])
    e = np.add.reduceat(err, starts)
    e0 = np.cumsum(e) - e
    group = np.repeat(np.arange(starts.size), sizes)
    j = np.arange(1, n + 1) - starts[group]
    expected = e0[group] + j * (e / sizes)[group]
    k = np.arange(1, n + 1)
    return {"coverage": k / n, "risk": expected / k, "order": order}


def aurc(score, correct) -> float:
    r"""Area under the risk-coverage curve, :math:`\frac1n\sum_{k=1}^{n} \mathrm{risk}(k)`.

    Lower is better. Ties are handled as in :func:`risk_coverage` (expected risk under a
    random order within each run of equal scores), so the value depends only on the scores
    and the correctness, never on the row order.
    """
    return float(risk_coverage(score, correct)["risk"].mean())


def kendall_tau(x, y) -> dict:
    r"""Kendall's :math:`\tau_b` between two scores, in :math:`O(n \log n)`.

    .. math::

        \tau_b = \frac{C - D}{\sqrt{(n_0 - n_x)(n_0 - n_y)}}

    with :math:`n_0 = n(n-1)/2` pairs, :math:`C` concordant and :math:`D` discordant pairs,
    and :math:`n_x, n_y` the pairs tied in ``x`` and in ``y``. :math:`D` is the number of
    inversions of ``y`` once rows are sorted by ``(x, y)``, counted by a vectorised bottom-up
    merge (Knight, 1966). The same quantity as ``scipy.stats.kendalltau`` (variant "b").
    Only the order of the values matters: scores, mean set sizes or ranks may be passed
    (``coverage.kendall_tau`` is this function).

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
    and :func:`standarderror.uncertainty.coverage.inversions`."""
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


# --------------------------------------------------------------------------------------
# Temperature: the table, the reordering, the swap pair
# --------------------------------------------------------------------------------------


def _held_out(count: int, size: int, seed: int, step) -> dict:
    from standarderror.llm.predictions import predictions

    return predictions(count=count, size=size, seed=seed, step=step)


def temperature_table(temperatures=TEMPERATURES, *, data: dict | None = None, count: int = 10,
                      size: int = 16, seed: int = 0, step: int | None = None,
                      bins: int = 15) -> dict:
    r"""Accuracy, NLL, ECE and mean confidence of held-out predictions at several temperatures.

    By default the predictions are ``coverage.predictions(count=10, size=16, seed=0)``:
    160 held-out 64-character windows, 10,240 next-character predictions.

    Parameters
    ----------
    temperatures : sequence of float
        Temperatures to evaluate (1.0 is always evaluated as the reference).
    data : dict, optional
        Predictions to use instead (keys ``logp`` or ``p``, and ``y``); for tests and
        synthetic examples.
    count, size, seed, step
        Passed to :func:`standarderror.uncertainty.coverage.predictions`.
    bins : int
        Equal-width ECE bins.

    Returns
    -------
    dict
        ``rows``: one dict per temperature with ``temperature``, ``accuracy``, ``nll``,
        ``ece``, ``confidence`` (mean top probability) and ``gap`` (confidence minus
        accuracy); ``accuracy_identical``: ``True`` when the argmax is the same array at
        every temperature (compared exactly); ``temperatures``; ``logp`` and ``y`` (the
        unscaled predictions, which :func:`reordering` uses); ``rows_count``.
    """
    ts = _temperatures(temperatures)
    if data is None:
        data = _held_out(count, size, seed, step)
    logp = _normalised_logp(data["logp"]) if "logp" in data else _log_of(data["p"])
    y = _checks.labels(data["y"], logp.shape[1], logp.shape[0])
    reference = scale(logp, 1.0).argmax(axis=1)
    rows, identical = [], True
    for t in ts:
        lt = scale(logp, t)
        pred = lt.argmax(axis=1)
        identical &= bool(np.array_equal(pred, reference))
        rows.append(temperature_row(t, pred, np.exp(lt.max(axis=1)),
                                    -lt[np.arange(y.size), y], y, bins=bins))
    return {"rows": rows, "accuracy_identical": identical, "temperatures": ts,
            "logp": logp, "y": y, "rows_count": int(y.size)}


def temperature_row(temperature: float, pred, confidence, nll, y, *, bins: int = 15) -> dict:
    """One row of a temperature table from the predictions at that temperature: the one
    place the row is computed (:func:`temperature_table`, and the streamed measurement of
    :func:`standarderror.experiments.measure.calibration`, which never holds the
    predictions x classes array, call it).

    ``pred``: the argmax class of each prediction; ``confidence``: its top probability;
    ``nll``: the negative log-probability of its true label ``y``. Returns ``temperature``,
    ``accuracy``, ``nll`` (mean), ``ece`` (``bins`` equal-width bins), ``confidence``
    (mean) and ``gap`` (mean confidence minus accuracy).
    """
    ok = np.asarray(pred) == np.asarray(y)
    conf = np.asarray(confidence, dtype=float)
    acc = float(ok.mean())
    return {"temperature": temperature, "accuracy": acc,
            "nll": float(np.asarray(nll, dtype=float).mean()),
            "ece": ece(conf, ok, bins=bins), "confidence": float(conf.mean()),
            "gap": float(conf.mean()) - acc}


def _top_set(score: np.ndarray, k: int) -> np.ndarray:
    """Rows whose score is at least the k-th largest (ties at the boundary are all included)."""
    threshold = np.partition(score, score.size - k)[score.size - k]
    return score >= threshold


def reordering(table: dict, top: float = 0.01) -> list[dict]:
    r"""How much the confidence *order between predictions* moves with temperature.

    For each temperature of ``table`` (from :func:`temperature_table`), compares the
    max-probability confidence at :math:`T` with that at :math:`T = 1`:

    * ``tau``: Kendall's :math:`\tau_b` (see :func:`kendall_tau`);
    * ``pairs_reordered``: discordant pairs as a share of all :math:`n(n-1)/2` pairs;
    * ``top_overlap``: of the rows in the most confident ``top`` share at :math:`T = 1`
      (the :math:`k = \max(1, \mathrm{round}(\mathrm{top}\cdot n))` most confident, plus any
      tied with the k-th), the share still in the most confident ``top`` share at :math:`T`.

    Returns
    -------
    list of dict
        One per temperature: ``temperature``, ``tau``, ``pairs_reordered``, ``top_overlap``.
    """
    if not isinstance(table, dict) or "logp" not in table or "temperatures" not in table:
        raise ValueError("table must be the dict returned by temperature_table()")
    top = _checks.alpha(top, "top")
    # log-probabilities, as temperature_table stores them (probabilities here would give a
    # wrong tau without an error)
    logp = _normalised_logp(table["logp"], "table['logp']")
    n = logp.shape[0]
    if n < 2:
        raise ValueError("table needs at least two predictions to compare orders")
    k = max(1, int(round(float(top) * n)))
    base = scale(logp, 1.0).max(axis=1)
    base_top = _top_set(base, k)
    out = []
    for t in table["temperatures"]:
        conf = scale(logp, t).max(axis=1)
        kt = kendall_tau(base, conf)
        out.append({
            "temperature": t,
            "tau": kt["tau"],
            "pairs_reordered": kt["discordant"] / kt["pairs"],
            "top_overlap": float((base_top & _top_set(conf, k)).sum() / base_top.sum()),
        })
    return out


def swap_pair(temperatures=(0.5, 1.0, 2.0, 3.0)) -> dict:
    r"""Two constructed predictions over five labels whose confidence order flips with T.

    * *one rival*: logits ``(2.0, 1.4, -6, -6, -6)`` -- one close rival, three negligible;
    * *crowd*: logits ``(2.0, -0.8, -0.8, -0.8, -0.8)`` -- four rivals, each far behind.

    Label 0 is the prediction of both at every temperature. Cold, the crowd's four distant
    rivals carry almost nothing and the crowd is the more confident; heated, probability
    spreads to rivals and four of them absorb more than one, so the order flips at the
    ``crossing`` temperature.

    Returns
    -------
    dict
        ``logits`` (2 x 5), ``confidence`` (T -> (one rival, crowd) top probabilities),
        ``crossing`` (the T at which they are equal), ``argmax`` (T -> both predicted
        labels), and ``curve`` (``temperature``, ``one rival``, ``crowd`` arrays over
        T in [0.25, 4] for drawing).
    """
    ts = _temperatures(temperatures)
    logits = np.array([[2.0, 1.4, -6.0, -6.0, -6.0],
                       [2.0, -0.8, -0.8, -0.8, -0.8]])

    def top(t):
        lt = scale(logits, t)
        return np.exp(lt.max(axis=1)), lt.argmax(axis=1)

    confidence, argmax = {}, {}
    for t in ts:
        c, a = top(t)
        confidence[t] = (float(c[0]), float(c[1]))
        argmax[t] = (int(a[0]), int(a[1]))
    crossing = optimize.brentq(lambda t: np.subtract(*top(t)[0]), 1.0, 3.0, xtol=1e-12)
    grid = np.linspace(0.25, 4.0, 151)
    curve = np.array([top(t)[0] for t in grid])
    return {"logits": logits, "confidence": confidence, "argmax": argmax,
            "crossing": float(crossing),
            "curve": {"temperature": grid, "one rival": curve[:, 0], "crowd": curve[:, 1]}}


def shared_shape(logp, shape=None) -> np.ndarray:
    r"""A control in which temperature cannot reorder confidence: every row has one shape.

    Row :math:`i` becomes :math:`a_i\,v` with one fixed sorted logit vector :math:`v` (the
    mean of the rows' sorted log-probabilities unless ``shape`` is given), permuted so its top
    entry sits on row :math:`i`'s own predicted label, and with :math:`a_i > 0` solved so the
    row keeps its own top probability at :math:`T = 1`. Rows then differ only by their own
    sharpness, and dividing by :math:`T` moves every row along the same one-parameter family,
    so max probability, entropy and margin keep their order across rows at every :math:`T`.
    Accuracy and the :math:`T = 1` max-probability order are those of the input.

    Parameters
    ----------
    logp : array_like, shape (rows, classes)
        Normalised log-probabilities.
    shape : array_like, shape (classes,), optional
        The common logit shape; needs a unique largest entry.

    Returns
    -------
    numpy.ndarray
        Normalised log-probabilities of the control rows (rows x classes).
    """
    logp = _normalised_logp(logp)
    n, v_count = logp.shape
    if shape is None:
        srt = -np.sort(-np.where(np.isfinite(logp), logp, np.nan), axis=1)
        if np.isnan(srt).any():
            raise ValueError("logp has zero probabilities; pass an explicit shape")
        v = srt.mean(axis=0)
    else:
        v = -np.sort(-_checks.array(shape, "shape", ndim=1))
        if v.size != v_count:
            raise ValueError(f"shape must have {v_count} entries (one per class), got {v.size}")
    gaps = v - v[0]  # 0 then negative
    if not gaps[1] < 0:
        raise ValueError("shape needs a unique largest entry")
    target = logp.max(axis=1)  # log top probability of each row
    if (target <= -np.log(v_count)).any():
        raise ValueError("a row of logp is uniform; no sharpness reproduces it")

    def log_top(a):
        return -np.log1p(np.exp(a[:, None] * gaps[None, 1:]).sum(axis=1))

    lo = np.zeros(n)
    hi = np.ones(n)
    while (log_top(hi) < target).any():
        hi = np.where(log_top(hi) < target, hi * 2, hi)
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        below = log_top(mid) < target
        lo = np.where(below, mid, lo)
        hi = np.where(below, hi, mid)
        if np.all(hi - lo <= 4 * np.finfo(float).eps * hi):
            break
    a = 0.5 * (lo + hi)
    pred = logp.argmax(axis=1)
    # place v[0] on the predicted label and the rest of v on the other labels in index order
    others = np.argsort(np.arange(v_count)[None, :] == pred[:, None], axis=1, kind="stable")[:, :-1]
    z = np.empty_like(logp)
    rows = np.arange(n)[:, None]
    z[rows, others] = a[:, None] * gaps[None, 1:]
    z[np.arange(n), pred] = 0.0
    return scale(z, 1.0)


# --------------------------------------------------------------------------------------
# Abstention
# --------------------------------------------------------------------------------------


class _Bootstrap:
    r"""AURC of many weighted copies of one dataset, all draws at once.

    A draw gives every row an integer weight (how many times its sequence was drawn).
    With rows sorted by score and runs of tied scores grouped, let group :math:`g` hold
    weight :math:`m_g` with :math:`e_g` weighted errors, and let :math:`K_g` be the
    cumulative weight through it. The resampled dataset has :math:`N = \sum m_g` rows; the
    expected number of errors among its top :math:`k` under random tie-breaking is linear
    within a group, and

    .. math::

        N \cdot \mathrm{AURC} = \sum_{k=1}^{N} \frac{E(k)}{k}
            = E_{\mathrm{tot}}\,H_N - \sum_g \frac{e_g}{m_g}\,\bigl(G_{K_g} - G_{K_g - m_g}\bigr),

    with :math:`H_k = \sum_{i \le k} 1/i` and :math:`G_k = \sum_{i < k} H_i`: each expected
    error at position :math:`j` adds :math:`1/k` for every :math:`k \ge j`. With unit weights
    this is exactly :func:`aurc`.
    """

    def __init__(self, counts: np.ndarray, seq_idx: np.ndarray):
        self.counts = counts.astype(np.int32)
        self.seq_idx = seq_idx
        per_seq = np.bincount(seq_idx)
        n_max = int((counts.astype(np.int64) * per_seq[None, :]).sum(axis=1).max())
        self.H = np.r_[0.0, np.cumsum(1.0 / np.arange(1, n_max + 1))]
        self.G = np.r_[0.0, np.cumsum(self.H)]  # G[k] = sum_{i<k} H[i]
        # one row drawn w times ending at cumulative weight k adds G[k] - G[k - w]: tabulate
        self.width = int(self.counts.max()) + 1
        table = np.zeros((n_max + 1, self.width))
        for w in range(1, self.width):
            table[w:, w] = self.G[w:n_max + 1] - self.G[:n_max + 1 - w]
        self.table = table.ravel()
        self._cache: dict = {}

    def aurc(self, score: np.ndarray, correct: np.ndarray, chunk: int = 25) -> np.ndarray:
        """AURC of every draw (one per row of ``counts``) for one score."""
        order, starts = _sorted_groups(score)
        err = ~correct[order]
        key = (order.tobytes(), starts.tobytes(), err.tobytes())
        if key in self._cache:  # same ranking, same ties, same errors: same answer
            return self._cache[key]
        q = self.seq_idx[order]
        n = score.size
        sizes = np.diff(np.r_[starts, n])
        group_err = np.add.reduceat(err.astype(np.int64), starts)
        single = sizes == 1
        lone = starts[single & (group_err > 0)]  # untied wrong rows
        q_lone = q[lone]
        multi = ~single & (group_err > 0)  # tied runs holding a wrong row
        if multi.any():
            m_starts, m_sizes = starts[multi], sizes[multi]
            m_local = np.r_[0, np.cumsum(m_sizes[:-1])]  # where each run starts in m_rows
            m_rows = np.repeat(m_starts - m_local, m_sizes) + np.arange(m_sizes.sum())
            m_ends = m_starts + m_sizes - 1
            m_err = err[m_rows]
        out = np.empty(self.counts.shape[0])
        chunk = max(1, min(chunk, (1 << 23) // n))  # draws at once: memory ~ chunk x rows
        for lo in range(0, self.counts.shape[0], chunk):
            c = self.counts[lo:lo + chunk]
            w = c[:, q]
            big_k = np.cumsum(w, axis=1, dtype=np.int32)
            total = big_k[:, -1]
            idx = big_k[:, lone]
            m = c[:, q_lone]
            idx *= self.width
            idx += m
            inner = self.table[idx].sum(axis=1)
            e_tot = m.sum(axis=1, dtype=np.int64).astype(float)
            if multi.any():
                wm = w[:, m_rows]
                mg = np.add.reduceat(wm, m_local, axis=1)
                eg = np.add.reduceat(wm * m_err, m_local, axis=1)
                kg = big_k[:, m_ends]
                r = eg / np.maximum(mg, 1)
                inner += (r * (self.G[kg] - self.G[kg - mg])).sum(axis=1)
                e_tot += eg.sum(axis=1)
            out[lo:lo + chunk] = (e_tot * self.H[total] - inner) / total
        self._cache[key] = out
        return out


def _draw_counts(sequences: int, draws: int, seed) -> np.ndarray:
    """How often each of ``sequences`` is drawn in each of ``draws`` resamples with replacement."""
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, sequences, size=(draws, sequences))
    flat = (np.arange(draws)[:, None] * sequences + idx).ravel()
    return np.bincount(flat, minlength=draws * sequences).reshape(draws, sequences)


def abstention(p, y, sequence, temperatures=ABSTENTION_TEMPERATURES, draws: int = 300,
               seed: int = 0, coverage: float = 0.2) -> dict:
    r"""What temperature does to abstention, for each confidence score, with paired intervals.

    For each score in :data:`SCORES` and each temperature, the predictions are ranked by the
    score of the temperature-scaled probabilities, and the area under the risk-coverage curve
    (:func:`aurc`) is computed. ``difference`` is the AURC minus that of the same score at
    :math:`T = 1`. Its interval comes from a bootstrap over *sequences*: predictions in one
    window share context, so whole windows are resampled (with replacement, as many as
    there are), each draw used for every temperature and score, so the differences are
    paired. 95% percentile intervals.

    Parameters
    ----------
    p : array_like, shape (rows, classes)
        Probabilities (rows sum to one). Their logarithm is taken once; no floor.
    y : array_like of int, shape (rows,)
        True labels.
    sequence : array_like, shape (rows,)
        The window each row belongs to (at least two distinct windows).
    temperatures : sequence of float
        Temperatures to report; :math:`T = 1` is always computed as the reference.
    draws : int
        Bootstrap resamples.
    seed : int
        Seed of the resampling.
    coverage : float
        Share kept for ``top_fifth`` (0.2: the most confident fifth).

    Returns
    -------
    dict
        ``table[(score, T)]`` -> dict with ``aurc``, ``difference``, ``low``, ``high``,
        ``top_fifth`` (expected accuracy of the kept most confident ``coverage`` share, ties
        broken at random); ``oracle`` (AURC of the perfect ordering: every correct
        prediction before any wrong one); ``temperatures``, ``scores``, ``rows``,
        ``sequences``, ``draws``; ``level`` (0.95, the intervals' coverage: the 2.5th and
        97.5th percentiles of the paired bootstrap differences).
    """
    logp = _log_of(p)
    n = logp.shape[0]
    y = _checks.labels(y, logp.shape[1], n)
    seq_idx, n_seq = _sequence_index(sequence, n)
    ts = _temperatures(temperatures)
    draws = _checks.positive_int(draws, "draws")
    if not 0 < float(coverage) <= 1:
        raise ValueError(f"coverage must lie in (0, 1], got {coverage!r}")
    ok = logp.argmax(axis=1) == y
    boot = _Bootstrap(_draw_counts(n_seq, draws, seed), seq_idx)
    keep = max(1, int(round(float(coverage) * n)))

    per_t = {}
    for t in sorted(set(ts) | {1.0}):
        scores = _scores(logp, t)
        for name in SCORES:
            rc = risk_coverage(scores[name], ok)
            per_t[(name, t)] = (float(rc["risk"].mean()), 1.0 - float(rc["risk"][keep - 1]),
                                boot.aurc(scores[name], ok))
    table = {}
    for name in SCORES:
        ref_aurc, _, ref_boot = per_t[(name, 1.0)]
        for t in ts:
            a, acc, b = per_t[(name, t)]
            low, high = np.percentile(b - ref_boot, [2.5, 97.5])
            table[(name, t)] = {"aurc": a, "difference": a - ref_aurc, "low": float(low),
                                "high": float(high), "top_fifth": acc}
    return {"table": table, "oracle": aurc(ok.astype(float), ok), "temperatures": ts,
            "scores": SCORES, "rows": n, "sequences": n_seq, "draws": draws, "level": 0.95}


def _nll_curve(logp: np.ndarray, y: np.ndarray):
    r"""NLL as a function of T: :math:`\frac1n\sum_i \log\sum_j e^{d_{ij}/T} - d_{iy_i}/T`,
    with :math:`d = z - z_{\max}` computed once (every exponent stays <= 0)."""
    d = logp - logp.max(axis=1, keepdims=True)
    dy = d[np.arange(y.size), y].mean()

    def f(t: float) -> float:
        return float(np.log(np.exp(d * (1.0 / t)).sum(axis=1)).mean() - dy / t)

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
    z = _log_array(logits, "logits")
    if z.ndim != 2:
        raise ValueError(f"logits must have 2 dimensions (rows x classes), got shape {z.shape}")
    y = _checks.labels(y, z.shape[1], z.shape[0])
    _ruled_out(z, y, "logits")
    lo, hi = _bounds(bounds)
    return _fit_on(z, y, lo, hi, "fit_temperature")


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
    halves = _checks.positive_int(halves, "halves")
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


def best_temperature(p, y, score: str, temperatures=None) -> dict:
    r"""The temperature at which abstaining on ``score`` has the lowest AURC.

    Searches :data:`GRID` (T = 0.2, 0.3, ..., 3.0) unless ``temperatures`` is given. The
    first minimum is reported; if the curve is flat to the bit (every AURC exactly equal,
    as for ``"margin"``) there is no best temperature and ``temperature`` is ``None``.

    Returns
    -------
    dict
        ``temperature`` (float or None), ``aurc`` (the minimum), ``curve`` (T -> AURC).
    """
    if score not in SCORES:
        raise ValueError(f"score must be one of {SCORES}, got {score!r}")
    logp = _log_of(p)
    y = _checks.labels(y, logp.shape[1], logp.shape[0])
    ts = GRID if temperatures is None else _temperatures(temperatures)
    ok = logp.argmax(axis=1) == y
    curve = {float(t): aurc(_scores(logp, t, (score,))[score], ok) for t in ts}
    values = np.array(list(curve.values()))
    best = None if np.all(values == values[0]) else float(list(curve)[int(values.argmin())])
    return {"temperature": best, "aurc": float(values.min()), "curve": curve}
