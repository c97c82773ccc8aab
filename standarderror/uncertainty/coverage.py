"""Coverage: split conformal prediction sets and the analyses of their size.

Pure functions over arrays; importing this module loads neither torch nor the model. One name
is the seed's and reaches the model: ``coverage.predictions(...)``, the committed model's
held-out predictions, is :func:`standarderror.llm.predictions.predictions`, resolved on first
use by the module's ``__getattr__`` (so ``cv.predictions(...)`` keeps working and only a
caller who uses it imports the model layer).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special, stats

from standarderror import _checks
from standarderror.uncertainty import calibration as _cb

# ======================================================================================
# Split conformal prediction sets (LAC, APS) and the analyses of set size
# ======================================================================================
#
# Everything below is a pure function over numpy arrays. Probabilities are (rows x K) with
# rows summing to one; labels are integers in [0, K). Nothing here touches the model.


def __getattr__(name: str):
    """``predictions``, the seed's name for the held-out predictions of the model layer,
    imported on first use (PEP 562), so that importing coverage never loads the model."""
    if name == "predictions":
        from standarderror.llm.predictions import predictions

        return predictions
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


SCORES = ("lac", "aps")
QUANTILES = ("textbook", "ye")
#: Set rules: ``"textbook"`` (float64 scores, the APS running sum capped at one, no fallback
#: unless asked) and ``"ye"`` (Ye et al.'s released computation; see :func:`conformal_sets`).
RULES = ("textbook", "ye")
#: Tolerance used when taking the ceiling of (n + 1)(1 - alpha): a decimal alpha such as 0.3
#: is not exactly representable in binary, and without it ``ceil`` could land one too high.
_CEIL_TOL = 1e-9


_choice = _checks.choice
_sets = _checks.sets


def conformal_rank(n: int, alpha: float) -> int:
    """k = ceil((n + 1)(1 - alpha)), the rank of the calibration score used as threshold
    (with a tolerance of 1e-9 so that a decimal alpha does not round k one too high)."""
    n = _checks.positive_int(n, "n")
    alpha = _checks.alpha(alpha)
    return int(math.ceil((n + 1) * (1 - alpha) - _CEIL_TOL))


_rank_of = conformal_rank


def minimum_calibration(alpha: float) -> int:
    """Smallest calibration size ``n`` for which the textbook threshold exists at ``alpha``.

    The threshold is the :math:`k`-th smallest of ``n`` scores with
    :math:`k = \\lceil (n+1)(1-\\alpha) \\rceil`; it exists when :math:`k \\le n`, which holds
    exactly when :math:`n \\ge 1/\\alpha - 1`.
    """
    a = _checks.alpha(alpha)
    n = max(1, int(math.ceil(1 / a - 1 - _CEIL_TOL)))
    while _rank_of(n, a) > n:  # guard against the tolerance, never more than a step
        n += 1
    return n


def _ye_dtype(a: np.ndarray) -> np.dtype:
    """The arithmetic of Ye et al.'s computation: the array's own float dtype (float32 for
    the released logits), float64 for anything that is not a float."""
    return a.dtype if a.dtype in (np.float32, np.float64) else np.dtype(np.float64)


def ye_softmax(logits, temperature: float = 1.0) -> np.ndarray:
    """Ye et al.'s softmax of option logits, in the logits' own dtype (float32 as released).

    Row by row, :math:`e = \\exp(z - \\max z)` and :math:`p = e / \\sum e`, computed in the
    dtype of ``logits`` when it is float32 or float64 (other input is read as float64); a
    ``temperature`` other than one divides the logits first, in that dtype. The float32
    result differs from the float64 :func:`softmax_logits` in the last bits, and those bits
    decide ties and near-ties of the APS running sum with the threshold
    (:func:`conformal_sets` with ``rule="ye"``). The vectorised form is bit-for-bit the
    per-row computation (a test checks it).
    """
    raw = np.asarray(_checks.real(logits, "logits"))
    z = _checks.array(raw, "logits", ndim=2)
    if z.shape[1] < 2:
        raise ValueError(f"logits must have at least two classes (columns), got shape {z.shape}")
    dt = _ye_dtype(raw)
    z = raw.astype(dt, copy=False)
    t = _checks.temperature(temperature)
    if t != 1.0:
        z = z / dt.type(t)
        if not np.all(np.isfinite(z)):
            raise ValueError(f"logits / temperature overflows {dt}; pass a larger temperature")
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _ye_order(p: np.ndarray) -> np.ndarray:
    """Ye et al.'s option order per row: numpy's default ascending argsort, reversed (so among
    equal probabilities the later option comes first)."""
    return np.argsort(p, axis=1)[:, ::-1]


def _ye_probabilities(p, name: str) -> np.ndarray:
    """Validate probabilities as :func:`_checks.probabilities` does, but return them in their
    own dtype (float32 stays float32): Ye et al.'s rule computes in that arithmetic."""
    raw = np.asarray(_checks.real(p, name))
    _checks.probabilities(raw, name)
    return raw.astype(_ye_dtype(raw), copy=False)


def label_scores(p, *, score: str = "lac", u=None,
                 rule: str = "textbook") -> np.ndarray:
    """Nonconformity score of every label of every row (rows x K); larger = less conforming.

    * ``"lac"`` (least ambiguous set-valued classifier, Sadinle, Lei and Wasserman 2019):
      :math:`s(x, y) = 1 - p_y(x)`.
    * ``"aps"`` (adaptive prediction sets, Romano, Sesia and Candes 2020), deterministic:
      :math:`s(x, y) = \\sum_{j:\\, \\pi(j) \\le \\pi(y)} p_j(x)`, the probability mass of the
      labels sorted by decreasing probability down to and including :math:`y` (:math:`\\pi` is
      the rank; ties are broken by label index). This is the version Ye et al. (2024) ran.
      The running sum is capped at one and the last label's score is exactly one, so scores
      that are one in exact arithmetic are one here, not one plus rounding error.
    * ``"aps"`` with ``u`` (one uniform draw per row): the randomised score
      :math:`s(x, y, u) = \\sum_{j:\\, \\pi(j) < \\pi(y)} p_j(x) + u\\, p_y(x)`, whose
      conformal coverage is exact up to :math:`1/(n+1)`.

    ``rule="ye"``: Ye et al.'s released arithmetic, in the dtype of ``p`` (float32 from
    :func:`ye_softmax`). LAC is ``1 - p``; APS is the running sum of the probabilities in
    the order of :func:`_ye_order` (numpy's ascending argsort reversed: among equal
    probabilities the later option first), accumulated in that dtype, **not** capped, so the
    last option's score is the rounded sum of all six (0.99999994 or 1.0000001 as often as
    1). No randomised form.
    """
    _choice(score, "score", SCORES)
    _choice(rule, "rule", RULES)
    if rule == "ye":
        if u is not None:
            raise ValueError("u (randomisation) is not part of rule='ye'; pass u=None")
        q = _ye_probabilities(p, "p")
        if score == "lac":
            return q.dtype.type(1) - q
        order = _ye_order(q)
        run = np.cumsum(np.take_along_axis(q, order, axis=1), axis=1)
        out = np.empty_like(q)
        np.put_along_axis(out, order, run, axis=1)
        return out
    p = _checks.probabilities(p, "p")
    if score == "lac":
        if u is not None:
            raise ValueError("u (randomisation) applies to score='aps' only; pass u=None for 'lac'")
        return 1.0 - p
    order = np.argsort(-p, axis=1, kind="stable")
    sorted_p = np.take_along_axis(p, order, axis=1)
    inclusive = np.cumsum(sorted_p, axis=1)
    # The mass through the last label is one by definition; rounding in the running sum can
    # push it a hair above (or below). Pin it so exact ties at one stay exact.
    inclusive = np.minimum(inclusive, 1.0)
    inclusive[:, -1] = 1.0
    if u is None:
        s_sorted = inclusive
    else:
        u = _checks.array(u, "u", ndim=1)
        _checks.same_length(p=p, u=u)
        if u.min() < 0 or u.max() > 1:
            raise ValueError("u must lie in [0, 1] (one uniform draw per row)")
        above = np.concatenate([np.zeros((p.shape[0], 1)), inclusive[:, :-1]], axis=1)
        s_sorted = above + u[:, None] * sorted_p
    s = np.empty_like(p)
    np.put_along_axis(s, order, s_sorted, axis=1)
    return s


def conformal_quantile(scores, alpha: float = 0.1, *, quantile: str = "textbook") -> float:
    """The split-conformal threshold :math:`\\hat q` from ``n`` calibration scores.

    ``quantile="textbook"``: the :math:`k`-th smallest score, :math:`k = \\lceil (n+1)
    (1-\\alpha)\\rceil`, which guarantees :math:`P(s_{n+1} \\le \\hat q) \\ge 1 - \\alpha` for an
    exchangeable test score (and :math:`\\le 1 - \\alpha + 1/(n+1)` when scores have no ties).

    ``quantile="ye"``: Ye et al.'s released construction,
    ``np.quantile(scores, ceil((n+1)(1-alpha))/n, method="higher")``. numpy's ``"higher"``
    returns the sorted score at index :math:`\\lceil q (n-1) \\rceil` (0-based). With
    :math:`q = k/n`, :math:`k(n-1)/n = k - k/n`, whose ceiling is :math:`k` when :math:`k < n`
    and :math:`n - 1` when :math:`k = n`. So the "ye" threshold is the :math:`(k+1)`-th smallest
    score when :math:`k < n` (one order statistic more conservative than the textbook; equal
    only where those two scores tie) and the textbook :math:`n`-th smallest when :math:`k = n`.
    When :math:`k > n` neither exists and a ``ValueError`` is raised.
    """
    a = _checks.alpha(alpha)
    _choice(quantile, "quantile", QUANTILES)
    s = _checks.array(scores, "scores", ndim=1)
    n = s.shape[0]
    if quantile == "ye":
        level = np.ceil((n + 1) * (1 - a)) / n
        if level > 1:
            raise ValueError(
                f"calibration set too small: quantile='ye' needs ceil((n+1)(1-alpha))/n <= 1, got "
                f"{level:.4g} for n={n}, alpha={a}; pass at least {minimum_calibration(a)} "
                "calibration rows or a larger alpha"
            )
        return float(np.quantile(s, level, method="higher"))
    k = _rank_of(n, a)
    if k > n:
        raise ValueError(
            f"calibration set too small: the threshold is the ceil((n+1)(1-alpha)) = {k}-th smallest "
            f"of n={n} scores, which does not exist; alpha={a} needs at least "
            f"{minimum_calibration(a)} calibration rows (n >= 1/alpha - 1), or use a larger alpha"
        )
    return float(np.partition(s, k - 1)[k - 1])


def conformal_sets(p_cal, y_cal, p_test, *, alpha: float = 0.1, score: str = "lac",
                   randomized: bool = False, nonempty: bool | None = None,
                   seed: int | None = None, quantile: str | None = None,
                   rule: str = "textbook") -> dict:
    """Split conformal prediction sets, vectorised over questions.

    The calibration scores :math:`s_i = s(x_i, y_i)` (see :func:`label_scores`) give the
    threshold :math:`\\hat q` (see :func:`conformal_quantile`), and the set of a test row is
    :math:`C(x) = \\{y : s(x, y) \\le \\hat q\\}`. For exchangeable calibration and test pairs,
    :math:`P(Y \\in C(X)) \\ge 1 - \\alpha`; this is a statement about the average coverage only.

    Parameters
    ----------
    p_cal, y_cal : calibration probabilities (n x K) and labels (n).
    p_test : test probabilities (m x K).
    alpha : miscoverage level in (0, 1).
    score : ``"lac"`` or ``"aps"``.
    randomized : APS only: draw :math:`U \\sim \\mathrm{Uniform}(0, 1)` per row (calibration and
        test) from ``seed`` and use the randomised score.
    nonempty : add the most probable label to an empty set (coverage can only go up).
        Default ``None``: off for ``rule="textbook"``, on for ``rule="ye"``.
    seed : int, numpy.random.Generator or None
        Seed of the uniform draws (``randomized=True``). With the default ``None`` the draws
        come from fresh operating-system entropy, so randomised sets differ from call to
        call; pass an integer for reproducible sets (as with scikit-learn's
        ``random_state``).
    quantile : ``"textbook"`` or ``"ye"`` (see :func:`conformal_quantile`). Default ``None``:
        the rule's own (``"textbook"``, or ``"ye"`` for ``rule="ye"``).
    rule : ``"textbook"`` or ``"ye"``. ``"ye"`` is Ye et al.'s released computation, in the
        dtype of the probabilities passed (float32 from :func:`ye_softmax`): scores as
        :func:`label_scores` with ``rule="ye"``; :math:`\\hat q` = ``np.quantile(scores,
        ceil((n+1)(1-alpha))/n, method="higher")``, a calibration score of that dtype;
        LAC keeps the options with :math:`p \\ge 1 - \\hat q` (the difference rounded in
        that dtype), APS keeps options in order while their running sum is
        :math:`\\le \\hat q`; and an empty set receives one option, ``argmax(p)`` under
        LAC, the first option of the APS order under APS (``nonempty=False`` switches that
        fallback off, to measure what it adds). Probabilities are not renormalised.

    Returns
    -------
    dict
        ``sets`` (m x K bool), ``qhat`` (float), ``scores_cal`` (n, the calibration scores),
        ``scores_test`` (m x K, every label's score), ``score``, ``alpha``, ``n_cal``.
    """
    a = _checks.alpha(alpha)
    _choice(score, "score", SCORES)
    _choice(rule, "rule", RULES)
    if rule == "ye":
        if quantile not in (None, "ye"):
            raise ValueError("rule='ye' uses Ye et al.'s quantile; pass quantile=None or 'ye'")
        if randomized:
            raise ValueError("randomized=True is not part of rule='ye'")
        return _ye_sets(p_cal, y_cal, p_test, a, score, True if nonempty is None else nonempty)
    quantile = "textbook" if quantile is None else quantile
    nonempty = bool(nonempty)
    _choice(quantile, "quantile", QUANTILES)
    p_cal = _checks.probabilities(p_cal, "p_cal")
    p_test = _checks.probabilities(p_test, "p_test")
    if p_test.shape[1] != p_cal.shape[1]:
        raise ValueError(
            f"p_test has {p_test.shape[1]} classes but p_cal has {p_cal.shape[1]}; "
            "both need the same columns"
        )
    y_cal = _checks.labels(y_cal, p_cal.shape[1], p_cal.shape[0], "y_cal")
    if randomized and score != "aps":
        raise ValueError("randomized=True applies to score='aps' only")
    u_cal = u_test = None
    if randomized:
        rng = np.random.default_rng(seed)
        u_cal = rng.random(p_cal.shape[0])
        u_test = rng.random(p_test.shape[0])
    cal_all = label_scores(p_cal, score=score, u=u_cal)
    s_cal = cal_all[np.arange(p_cal.shape[0]), y_cal]
    qhat = conformal_quantile(s_cal, a, quantile=quantile)
    s_test = label_scores(p_test, score=score, u=u_test)
    sets = s_test <= qhat
    if nonempty:
        empty = ~sets.any(axis=1)
        sets[empty, np.argmax(p_test[empty], axis=1)] = True
    return {"sets": sets, "qhat": qhat, "scores_cal": s_cal, "scores_test": s_test,
            "score": score, "alpha": a, "n_cal": int(p_cal.shape[0])}


def _ye_sets(p_cal, y_cal, p_test, alpha: float, score: str, fallback: bool) -> dict:
    """:func:`conformal_sets` with ``rule="ye"`` (arguments already checked)."""
    nonempty = bool(fallback)
    q_cal = _ye_probabilities(p_cal, "p_cal")
    q_test = _ye_probabilities(p_test, "p_test")
    if q_test.shape[1] != q_cal.shape[1]:
        raise ValueError(f"p_test has {q_test.shape[1]} classes but p_cal has {q_cal.shape[1]}; "
                         "both need the same columns")
    y_cal = _checks.labels(y_cal, q_cal.shape[1], q_cal.shape[0], "y_cal")
    s_cal = label_scores(q_cal, score=score, rule="ye")[np.arange(q_cal.shape[0]), y_cal]
    # the threshold is one of the calibration scores ("higher" interpolates nothing), so it
    # is exact in their dtype; conformal_quantile checks the size of the calibration set
    qhat = s_cal.dtype.type(conformal_quantile(s_cal.astype(np.float64), alpha, quantile="ye"))
    s_test = label_scores(q_test, score=score, rule="ye")
    rows = np.arange(q_test.shape[0])
    if score == "lac":
        sets = q_test >= q_test.dtype.type(1) - qhat
        top = np.argmax(q_test, axis=1)
    else:
        sets = s_test <= qhat
        top = _ye_order(q_test)[:, 0]
    if nonempty:
        empty = ~sets.any(axis=1)
        sets[rows[empty], top[empty]] = True
    return {"sets": sets, "qhat": float(qhat), "scores_cal": s_cal, "scores_test": s_test,
            "score": score, "alpha": alpha, "n_cal": int(q_cal.shape[0]), "rule": "ye",
            "nonempty": nonempty}


def set_summary(sets, y) -> dict:
    """Realised coverage and size of prediction sets.

    Returns
    -------
    dict
        ``coverage`` (fraction of rows whose set holds the label), ``mean_size``,
        ``median_size``, ``singleton`` (fraction of sets of size one), ``empty`` (fraction of
        empty sets), ``n`` (rows), ``sizes`` (per row).
    """
    s = _sets(sets)
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
    s = _sets(sets)
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
    counts = _cb.pair_counts(acc, sz)
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


def softmax_logits(logits, temperature: float = 1.0) -> np.ndarray:
    """Row-wise :math:`\\mathrm{softmax}(z / T)`, computed in log space (float64).

    A row whose ``z / T`` overflows (a temperature so small that ``1/T`` is finite but
    ``z/T`` is not, such as 1e-308) is computed as :math:`\\mathrm{softmax}((z - z_{\\max})
    / T)`, equal in exact arithmetic: every exponent is then <= 0, an entry far below the
    maximum gets probability 0, and the entries tied at the maximum share the mass (the
    limit as T -> 0). Other rows are computed as ``log_softmax(z / T)``, unchanged."""
    z = _checks.array(logits, "logits", ndim=2)
    if z.shape[1] < 2:
        raise ValueError(f"logits must have at least two classes (columns), got shape {z.shape}")
    t = _checks.temperature(temperature)
    with np.errstate(over="ignore"):
        scaled = z / t
    over = ~np.isfinite(scaled).all(axis=1)
    if over.any():
        with np.errstate(over="ignore"):
            shifted = z[over] - z[over].max(axis=1, keepdims=True)   # <= 0, or -inf
            scaled[over] = shifted / t                               # 0 at the max, or -inf
    return np.exp(special.log_softmax(scaled, axis=1))


def evaluate(p, y, calibration, *, alpha: float = 0.1, quantile: str | None = None,
             scores=SCORES, rule: str = "textbook", nonempty: bool | None = None,
             answers=None) -> dict:
    """One model on one task: accuracy and, per score function, threshold, coverage and size.

    ``calibration`` is a boolean mask (rows): True rows calibrate, the others are the test half.
    Accuracy is measured on the test half (the rows whose sets are measured), of ``answers``
    (the model's answer per row) when given, else of ``argmax(p)``. Ye et al. score the
    argmax of the logits, which can differ from that of float32 probabilities where two
    probabilities round to the same float; pass ``answers=argmax(logits)`` to match them.
    ``quantile``, ``rule`` and ``nonempty`` go to :func:`conformal_sets`.

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
    cal = np.asarray(calibration)
    if cal.dtype != bool or cal.shape != y.shape:
        raise ValueError("calibration must be a boolean mask with one entry per row of p")
    test = ~cal
    if test.sum() == 0:
        raise ValueError("calibration marks every row; leave some rows for the test half")
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
# The demonstration: three synthetic classifiers, each isolating one effect
# --------------------------------------------------------------------------------------


def _synthetic_logits(rng, n: int, k: int, wrong_rate: float, margin: tuple, wrong_margin: tuple):
    """Logits of a synthetic k-option classifier: standard normal noise plus a margin on the
    option it picks; it picks a wrong option on a ``wrong_rate`` share of the questions."""
    y = rng.integers(0, k, n)
    z = rng.normal(0.0, 1.0, (n, k))
    wrong = rng.random(n) < wrong_rate
    top = np.where(wrong, (y + rng.integers(1, k, n)) % k, y)
    m = np.where(wrong, rng.uniform(*wrong_margin, n), rng.uniform(*margin, n))
    z[np.arange(n), top] += m
    return z, y


def _identical_sets_pair(rng, n_half: int, k: int = 6, b: float = 0.35):
    """Two models whose LAC sets coincide on every question, with accuracy 90% and 5%.

    On each question the same two options (``S``) carry probabilities ``a`` (drawn from
    U(0.45, 0.6)) and ``b`` = 0.35; the other four share ``1 - a - b`` <= 0.2, so each is below
    ``b``. Model A gives ``a`` to the true label on 90% of the questions, model B on 5%. Both
    put the true label outside ``S`` on 3%. Counts are exact within each half, so both
    thresholds are 1 - b and both models' sets are ``S`` on every question.
    """
    # joint categories: (A's role of the true label, B's role): top/second/outside
    shares = {("top", "top"): 0.05, ("top", "second"): 0.85, ("second", "second"): 0.07,
              ("outside", "outside"): 0.03}
    pa, pb, ys = [], [], []
    for _half in range(2):
        roles = np.concatenate([np.full(int(round(s * n_half)), i) for i, s in enumerate(shares.values())])
        if roles.size != n_half:
            raise ValueError("n_half must be a multiple of 100 for exact shares")
        roles = rng.permutation(roles)
        y = rng.integers(0, k, n_half)
        a = rng.uniform(0.45, 0.6, n_half)
        rest = rng.dirichlet(np.ones(k - 2), n_half) * (1 - a - b)[:, None]
        d1 = (y + rng.integers(1, k, n_half)) % k                    # a decoy
        d2 = (d1 + rng.integers(1, k - 1, n_half)) % k               # a second decoy
        d2 = np.where(d2 == y, (d2 + 1) % k, d2)
        d2 = np.where(d2 == d1, (d2 + 1) % k, d2)
        d2 = np.where(d2 == y, (d2 + 1) % k, d2)
        keys = list(shares)
        p_models = []
        for which in (0, 1):
            role = np.array([keys[r][which] for r in roles])
            first = np.where(role == "top", y, d1)                     # gets a
            second = np.where(role == "second", y, np.where(role == "top", d1, d2))  # gets b
            p = np.zeros((n_half, k))
            rows = np.arange(n_half)
            p[rows, first] = a
            p[rows, second] = b
            others = np.ones((n_half, k), bool)
            others[rows, first] = False
            others[rows, second] = False
            p[others] = rest.reshape(-1)
            p_models.append(p)
        pa.append(p_models[0])
        pb.append(p_models[1])
        ys.append(y)
    return np.concatenate(pa), np.concatenate(pb), np.concatenate(ys)


def demonstration(seed: int = 0, *, n: int = 4000, alpha: float = 0.1) -> dict:
    """Three synthetic classifiers (six options), each isolating one effect on set size.

    The first half of the ``n`` questions calibrates, the second half is the test half.

    * Panel A (``"a"``): a sharp model (right on ~90%, large margins) and a medium model (right
      on ~76%, smaller margins). LAC gives the sharp model the smaller sets, APS the larger:
      the two scores rank the two models in opposite orders.
    * Panel B (``"b"``): a sharper model whose confident answers are so confident that the
      mass left below its top option is under double precision, so its APS scores are exactly
      one on those questions. The APS threshold becomes one, every option is admitted and
      realised coverage is 100%; LAC on the same model stays near 90% with sets of about one.
    * Panel C (``"c"``): two models whose LAC sets coincide on every question (same mean size,
      same coverage) with accuracy 90% and 5% (see :func:`_identical_sets_pair`).

    Returns
    -------
    dict
        ``"a"``, ``"b"``: ``{model: {"p", "y", "accuracy", "lac": {...}, "aps": {...}}}`` with
        the :func:`evaluate` summaries (plus ``scores_cal`` per score); ``"c"``: ``{"p_a",
        "p_b", "y", "a": evaluate(...), "b": evaluate(...), "identical": bool}``;
        ``"calibration"`` (the mask).
    """
    rng = np.random.default_rng(seed)
    a = _checks.alpha(alpha)
    if n % 200 != 0:
        raise ValueError("n must be a multiple of 200 (two halves with exact shares)")
    cal = np.zeros(n, dtype=bool)
    cal[: n // 2] = True
    specs = {
        "a": {"sharp": (0.10, (4.0, 12.0), (4.0, 8.0)), "medium": (0.20, (2.0, 5.0), (0.5, 2.0))},
        "b": {"saturating": (0.10, (10.0, 60.0), (3.0, 6.0))},
    }
    out: dict = {"calibration": cal}
    for panel, models in specs.items():
        out[panel] = {}
        for name, (wrong, margin, wrong_margin) in models.items():
            z, y = _synthetic_logits(rng, n, 6, wrong, margin, wrong_margin)
            p = softmax_logits(z)
            e = evaluate(p, y, cal, alpha=a)
            for score in SCORES:
                e[score]["scores_cal"] = conformal_sets(p[cal], y[cal], p[~cal], alpha=a,
                                                        score=score)["scores_cal"]
            out[panel][name] = {"p": p, "y": y, **e}
    p_a, p_b, y = _identical_sets_pair(rng, n // 2)
    ea, eb = evaluate(p_a, y, cal, alpha=a, scores=("lac",)), evaluate(p_b, y, cal, alpha=a, scores=("lac",))
    out["c"] = {"p_a": p_a, "p_b": p_b, "y": y, "a": ea, "b": eb,
                "identical": bool(np.array_equal(ea["lac"]["sets"], eb["lac"]["sets"]))}
    return out
