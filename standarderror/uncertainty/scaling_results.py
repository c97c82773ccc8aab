"""Episode 3's named results that its other modules do not already return: the swap pair's
numbers, the shared-shape control, the tail's share of the entropy, the margin against the
other scores, tied margins, and the exercises (the pair's entropies, an old threshold after the
fit, a sharpened model calibrated), and the model card's numbers.

Each function takes arrays (predictions, labels, windows) or the dicts this package's other
functions return, never a model, and returns a frozen dataclass. Its number fields are what the
lecture quotes, under the pin names; arrays and dicts it also returns are ``repr=False`` fields
holding no bare number, so ``pin(result)`` pins exactly the quoted fields. Every number is
computed by this package's public functions, in the order the lecture's prose describes them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from standarderror.uncertainty.ranks import kendall_tau
from standarderror.uncertainty.scaling import (
    CONFIDENCE_SCORES,
    confidence_scores,
    fitted_temperature,
    scale,
)
from standarderror.uncertainty.selective import GRID, abstention, aurc


@dataclass(frozen=True)
class SwapPair:
    """The swap pair (:func:`~standarderror.uncertainty.confidence_order.swap_pair`).
    ``rival_gap``: how far the one close rival sits behind the top logit; ``crowd_gap``: how
    far each of the crowd's rivals sits; ``swap_one_t1``/``swap_crowd_t1``: each row's top
    probability at T = 1 (and ``_t3`` at T = 3); ``swap_cross``: the temperature where the two
    cross."""

    rival_gap: float
    crowd_gap: float
    swap_one_t1: float
    swap_crowd_t1: float
    swap_one_t3: float
    swap_crowd_t3: float
    swap_cross: float


def swap_numbers(pair: dict) -> SwapPair:
    """:class:`SwapPair` of a ``swap_pair()`` dict."""
    c1, c3 = pair["confidence"][1.0], pair["confidence"][3.0]
    gaps = pair["logits"][:, :1] - pair["logits"][:, 1:]      # each rival's distance behind
    return SwapPair(rival_gap=gaps[0, 0], crowd_gap=gaps[1, 0], swap_one_t1=c1[0],
                    swap_crowd_t1=c1[1], swap_one_t3=c3[0], swap_crowd_t3=c3[1],
                    swap_cross=pair["crossing"])


@dataclass(frozen=True)
class ControlOrder:
    """The shared-shape control's reordering rows: the smallest Kendall's tau against T = 1
    (``control_tau_min``) and the largest share of pairs reordered (``control_pairs_max``)
    over the temperatures."""

    control_tau_min: float
    control_pairs_max: float


def control_order(rows: list[dict]) -> ControlOrder:
    """:class:`ControlOrder` of ``reordering(...)`` rows."""
    return ControlOrder(control_tau_min=min(r["tau"] for r in rows),
                        control_pairs_max=max(r["pairs_reordered"] for r in rows))


@dataclass(frozen=True)
class TailShares:
    """What the labels below each row's top two hold, at T = 1 and T = 3: their share of the
    total entropy (``tail_h_t1``, ``tail_h_t3``; summed over rows, then divided) and their
    mean probability per row (``tail_p_t1``, ``tail_p_t3``)."""

    tail_h_t1: float
    tail_h_t3: float
    tail_p_t1: float
    tail_p_t3: float
    shares: dict = field(repr=False)


def tail_shares(logp) -> TailShares:
    """:class:`TailShares` of log-probabilities ``logp`` (rows x labels). ``shares`` maps each
    temperature to (entropy share, mean tail probability)."""
    tail = {}
    for t in (1.0, 3.0):
        lt = scale(logp, t)
        h = -np.exp(lt) * lt                          # each label's term in the entropy
        ranked = np.take_along_axis(h, np.argsort(-lt, axis=1), axis=1)
        mass = np.take_along_axis(np.exp(lt), np.argsort(-lt, axis=1), axis=1)
        tail[t] = (ranked[:, 2:].sum() / ranked.sum(), mass[:, 2:].sum(axis=1).mean())
    return TailShares(tail_h_t1=tail[1.0][0], tail_h_t3=tail[3.0][0],
                      tail_p_t1=tail[1.0][1], tail_p_t3=tail[3.0][1], shares=tail)


@dataclass(frozen=True)
class MarginGaps:
    """The margin's AURC at T = 1 minus the top probability's (``mar_vs_mp``) and minus
    entropy's (``mar_vs_ent``), from an :func:`abstention` table, each with a central
    interval (``_lo``, ``_hi``) over resampled windows. ``scores``: the three scores at
    T = 1 (:func:`confidence_scores`)."""

    mar_vs_mp: float
    mar_vs_mp_lo: float
    mar_vs_mp_hi: float
    mar_vs_ent: float
    mar_vs_ent_lo: float
    mar_vs_ent_hi: float
    scores: dict = field(repr=False)


def margin_gaps(logp, ok, sequence, table: dict, *, draws: int = 200, seed: int = 0,
                level: float = 0.95) -> MarginGaps:
    """:class:`MarginGaps` of log-probabilities ``logp``, correctness ``ok`` and each row's
    window ``sequence``; ``table`` is an :func:`abstention` result's ``table`` holding T = 1.
    Each of ``draws`` resamples draws as many windows as there are, with replacement
    (``numpy.random.default_rng(seed)``), and scores the three AURCs on the same rows; the
    interval's tails are ``100 (1 - level) / 2`` per cent each, rounded to 12 decimals (0.95
    gives exactly 2.5 and 97.5)."""
    if not 0 < level < 1:
        raise ValueError(f"level must lie strictly between 0 and 1, got {level}")
    tail = round(100 * (1 - level) / 2, 12)
    rng = np.random.default_rng(seed)
    s1 = confidence_scores(logp, 1.0)
    members = [np.flatnonzero(sequence == w) for w in np.unique(sequence)]
    gaps_draws = []
    for _ in range(draws):
        drawn = rng.integers(0, len(members), len(members))
        rows_ = np.concatenate([members[i] for i in drawn])
        a = {s: aurc(s1[s][rows_], ok[rows_]) for s in CONFIDENCE_SCORES}
        gaps_draws.append((a["margin"] - a["max probability"], a["margin"] - a["entropy"]))
    (lo_mp, lo_ent), (hi_mp, hi_ent) = np.percentile(gaps_draws, [tail, 100 - tail],
                                                           axis=0)
    mar = table[("margin", 1.0)]["aurc"]
    return MarginGaps(mar_vs_mp=mar - table[("max probability", 1.0)]["aurc"],
                      mar_vs_mp_lo=lo_mp, mar_vs_mp_hi=hi_mp,
                      mar_vs_ent=mar - table[("entropy", 1.0)]["aurc"],
                      mar_vs_ent_lo=lo_ent, mar_vs_ent_hi=hi_ent, scores=s1)


@dataclass(frozen=True)
class TiedMargins:
    """``tied_share``: the share of neighbouring margins (gaps between each row's two largest
    log-probabilities, sorted) that are exactly equal. ``naive`` maps each temperature of
    :data:`GRID` to the margin's AURC read off temperature-scaled log-probabilities (the
    route that breaks ties by rounding noise)."""

    tied_share: float
    naive: dict = field(repr=False)


def tied_margins(logp, ok) -> TiedMargins:
    """:class:`TiedMargins` of log-probabilities ``logp`` and correctness ``ok``."""
    gaps = np.sort(np.diff(np.sort(logp, axis=1)[:, -2:], axis=1).ravel())
    naive = {float(t): aurc(confidence_scores(scale(logp, t))["margin"], ok) for t in GRID}
    return TiedMargins(tied_share=(np.diff(gaps) == 0).mean(), naive=naive)


@dataclass(frozen=True)
class PairEntropies:
    """The swap pair's entropies at T = 1 in nats (``pair_h_one``, ``pair_h_crowd``), and how
    far the entropy ranking of a set of predictions is from the top-probability ranking:
    Kendall's tau (``tau_mp_ent``) and the share of pairs ordered oppositely
    (``disc_mp_ent``). ``kendall``: :func:`kendall_tau`'s dict."""

    pair_h_one: float
    pair_h_crowd: float
    tau_mp_ent: float
    disc_mp_ent: float
    kendall: dict = field(repr=False)


def pair_entropies(pair_logp, scores: dict) -> PairEntropies:
    """:class:`PairEntropies` of the pair's log-probabilities and of ``scores``, the
    :func:`confidence_scores` of the predictions to compare."""
    h1 = -confidence_scores(pair_logp, 1.0)["entropy"]
    kt = kendall_tau(scores["max probability"], scores["entropy"])
    return PairEntropies(pair_h_one=h1[0], pair_h_crowd=h1[1], tau_mp_ent=kt["tau"],
                         disc_mp_ent=kt["discordant"] / kt["pairs"], kendall=kt)


@dataclass(frozen=True)
class ThresholdShift:
    """An abstention threshold set at T = 1 to answer a share of the predictions, applied
    after scaling to ``temperature``, per score (``mp``, ``ent``, ``mar``): the share answered
    now (``thr_*_cov``), the predictions that changed sides (``thr_*_moved``), and, with the
    threshold re-chosen to answer the same share, the predictions that differ from the
    original set (``re_*``). ``table`` maps each score to those three."""

    thr_mp_cov: float
    thr_mp_moved: int
    re_mp: int
    thr_ent_cov: float
    thr_ent_moved: int
    re_ent: int
    thr_mar_cov: float
    thr_mar_moved: int
    re_mar: int
    table: dict = field(repr=False)


def threshold_shift(logp, temperature: float, *, answered: float = 0.8) -> ThresholdShift:
    """:class:`ThresholdShift` of log-probabilities ``logp``: thresholds that answer the share
    ``answered`` of the rows."""
    keep = int(round(answered * logp.shape[0]))
    res = {}
    for score in CONFIDENCE_SCORES:
        before = confidence_scores(logp, 1.0)[score]
        after = confidence_scores(logp, temperature)[score]
        old = np.sort(before)[::-1][keep - 1]      # the share answered at T = 1
        new = np.sort(after)[::-1][keep - 1]       # re-chosen after scaling
        k0, k_old, k_new = before >= old, after >= old, after >= new
        res[score] = (k_old.mean(), int((k0 != k_old).sum()), int((k0 != k_new).sum()))
    rm, re_, rg = (res[s] for s in CONFIDENCE_SCORES)
    return ThresholdShift(thr_mp_cov=rm[0], thr_mp_moved=rm[1], re_mp=rm[2],
                          thr_ent_cov=re_[0], thr_ent_moved=re_[1], re_ent=re_[2],
                          thr_mar_cov=rg[0], thr_mar_moved=rg[1], re_mar=rg[2], table=res)


@dataclass(frozen=True)
class ColdModel:
    """A model sharpened to a low temperature, then calibrated. ``cold_fit``: its fitted
    temperature (:func:`fitted_temperature`'s mean); at that temperature rounded to two
    decimals, the change in AURC against T = 1 with its interval for the top probability
    (``cold_mp_d``, ``_lo``, ``_hi``) and entropy (``cold_ent_*``), and the AURC of the top
    probability and the margin (``cold_mp_aurc``, ``cold_mar_aurc``). ``detail`` holds the
    sharpened probabilities' ``fit``, the rounded ``temperature`` and the abstention
    ``table``."""

    cold_fit: float
    cold_mp_d: float
    cold_mp_lo: float
    cold_mp_hi: float
    cold_ent_d: float
    cold_ent_lo: float
    cold_ent_hi: float
    cold_mp_aurc: float
    cold_mar_aurc: float
    detail: dict = field(repr=False)


def cold_model(logp, y, sequence, *, sharpen: float = 0.5, halves: int = 20,
               draws: int = 300) -> ColdModel:
    """:class:`ColdModel` of log-probabilities ``logp`` scaled to ``sharpen``."""
    cold = np.exp(scale(logp, sharpen))
    fit = fitted_temperature(cold, y, sequence, halves=halves)
    t_cold = round(fit["mean"], 2)
    table = abstention(cold, y, sequence, temperatures=(t_cold,), draws=draws)["table"]
    cm, ce, cg = (table[(s, t_cold)] for s in CONFIDENCE_SCORES)
    return ColdModel(cold_fit=fit["mean"], cold_mp_d=cm["difference"], cold_mp_lo=cm["low"],
                     cold_mp_hi=cm["high"], cold_ent_d=ce["difference"],
                     cold_ent_lo=ce["low"], cold_ent_hi=ce["high"], cold_mp_aurc=cm["aurc"],
                     cold_mar_aurc=cg["aurc"],
                     detail={"fit": fit, "temperature": t_cold, "table": table})


@dataclass(frozen=True)
class ModelFacts:
    """A model's size from its card: ``params`` (parameters), ``vocab`` (characters of its
    vocabulary), ``width`` and ``context`` (the block, in characters)."""

    params: int
    vocab: int
    width: int
    context: int


def model_facts(model: dict, chars) -> ModelFacts:
    """:class:`ModelFacts` of a loaded model's dict (``parameters`` and ``card``) and the
    vocabulary ``chars`` its predictions use."""
    return ModelFacts(params=model["parameters"], vocab=len(chars),
                      width=model["card"]["config"]["width"],
                      context=model["card"]["config"]["block"])
