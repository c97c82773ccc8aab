r"""The floor under binned calibration error, and estimators that sit on it (Episode 2).

A binned calibration error compares, bin by bin, the mean confidence with the observed
accuracy. Even a model that is calibrated by construction -- every label drawn as
:math:`\mathrm{Bernoulli}(c_i)` from the confidence :math:`c_i` it was given -- shows a
positive ECE, because each bin's accuracy is a noisy mean of a finite number of labels and
the ECE adds up the *absolute values* of the noise. This module measures that floor,
vectorised over many resampled label vectors, and the estimators that correct for it:

* :func:`calibrated_labels` -- labels drawn from the confidences (calibrated by construction);
* :func:`bin_index`, :func:`ece_batch` -- ECE of many label vectors at once, identical row by
  row to :func:`standarderror.uncertainty.calibration.ece`;
* :func:`l2_batch` -- the squared (L2) calibration error, plug-in or debiased (Kumar, Liang
  and Ma 2019);
* :func:`ece_floor`, :func:`fit_scaling`, :func:`predicted_constant` -- the floor across
  sample sizes and bin counts, and its :math:`\sqrt{B/n}` scaling;
* :func:`consistency_test`, :func:`p_values`, :func:`subset_p_values` -- consistency
  resampling (Brocker and Smith 2007): is a measured ECE distinguishable from a calibrated
  model with the same confidences, on all the data and on smaller evaluation sets?
* :func:`verdicts` -- how often ECE, debiased L2, NLL and Brier on a random subset agree with
  the full data about which of two temperatures is better.
"""

from __future__ import annotations

import numpy as np

from standarderror import _checks
from standarderror.uncertainty.metrics import (  # noqa: F401  (bin_index: binning.bin_index)
    bin_index,
    brier,
    ece,
    nll,
)
from standarderror.uncertainty.scaling import scale


def _confidence(confidence, name: str = "confidence") -> np.ndarray:
    """A 1-D or 2-D (draws x rows) array of confidences in [0, 1]."""
    c = _checks.array(confidence, name)
    if c.ndim not in (1, 2):
        raise ValueError(f"{name} must be one- or two-dimensional (draws x rows), got shape {c.shape}")
    if c.min() < 0 or c.max() > 1:
        raise ValueError(f"{name} must lie in [0, 1]; got [{c.min():.3g}, {c.max():.3g}]")
    return c


def _pair(confidence, correct) -> tuple[np.ndarray, np.ndarray]:
    """Confidences (1 x rows, shared by every draw, or draws x rows) and correctness (draws x rows)."""
    c = _confidence(confidence)
    ok = np.asarray(correct)
    if ok.dtype != bool:
        ok = _checks.array(ok, "correct")
        if not np.isin(ok, (0, 1)).all():
            raise ValueError("correct must hold booleans or 0/1 values")
        ok = ok.astype(bool)
    if ok.ndim not in (1, 2) or ok.size == 0:
        raise ValueError(f"correct must be a non-empty (rows,) or (draws x rows) array, got shape {ok.shape}")
    ok2 = np.atleast_2d(ok)
    c2 = np.atleast_2d(c)
    if c2.shape[1] != ok2.shape[1]:
        raise ValueError(f"confidence has {c2.shape[1]} rows per draw but correct has {ok2.shape[1]}; "
                         "pass one confidence per prediction")
    if c2.shape[0] not in (1, ok2.shape[0]):
        raise ValueError(f"confidence has {c2.shape[0]} draws but correct has {ok2.shape[0]}; pass "
                         "one confidence vector (shared) or one per draw")
    return c2, ok2


def _binned(c: np.ndarray, ok: np.ndarray, bins: int, adaptive: bool):
    """Per-draw, per-bin row counts, confidence sums and hits, each (draws x bins).

    With one shared confidence vector the bins are assigned once and the hits of every draw
    are one matrix product with the (rows x bins) indicator (float32 is exact for counts below
    2**24); otherwise one ``bincount`` over (draw, bin) pairs."""
    which = bin_index(c, bins, adaptive)
    draws = ok.shape[0]
    if c.shape[0] == 1:
        count = np.bincount(which[0], minlength=bins).astype(float)[None, :]
        conf_sum = np.bincount(which[0], weights=c[0], minlength=bins)[None, :]
        rows = c.shape[1]
        if rows * bins <= 1 << 22 and rows < 1 << 24:  # small: one exact float32 product
            indicator = np.zeros((rows, bins), dtype=np.float32)
            indicator[np.arange(rows), which[0]] = 1.0
            hits = (ok.astype(np.float32) @ indicator).astype(float)
        else:  # large: bincounts a few draws at a time (memory stays O(rows + bins))
            hits = np.empty((draws, bins))
            step = max(1, (1 << 22) // rows)
            for start in range(0, draws, step):
                part = ok[start:start + step]
                hits[start:start + len(part)] = _bin_sums(
                    np.broadcast_to(which, part.shape), part.astype(float), bins)
        return np.broadcast_to(count, (draws, bins)), np.broadcast_to(conf_sum, (draws, bins)), hits
    flat = _flat_bins(which, bins)  # once for the three sums
    # the counts are exact integers: an unweighted bincount gives the same floats, faster
    count = np.bincount(flat, minlength=which.shape[0] * bins).astype(float).reshape(-1, bins)
    return count, _bin_sums(which, c, bins, flat), _bin_sums(which, ok.astype(float), bins, flat)


def calibrated_labels(confidence, draws: int = 200, seed: int = 0) -> np.ndarray:
    r"""Correctness drawn from the confidences: a model calibrated by construction.

    ``correct[d, i] = U[d, i] < c_i`` with :math:`U \sim \mathrm{Uniform}(0, 1)`, i.e.
    :math:`\mathrm{Bernoulli}(c_i)`, independently over rows and draws. Every such label
    vector comes from a perfectly calibrated model; whatever calibration error it shows is
    estimation noise.

    Parameters
    ----------
    confidence : array_like, shape (rows,) or (draws, rows)
        Confidences in [0, 1]; a 2-D array gives each draw its own confidences.
    draws : int
        Number of label vectors (ignored for 2-D ``confidence``, which sets it).
    seed : int or numpy.random.Generator
        Seed of the uniforms (a Generator is used as is, so draws can be made in chunks from
        one stream: the chunks are the rows of one large draw).

    Returns
    -------
    numpy.ndarray of bool, shape (draws, rows)
    """
    c = _confidence(confidence)
    draws = _checks.draws(draws)
    shape = c.shape if c.ndim == 2 else (draws, c.size)
    rng = np.random.default_rng(seed)
    out = np.empty(shape, dtype=bool)
    step = max(1, (1 << 22) // shape[1])  # uniforms a few draws at a time (the same stream)
    for start in range(0, shape[0], step):
        stop = min(start + step, shape[0])
        out[start:stop] = rng.random((stop - start, shape[1])) < (c[start:stop] if c.ndim == 2 else c)
    return out


def _flat_bins(which: np.ndarray, bins: int) -> np.ndarray:
    """Each (draw, row)'s bin as one index into draws x bins, flattened."""
    return (which + bins * np.arange(which.shape[0])[:, None]).ravel()


def _bin_sums(which: np.ndarray, values: np.ndarray, bins: int, flat=None) -> np.ndarray:
    """Per-draw, per-bin sums of ``values`` (draws x rows) -> (draws x bins), one bincount
    (``flat``: :func:`_flat_bins` of ``which``, when it is computed already)."""
    d = which.shape[0]
    flat = _flat_bins(which, bins) if flat is None else flat
    return np.bincount(flat, weights=values.ravel(), minlength=d * bins).reshape(d, bins)


def ece_batch(confidence, correct, bins: int = 15, adaptive: bool = False) -> np.ndarray:
    r"""ECE of many label vectors at once; row ``d`` equals ``calibration.ece`` of draw ``d``.

    .. math::

        \mathrm{ECE}_d = \sum_{b=1}^{B} \frac{1}{n}\Bigl|\sum_{i \in b} (c_{di} - y_{di})\Bigr|

    with the bins of :func:`bin_index`. ``calibration.ece`` is the definition; this is the same
    sum, batched over draws with one ``bincount`` (the test suite checks they agree).

    Parameters
    ----------
    confidence : array_like, shape (rows,) or (draws, rows)
        Confidences, shared by every draw or one row per draw.
    correct : array_like of bool, shape (rows,) or (draws, rows)
    bins : int
    adaptive : bool
        Equal-mass bins.

    Returns
    -------
    numpy.ndarray, shape (draws,)
    """
    c, ok = _pair(confidence, correct)
    bins = _checks.bins(bins)
    _, conf_sum, hits = _binned(c, ok, bins, adaptive)
    return np.abs(conf_sum - hits).sum(axis=1) / c.shape[1]


def l2_batch(confidence, correct, bins: int = 15, adaptive: bool = False,
             debiased: bool = True) -> np.ndarray:
    r"""Squared (L2) binned calibration error of many label vectors; plug-in or debiased.

    With :math:`n_b` rows in bin :math:`b`, mean confidence :math:`\bar c_b` and accuracy
    :math:`\bar y_b`, the plug-in estimate is

    .. math::

        \widehat{\mathrm{CE}}^2_{\mathrm{plug}} = \sum_b \frac{n_b}{n}\,(\bar y_b - \bar c_b)^2 .

    Its expectation exceeds the truth by :math:`\sum_b \frac{n_b}{n}\mathrm{Var}(\bar y_b)`.
    Kumar, Liang and Ma (2019, "Verified uncertainty calibration") subtract an unbiased
    estimate of that variance, :math:`\bar y_b(1-\bar y_b)/(n_b - 1)`:

    .. math::

        \widehat{\mathrm{CE}}^2_{\mathrm{db}} = \sum_b \frac{n_b}{n}\Bigl[(\bar y_b - \bar c_b)^2
        - \frac{\bar y_b (1 - \bar y_b)}{n_b - 1}\Bigr].

    It is exactly unbiased when the confidence is constant within each bin (their setting,
    a binned recalibrator); with confidences that vary inside a bin it over-corrects by
    :math:`\sum_b \frac{n_b}{n}\,\mathrm{var}_b(c)/(n_b-1)` where :math:`\mathrm{var}_b(c)` is
    the spread of the confidences in bin :math:`b`, which is small for narrow bins. It can be
    negative; that is the price of unbiasedness. Bins with fewer than two rows contribute
    nothing to the debiased sum (the correction is undefined there).

    Returns
    -------
    numpy.ndarray, shape (draws,)
    """
    c, ok = _pair(confidence, correct)
    bins = _checks.bins(bins)
    count, conf_sum, hits = _binned(c, ok, bins, adaptive)
    with np.errstate(invalid="ignore", divide="ignore"):
        acc = np.where(count > 0, hits / np.maximum(count, 1), 0.0)
        mean_c = np.where(count > 0, conf_sum / np.maximum(count, 1), 0.0)
        term = (acc - mean_c) ** 2
        if debiased:
            term = np.where(count >= 2, term - acc * (1 - acc) / np.maximum(count - 1, 1), 0.0)
    return (count / c.shape[1] * term).sum(axis=1)


def subsample(rows: int, size: int, draws: int = 200, seed: int = 0) -> np.ndarray:
    """``draws`` random subsets of ``size`` distinct row indices out of ``rows`` (draws x size)."""
    rows = _checks.positive_int(rows, "rows")
    size = _checks.positive_int(size, "size")
    draws = _checks.draws(draws)
    if size > rows:
        raise ValueError(f"size={size} is larger than rows={rows}; a subset cannot repeat rows")
    rng = np.random.default_rng(seed)
    out = np.empty((draws, size), dtype=np.int64)
    # the keys are drawn a few draws at a time (the same stream as one draws x rows array, so
    # the same subsets), never more than about 4 million keys at once: 10^6 rows fit in memory
    step = max(1, (1 << 22) // rows)
    for start in range(0, draws, step):
        keys = rng.random((min(step, draws - start), rows))
        if size == rows:
            out[start:start + len(keys)] = np.argsort(keys, axis=1)
        else:
            out[start:start + len(keys)] = np.argpartition(keys, size, axis=1)[:, :size]
    return out


def ece_floor(confidence, sizes, bins=(5, 10, 15, 30, 60), *, draws: int = 200,
              adaptive: bool = False, seed: int = 0) -> dict:
    r"""ECE of a calibrated-by-construction model across sample sizes and bin counts.

    For each sample size :math:`n` in ``sizes``, ``draws`` random subsets of the given
    confidences are taken (without replacement), labels are drawn from them
    (:func:`calibrated_labels`) and the ECE is computed for every bin count. The true
    calibration error is zero, so the mean ECE is the bias.

    Returns
    -------
    dict
        ``rows``: a list of dicts with ``n``, ``bins``, ``mean`` (the bias), ``sd``,
        ``x`` (:math:`\sqrt{B/n}`), ``l2_plugin`` and ``l2_debiased`` (means of the squared
        calibration error, :func:`l2_batch`, whose truth here is 0) and ``l2_debiased_se``
        (the standard error of that mean); and ``draws``, ``adaptive``.
    """
    c = _confidence(confidence)
    if c.ndim != 1:
        raise ValueError("confidence must be one-dimensional here (the pool subsets are drawn from)")
    sizes = [_checks.positive_int(s, "sizes") for s in np.atleast_1d(sizes).tolist()]
    bins = [_checks.bins(b) for b in np.atleast_1d(bins).tolist()]
    draws = _checks.draws(draws)
    rows = []
    for j, n in enumerate(sizes):
        idx = subsample(c.size, n, draws, seed=seed + 1000 * j)
        conf = np.sort(c[idx], axis=1)  # the order of rows in a subset is irrelevant to ECE;
        # sorted rows make the equal-mass argsort of every bin count a linear pass
        ok = calibrated_labels(conf, seed=seed + 1000 * j + 1)
        for b in bins:
            e = ece_batch(conf, ok, b, adaptive)
            plug = l2_batch(conf, ok, b, adaptive, debiased=False)
            db = l2_batch(conf, ok, b, adaptive, debiased=True)
            rows.append({"n": n, "bins": b, "mean": float(e.mean()), "sd": float(e.std(ddof=1)),
                         "x": float(np.sqrt(b / n)), "l2_plugin": float(plug.mean()),
                         "l2_debiased": float(db.mean()),
                         "l2_debiased_se": float(db.std(ddof=1) / np.sqrt(draws))})
    return {"rows": rows, "draws": draws, "adaptive": bool(adaptive)}


def fit_scaling(x, y) -> dict:
    r"""Least-squares fit of :math:`y = a\,x` through the origin, and how well it fits.

    :math:`\hat a = \sum x_i y_i / \sum x_i^2`. ``r2`` is
    :math:`1 - \sum (y - \hat a x)^2 / \sum (y - \bar y)^2`; ``max_relative`` is the largest
    :math:`|y - \hat a x| / y` (how far the worst point is from the line, as a fraction).
    """
    x = _checks.array(x, "x", ndim=1)
    y = _checks.array(y, "y", ndim=1)
    _checks.same_length(x=x, y=y)
    if x.size < 2 or np.all(x == 0):
        raise ValueError("x needs at least two points, not all zero, to fit a line through the origin")
    a = float((x * y).sum() / (x * x).sum())
    resid = y - a * x
    total = ((y - y.mean()) ** 2).sum()
    r2 = float(1 - (resid ** 2).sum() / total) if total > 0 else float(np.all(resid == 0))
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.abs(resid) / np.abs(y)
    return {"constant": a, "r2": r2, "max_relative": float(np.max(rel[np.isfinite(rel)], initial=0.0))}


def predicted_constant(confidence, bins: int = 15, adaptive: bool = False) -> float:
    r"""The constant :math:`a` in :math:`E[\mathrm{ECE}] \approx a\sqrt{B/n}` for a calibrated model.

    In bin :math:`b` the gap :math:`\frac{1}{n_b}\sum_{i\in b}(c_i - y_i)` has mean 0 and
    variance :math:`\bar v_b / n_b` with :math:`\bar v_b` the mean of :math:`c_i(1-c_i)` in the
    bin. For large :math:`n_b` it is close to normal, and :math:`E|N(0,\sigma^2)| =
    \sigma\sqrt{2/\pi}`, so with bin shares :math:`w_b = n_b / n`

    .. math::

        E[\mathrm{ECE}] \approx \sum_b w_b \sqrt{\frac{2}{\pi}\frac{\bar v_b}{n w_b}}
        = \sqrt{\frac{B}{n}}\;\underbrace{\sqrt{\frac{2}{\pi B}}\sum_b \sqrt{w_b \bar v_b}}_{a}.

    Computed from the confidence distribution alone (the shares and variances of its bins).
    """
    c = _confidence(confidence)
    if c.ndim != 1:
        raise ValueError("confidence must be one-dimensional")
    bins = _checks.bins(bins)
    which = bin_index(c, bins, adaptive)[None, :]
    count = _bin_sums(which, np.ones((1, c.size)), bins)[0]
    v = _bin_sums(which, (c * (1 - c))[None, :], bins)[0]
    w = count / c.size
    vbar = np.where(count > 0, v / np.maximum(count, 1), 0.0)
    return float(np.sqrt(2 / (np.pi * bins)) * np.sqrt(w * vbar).sum())


def consistency_test(confidence, correct, bins: int = 15, *, adaptive: bool = False,
                     draws: int = 1000, seed: int = 0) -> dict:
    r"""Consistency resampling (Brocker and Smith 2007): is this ECE more than noise?

    Keep the model's confidences, redraw the labels from them ``draws`` times (a calibrated
    model with exactly these confidences), and compare the observed ECE with the resulting
    null distribution. The p-value counts the observed value as one of the draws,
    :math:`p = (1 + \#\{\mathrm{ECE}^{*} \ge \mathrm{ECE}\}) / (1 + D)`, so it is never 0.

    The null assumes labels independent given their confidences; predictions that share
    context are more correlated than that, which makes this p-value too small, not too large.

    Returns
    -------
    dict
        ``observed`` (``calibration.ece`` of the data), ``null`` (D values), ``null_mean``,
        ``null_high`` (its 95th percentile), ``p_value``, ``excess`` (observed minus null mean).
    """
    c = _confidence(confidence)
    if c.ndim != 1:
        raise ValueError("confidence must be one-dimensional (one confidence per prediction)")
    draws = _checks.draws(draws)
    observed = ece(c, correct, bins=bins, adaptive=adaptive)
    rng = np.random.default_rng(seed)
    chunk = max(1, 2_000_000 // c.size)  # label matrices of ~2M entries at a time
    null = np.concatenate([ece_batch(c, calibrated_labels(c, min(chunk, draws - start), rng), bins, adaptive)
                           for start in range(0, draws, chunk)])
    return {"observed": observed, "null": null, "null_mean": float(null.mean()),
            "null_high": float(np.percentile(null, 95)),
            "p_value": float(p_values(observed, null)),
            "excess": float(observed - null.mean())}


def subset_p_values(confidence, correct, sequence, windows: int, *, subsets: int = 50,
                    draws: int = 500, bins: int = 15, adaptive: bool = False, seed: int = 0) -> dict:
    r"""Consistency-resampling p-values on random subsets of whole windows.

    ``subsets`` times, draw ``windows`` distinct windows (all their rows) and run
    :func:`consistency_test` on them with ``draws`` resamples. This asks how often an
    evaluation set of that size would detect the miscalibration that the full data shows.

    Returns
    -------
    dict
        ``p_values`` (one per subset), ``observed`` (the ECE of each subset), ``rows`` (per
        subset), ``windows``, ``subsets``, ``draws``.
    """
    c = _confidence(confidence)
    if c.ndim != 1:
        raise ValueError("confidence must be one-dimensional (one confidence per prediction)")
    _, ok = _pair(c, correct)
    ok = ok[0]
    if ok.shape[0] != c.shape[0] or np.asarray(correct).ndim != 1:
        raise ValueError("correct must be one-dimensional, one entry per prediction")
    seq = np.asarray(sequence)
    if seq.shape != c.shape:
        raise ValueError(f"sequence must hold one window id per prediction, got shape {seq.shape}")
    _, idx = np.unique(seq, return_inverse=True)
    idx = idx.reshape(-1)
    n_win = int(idx.max()) + 1
    windows = _checks.positive_int(windows, "windows")
    subsets = _checks.draws(subsets, "subsets")
    if windows > n_win:
        raise ValueError(f"windows={windows} but the data hold only {n_win} windows")
    rng = np.random.default_rng(seed)
    chosen = np.argpartition(rng.random((subsets, n_win)), windows - 1, axis=1)[:, :windows]
    # One consistency test per subset: each is vectorised over its resamples.
    tests = []
    for j, pick in enumerate(chosen):
        rows = np.isin(idx, pick)
        tests.append(consistency_test(c[rows], ok[rows], bins, adaptive=adaptive, draws=draws,
                                      seed=seed + 1 + j))
    return {"p_values": np.array([t["p_value"] for t in tests]),
            "observed": np.array([t["observed"] for t in tests]),
            "rows": int(np.isin(idx, chosen[0]).sum()), "windows": windows,  # of the first subset
            "subsets": subsets, "draws": draws}


def p_values(observed, null) -> np.ndarray | float:
    r"""Resampling p-values of one or many observed statistics against one null sample.

    :math:`p = (1 + \#\{t^{*}_d \ge t\}) / (1 + D)` for each observed :math:`t` (larger is
    more extreme). Vectorised over ``observed``; a scalar in gives a float out.
    """
    obs = _checks.array(observed, "observed")
    null = np.sort(_checks.array(null, "null", ndim=1))
    if obs.ndim > 1:
        raise ValueError(f"observed must be a number or a one-dimensional array, got shape {obs.shape}")
    above = null.size - np.searchsorted(null, obs, side="left")  # count of null >= observed
    p = (1 + above) / (1 + null.size)
    return float(p) if p.ndim == 0 else p


METRICS = ("ECE", "debiased L2", "NLL", "Brier")


def _row_terms(logp: np.ndarray, y: np.ndarray) -> dict:
    """Per-row confidence, correctness, log loss and Brier term of normalised log-probabilities."""
    rows = np.arange(y.size)
    p = np.exp(logp)
    sq = (p * p).sum(axis=1) - 2 * p[rows, y] + 1.0
    return {"confidence": p.max(axis=1), "correct": logp.argmax(axis=1) == y,
            "nll": -logp[rows, y], "brier": sq}


def verdicts(logp, y, sequence, temperatures=(1.0, 1.2), sizes=(4, 16, 64), *,
             draws: int = 400, bins: int = 15, seed: int = 0) -> dict:
    r"""Does a random subset agree with all the data about which of two temperatures is better?

    For each metric (ECE, debiased L2 with equal-width bins, NLL, Brier; lower is better) the
    *full-data verdict* is which of ``temperatures`` scores lower on every row. Then ``draws``
    random subsets of ``s`` whole sequences (``s`` in ``sizes``; all predictions of each chosen
    window, since predictions in a window share context) are scored at both temperatures, and
    the agreement is the share of subsets whose verdict matches the full-data one. Both
    temperatures are scored on the same subset (a paired comparison).

    Parameters
    ----------
    logp : array_like, shape (rows, classes)
        Log-probabilities at T = 1 (e.g. ``predictions()["logp"]``); scaled with
        ``calibration.scale``.
    y, sequence : array_like, shape (rows,)
        True labels and the window of each row (equal-sized windows).
    temperatures : pair of float
    sizes : sequence of int
        Subset sizes, in sequences.

    Returns
    -------
    dict
        ``full``: metric -> (value at the first T, value at the second T, index of the better
        T); ``agreement``: metric -> array over ``sizes``; ``sizes``, ``rows_per_sequence``,
        ``draws``, ``temperatures``.
    """
    logp = _checks.normalised_logp(logp)
    y = _checks.labels(y, logp.shape[1], logp.shape[0])
    seq = np.asarray(sequence)
    if seq.shape != y.shape:
        raise ValueError("sequence must hold one window id per row of logp")
    _, idx, counts = np.unique(seq, return_inverse=True, return_counts=True)
    if counts.min() != counts.max():
        raise ValueError("sequence: windows must be equal-sized (subsets are drawn as whole windows)")
    ts = tuple(_checks.temperature(t, "temperatures") for t in temperatures)
    if len(ts) != 2 or ts[0] == ts[1]:
        raise ValueError(f"temperatures must be two different temperatures, got {temperatures!r}")
    draws = _checks.draws(draws)
    n_seq, per = counts.size, int(counts[0])
    sizes = [_checks.positive_int(s, "sizes") for s in np.atleast_1d(sizes).tolist()]
    if max(sizes) > n_seq:
        raise ValueError(f"sizes go up to {max(sizes)} sequences but there are only {n_seq}")
    order = np.argsort(idx, kind="stable")  # rows grouped by window: window w is order[w*per:(w+1)*per]
    scaled = [scale(logp, t) for t in ts]
    terms = [_row_terms(lp, y) for lp in scaled]
    def scores(rows):  # rows: (draws x k) indices -> metric -> (draws, 2)
        out = {}
        for name in METRICS:
            vals = []
            for term in terms:
                conf, ok = term["confidence"][rows], term["correct"][rows]
                if name == "ECE":
                    vals.append(ece_batch(conf, ok, bins))
                elif name == "debiased L2":
                    vals.append(l2_batch(conf, ok, bins, debiased=True))
                elif name == "NLL":
                    vals.append(term["nll"][rows].mean(axis=1))
                else:
                    vals.append(term["brier"][rows].mean(axis=1))
            out[name] = np.stack(vals, axis=1)
        return out

    # The full-data verdicts use the module's own metrics (one code path); the subsets use the
    # batched sums above, which the tests check against the same functions.
    full = {}
    for name in METRICS:
        vals = []
        for lp, term in zip(scaled, terms):
            if name == "ECE":
                vals.append(ece(term["confidence"], term["correct"], bins=bins))
            elif name == "debiased L2":
                vals.append(float(l2_batch(term["confidence"], term["correct"], bins)[0]))
            elif name == "NLL":
                vals.append(nll(np.exp(lp), y))
            else:
                vals.append(brier(np.exp(lp), y))
        full[name] = (vals[0], vals[1], int(vals[1] < vals[0]))
    agreement = {k: np.empty(len(sizes)) for k in METRICS}
    rng = np.random.default_rng(seed)
    for j, s in enumerate(sizes):
        chosen = np.argpartition(rng.random((draws, n_seq)), s - 1, axis=1)[:, :s]
        rows = order[(chosen[:, :, None] * per + np.arange(per)).reshape(draws, s * per)]
        sub = scores(rows)
        for k in METRICS:
            better = (sub[k][:, 1] < sub[k][:, 0]).astype(int)
            agreement[k][j] = float((better == full[k][2]).mean())
    return {"full": full, "agreement": agreement, "sizes": sizes, "rows_per_sequence": per,
            "draws": draws, "temperatures": ts}
