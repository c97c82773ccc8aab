"""Downstream uses of the confidence scores and the baselines they are compared with: the
AUROC for correctness (with bootstrap error bars, and the paired difference of two scores),
discrete semantic entropy and kernel language entropy."""

from __future__ import annotations

import numpy as np
from scipy import sparse
from scipy.special import logsumexp

from .. import _checks
from ..uncertainty.selective import _draw_counts
from ._gram import _answers, _count, _level, _temperature, _unit_gram, _variant
from .clusters import _unique_rows

#: The authors' grid of *sampling* temperatures for the Lamb et al. (2025) baseline: 20 values,
#: ``np.logspace(np.log10(0.1), np.log10(3.0), 20)``.
LAMB_GRID = np.logspace(np.log10(0.1), np.log10(3.0), 20)


def _auc(scores: np.ndarray, correct: np.ndarray, counts: np.ndarray | None = None) -> np.ndarray:
    r"""Mann-Whitney AUROC (a tie between a correct and an incorrect answer counts one half) of
    ``scores`` for ``correct`` (0/1, shape ``(n,)``), once per row of ``counts`` (``(k, n)``:
    how often each question is drawn; ``None``: the sample itself, one row of ones).

    The statistic is counted, not ranked: with the questions sorted by score once and grouped
    by equal scores, :math:`2U = \sum_g p_g (2 N_{<g} + q_g)`, where :math:`p_g`, :math:`q_g`
    are the drawn correct and incorrect answers of group :math:`g` and :math:`N_{<g}` the
    incorrect answers of the groups below it. Every term is an integer, so :math:`U` is exact,
    and the AUROC is one correctly rounded division :math:`U / (n_+ n_-)`: the number that the
    ranks give (their sums are exact too), bit for bit, without sorting each draw. NaN for a
    row that holds a single class."""
    order = np.argsort(scores, kind="stable")
    ranked = scores[order]
    starts = np.flatnonzero(np.r_[True, ranked[1:] != ranked[:-1]])  # first of each group
    good = correct[order] == 1
    c = np.ones((1, len(scores)), dtype=np.int64) if counts is None else counts[:, order]
    p = np.add.reduceat(np.where(good, c, 0), starts, axis=1)
    q = np.add.reduceat(np.where(good, 0, c), starts, axis=1)
    twice_u = np.sum(p * (2 * (np.cumsum(q, axis=1) - q) + q), axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (twice_u / 2) / (p.sum(1) * q.sum(1))


def _scores_correct(scores, correct, name: str = "scores"):
    s = _checks.array(scores, name, ndim=1)
    c = np.asarray(correct)
    if c.shape != s.shape:
        raise ValueError(f"correct must have the same shape as {name} {s.shape}, got {c.shape}")
    if not np.all((c == 0) | (c == 1)):
        raise ValueError("correct must hold 0/1 (or booleans)")
    c = c.astype(float)
    if c.min() == c.max():
        raise ValueError("correct must contain both correct and incorrect answers for an AUROC")
    return s, c


def auroc(scores, correct, *, bootstrap: int = 20, seed: int = 0, variant: str = "ours") -> dict:
    """AUROC of a confidence score for answer correctness, with bootstrap error bars.

    Higher ``scores`` must mean "more likely correct" (pass ``-entropy`` for an entropy).
    Agrees with :func:`sklearn.metrics.roc_auc_score`; the bootstrap resamples questions with
    replacement ``bootstrap`` times (at least 2: a standard deviation needs two draws).

    ``variant="ours"`` reports the full-sample AUROC and the bootstrap standard deviation
    (``ddof=1``); draws containing a single class have no AUROC and are skipped, and fewer than
    two usable draws is an error. ``variant="authors"`` reports the *mean* of the bootstrap
    AUROCs and, as ``se``, their standard deviation with ``ddof=1`` (pandas' default) divided
    by the number of draws (20 by default), which is what the authors' ± is; as in their code
    (:func:`sklearn.metrics.roc_auc_score` raises on one class), a draw with a single class
    is an error there, not skipped.

    Returns
    -------
    dict
        ``auroc``, ``se`` (standard deviation over bootstrap draws), ``draws``.
    """
    s, c = _scores_correct(scores, correct)
    nb = _count(bootstrap, "bootstrap", low=2, high=_checks.MAX_DRAWS)
    authors = _variant(variant) == "authors"
    value = float(_auc(s, c)[0])
    draws = _auc(s, c, _draw_counts(len(s), nb, seed))
    usable = np.isfinite(draws)
    if authors:
        if not usable.all():
            raise ValueError(
                f"variant='authors': {int((~usable).sum())} of {nb} bootstrap draws hold a "
                "single class of correct, where the authors' AUROC is undefined; use "
                "variant='ours' (which skips them) or more questions")
        return {"auroc": float(draws.mean()), "se": float(draws.std(ddof=1) / nb),
                "draws": draws}
    draws = draws[usable]
    if len(draws) < 2:
        raise ValueError(
            f"only {len(draws)} of {nb} bootstrap draws hold both classes of correct; a "
            "standard deviation needs two: raise bootstrap or use more questions")
    return {"auroc": value, "se": float(draws.std(ddof=1)), "draws": draws}


def auroc_difference(first, second, correct, *, bootstrap: int = 1000, seed: int = 0,
                     level: float = 0.95) -> dict:
    r"""Paired bootstrap of the AUROC difference of two confidence scores on the same
    questions: :math:`\mathrm{AUROC}(\text{first}) - \mathrm{AUROC}(\text{second})`.

    Each draw resamples the questions with replacement once and computes both AUROCs on that
    same resample, so the spread is that of the *difference* (the two scores' errors are
    correlated; their separate spreads overstate it). Draws with a single class are skipped.

    Returns
    -------
    dict
        ``difference`` (full sample), ``low``, ``high`` (percentile interval at ``level``),
        ``se`` (standard deviation of the paired draws, ``ddof=1``), ``draws``.
    """
    a, c = _scores_correct(first, correct, "first")
    b, _ = _scores_correct(second, correct, "second")
    nb = _count(bootstrap, "bootstrap", low=2, high=_checks.MAX_DRAWS)
    lv = _level(level)
    counts = _draw_counts(len(a), nb, seed)  # the same resamples for both scores
    d = _auc(a, c, counts) - _auc(b, c, counts)
    d = d[np.isfinite(d)]
    if len(d) < 2:
        raise ValueError(f"only {len(d)} of {nb} bootstrap draws hold both classes of correct")
    lo, hi = np.quantile(d, [(1 - lv) / 2, (1 + lv) / 2])
    return {"difference": float(_auc(a, c)[0] - _auc(b, c)[0]), "low": float(lo),
            "high": float(hi), "se": float(d.std(ddof=1)), "draws": d}


def semantic_entropy(answers, threshold: float = 0.9) -> dict:
    r"""Discrete semantic entropy (Kuhn et al., 2023) with embedding equivalence.

    Two answers are taken to mean the same thing when the cosine similarity of their
    embeddings is at least ``threshold`` (our stand-in for bidirectional entailment); the
    semantic classes are the connected components of that relation within each question
    (:func:`scipy.sparse.csgraph.connected_components`), and

    .. math:: \mathrm{SE}(x) = -\sum_c p_c \log p_c, \qquad p_c = |c| / m.

    Returns
    -------
    dict
        ``entropy`` (n,), ``classes`` (n,) number of classes, ``largest`` (n,) the largest
        class's share (the confidence of Lamb et al., 2025).
    """
    a = _answers(answers)
    n, m, _ = a.shape
    try:
        th = float(threshold)
    except (TypeError, ValueError):
        raise ValueError(f"threshold must be a number in (-1, 1], got {threshold!r}") from None
    if not -1 < th <= 1:
        raise ValueError(f"threshold must lie in (-1, 1], got {threshold!r}")
    g = _unit_gram(a)
    q, i, j = np.nonzero(g >= th - 1e-12)
    adj = sparse.coo_matrix((np.ones(len(q)), (q * m + i, q * m + j)), shape=(n * m, n * m))
    _, comp = sparse.csgraph.connected_components(adj, directed=False)
    comp = comp.reshape(n, m)
    # Renumber components within each question: count members per (question, component).
    first = np.sort(comp, axis=1)
    new = np.concatenate([np.ones((n, 1), bool), first[:, 1:] != first[:, :-1]], axis=1)
    # class sizes: run lengths of the sorted component ids
    flat = first + (np.arange(n) * n * m)[:, None]
    _, counts = np.unique(flat, return_counts=True)
    owner = np.repeat(np.arange(n), new.sum(1))
    p = counts / m
    ent = -np.bincount(owner, weights=p * np.log(p), minlength=n)
    largest = np.zeros(n)
    np.maximum.at(largest, owner, p)
    return {"entropy": ent, "classes": new.sum(1), "largest": largest}


#: The largest heat-kernel time :func:`kernel_language_entropy` takes. The Laplacian's
#: eigenvalues (at most ``2 (m - 1)``) carry rounding errors of about ``2 m`` float64
#: epsilons, which the kernel multiplies by ``time``: at this bound and 1,000 answers the
#: shift is under 1e-6, and the entropy has long reached its limit (the logarithm of the
#: number of disconnected groups of answers, for ``variant="ours"``).
MAX_KLE_TIME = 1e6


def kernel_language_entropy(answers, time: float | None = None, *,
                            variant: str = "ours") -> np.ndarray:
    r"""Kernel language entropy (Nikitin et al., 2024) with an embedding-similarity graph.

    Per question, the weighted graph on the ``m`` answers has weights
    :math:`W_{jk} = \max(0, \cos(e_j, e_k))` for :math:`j \neq k`; with the Laplacian
    :math:`L = \operatorname{diag}(W\mathbf 1) - W`, the heat kernel
    :math:`K = \exp(-tL)` is normalised to unit trace and its von Neumann entropy is returned:
    :math:`\mathrm{KLE} = -\sum_k \kappa_k \log \kappa_k` with
    :math:`\kappa = \operatorname{softmax}(-t\,\lambda(L))`. (The plain cosine kernel
    :math:`E E^\top / m` would give back :func:`entropy` exactly.)

    ``variant="ours"``: ``time`` defaults to 1 and the kernel is divided by its trace.
    ``variant="authors"``: ``time`` defaults to 0.4 and the kernel is normalised entrywise,
    :math:`K_{jk} / (\sqrt{K_{jj} K_{kk}}\, m)` (unit trace, but a different matrix unless the
    diagonal of :math:`K` is constant).

    Two identical answers weigh exactly 1, not their computed cosine, which is 1 only within
    the CPU's rounding: questions whose graphs are equal in exact arithmetic (all ``m``
    answers the same word, whichever word) then get equal entropies, and an AUROC ties them
    instead of ordering them by round-off that changes with the CPU's kernels.

    ``time`` is at most :data:`MAX_KLE_TIME`; larger times are refused (``ValueError``), and
    so is any result that is not finite.
    """
    a = _answers(answers)
    authors = _variant(variant) == "authors"
    t = _temperature((0.4 if authors else 1.0) if time is None else time, "time")
    if t > MAX_KLE_TIME:
        raise ValueError(f"time must be at most {MAX_KLE_TIME:g}, got {time!r}: the entropy "
                         "at larger times is the rounding of the Laplacian's eigenvalues, "
                         "multiplied by time")
    g = _unit_gram(a)
    n, m, d = a.shape
    w = np.clip(g, 0.0, None)
    ids = _unique_rows(a.reshape(n * m, d))[1].reshape(n, m)
    w[ids[:, :, None] == ids[:, None, :]] = 1.0
    w[:, np.arange(m), np.arange(m)] = 0.0
    lap = -w
    lap[:, np.arange(m), np.arange(m)] = w.sum(2)
    if authors:
        lam, v = np.linalg.eigh(lap)
        k = np.einsum("qjk,qk,qlk->qjl", v, np.exp(-t * (lam - lam[:, :1])), v)
        dia = np.sqrt(np.einsum("qjj->qj", k))
        kappa = np.linalg.eigvalsh(k / (dia[:, :, None] * dia[:, None, :] * m))
        kappa = np.clip(kappa, 0.0, None)
        logk = np.log(np.where(kappa > 0, kappa, 1.0))
        return _finite_kle(-np.sum(kappa * logk, axis=1), time)
    lam = np.linalg.eigvalsh(lap)
    logk = -t * lam - logsumexp(-t * lam, axis=1, keepdims=True)
    return _finite_kle(-np.sum(np.exp(logk) * logk, axis=1), time)


def _finite_kle(values: np.ndarray, time) -> np.ndarray:
    """The entropies, refused unless every one is finite."""
    if not np.all(np.isfinite(values)):
        raise ValueError(f"kernel language entropy is not finite at time={time!r} for "
                         f"{int(np.sum(~np.isfinite(values)))} question(s); use a smaller time")
    return values
