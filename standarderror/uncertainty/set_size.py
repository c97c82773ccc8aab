"""What prediction sets measure, and models compared by it.

* One model's sets: :func:`set_summary` (realised coverage and size), :func:`by_confidence`
  (the same within bands of the model's confidence) and :func:`evaluate` (one model on one
  task: accuracy, and per score function threshold, coverage and size).
* Models compared: :func:`ranking` and :func:`spearman` (of mean set sizes),
  :func:`inversions` (pairs in which the more accurate model has the larger sets) and
  :func:`paired_accuracy` (two models' accuracies on the same questions, with McNemar's test).

Pure functions over numpy arrays; the sets come from :mod:`standarderror.uncertainty.conformal`.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

from standarderror import _checks
from standarderror.uncertainty.conformal import SCORES, conformal_sets
from standarderror.uncertainty.ranks import pair_counts


def set_summary(sets, y) -> dict:
    """Realised coverage and size of prediction sets.

    Returns
    -------
    dict
        ``coverage`` (fraction of rows whose set holds the label), ``mean_size``,
        ``median_size``, ``singleton`` (fraction of sets of size one), ``empty`` (fraction of
        empty sets), ``n`` (rows), ``sizes`` (per row).
    """
    s = _checks.sets(sets)
    y = _checks.labels(y, s.shape[1], s.shape[0], "y")
    sizes = s.sum(axis=1)
    return {
        "coverage": float(s[np.arange(s.shape[0]), y].mean()),
        "mean_size": float(sizes.mean()),
        "median_size": float(np.median(sizes)),
        "singleton": float((sizes == 1).mean()),
        "empty": float((sizes == 0).mean()),
        "n": int(s.shape[0]),
        "sizes": sizes,
    }


def by_confidence(sets, y, confidence, *, bands=(0.0, 0.5, 0.7, 0.9, 1.0)) -> dict:
    """Coverage and mean size within bands of the model's confidence (its top probability).

    Band :math:`b` holds the rows with ``bands[b] < confidence <= bands[b+1]`` (the first band
    also holds ``confidence == bands[0]``). Empty bands report ``count = 0`` and NaN coverage
    and size, so a caller cannot mistake them for measurements.

    Returns
    -------
    dict
        ``edges`` (the band edges), ``count``, ``coverage``, ``mean_size`` (one per band).
    """
    s = _checks.sets(sets)
    y = _checks.labels(y, s.shape[1], s.shape[0], "y")
    c = _checks.array(confidence, "confidence", ndim=1)
    _checks.same_length(sets=s, confidence=c)
    edges = _checks.array(bands, "bands", ndim=1)
    if edges.shape[0] < 2 or np.any(np.diff(edges) <= 0):
        raise ValueError("bands must be at least two strictly increasing edges")
    if c.min() < edges[0] or c.max() > edges[-1]:
        raise ValueError(f"confidence lies in [{c.min():.3g}, {c.max():.3g}], outside the bands "
                         f"[{edges[0]}, {edges[-1]}]; widen bands")
    band = np.clip(np.searchsorted(edges, c, side="left") - 1, 0, len(edges) - 2)
    hit = s[np.arange(s.shape[0]), y]
    size = s.sum(axis=1)
    nb = len(edges) - 1
    count = np.bincount(band, minlength=nb)
    with np.errstate(invalid="ignore", divide="ignore"):
        cov = np.bincount(band, weights=hit, minlength=nb) / count
        msize = np.bincount(band, weights=size, minlength=nb) / count
    return {"edges": edges, "count": count, "coverage": cov, "mean_size": msize}


def evaluate(p, y, calibrating, *, alpha: float = 0.1, quantile: str | None = None,
             scores=SCORES, rule: str = "textbook", nonempty: bool | None = None,
             answers=None) -> dict:
    """One model on one task: accuracy and, per score function, threshold, coverage and size.

    ``calibrating`` is a boolean mask (rows): True rows calibrate, the others are the test half.
    Accuracy is measured on the test half (the rows whose sets are measured), of ``answers``
    (the model's answer per row) when given, else of ``argmax(p)``. Ye et al. score the
    argmax of the logits, which can differ from that of float32 probabilities where two
    probabilities round to the same float; pass ``answers=argmax(logits)`` to match them.
    ``quantile``, ``rule`` and ``nonempty`` go to :func:`~standarderror.uncertainty.conformal.conformal_sets`.

    Returns
    -------
    dict
        ``accuracy``; for each score name a dict with ``qhat``, ``coverage``, ``mean_size``,
        ``median_size``, ``singleton``, ``empty`` and ``sets``; and ``average_size``, the mean
        of the scores' mean sizes (the quantity Ye et al. rank by).
    """
    p_in = p
    p = _checks.probabilities(p, "p")
    y = _checks.labels(y, p.shape[1], p.shape[0], "y")
    cal = np.asarray(calibrating)
    if cal.dtype != bool or cal.shape != y.shape:
        raise ValueError("calibrating must be a boolean mask with one entry per row of p")
    test = ~cal
    if test.sum() == 0:
        raise ValueError("calibrating marks every row; leave some rows for the test half")
    if answers is None:
        answers = np.argmax(p, axis=1)
    else:
        answers = _checks.labels(answers, p.shape[1], p.shape[0], "answers")
    out = {"accuracy": float((answers[test] == y[test]).mean())}
    # rule="ye" computes in the probabilities' own dtype: hand it the array as passed
    q = p if rule == "textbook" else np.asarray(p_in)
    for name in scores:
        r = conformal_sets(q[cal], y[cal], q[test], alpha=alpha, score=name, quantile=quantile,
                           rule=rule, nonempty=nonempty)
        summ = set_summary(r["sets"], y[test])
        summ.pop("sizes")
        out[name] = {"qhat": r["qhat"], "sets": r["sets"], **summ}
    out["average_size"] = float(np.mean([out[name]["mean_size"] for name in scores]))
    return out


# --------------------------------------------------------------------------------------
# Comparing models: rankings, Kendall's tau, Spearman, inversions, temperature
# --------------------------------------------------------------------------------------


def spearman(a, b) -> float:
    """Spearman's rank correlation (``scipy.stats.spearmanr``) between two per-model values."""
    a = _checks.array(a, "a", ndim=1)
    b = _checks.array(b, "b", ndim=1)
    _checks.same_length(a=a, b=b)
    if a.shape[0] < 3 or np.ptp(a) == 0 or np.ptp(b) == 0:
        raise ValueError("a and b need at least three items and must not be constant")
    return float(stats.spearmanr(a, b).statistic)


def ranking(values) -> np.ndarray:
    """Ranks (1 = smallest; ties share the average rank), e.g. of mean set sizes: rank 1 is the
    model a size benchmark calls least uncertain."""
    return stats.rankdata(_checks.array(values, "values", ndim=1))


def inversions(accuracy, size, *, list_limit: int = 10_000) -> dict:
    """Pairs of models in which the more accurate one has the strictly larger mean set size.

    Only pairs with different accuracies count as pairs. The counts are Kendall's concordant
    pairs and untied pairs (:func:`~standarderror.uncertainty.ranks.kendall_tau`'s merge
    count, :math:`O(n \\log n)` time and :math:`O(n)` memory), so 10^5 models are fine.

    Returns
    -------
    dict
        ``count``, ``pairs`` and ``which``: the list of (more accurate, less accurate) index
        pairs, in row-major order, when ``count <= list_limit``; otherwise ``None`` (a list of
        billions of pairs would not fit in memory).
    """
    acc = _checks.array(accuracy, "accuracy", ndim=1)
    sz = _checks.array(size, "size", ndim=1)
    n = _checks.same_length(accuracy=acc, size=sz)
    if n < 2:
        return {"count": 0, "pairs": 0, "which": []}
    counts = pair_counts(acc, sz)
    count, pairs = counts["concordant"], counts["pairs"] - counts["ties_x"]
    which = None
    if count <= list_limit:
        which = []
        step = max(1, 4_000_000 // n)  # rows per chunk: at most 4 million comparisons at once
        for start in range(0, n, step):
            a, b = acc[start:start + step, None], sz[start:start + step, None]
            hits = np.argwhere((a > acc[None, :]) & (b > sz[None, :]))
            which.extend((int(i) + start, int(j)) for i, j in hits)
    return {"count": int(count), "pairs": int(pairs), "which": which}


def paired_accuracy(correct_a, correct_b) -> dict:
    """Two models' accuracies on the same questions, compared question by question.

    With :math:`d_i = a_i - b_i \\in \\{-1, 0, 1\\}` (1 = right), the difference of
    accuracies is :math:`\\bar d` and its paired standard error is
    :math:`\\sqrt{(\\overline{d^2} - \\bar d^{\\,2}) / n}`: only the questions on which the two
    disagree contribute, so it is smaller than one accuracy's binomial standard error
    whenever the two models tend to be right on the same questions. McNemar's exact test
    asks whether the ``a_only`` questions (a right, b wrong) and the ``b_only`` questions are
    equally likely: the two-sided binomial test of ``a_only`` out of ``a_only + b_only`` at
    one half (``scipy.stats.binomtest``; p = 1 when the two never disagree).

    Returns
    -------
    dict
        ``n``, ``difference`` (accuracy of a minus accuracy of b), ``se`` (paired),
        ``a_only``, ``b_only``, ``mcnemar_p``.
    """
    a = _checks.real(correct_a, "correct_a")
    b = _checks.real(correct_b, "correct_b")
    for name, v in (("correct_a", a), ("correct_b", b)):
        if v.ndim != 1 or v.size == 0 or not np.all((v == 0) | (v == 1)):
            raise ValueError(f"{name} must be a non-empty 1-D array of 0/1 (right/wrong) values")
    _checks.same_length(correct_a=a, correct_b=b)
    d = a.astype(np.int64) - b.astype(np.int64)
    n = d.size
    a_only, b_only = int((d == 1).sum()), int((d == -1).sum())
    mean = d.mean()
    se = math.sqrt(max((d.astype(float) ** 2).mean() - mean ** 2, 0.0) / n)
    p = 1.0 if a_only + b_only == 0 else float(stats.binomtest(a_only, a_only + b_only,
                                                               0.5).pvalue)
    return {"n": int(n), "difference": float(mean), "se": se, "a_only": a_only,
            "b_only": b_only, "mcnemar_p": p}
