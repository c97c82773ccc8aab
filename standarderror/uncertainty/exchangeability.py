r"""Split conformal as a statement about an average, and how to check what it assumes (Episode 1).

Split conformal prediction (Vovk, Gammerman and Shafer 2005; Angelopoulos and Bates 2023)
calibrates a threshold :math:`\hat q` on :math:`n` held-out scores and promises

.. math::

    P\bigl(Y_{n+1} \in C(X_{n+1})\bigr) \ge 1 - \alpha,

where the probability is over the calibration set *and* the test point, and the only
assumption is that calibration and test pairs are exchangeable. The threshold and the sets
come from :mod:`standarderror.uncertainty.coverage` (one code path); this module measures
what the promise is about:

* :func:`finite_sample_level` -- the exact expected coverage :math:`k/(n+1)`,
  :math:`k = \lceil (n+1)(1-\alpha) \rceil`;
* :func:`coverage_distribution` -- the distribution of the realised coverage of :math:`m`
  test points: Beta for the coverage of the calibrated threshold, beta-binomial for what a
  finite test set sees;
* :func:`calibration_masks` and :func:`split_coverage` -- many random calibration/test
  splits at once, by rows or by whole sequences;
* :func:`spread_interval` -- the spread across splits with its uncertainty;
* :func:`shuffle_groups` -- the control: the same grouped split with the grouping destroyed;
* :func:`escalation` -- what a policy that answers singleton sets and escalates the rest
  keeps and sends on.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from scipy import stats

from standarderror import _checks
from standarderror.uncertainty.conformal import (
    conformal_quantile,
    conformal_rank,
    conformal_sets,
    minimum_calibration,
)
from standarderror.uncertainty.set_size import set_summary

#: How a calibration set is drawn: individual rows, or whole sequences (windows).
SPLITS = ("row", "sequence")
#: The largest test set :func:`coverage_distribution` takes: its quantiles sum the exact
#: beta-binomial over all ``m + 1`` outcomes (two seconds at this size).
MAX_TEST_POINTS = 1_000_000


def finite_sample_level(n, alpha) -> float:
    r"""Expected coverage of split conformal with ``n`` calibration scores at level ``alpha``.

    The threshold is the :math:`k`-th smallest calibration score with
    :math:`k = \lceil (n+1)(1-\alpha) \rceil`. For exchangeable scores without ties the rank of
    a new score among the :math:`n+1` is uniform, so

    .. math::

        P(s_{n+1} \le \hat q) = \frac{k}{n+1} \in \Bigl[1-\alpha,\; 1-\alpha+\frac{1}{n+1}\Bigr).

    Ties can only raise the coverage. Raises ``ValueError`` when :math:`k > n` (the threshold
    does not exist; see :func:`standarderror.uncertainty.conformal.minimum_calibration`).
    """
    n = _checks.positive_int(n, "n")
    a = _checks.alpha(alpha)
    k = conformal_rank(n, a)
    if k > n:
        raise ValueError(f"n={n} calibration scores are too few for alpha={a}: the threshold is the "
                         f"{k}-th smallest; pass n >= {minimum_calibration(a)} or a larger alpha")
    return k / (n + 1)


def coverage_distribution(n, m, alpha) -> dict:
    r"""How far the realised coverage of one split can fall from its expectation.

    Conditional on the calibration set, the threshold covers a fraction :math:`C` of the
    score distribution. For continuous exchangeable scores :math:`C` is the :math:`k`-th
    uniform order statistic of :math:`n`:

    .. math::

        C \sim \mathrm{Beta}(k,\; n+1-k), \qquad E[C] = \frac{k}{n+1},\qquad
        \mathrm{Var}(C) = \frac{k(n+1-k)}{(n+1)^2 (n+2)}.

    A finite test set of :math:`m` points then covers :math:`X \mid C \sim
    \mathrm{Binomial}(m, C)` of them, so :math:`X \sim \mathrm{BetaBinomial}(m, k, n+1-k)` and
    the realised coverage :math:`\hat C = X/m` has

    .. math::

        \mathrm{Var}(\hat C) = \mathrm{Var}(C) + \frac{E[C(1-C)]}{m}
        = \mathrm{Var}(C)\Bigl(1 - \frac1m\Bigr) + \frac{\mu(1-\mu)}{m},\qquad \mu = E[C].

    The same beta-binomial is the exact distribution of the test coverage over *random
    splits of one fixed pool* of :math:`n+m` distinct scores (the rank of the threshold in
    the pool is then negative-hypergeometric, which equals this beta-binomial), so it is
    the right yardstick for the spread across re-splits of a single dataset.

    Returns
    -------
    dict
        ``k``, ``level`` (:math:`k/(n+1)`), ``sd_calibration`` (sd of :math:`C`),
        ``sd_test`` (the binomial part, :math:`\sqrt{E[C(1-C)]/m}`), ``sd`` (sd of
        :math:`\hat C`), ``low`` and ``high`` (the 2.5% and 97.5% quantiles of :math:`\hat C`),
        ``below`` (:math:`P(\hat C < 1-\alpha)`), ``n``, ``m``.
    """
    n = _checks.positive_int(n, "n")
    m = _checks.at_most(_checks.positive_int(m, "m"), "m", MAX_TEST_POINTS)
    a = _checks.alpha(alpha)
    level = finite_sample_level(n, a)
    k = conformal_rank(n, a)
    b = n + 1 - k
    var_c = k * b / ((n + 1) ** 2 * (n + 2))
    between = level * (1 - level) - var_c  # E[C(1 - C)]
    var_hat = var_c + between / m
    law = stats.betabinom(m, k, b)
    # P(X/m < 1 - alpha) = P(X <= ceil(m(1-alpha)) - 1), with the same tolerance as the rank.
    below = float(law.cdf(int(np.ceil(m * (1 - a) - 1e-9)) - 1))
    return {"k": k, "level": level, "sd_calibration": float(np.sqrt(var_c)),
            "sd_test": float(np.sqrt(between / m)), "sd": float(np.sqrt(var_hat)),
            "low": float(law.ppf(0.025) / m), "high": float(law.ppf(0.975) / m),
            "below": below, "n": n, "m": m}


def _groups(sequence, name: str = "sequence") -> tuple[np.ndarray, int, int]:
    """Dense group ids 0..G-1, the number of groups and their (common) size."""
    s = np.asarray(sequence)
    if s.ndim != 1 or s.size == 0:
        raise ValueError(f"{name} must be a non-empty one-dimensional array of group ids, "
                         f"got shape {s.shape}")
    if s.dtype.kind == "f" and not np.all(np.isfinite(s)):
        raise ValueError(f"{name} contains NaN or infinite ids; pass one integer id per row")
    _, idx, counts = np.unique(s, return_inverse=True, return_counts=True)
    if counts.min() != counts.max():
        raise ValueError(f"{name}: groups have {counts.min()} to {counts.max()} rows; splits by "
                         "whole groups need equal-sized groups so that every split has the same n")
    if counts.size < 2:
        raise ValueError(f"{name} holds a single group; a split needs at least two")
    return idx.reshape(-1), int(counts.size), int(counts[0])


def calibration_masks(sequence, *, share: float = 0.5, splits: int = 200,
                      by: str = "row", seed: int = 0) -> np.ndarray:
    r"""Random calibration/test splits, all at once: a (splits x rows) boolean mask.

    ``sequence`` gives the group (window) of every row; groups must have equal sizes
    :math:`g`. With :math:`G` groups, :math:`G_c = \mathrm{round}(\text{share} \cdot G)`
    of them (``by="sequence"``) or :math:`n = G_c g` individual rows (``by="row"``) go to
    calibration in each split, so both kinds of split calibrate on the same :math:`n` and test on
    the same :math:`m = (G - G_c) g`. True marks a calibration row.

    Parameters
    ----------
    sequence : array_like, shape (rows,)
        Group id of each row (e.g. ``predictions()["sequence"]``).
    share : float
        Fraction of the groups that calibrate, in (0, 1).
    splits : int
        Number of independent random splits.
    by : {"row", "sequence"}
        Draw rows independently of their group, or whole groups.
    seed : int
        Seed of the permutations.
    """
    idx, n_groups, size = _groups(sequence)
    frac = _checks.alpha(share, "share")
    splits = _checks.draws(splits, "splits")
    _checks.choice(by, "by", SPLITS)
    g_cal = int(round(frac * n_groups))
    if not 1 <= g_cal < n_groups:
        raise ValueError(f"share={frac} of {n_groups} groups leaves no calibration or no test "
                         "group; pass a fraction nearer 0.5")
    rng = np.random.default_rng(seed)
    rows = idx.size
    # one permutation per split, drawn in turn (the same stream as permuting a splits x rows
    # array row by row, without holding it: memory is the mask plus one permutation)
    mask = np.zeros((splits, rows), dtype=bool)
    if by == "row":
        n_cal = g_cal * size
        for i in range(splits):
            mask[i, rng.permutation(rows)[:n_cal]] = True
        return mask
    member = np.zeros(n_groups, dtype=bool)
    for i in range(splits):
        member[:] = False
        member[rng.permutation(n_groups)[:g_cal]] = True
        mask[i] = member[idx]
    return mask


def split_coverage(scores, calibrating, alpha: float = 0.1) -> dict:
    r"""Realised test coverage of split conformal over many calibration/test splits.

    ``scores`` are the nonconformity scores of the *true* labels, one per row (for LAC,
    ``coverage.label_scores(p)[rows, y]``); row :math:`i` is covered by its set exactly when
    :math:`s_i \le \hat q`. In each split (a row of ``calibrating``) the threshold is
    ``coverage.conformal_quantile`` of the calibration scores -- the same code that builds the
    sets -- and the coverage is measured on the remaining rows.

    Parameters
    ----------
    scores : array_like, shape (rows,)
        True-label nonconformity scores.
    calibrating : array_like of bool, shape (splits, rows)
        True marks calibration rows (see :func:`calibration_masks`); every split must hold
        the same number of them.
    alpha : float
        Miscoverage level.

    Returns
    -------
    dict
        ``coverage`` and ``qhat`` (one per split), ``mean``, ``sd``, ``n`` (calibration
        rows per split) and ``m`` (test rows per split).
    """
    s = _checks.array(scores, "scores", ndim=1)
    a = _checks.alpha(alpha)
    mask = np.asarray(calibrating)
    if mask.dtype != bool or mask.ndim != 2 or mask.shape[1] != s.size:
        raise ValueError(f"calibrating must be a boolean (splits x {s.size}) mask, got dtype "
                         f"{mask.dtype} and shape {mask.shape}")
    n_cal = mask.sum(axis=1)
    if np.any(n_cal != n_cal[0]):
        raise ValueError("calibrating: every split must hold the same number of calibration rows")
    n, m = int(n_cal[0]), int(s.size - n_cal[0])
    if n == 0 or m == 0:
        raise ValueError("calibrating must leave at least one calibration and one test row per split")
    cal = np.broadcast_to(s, mask.shape)[mask].reshape(mask.shape[0], n)
    # One threshold code path: coverage.conformal_quantile, once per split (a few hundred short
    # calls; the work over rows is vectorised inside it and below).
    qhat = np.array([conformal_quantile(row, a) for row in cal])
    covered = (s[None, :] <= qhat[:, None]) & ~mask
    cov = covered.sum(axis=1) / m
    return {"coverage": cov, "qhat": qhat, "mean": float(cov.mean()),
            "sd": float(cov.std(ddof=1)) if cov.size > 1 else 0.0, "n": n, "m": m}


def spread_interval(values, level: float = 0.95) -> dict:
    r"""The standard deviation of ``values`` with a chi-square confidence interval.

    For :math:`S` roughly normal values, :math:`(S-1)\,\hat\sigma^2/\sigma^2 \sim
    \chi^2_{S-1}`, so :math:`\sigma \in \bigl[\hat\sigma\sqrt{(S-1)/\chi^2_{S-1,\,1-a/2}},\;
    \hat\sigma\sqrt{(S-1)/\chi^2_{S-1,\,a/2}}\bigr]` with probability ``level``
    (:math:`a = 1 -` level). Used for the spread of coverage across random splits, which is
    close to normal when the calibration and test sets are large.

    Returns
    -------
    dict
        ``sd``, ``low``, ``high``, ``count``.
    """
    v = _checks.array(values, "values", ndim=1)
    if v.size < 3:
        raise ValueError(f"values needs at least three entries for a spread and its interval, got {v.size}")
    lv = _checks.alpha(level, "level")
    df = v.size - 1
    sd = float(v.std(ddof=1))
    tail = (1 - lv) / 2
    return {"sd": sd, "low": sd * float(np.sqrt(df / stats.chi2.ppf(1 - tail, df))),
            "high": sd * float(np.sqrt(df / stats.chi2.ppf(tail, df))), "count": int(v.size)}


def shuffle_groups(sequence, seed: int = 0) -> np.ndarray:
    """The control for a grouped split: the same group ids, randomly reassigned to rows.

    Every group keeps its size, but its rows are now a random draw from all rows, so whatever
    the rows of one real sequence share (context, topic, position in a speech) is spread
    across groups. A split by these groups is a random row split in disguise.
    """
    _groups(sequence)
    return np.random.default_rng(seed).permutation(np.asarray(sequence))


def escalation(sets, y) -> dict:
    r"""An escalation policy on prediction sets: answer singletons, send the rest on.

    A set with exactly one label is answered automatically with that label; an empty set or
    a set of two or more labels is escalated (to a person, or a larger model).

    Returns
    -------
    dict
        ``kept`` (share of rows answered automatically), ``escalated`` (share sent on),
        ``kept_accuracy`` (share of answered rows whose single label is the truth),
        ``escalated_coverage`` (share of escalated rows whose set holds the truth),
        ``escalated_size`` (mean set size of escalated rows), ``empty`` (share of empty sets),
        ``coverage`` (overall), ``kept_rows``. A share over no rows (nothing kept, or nothing
        escalated) is reported as NaN, never as a number that could be mistaken for a measurement.
    """
    s = _checks.sets(sets)
    y = _checks.labels(y, s.shape[1], s.shape[0], "y")
    size = s.sum(axis=1)
    hit = s[np.arange(s.shape[0]), y]
    kept = size == 1
    out = {"kept": float(kept.mean()), "escalated": float(1 - kept.mean()),
           "empty": float((size == 0).mean()), "coverage": float(hit.mean()),
           "kept_rows": int(kept.sum())}
    out["kept_accuracy"] = float(hit[kept].mean()) if kept.any() else float("nan")
    out["escalated_coverage"] = float(hit[~kept].mean()) if (~kept).any() else float("nan")
    out["escalated_size"] = float(size[~kept].mean()) if (~kept).any() else float("nan")
    return out


@dataclasses.dataclass(frozen=True)
class OneSplit:
    """Split conformal sets calibrated on one split of whole windows (:func:`one_split`).

    Number fields: ``window`` (predictions per window), ``rows``, ``windows``, ``n_cal`` and
    ``n_test`` (calibration and test predictions), ``qhat`` (the threshold), ``p_min``
    (``1 - qhat``: the least probability a label in a set has, for LAC), ``coverage_one``,
    ``mean_size`` (of the test sets), ``level`` (:func:`finite_sample_level` of ``n_cal``) and
    ``accuracy`` (top-1, on the test predictions). ``calibrating`` is the calibration mask over
    all rows, ``sets`` the test sets (boolean, test rows x labels).
    """

    window: int
    rows: int
    windows: int
    n_cal: int
    n_test: int
    qhat: float
    p_min: float
    coverage_one: float
    level: float
    mean_size: float
    accuracy: float
    calibrating: np.ndarray = dataclasses.field(repr=False)
    sets: np.ndarray = dataclasses.field(repr=False)


def one_split(pred: dict, alpha: float = 0.1, *, share: float = 0.5, seed: int = 0,
              score: str = "lac") -> OneSplit:
    """Calibrate split conformal sets on a random ``share`` of whole windows, test on the rest.

    ``pred`` holds ``p`` (rows x labels), ``y``, ``sequence`` (each row's window) and
    ``position`` (each row's place in its window), as :func:`standarderror.llm.predictions.predictions`
    returns them. The split is :func:`calibration_masks` with ``by="sequence"``.
    """
    p, y, seq = pred["p"], pred["y"], pred["sequence"]
    cal = calibration_masks(seq, share=share, splits=1, by="sequence", seed=seed)[0]
    made = conformal_sets(p[cal], y[cal], p[~cal], alpha=alpha, score=score)
    summary = set_summary(made["sets"], y[~cal])
    n, m = int(cal.sum()), int((~cal).sum())
    return OneSplit(
        window=int(pred["position"].max()) + 1, rows=int(y.size), windows=int(seq.max() + 1),
        n_cal=n, n_test=m, qhat=made["qhat"], p_min=1 - made["qhat"],
        coverage_one=summary["coverage"], level=finite_sample_level(n, alpha),
        mean_size=summary["mean_size"],
        accuracy=float((p[~cal].argmax(axis=1) == y[~cal]).mean()),
        calibrating=cal, sets=made["sets"])
