"""Named results of Episode 1 (split conformal coverage as an average): each function returns a
frozen dataclass whose number fields are what the lecture quotes and pins, under the field's
name; arrays and dicts it also returns (for a table, a print or a figure) are not pinned.

Every function takes the model's predictions as arrays (``p`` rows x labels, ``y`` the true
labels, the window of each row, the position of each row in its window) and is built from the
public functions of :mod:`.conformal`, :mod:`.set_size` and :mod:`.exchangeability` in the order
a reader would call them, so its numbers are those functions' numbers, bit for bit.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from .conformal import conformal_sets, minimum_calibration
from .exchangeability import (
    calibration_masks,
    coverage_distribution,
    escalation,
    finite_sample_level,
    shuffle_groups,
    split_coverage,
    spread_interval,
)
from .set_size import by_confidence, set_summary


@dataclass(frozen=True)
class RowSplits:
    """Coverage over random splits of rows into calibration and test, beside the beta-binomial
    law of the coverage of one split.

    ``splits`` is the number of splits, ``row_mean`` and ``row_sd`` the mean and standard
    deviation of their coverage, ``row_below`` the share of splits below ``1 - alpha``.
    ``bb_sd`` is the beta-binomial standard deviation, ``beta_sd`` its calibration (Beta) part,
    ``binom_sd`` its test (binomial) part, ``bb_below`` its probability of a coverage below
    ``1 - alpha``, and ``beta_only_excess`` how much larger ``bb_sd`` is than ``beta_sd``
    (``bb_sd / beta_sd - 1``). ``runs`` is :func:`split_coverage`'s dict, ``theory``
    :func:`coverage_distribution`'s.
    """

    splits: int
    row_mean: float
    row_sd: float
    bb_sd: float
    beta_sd: float
    binom_sd: float
    beta_only_excess: float
    row_below: float
    bb_below: float
    runs: dict = field(repr=False)
    theory: dict = field(repr=False)


def row_splits(scores, sequence, alpha: float = 0.1, *, splits: int = 200,
               seed: int = 1) -> RowSplits:
    """:func:`split_coverage` of the true-label ``scores`` over ``splits`` random row splits
    (half of the rows of ``sequence``'s windows calibrate), and :func:`coverage_distribution`
    at the same calibration and test sizes."""
    masks = calibration_masks(sequence, splits=splits, by="row", seed=seed)
    runs = split_coverage(scores, masks, alpha)
    theory = coverage_distribution(runs["n"], runs["m"], alpha)
    below = float((runs["coverage"] < 1 - alpha).mean())
    return RowSplits(
        splits=runs["coverage"].size, row_mean=runs["mean"], row_sd=runs["sd"],
        bb_sd=theory["sd"], beta_sd=theory["sd_calibration"], binom_sd=theory["sd_test"],
        beta_only_excess=theory["sd"] / theory["sd_calibration"] - 1,
        row_below=below, bb_below=theory["below"], runs=runs, theory=theory)


@dataclass(frozen=True)
class FewScores:
    """Coverage over random splits that calibrate on only ``few_n`` rows.

    ``few_splits`` is the number of splits; ``few_level`` the level ``k/(n+1)``; ``few_mean``,
    ``few_sd`` and ``few_min`` the mean, standard deviation and least of the splits' coverage;
    ``few_beta_sd`` the beta-binomial standard deviation; ``few_below`` the share of splits
    below ``1 - alpha`` and ``few_theory_below`` its beta-binomial probability; ``few_low`` the
    share of splits below ``low``. ``runs`` is :func:`split_coverage`'s dict, ``theory``
    :func:`coverage_distribution`'s.
    """

    few_n: int
    few_splits: int
    few_level: float
    few_mean: float
    few_sd: float
    few_beta_sd: float
    few_below: float
    few_theory_below: float
    few_low: float
    few_min: float
    runs: dict = field(repr=False)
    theory: dict = field(repr=False)


def few_scores(scores, alpha: float = 0.1, *, n: int = 15, splits: int = 400, seed: int = 2,
               low: float = 0.8) -> FewScores:
    """:func:`split_coverage` over ``splits`` random splits of the rows of ``scores`` that
    calibrate on ``n`` rows each (``share = n / rows``), with :func:`coverage_distribution`."""
    rows = np.asarray(scores).size
    masks = calibration_masks(np.arange(rows), share=n / rows, splits=splits, seed=seed)
    runs = split_coverage(scores, masks, alpha)
    theory = coverage_distribution(runs["n"], runs["m"], alpha)
    return FewScores(
        few_n=runs["n"], few_splits=runs["coverage"].size, few_level=theory["level"],
        few_mean=runs["mean"], few_sd=runs["sd"], few_beta_sd=theory["sd"],
        few_below=float((runs["coverage"] < 1 - alpha).mean()),
        few_theory_below=theory["below"], few_low=float((runs["coverage"] < low).mean()),
        few_min=runs["coverage"].min(), runs=runs, theory=theory)


@dataclass(frozen=True)
class ConfidenceFifths:
    """Coverage and mean set size within fifths of the model's top probability on the test rows.

    ``fifth_low_cov`` and ``fifth_low_size`` are those of the least confident fifth,
    ``fifth_high_cov`` and ``fifth_high_size`` of the most confident; ``fifth_edge`` is the top
    of the least confident fifth, ``fifth_top_edge`` the bottom of the most confident one.
    ``edges`` are the six quantile edges, ``confidence`` the top probability of each test row,
    ``bands`` :func:`by_confidence`'s dict.
    """

    fifth_low_cov: float
    fifth_high_cov: float
    fifth_low_size: float
    fifth_high_size: float
    fifth_edge: float
    fifth_top_edge: float
    edges: np.ndarray = field(repr=False)
    confidence: np.ndarray = field(repr=False)
    bands: dict = field(repr=False)


def confidence_fifths(sets, p_test, y_test) -> ConfidenceFifths:
    """:func:`by_confidence` of the test ``sets`` in five bands of equal count of the top
    probability of ``p_test``."""
    conf = p_test.max(axis=1)
    edges = np.quantile(conf, np.linspace(0, 1, 6))
    bands = by_confidence(sets, y_test, conf, bands=edges)
    return ConfidenceFifths(
        fifth_low_cov=bands["coverage"][0], fifth_high_cov=bands["coverage"][4],
        fifth_low_size=bands["mean_size"][0], fifth_high_size=bands["mean_size"][4],
        fifth_edge=edges[1], fifth_top_edge=edges[4], edges=edges, confidence=conf,
        bands=bands)


@dataclass(frozen=True)
class EscalationPolicy:
    """The answer-singletons-escalate-the-rest policy on LAC sets at several levels.

    At ``alpha = 0.1``: ``kept_10`` (share answered), ``esc_10`` (share escalated),
    ``kept_acc_10`` (accuracy of the answered), ``esc_size_10`` and ``esc_cov_10`` (mean set
    size and coverage of the escalated). At ``alpha = 0.3``: ``kept_30``, ``kept_acc_30`` and
    ``empty_30`` (share of empty sets). ``by_alpha`` maps each level to :func:`escalation`'s
    dict.
    """

    kept_10: float
    esc_10: float
    kept_acc_10: float
    esc_size_10: float
    esc_cov_10: float
    kept_30: float
    kept_acc_30: float
    empty_30: float
    by_alpha: dict = field(repr=False)


def escalation_policy(p_cal, y_cal, p_test, y_test, *,
                      alpha_levels=(0.05, 0.1, 0.2, 0.3)) -> EscalationPolicy:
    """:func:`escalation` of the LAC sets of the test rows at each of ``alpha_levels``, which
    must include 0.1 and 0.3."""
    by_alpha = {}
    for a in alpha_levels:
        sets = conformal_sets(p_cal, y_cal, p_test, alpha=a, score="lac")["sets"]
        by_alpha[a] = escalation(sets, y_test)
    at10, at30 = by_alpha[0.1], by_alpha[0.3]
    return EscalationPolicy(
        kept_10=at10["kept"], esc_10=at10["escalated"], kept_acc_10=at10["kept_accuracy"],
        esc_size_10=at10["escalated_size"], esc_cov_10=at10["escalated_coverage"],
        kept_30=at30["kept"], kept_acc_30=at30["kept_accuracy"], empty_30=at30["empty"],
        by_alpha=by_alpha)


@dataclass(frozen=True)
class WindowSpread:
    """The spread of coverage across splits by whole windows, against row splits and the
    shuffled-windows control.

    ``seq_sd``, ``seq_mean`` and ``seq_min``: standard deviation, mean and least coverage of the
    window splits; ``seq_sd_low`` and ``seq_sd_high`` the chi-square interval of ``seq_sd``
    (``row_sd_*`` and ``ctl_sd_*`` those of the row splits and of the control, ``ctl_sd`` the
    control's spread); ``seq_ratio`` is ``seq_sd`` over the beta-binomial standard deviation;
    ``cal_windows`` the number of windows in the one split's calibration half. ``runs`` maps
    ``"rows"``, ``"windows"`` and ``"shuffled windows"`` to :func:`split_coverage`'s dicts,
    ``intervals`` the same keys to :func:`spread_interval`'s.
    """

    seq_sd: float
    seq_sd_low: float
    seq_sd_high: float
    row_sd_low: float
    row_sd_high: float
    ctl_sd: float
    ctl_sd_low: float
    ctl_sd_high: float
    seq_ratio: float
    seq_mean: float
    seq_min: float
    cal_windows: int
    runs: dict = field(repr=False)
    intervals: dict = field(repr=False)


def window_spread(scores, sequence, calibrating, rows: RowSplits, alpha: float = 0.1, *,
                  splits: int = 200, seed: int = 1, shuffle_seed: int = 3,
                  level: float = 0.95) -> WindowSpread:
    """:func:`split_coverage` over ``splits`` splits by whole windows of ``sequence``, and over
    as many by windows whose rows were reassigned at random (:func:`shuffle_groups` at
    ``shuffle_seed``), each with :func:`spread_interval` at ``level``, beside the row splits
    ``rows`` (:func:`row_splits`). ``calibrating`` is the one split's calibration mask."""
    def spread_of(groups):
        masks = calibration_masks(groups, splits=splits, by="sequence", seed=seed)
        return split_coverage(scores, masks, alpha)

    by_seq = spread_of(sequence)
    control = spread_of(shuffle_groups(sequence, seed=shuffle_seed))
    runs = {"rows": rows.runs, "windows": by_seq, "shuffled windows": control}
    spread = {name: spread_interval(r["coverage"], level) for name, r in runs.items()}
    return WindowSpread(
        seq_sd=by_seq["sd"], seq_sd_low=spread["windows"]["low"],
        seq_sd_high=spread["windows"]["high"], row_sd_low=spread["rows"]["low"],
        row_sd_high=spread["rows"]["high"], ctl_sd=control["sd"],
        ctl_sd_low=spread["shuffled windows"]["low"],
        ctl_sd_high=spread["shuffled windows"]["high"],
        seq_ratio=by_seq["sd"] / rows.theory["sd"], seq_mean=by_seq["mean"],
        seq_min=by_seq["coverage"].min(),
        cal_windows=len(np.unique(np.asarray(sequence)[calibrating])),
        runs=runs, intervals=spread)


@dataclass(frozen=True)
class ApsComparison:
    """Randomised APS sets on the same split, overall, within the fifths of confidence, and
    under the escalation policy.

    ``aps_cov``, ``aps_size`` and ``aps_empty``: coverage, mean size and share of empty sets;
    ``aps_low_*`` and ``aps_high_*``: coverage and mean size in the least and the most confident
    fifth; ``aps_dev`` the largest distance of a fifth's coverage from ``1 - alpha``;
    ``aps_kept`` and ``aps_kept_acc`` the share answered by the escalation policy and its
    accuracy. ``made`` is :func:`conformal_sets`'s dict, ``summary`` :func:`set_summary`'s,
    ``bands`` :func:`by_confidence`'s, ``policy`` :func:`escalation`'s.
    """

    aps_cov: float
    aps_size: float
    aps_empty: float
    aps_low_cov: float
    aps_high_cov: float
    aps_low_size: float
    aps_high_size: float
    aps_dev: float
    aps_kept: float
    aps_kept_acc: float
    made: dict = field(repr=False)
    summary: dict = field(repr=False)
    bands: dict = field(repr=False)
    policy: dict = field(repr=False)


def aps_comparison(p_cal, y_cal, p_test, y_test, fifths: ConfidenceFifths,
                   alpha: float = 0.1, *, seed: int = 0) -> ApsComparison:
    """Randomised APS sets (uniforms at ``seed``) of the test rows, measured as LAC's were:
    :func:`set_summary`, :func:`by_confidence` in the bands of ``fifths``
    (:func:`confidence_fifths`) and :func:`escalation`."""
    made = conformal_sets(p_cal, y_cal, p_test, alpha=alpha, score="aps", randomized=True,
                          seed=seed)
    summary = set_summary(made["sets"], y_test)
    bands = by_confidence(made["sets"], y_test, fifths.confidence, bands=fifths.edges)
    policy = escalation(made["sets"], y_test)
    return ApsComparison(
        aps_cov=summary["coverage"], aps_size=summary["mean_size"], aps_empty=summary["empty"],
        aps_low_cov=bands["coverage"][0], aps_high_cov=bands["coverage"][4],
        aps_low_size=bands["mean_size"][0], aps_high_size=bands["mean_size"][4],
        aps_dev=np.abs(bands["coverage"] - (1 - alpha)).max(),
        aps_kept=policy["kept"], aps_kept_acc=policy["kept_accuracy"],
        made=made, summary=summary, bands=bands, policy=policy)


@dataclass(frozen=True)
class Ties:
    """``tied``: the share of rows whose score equals another row's exactly; ``tied_first``:
    the share of those rows at the first position of their window."""

    tied: float
    tied_first: float


def ties(scores, position) -> Ties:
    """The exact ties among ``scores``, and where in the window (``position``) they sit."""
    _, where, counts = np.unique(scores, return_inverse=True, return_counts=True)
    tied = counts[where.ravel()] > 1
    return Ties(tied=tied.mean(), tied_first=(np.asarray(position)[tied] == 0).mean())


@dataclass(frozen=True)
class LevelBySize:
    """The level ``k/(n+1)`` over calibration sizes from the least that has a threshold.

    ``least_n`` is that least size; ``exact_count`` the number of sizes whose level is exactly
    ``1 - alpha``, ``exact_first`` and ``exact_second`` the first two; ``excess_max`` the
    largest excess of the level over ``1 - alpha`` and ``excess_at`` its size; ``excess_15``
    the excess at 15 scores. ``sizes``, ``exact`` (the exact sizes, a list) and ``gap`` (the
    excess at each size) are the whole range.
    """

    least_n: int
    exact_first: int
    exact_second: int
    exact_count: int
    excess_max: float
    excess_at: int
    excess_15: float
    sizes: np.ndarray = field(repr=False)
    exact: list = field(repr=False)
    gap: np.ndarray = field(repr=False)


def level_by_size(alpha: float = 0.1, *, largest: int = 60) -> LevelBySize:
    """:func:`finite_sample_level` for every calibration size from
    :func:`minimum_calibration` to ``largest``; a level is exactly ``1 - alpha`` when
    ``k/(n+1)`` equals it as a fraction (``alpha`` read with a denominator up to 1000)."""
    least = minimum_calibration(alpha)
    target = 1 - Fraction(alpha).limit_denominator(1000)
    sizes = np.arange(least, largest + 1)
    ranks = [coverage_distribution(int(size), 1, alpha)["k"] for size in sizes]
    exact = [int(size) for size, k in zip(sizes, ranks)
             if Fraction(k, int(size) + 1) == target]
    levels = np.array([finite_sample_level(int(size), alpha) for size in sizes])
    gap = levels - (1 - alpha)
    return LevelBySize(
        least_n=least, exact_first=exact[0], exact_second=exact[1], exact_count=len(exact),
        excess_max=gap.max(), excess_at=int(sizes[gap.argmax()]),
        excess_15=gap[sizes == 15][0], sizes=sizes, exact=exact, gap=gap)


@dataclass(frozen=True)
class SpreadAt49:
    """Coverage over random splits that calibrate on 49 rows, beside the beta-binomial law.

    ``k49`` is the rank of the threshold; ``sd49_theory`` the beta-binomial standard deviation,
    ``sd49_beta`` its calibration part and ``sd49_test`` its test part; ``mean49`` and ``sd49``
    the measured mean and spread, ``sd49_low`` and ``sd49_high`` the chi-square interval of the
    spread. ``runs``, ``theory`` and ``interval`` are the dicts of :func:`split_coverage`,
    :func:`coverage_distribution` and :func:`spread_interval`.
    """

    k49: int
    sd49_theory: float
    sd49_beta: float
    sd49_test: float
    mean49: float
    sd49: float
    sd49_low: float
    sd49_high: float
    runs: dict = field(repr=False)
    theory: dict = field(repr=False)
    interval: dict = field(repr=False)


def spread_at_49(scores, alpha: float = 0.1, *, splits: int = 400, seed: int = 4) -> SpreadAt49:
    """:func:`split_coverage` over ``splits`` random splits that calibrate on 49 rows of
    ``scores`` each, with :func:`coverage_distribution` and :func:`spread_interval`."""
    rows = np.asarray(scores).size
    masks = calibration_masks(np.arange(rows), share=49 / rows, splits=splits, seed=seed)
    runs = split_coverage(scores, masks, alpha)
    theory = coverage_distribution(runs["n"], runs["m"], alpha)
    interval = spread_interval(runs["coverage"])
    return SpreadAt49(
        k49=theory["k"], sd49_theory=theory["sd"], sd49_beta=theory["sd_calibration"],
        sd49_test=theory["sd_test"], mean49=runs["mean"], sd49=interval["sd"],
        sd49_low=interval["low"], sd49_high=interval["high"], runs=runs, theory=theory,
        interval=interval)


@dataclass(frozen=True)
class PositionSlices:
    """Coverage by position in the window, and LAC calibrated on one part of the positions.

    ``pos_lac_early`` and ``pos_aps_early``: LAC's and APS's coverage on the early positions;
    ``pos_lac_late``: LAC's on the last band. ``shift_cov``: LAC calibrated on the later
    positions of the calibration windows, covering the early positions of the test windows,
    with ``shift_low`` and ``shift_high`` the 95% range of the beta-binomial law had the two
    been exchangeable; ``same_cov``, ``same_low`` and ``same_high``: the same, calibrated on
    the early positions (the control). ``conf_early`` and ``conf_later``: the mean top
    probability on the early and on the later test positions. ``coverage`` maps ``"LAC"`` and
    ``"APS"`` to the coverage in each band, ``shifted`` maps ``"late"`` and ``"early"`` to the
    coverage, the range and ``n`` (the calibration rows).
    """

    pos_lac_early: float
    pos_aps_early: float
    pos_lac_late: float
    shift_cov: float
    shift_low: float
    shift_high: float
    same_cov: float
    same_low: float
    same_high: float
    conf_early: float
    conf_later: float
    coverage: dict = field(repr=False)
    shifted: dict = field(repr=False)


def position_slices(p, y, position, calibrating, lac_sets, aps_sets, alpha: float = 0.1, *,
                    edges=(-0.5, 7.5, 31.5, 63.5), early_positions: int = 8) -> PositionSlices:
    """:func:`by_confidence` of the test ``lac_sets`` and ``aps_sets`` with each row's
    ``position`` in place of its confidence (bands at ``edges``; the first band is the early
    one, the last the late one), and LAC sets for the test rows of the first
    ``early_positions`` positions calibrated on the calibration rows at or after them, and
    before them."""
    cal = calibrating
    coverage = {name: by_confidence(sets, y[~cal], position[~cal].astype(float),
                                    bands=edges)["coverage"]
                for name, sets in (("LAC", lac_sets), ("APS", aps_sets))}
    early = ~cal & (position < early_positions)
    shifted = {}
    for name, fit in (("late", cal & (position >= early_positions)),
                      ("early", cal & (position < early_positions))):
        sets = conformal_sets(p[fit], y[fit], p[early], alpha=alpha, score="lac")["sets"]
        law = coverage_distribution(int(fit.sum()), int(early.sum()), alpha)
        covered = set_summary(sets, y[early])["coverage"]
        shifted[name] = {"coverage": covered, "low": law["low"], "high": law["high"],
                         "n": int(fit.sum())}
    return PositionSlices(
        pos_lac_early=coverage["LAC"][0], pos_aps_early=coverage["APS"][0],
        pos_lac_late=coverage["LAC"][2],
        shift_cov=shifted["late"]["coverage"], shift_low=shifted["late"]["low"],
        shift_high=shifted["late"]["high"], same_cov=shifted["early"]["coverage"],
        same_low=shifted["early"]["low"], same_high=shifted["early"]["high"],
        conf_early=p[early].max(axis=1).mean(),
        conf_later=p[~cal & (position >= early_positions)].max(axis=1).mean(),
        coverage=coverage, shifted=shifted)
