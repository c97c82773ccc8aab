"""The demonstration of set size: three synthetic classifiers, each isolating one effect.

:func:`demonstration` builds them (six options, a seeded generator) and measures their LAC
and APS sets with :func:`~standarderror.uncertainty.set_size.evaluate`.
"""

from __future__ import annotations

import numpy as np

from standarderror import _checks
from standarderror.uncertainty.conformal import SCORES, conformal_sets, softmax_logits
from standarderror.uncertainty.set_size import evaluate

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
        the :func:`~standarderror.uncertainty.set_size.evaluate` summaries (plus
        ``scores_cal`` per score); ``"c"``: ``{"p_a", "p_b", "y", "a": evaluate(...), "b":
        evaluate(...), "identical": bool}``;
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
