r"""The estimator of :math:`\lambda_{\max}` from ``s`` of the ``m`` sampled answers: its mean,
spread and bias as ``s`` grows (the paper's Fig. 6)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .. import _checks
from .._parallel import ordered_map
from ._gram import _CHUNK_BYTES, _answers, _count, _unit_gram


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
    r = _count(draws, "draws", high=_checks.MAX_DRAWS)
    rng = np.random.default_rng(seed)
    full = _unit_gram(a)
    reference = np.linalg.eigvalsh(full / m)[:, -1]
    mean, std, bias = [], [], []
    for size in ss:
        idx = np.argsort(rng.random((r, n, m)), axis=2)[:, :, :size]  # (r, n, s)
        per = max(1, _CHUNK_BYTES // (8 * n * size * size))
        qi = np.arange(n)[None, :, None, None]

        def top(s0, ii=idx, qi=qi, per=per, size=size):
            """The largest eigenvalue of each sub-Gram of draws ``s0:s0 + per``."""
            sub = full[qi, ii[s0:s0 + per, ..., :, None], ii[s0:s0 + per, ..., None, :]]
            return np.linalg.eigvalsh(sub / size)[..., -1]

        # the chunks of draws are independent: shared out among the threads, each chunk's
        # decompositions as in the plain loop (numpy's BLAS on one thread)
        est = np.concatenate(ordered_map(top, range(0, r, per)))
        mean.append(est.mean())
        std.append(est.std(0, ddof=1).mean() if r > 1 else 0.0)
        bias.append((est.mean(0) - reference).mean())
    return {"sizes": ss, "mean": np.array(mean), "std": np.array(std), "bias": np.array(bias),
            "reference": reference}



@dataclass(frozen=True)
class MaxEigenvalueBias:
    """The upward bias of :math:`\\lambda_{\\max}` estimated from 5 and from 20 answers
    (averaged over questions and draws) and the mean of the full-``m`` value;
    ``subsample`` is :func:`max_eigenvalue_subsample`'s dict."""

    bias_m5: float
    bias_m20: float
    lmax_full: float
    subsample: dict = field(repr=False)


def max_eigenvalue_bias(answers, sizes, *, draws: int = 20, seed: int = 0) -> MaxEigenvalueBias:
    """:func:`max_eigenvalue_subsample` over ``sizes`` (which hold 5 and 20), read at 5 and
    20 answers."""
    sub = max_eigenvalue_subsample(answers, sizes, draws=draws, seed=seed)
    at = list(sub["sizes"])
    if 5 not in at or 20 not in at:
        raise ValueError(f"sizes must hold 5 and 20, got {sizes!r}")
    return MaxEigenvalueBias(bias_m5=sub["bias"][at.index(5)], bias_m20=sub["bias"][at.index(20)],
                             lmax_full=sub["reference"].mean(), subsample=sub)
