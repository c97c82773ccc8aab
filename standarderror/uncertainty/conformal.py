"""Split conformal prediction sets: nonconformity scores, the threshold and the sets.

* :func:`label_scores` -- the LAC and APS scores of every label (deterministic or randomised).
* :func:`conformal_quantile` -- the threshold: the :math:`\\lceil (n+1)(1-\\alpha) \\rceil`-th
  smallest calibration score (:func:`conformal_rank`; :func:`minimum_calibration` is the
  smallest calibration set for which it exists), or Ye et al.'s ``np.quantile`` construction.
* :func:`conformal_sets` -- the sets of test rows, vectorised over questions.
* ``rule="ye"`` -- Ye et al.'s released computation, an explicit option beside the textbook
  rule: their float32 softmax (:func:`ye_softmax`), their option order, their uncapped running
  sum, their quantile and their fallback for empty sets.
* :func:`softmax_logits` -- the row-wise softmax of logits at a temperature, in float64 and
  log space (:func:`ye_softmax` is Ye et al.'s float32 one).

Pure functions over numpy arrays. Probabilities are (rows x K) with rows summing to one;
labels are integers in [0, K). Nothing here touches the model.
"""

from __future__ import annotations

import math

import numpy as np

from standarderror import _checks
from standarderror.uncertainty.scaling import _scale

SCORES = ("lac", "aps")
QUANTILES = ("textbook", "ye")
#: Set rules: ``"textbook"`` (float64 scores, the APS running sum capped at one, no fallback
#: unless asked) and ``"ye"`` (Ye et al.'s released computation; see :func:`conformal_sets`).
RULES = ("textbook", "ye")
#: Tolerance used when taking the ceiling of (n + 1)(1 - alpha): a decimal alpha such as 0.3
#: is not exactly representable in binary, and without it ``ceil`` could land one too high.
_CEIL_TOL = 1e-9


def conformal_rank(n: int, alpha: float) -> int:
    """k = ceil((n + 1)(1 - alpha)), the rank of the calibration score used as threshold
    (with a tolerance of 1e-9 so that a decimal alpha does not round k one too high)."""
    n = _checks.positive_int(n, "n")
    alpha = _checks.alpha(alpha)
    return int(math.ceil((n + 1) * (1 - alpha) - _CEIL_TOL))


def minimum_calibration(alpha: float) -> int:
    """Smallest calibration size ``n`` for which the textbook threshold exists at ``alpha``.

    The threshold is the :math:`k`-th smallest of ``n`` scores with
    :math:`k = \\lceil (n+1)(1-\\alpha) \\rceil`; it exists when :math:`k \\le n`, which holds
    exactly when :math:`n \\ge 1/\\alpha - 1`.
    """
    a = _checks.alpha(alpha)
    n = max(1, int(math.ceil(1 / a - 1 - _CEIL_TOL)))
    while conformal_rank(n, a) > n:  # guard against the tolerance, never more than a step
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
    _checks.choice(score, "score", SCORES)
    _checks.choice(rule, "rule", RULES)
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
    _checks.choice(quantile, "quantile", QUANTILES)
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
    k = conformal_rank(n, a)
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
    _checks.choice(score, "score", SCORES)
    _checks.choice(rule, "rule", RULES)
    if rule == "ye":
        if quantile not in (None, "ye"):
            raise ValueError("rule='ye' uses Ye et al.'s quantile; pass quantile=None or 'ye'")
        if randomized:
            raise ValueError("randomized=True is not part of rule='ye'")
        return _ye_sets(p_cal, y_cal, p_test, a, score, True if nonempty is None else nonempty)
    quantile = "textbook" if quantile is None else quantile
    nonempty = bool(nonempty)
    _checks.choice(quantile, "quantile", QUANTILES)
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


def softmax_logits(logits, temperature: float = 1.0) -> np.ndarray:
    r"""Row-wise :math:`\mathrm{softmax}(z / T)` in float64: the probabilities of
    :func:`standarderror.uncertainty.scaling.scale`, the one softmax at T of the package
    (computed in log space from the row maximum, so a temperature as small as 1e-308 gives
    the limit as T -> 0: the entries tied at the maximum share the mass). Logits must be
    finite, with at least two classes (columns)."""
    z = _checks.array(logits, "logits", ndim=2)
    if z.shape[1] < 2:
        raise ValueError(f"logits must have at least two classes (columns), got shape {z.shape}")
    return np.exp(_scale(z, _checks.temperature(temperature)))  # z is validated here
