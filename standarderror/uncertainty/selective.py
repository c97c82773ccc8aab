r"""Selective prediction: risk-coverage curves, the AURC, abstention at several temperatures
with a sequence-level bootstrap, and the temperature that abstains best."""

from __future__ import annotations

import dataclasses

import numpy as np

from standarderror import _checks
from standarderror.uncertainty._inputs import (
    _correct,
    _log_of,
    _score,
    _sequence_index,
    _temperatures,
)
from standarderror.uncertainty.scaling import CONFIDENCE_SCORES, _scores

#: Temperatures of the abstention table (Episode 3).
ABSTENTION_TEMPERATURES = (0.5, 1.0, 1.25, 1.5, 2.0, 3.0)
#: The grid searched by :func:`best_temperature`: 0.2, 0.3, ..., 3.0 (29 points).
GRID = np.round(np.arange(2, 31) / 10, 1)


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

    For each score in :data:`CONFIDENCE_SCORES` and each temperature, the predictions are ranked by the
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
    draws = _checks.draws(draws)
    if not 0 < float(coverage) <= 1:
        raise ValueError(f"coverage must lie in (0, 1], got {coverage!r}")
    ok = logp.argmax(axis=1) == y
    boot = _Bootstrap(_draw_counts(n_seq, draws, seed), seq_idx)
    keep = max(1, int(round(float(coverage) * n)))

    per_t = {}
    for t in sorted(set(ts) | {1.0}):
        scores = _scores(logp, t)
        for name in CONFIDENCE_SCORES:
            rc = risk_coverage(scores[name], ok)
            per_t[(name, t)] = (float(rc["risk"].mean()), 1.0 - float(rc["risk"][keep - 1]),
                                boot.aurc(scores[name], ok))
    table = {}
    for name in CONFIDENCE_SCORES:
        ref_aurc, _, ref_boot = per_t[(name, 1.0)]
        for t in ts:
            a, acc, b = per_t[(name, t)]
            low, high = np.percentile(b - ref_boot, [2.5, 97.5])
            table[(name, t)] = {"aurc": a, "difference": a - ref_aurc, "low": float(low),
                                "high": float(high), "top_fifth": acc}
    return {"table": table, "oracle": aurc(ok.astype(float), ok), "temperatures": ts,
            "scores": CONFIDENCE_SCORES, "rows": n, "sequences": n_seq, "draws": draws, "level": 0.95}


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
    if score not in CONFIDENCE_SCORES:
        raise ValueError(f"score must be one of {CONFIDENCE_SCORES}, got {score!r}")
    logp = _log_of(p)
    y = _checks.labels(y, logp.shape[1], logp.shape[0])
    ts = GRID if temperatures is None else _temperatures(temperatures)
    ok = logp.argmax(axis=1) == y
    curve = {float(t): aurc(_scores(logp, t, (score,))[score], ok) for t in ts}
    values = np.array(list(curve.values()))
    best = None if np.all(values == values[0]) else float(list(curve)[int(values.argmin())])
    return {"temperature": best, "aurc": float(values.min()), "curve": curve}


@dataclasses.dataclass(frozen=True)
class AbstentionHeadline:
    """What Episode 3 quotes of an :func:`abstention` result.

    ``n_rows`` predictions in ``n_seq`` windows; ``oracle`` AURC; at T = 1 the AURC of the top
    probability (``mp_aurc_t1``), of entropy (``ent_aurc_t1``) and of the margin
    (``mar_aurc``). Changes in AURC against T = 1 with their interval: the top probability
    at T = 1.25 (``mp_d125``, ``mp_lo125``, ``mp_hi125``) and 3 (``mp_d3``), entropy at
    T = 1.25 (``ent_d125``, ``ent_lo125``, ``ent_hi125``) and 3 (``ent_d3``, ``ent_lo3``,
    ``ent_hi3``); the change at T = 3 relative to the score's AURC at T = 1 (``mp_rel_t3``,
    ``ent_rel_t3``); entropy's accuracy on the surest fifth at T = 1 and 3 (``ent_top_t1``,
    ``ent_top_t3``); how many distinct changes the margin takes over the temperatures
    (``mar_changes``); entropy's AURC at T = 1.25 and 1.5 (``ent_aurc_t125``,
    ``ent_aurc_t15``).
    """

    n_rows: int
    n_seq: int
    oracle: float
    mp_aurc_t1: float
    ent_aurc_t1: float
    mar_aurc: float
    mp_d125: float
    mp_lo125: float
    mp_hi125: float
    mp_d3: float
    mp_rel_t3: float
    ent_d125: float
    ent_lo125: float
    ent_hi125: float
    ent_d3: float
    ent_lo3: float
    ent_hi3: float
    ent_rel_t3: float
    ent_top_t1: float
    ent_top_t3: float
    mar_changes: int
    ent_aurc_t125: float
    ent_aurc_t15: float


def abstention_headline(ab: dict) -> AbstentionHeadline:
    """The values Episode 3 quotes of ``ab`` (an :func:`abstention` result over the three
    scores, holding T = 1, 1.25, 1.5 and 3)."""
    table = ab["table"]
    need = {(s, t) for s in CONFIDENCE_SCORES for t in (1.0, 1.25, 1.5, 3.0)}
    if need - set(table):
        raise ValueError(f"abstention_headline: the table lacks {sorted(need - set(table))}")
    mp, ent, mar = ({t: table[(s, t)] for t in ab["temperatures"]} for s in CONFIDENCE_SCORES)
    return AbstentionHeadline(
        n_rows=ab["rows"], n_seq=ab["sequences"], oracle=ab["oracle"],
        mp_aurc_t1=mp[1.0]["aurc"], ent_aurc_t1=ent[1.0]["aurc"], mar_aurc=mar[1.0]["aurc"],
        mp_d125=mp[1.25]["difference"], mp_lo125=mp[1.25]["low"], mp_hi125=mp[1.25]["high"],
        mp_d3=mp[3.0]["difference"], mp_rel_t3=mp[3.0]["difference"] / mp[1.0]["aurc"],
        ent_d125=ent[1.25]["difference"], ent_lo125=ent[1.25]["low"],
        ent_hi125=ent[1.25]["high"], ent_d3=ent[3.0]["difference"], ent_lo3=ent[3.0]["low"],
        ent_hi3=ent[3.0]["high"], ent_rel_t3=ent[3.0]["difference"] / ent[1.0]["aurc"],
        ent_top_t1=ent[1.0]["top_fifth"], ent_top_t3=ent[3.0]["top_fifth"],
        mar_changes=len({r["difference"] for r in mar.values()}),
        ent_aurc_t125=ent[1.25]["aurc"], ent_aurc_t15=ent[1.5]["aurc"])


@dataclasses.dataclass(frozen=True)
class FitHeadline:
    """What Episode 3 quotes of the fitted temperature beside each score's best one.

    The fits over random halves (``fit_mean``, ``fit_low``, ``fit_high``); the top probability's
    best grid temperature and its AURC there (``mp_best``, ``mp_best_aurc``), its AURC at a grid
    temperature near the fit (``mp_aurc_t11``), at the fitted temperature (``mp_at_fit``) and
    its worst on the grid (``mp_worst``); entropy's best temperature and AURC (``ent_best``,
    ``ent_best_aurc``), its AURC at the fitted temperature (``ent_at_fit``) and the change there
    against T = 1 with its interval (``ent_d_fit``, ``ent_lo_fit``, ``ent_hi_fit``); how many
    distinct AURCs the margin takes (``mar_flat``) over ``grid_points`` temperatures; and the
    change against T = 1 at T = 0.5, with its interval, for entropy (``ent_d05``, ``ent_lo05``,
    ``ent_hi05``) and the top probability (``mp_d05``, ``mp_lo05``, ``mp_hi05``).
    """

    fit_mean: float
    fit_low: float
    fit_high: float
    mp_best: float
    mp_best_aurc: float
    mp_aurc_t11: float
    mp_at_fit: float
    mp_worst: float
    ent_best: float
    ent_best_aurc: float
    ent_at_fit: float
    ent_d_fit: float
    ent_lo_fit: float
    ent_hi_fit: float
    mar_flat: int
    grid_points: int
    ent_d05: float
    ent_lo05: float
    ent_hi05: float
    mp_d05: float
    mp_lo05: float
    mp_hi05: float


def fit_headline(fit: dict, best: dict, at_fit: dict, ab: dict, *, near: float) -> FitHeadline:
    """The values Episode 3 quotes of a fitted temperature.

    ``fit``: :func:`standarderror.uncertainty.scaling.fitted_temperature`; ``best``: each
    score's :func:`best_temperature`; ``at_fit``: each score's :func:`abstention` row at the
    fitted temperature; ``ab``: an :func:`abstention` result holding T = 0.5; ``near``: the
    grid temperature beside the fit whose top-probability AURC is ``mp_aurc_t11`` (Episode 3
    passes 1.1).
    """
    mpc, entc, margin = best["max probability"], best["entropy"], best["margin"]["curve"]
    mp05, ent05 = ab["table"][("max probability", 0.5)], ab["table"][("entropy", 0.5)]
    return FitHeadline(
        fit_mean=fit["mean"], fit_low=fit["low"], fit_high=fit["high"],
        mp_best=mpc["temperature"], mp_best_aurc=mpc["aurc"], mp_aurc_t11=mpc["curve"][near],
        mp_at_fit=at_fit["max probability"]["aurc"], mp_worst=max(mpc["curve"].values()),
        ent_best=entc["temperature"], ent_best_aurc=entc["aurc"],
        ent_at_fit=at_fit["entropy"]["aurc"], ent_d_fit=at_fit["entropy"]["difference"],
        ent_lo_fit=at_fit["entropy"]["low"], ent_hi_fit=at_fit["entropy"]["high"],
        mar_flat=len(set(margin.values())), grid_points=len(margin),
        ent_d05=ent05["difference"], ent_lo05=ent05["low"], ent_hi05=ent05["high"],
        mp_d05=mp05["difference"], mp_lo05=mp05["low"], mp_hi05=mp05["high"])
