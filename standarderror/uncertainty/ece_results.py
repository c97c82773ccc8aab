"""Named results of Episode 2 (the floor under ECE): each function returns a frozen dataclass
whose number fields are what the lecture quotes and pins, under the field's name; arrays and
dicts it also returns (for a print, a table or a figure) are not pinned.

Every function takes the model's predictions as arrays (``p`` rows x labels, ``logp`` their
logarithms, ``y`` the true labels, the window of each row) and is built from the public
functions of :mod:`.metrics`, :mod:`.scaling` and :mod:`.binning` in the order a reader would
call them, so its numbers are those functions' numbers, bit for bit.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .binning import (
    calibrated_labels,
    consistency_test,
    ece_batch,
    ece_floor,
    fit_scaling,
    l2_batch,
    p_values,
    predicted_constant,
    subset_p_values,
    verdicts,
)
from .metrics import ece
from .scaling import fitted_temperature, scale


def _top_confidence(logp, temperature) -> np.ndarray:
    """The top probability of each row at ``temperature``."""
    return np.exp(scale(logp, temperature).max(axis=1))


@dataclass(frozen=True)
class CalibratedStandIn:
    """The model's ECE beside that of a model calibrated by construction with the same
    confidences (labels drawn from them).

    ``rows`` is the number of predictions, ``accuracy`` and ``mean_conf`` the model's accuracy
    and mean top probability, ``ece_model`` its ECE; ``ece_fake`` is the stand-in's ECE on all
    rows and ``ece_fake_small`` on the ``small_rows`` rows of a random set of whole windows.
    ``confidence``, ``correct``, ``fake`` (the drawn labels) and ``small`` (the mask of the
    small set) are per row.
    """

    rows: int
    accuracy: float
    mean_conf: float
    ece_model: float
    ece_fake: float
    ece_fake_small: float
    small_rows: int
    confidence: np.ndarray = field(repr=False)
    correct: np.ndarray = field(repr=False)
    fake: np.ndarray = field(repr=False)
    small: np.ndarray = field(repr=False)


def calibrated_stand_in(p, y, sequence, *, seed: int = 0, windows: int = 16,
                        windows_seed: int = 1) -> CalibratedStandIn:
    """:func:`ece` (15 equal-width bins) of the top probability of ``p``, with the labels
    ``y`` and with labels drawn from the confidences (:func:`calibrated_labels` at ``seed``);
    the small set is ``windows`` windows of ``sequence`` drawn at ``windows_seed``."""
    conf = p.max(axis=1)
    correct = p.argmax(axis=1) == y
    fake = calibrated_labels(conf, draws=1, seed=seed)[0]
    chosen = np.random.default_rng(windows_seed).choice(sequence.max() + 1, windows,
                                                        replace=False)
    small = np.isin(sequence, chosen)
    return CalibratedStandIn(
        rows=y.size, accuracy=correct.mean(), mean_conf=conf.mean(),
        ece_model=ece(conf, correct), ece_fake=ece(conf, fake),
        ece_fake_small=ece(conf[small], fake[small]), small_rows=int(small.sum()),
        confidence=conf, correct=correct, fake=fake, small=small)


#: The two kinds of bins of :func:`floor_law`, as the lecture names them.
MODES = ("equal width", "equal mass")


@dataclass(frozen=True)
class FloorLaw:
    """The ECE floor of a model calibrated by construction, over sample sizes and bin counts,
    fitted by ``constant * sqrt(B/n)`` and predicted from the confidences alone.

    ``floor_draws`` is the number of label draws per point and ``points`` the number of
    points (both kinds of bins); ``fit_width`` and ``fit_mass`` the fitted constants for
    equal-width and equal-mass bins, ``r2_width`` and ``r2_mass`` their R^2, ``worst_width``
    the largest relative distance of an equal-width point from its line; ``pred_*_low`` and
    ``pred_*_high`` the least and largest constant :func:`predicted_constant` gives over the
    bin counts; ``floor_256``, ``floor_1024`` and ``floor_16384`` the mean ECE with 15
    equal-width bins at those sizes. ``floor`` maps each of :data:`MODES` to
    :func:`ece_floor`'s dict, ``fits`` to :func:`fit_scaling`'s, ``predicted`` to the constant
    of each bin count, ``bound`` to ``ratio`` (each point's mean over the exact bound) and
    ``rows15`` maps each size to its equal-width row with 15 bins.
    """

    floor_draws: int
    points: int
    fit_width: float
    r2_width: float
    worst_width: float
    fit_mass: float
    r2_mass: float
    pred_width_low: float
    pred_width_high: float
    pred_mass_low: float
    pred_mass_high: float
    floor_256: float
    floor_1024: float
    floor_16384: float
    floor: dict = field(repr=False)
    fits: dict = field(repr=False)
    predicted: dict = field(repr=False)
    bound: dict = field(repr=False)
    rows15: dict = field(repr=False)


def floor_law(conf, *, n_predictions=(256, 1024, 4096, 16384), bins=(5, 10, 15, 30, 60),
              draws: int = 200, seed: int = 0) -> FloorLaw:
    """:func:`ece_floor` of the confidences ``conf`` at each size of ``n_predictions`` and
    each bin count of ``bins`` (which must hold 15; the sizes must hold 256, 1,024 and
    16,384), with both kinds of bins; :func:`fit_scaling` of the means against
    ``sqrt(B/n)``; and the exact bound ``sqrt(pi/2) a sqrt(B/n)`` of each point, with ``a``
    from :func:`predicted_constant`."""
    floor, fits, predicted, bound = {}, {}, {}, {}
    for mode in MODES:
        mass = mode == "equal mass"
        floor[mode] = ece_floor(conf, n_predictions, bins, draws=draws, adaptive=mass,
                                seed=seed)
        rows = floor[mode]["rows"]
        x, mean = np.array([r["x"] for r in rows]), np.array([r["mean"] for r in rows])
        fits[mode] = fit_scaling(x, mean)
        predicted[mode] = {b: predicted_constant(conf, b, adaptive=mass) for b in bins}
        a_of = np.array([predicted[mode][r["bins"]] for r in rows])
        bound[mode] = mean / (np.sqrt(np.pi / 2) * a_of * x)
    rows15 = {r["n"]: r for r in floor["equal width"]["rows"] if r["bins"] == 15}
    fw, fm = fits["equal width"], fits["equal mass"]
    return FloorLaw(
        floor_draws=floor["equal width"]["draws"],
        points=sum(len(f["rows"]) for f in floor.values()),
        fit_width=fw["constant"], r2_width=fw["r2"], worst_width=fw["max_relative"],
        fit_mass=fm["constant"], r2_mass=fm["r2"],
        pred_width_low=min(predicted["equal width"].values()),
        pred_width_high=max(predicted["equal width"].values()),
        pred_mass_low=min(predicted["equal mass"].values()),
        pred_mass_high=max(predicted["equal mass"].values()),
        floor_256=rows15[256]["mean"], floor_1024=rows15[1024]["mean"],
        floor_16384=rows15[16384]["mean"],
        floor=floor, fits=fits, predicted=predicted, bound=bound, rows15=rows15)


@dataclass(frozen=True)
class TemperatureTests:
    """Consistency resampling of the model's ECE at the trained temperature (``_t1``), the
    fitted one (``_fit``) and a hotter one (``_t13``), and the control.

    ``fitted_t`` is the temperature that minimises NLL; ``null_draws`` the number of
    calibrated redraws; ``ece_*`` the observed ECE, ``null_*`` the mean of the redraws,
    ``high_fit`` their 95th percentile at the fitted temperature, ``p_*`` the p-values.
    ``control_rate`` is the share of the ``control_tries`` label vectors drawn from the fitted
    confidences whose p-value is at or below ``level``. ``tests`` maps each temperature to
    :func:`consistency_test`'s dict, ``control`` holds the control's p-values.
    """

    fitted_t: float
    null_draws: int
    ece_t1: float
    null_t1: float
    p_t1: float
    ece_fit: float
    null_fit: float
    high_fit: float
    p_fit: float
    ece_t13: float
    p_t13: float
    control_tries: int
    control_rate: float
    tests: dict = field(repr=False)
    control: np.ndarray = field(repr=False)


def temperature_tests(p, y, sequence, logp, correct, *, T=(1.0, 1.3), draws: int = 1000,
                      seed: int = 0, control_draws: int = 500, control_seed: int = 7,
                      level: float = 0.05) -> TemperatureTests:
    """:func:`consistency_test` of the top probability at ``T[0]``, at the temperature
    :func:`fitted_temperature` fits on all rows, and at ``T[1]``; the control draws
    ``control_draws`` label vectors from the fitted confidences (at ``control_seed``) and
    tests their ECE against the fitted temperature's null."""
    fitted_t = fitted_temperature(p, y, sequence, halves=1)["all"]
    tests = {}
    for t in (T[0], fitted_t, T[1]):
        tests[t] = consistency_test(_top_confidence(logp, t), correct, draws=draws, seed=seed)
    c_fit = _top_confidence(logp, fitted_t)
    labels = calibrated_labels(c_fit, draws=control_draws, seed=control_seed)
    control = p_values(ece_batch(c_fit, labels), tests[fitted_t]["null"])
    t1, tf, t13 = tests[T[0]], tests[fitted_t], tests[T[1]]
    return TemperatureTests(
        fitted_t=fitted_t, null_draws=t1["null"].size, ece_t1=t1["observed"],
        null_t1=t1["null_mean"], p_t1=t1["p_value"], ece_fit=tf["observed"],
        null_fit=tf["null_mean"], high_fit=tf["null_high"], p_fit=tf["p_value"],
        ece_t13=t13["observed"], p_t13=t13["p_value"], control_tries=control.size,
        control_rate=np.mean(control <= level), tests=tests, control=control)


@dataclass(frozen=True)
class SubsetTests:
    """Consistency resampling on random evaluation sets of whole windows: ``sub_sets`` sets
    of ``sub_rows`` rows each; ``sub_detect`` is the share of them with a p-value at or below
    ``level``, ``sub_median_p`` their median p-value. ``result`` is
    :func:`subset_p_values`'s dict."""

    sub_sets: int
    sub_rows: int
    sub_detect: float
    sub_median_p: float
    result: dict = field(repr=False)


def subset_tests(conf, correct, sequence, *, windows: int = 16, subsets: int = 50,
                 draws: int = 500, seed: int = 0, level: float = 0.05) -> SubsetTests:
    """:func:`subset_p_values` on ``subsets`` sets of ``windows`` whole windows."""
    sub = subset_p_values(conf, correct, sequence, windows=windows, subsets=subsets,
                          draws=draws, seed=seed)
    return SubsetTests(
        sub_sets=sub["subsets"], sub_rows=sub["rows"],
        sub_detect=np.mean(sub["p_values"] <= level),
        sub_median_p=np.median(sub["p_values"]), result=sub)


@dataclass(frozen=True)
class DebiasedErrors:
    """The plug-in and the debiased squared calibration error, on the calibrated stand-in and
    on the model.

    ``l2_plug_256``, ``l2_db_256`` and ``l2_se_256``: the plug-in mean, the debiased mean and
    its standard error on 256 calibrated predictions (15 bins); ``l2_plug_16384``: the plug-in
    mean on 16,384; ``l2_max_z``: the largest debiased mean over the sizes, in standard
    errors. ``rms_t1`` and ``rms_fit``: the square root of the model's debiased estimate at
    ``T`` and at the fitted temperature; ``plug_rms_fit``: that of the plug-in at the fitted
    one. ``model`` maps each temperature to the plug-in and the debiased estimate.
    """

    l2_plug_256: float
    l2_db_256: float
    l2_se_256: float
    l2_plug_16384: float
    l2_max_z: float
    rms_t1: float
    rms_fit: float
    plug_rms_fit: float
    model: dict = field(repr=False)


def debiased_errors(floor: FloorLaw, logp, correct, fitted_t: float, *,
                    T: float = 1.0) -> DebiasedErrors:
    """:func:`l2_batch`, plug-in and debiased, of the model's top probability at ``T`` and
    at ``fitted_t``, beside the means of :func:`floor_law`'s 15-bin rows."""
    rows15 = floor.rows15
    model = {}
    for t in (T, fitted_t):
        c_t = _top_confidence(logp, t)
        model[t] = [l2_batch(c_t, correct, debiased=d)[0] for d in (False, True)]
    return DebiasedErrors(
        l2_plug_256=rows15[256]["l2_plugin"], l2_db_256=rows15[256]["l2_debiased"],
        l2_se_256=rows15[256]["l2_debiased_se"], l2_plug_16384=rows15[16384]["l2_plugin"],
        l2_max_z=max(abs(r["l2_debiased"]) / r["l2_debiased_se"] for r in rows15.values()),
        rms_t1=np.sqrt(model[T][1]), rms_fit=np.sqrt(model[fitted_t][1]),
        plug_rms_fit=np.sqrt(model[fitted_t][0]), model=model)


@dataclass(frozen=True)
class Verdicts:
    """How often random subsets of whole windows agree with all the data about which of two
    temperatures is better, for the pairs ``pairs`` (``_a`` the first, ``_b`` the second).

    ``agree_<metric>_<pair>``: the agreement of NLL, ECE, Brier and debiased L2 on subsets of
    16 windows; ``agree_ece_small_a``: ECE's on the smallest subsets, ``agree_nll_big_b`` and
    ``agree_ece_big_b``: NLL's and ECE's on the largest; ``verdict_draws``: subsets per size;
    ``fewest_rows`` and ``most_rows``: the rows of the smallest and the largest subsets.
    ``verdict`` maps each pair to :func:`verdicts`'s dict, ``preferred`` each pair to the
    temperature each metric prefers on all the data; ``windows`` are the subset sizes.
    """

    agree_nll_a: float
    agree_ece_a: float
    agree_brier_a: float
    agree_l2_a: float
    agree_nll_b: float
    agree_ece_b: float
    agree_brier_b: float
    agree_ece_small_a: float
    agree_nll_big_b: float
    agree_ece_big_b: float
    verdict_draws: int
    fewest_rows: int
    most_rows: int
    pairs: tuple = field(repr=False)
    windows: tuple = field(repr=False)
    verdict: dict = field(repr=False)
    preferred: dict = field(repr=False)


def temperature_verdicts(logp, y, sequence, *, T=(1.0, 1.1, 1.2),
                         windows=(2, 4, 8, 16, 32, 64, 128), draws: int = 500,
                         seed: int = 0) -> Verdicts:
    """:func:`verdicts` for each of the three temperatures ``T`` against the next (two pairs)
    on subsets of each number of ``windows`` (which must hold 16)."""
    if len(T) != 3:
        raise ValueError(f"T must hold three temperatures (two pairs), got {T!r}")
    pairs, windows = tuple(zip(T[:-1], T[1:])), tuple(windows)
    verdict = {pair: verdicts(logp, y, sequence, pair, windows, draws=draws, seed=seed)
               for pair in pairs}
    preferred = {pair: {k: v["temperatures"][w] for k, (_, _, w) in v["full"].items()}
                 for pair, v in verdict.items()}
    a1, a2 = verdict[pairs[0]]["agreement"], verdict[pairs[1]]["agreement"]
    j16, per = windows.index(16), verdict[pairs[0]]["rows_per_sequence"]
    return Verdicts(
        agree_nll_a=a1["NLL"][j16], agree_ece_a=a1["ECE"][j16],
        agree_brier_a=a1["Brier"][j16], agree_l2_a=a1["debiased L2"][j16],
        agree_nll_b=a2["NLL"][j16], agree_ece_b=a2["ECE"][j16],
        agree_brier_b=a2["Brier"][j16], agree_ece_small_a=a1["ECE"][0],
        agree_nll_big_b=a2["NLL"][-1], agree_ece_big_b=a2["ECE"][-1],
        verdict_draws=verdict[pairs[0]]["draws"], fewest_rows=windows[0] * per,
        most_rows=windows[-1] * per, pairs=pairs, windows=windows, verdict=verdict,
        preferred=preferred)


@dataclass(frozen=True)
class FloorPrediction:
    """The floor predicted by :func:`floor_law`'s equal-width constant for 15 bins on 1,024
    predictions (``guess_1024``), beside the simulated means with 15 bins on 1,024
    (``sim_15_1024``) and 60 bins on 4,096 (``sim_60_4096``), the larger Monte Carlo
    standard error of the two (``sim_se``), and the larger distance of the two from the
    prediction in its own standard errors (``sim_z``). ``cells`` are the two simulated rows."""

    guess_1024: float
    sim_15_1024: float
    sim_60_4096: float
    sim_se: float
    sim_z: float
    cells: list = field(repr=False)


def floor_prediction(floor: FloorLaw) -> FloorPrediction:
    """``constant * sqrt(15 / 1024)`` against the two simulated points with that ratio."""
    width = floor.floor["equal width"]
    by_cell = {(r["bins"], r["n"]): r["mean"] for r in width["rows"]}
    guess = floor.fits["equal width"]["constant"] * np.sqrt(15 / 1024)
    cells = [r for r in width["rows"] if (r["bins"], r["n"]) in ((15, 1024), (60, 4096))]
    ses = [r["sd"] / np.sqrt(width["draws"]) for r in cells]
    z = max(abs(r["mean"] - guess) / e for r, e in zip(cells, ses))
    return FloorPrediction(guess_1024=guess, sim_15_1024=by_cell[15, 1024],
                           sim_60_4096=by_cell[60, 4096], sim_se=max(ses), sim_z=float(z),
                           cells=cells)


@dataclass(frozen=True)
class DataForFloor:
    """How many predictions a calibrated model with these confidences needs for its mean ECE
    to reach a target: ``a15`` the predicted constant, ``need`` the number of predictions,
    ``need_share`` that number over the rows given; ``need_mean`` and ``need_sd`` the mean and
    standard deviation of the simulated ECE there. ``check`` is :func:`ece_floor`'s row, with
    ``se`` (the standard error of its mean) added."""

    a15: float
    need: int
    need_mean: float
    need_sd: float
    need_share: float
    check: dict = field(repr=False)


def data_for_floor(conf, *, bins: int = 15, target: float = 0.01, draws: int = 200,
                   seed: int = 5) -> DataForFloor:
    """``n = B (a / target)^2`` with ``a`` from :func:`predicted_constant`, rounded up, and
    :func:`ece_floor` at that ``n`` to check it."""
    a15 = predicted_constant(conf, bins)
    need = int(np.ceil(bins * (a15 / target) ** 2))
    row = ece_floor(conf, [need], [bins], draws=draws, seed=seed)["rows"][0]
    check = dict(row, se=row["sd"] / np.sqrt(draws))
    return DataForFloor(a15=a15, need=need, need_mean=check["mean"], need_sd=check["sd"],
                        need_share=need / np.asarray(conf).size, check=check)


@dataclass(frozen=True)
class MoreVerdicts:
    """The verdicts of two more pairs (``_wide``: the first, ``_close``: the second) on the
    largest subsets, ``x_rows`` rows each: ``x_nll_*``, ``x_ece_wide``, ``x_brier_*``; the
    first pair of :func:`temperature_verdicts` at the same size (``x_ece_near``,
    ``x_brier_near``); and ECE's full-data gap between the temperatures of the first new pair
    (``x_gap_wide``) and of that first pair (``x_gap_near``). ``extra`` maps each new pair to
    :func:`verdicts`'s dict; ``windows`` are the subset sizes."""

    x_nll_wide: float
    x_ece_wide: float
    x_brier_wide: float
    x_nll_close: float
    x_brier_close: float
    x_rows: int
    x_ece_near: float
    x_brier_near: float
    x_gap_wide: float
    x_gap_near: float
    windows: tuple = field(repr=False)
    extra: dict = field(repr=False)


def more_verdicts(logp, y, sequence, near: Verdicts, *, T=((1.0, 1.3), (1.12, 1.15)),
                  windows=(4, 16, 64), draws: int = 200, seed: int = 0) -> MoreVerdicts:
    """:func:`verdicts` for the two pairs of temperatures ``T`` (a wide pair, then a close
    one) on subsets of ``windows`` windows, compared with the first pair of ``near`` at the
    largest of them."""
    if len(T) != 2 or any(len(pair) != 2 for pair in T):
        raise ValueError(f"T must hold two pairs of temperatures, got {T!r}")
    windows = tuple(windows)
    wide_pair, close_pair = (tuple(pair) for pair in T)
    extra = {pair: verdicts(logp, y, sequence, pair, windows, draws=draws, seed=seed)
             for pair in (wide_pair, close_pair)}
    wide, close = extra[wide_pair]["agreement"], extra[close_pair]["agreement"]
    first = near.verdict[near.pairs[0]]
    gap = {name: abs(v["full"]["ECE"][1] - v["full"]["ECE"][0])
           for name, v in (("wide", extra[wide_pair]), ("near", first))}
    at = near.windows.index(windows[-1])
    return MoreVerdicts(
        x_nll_wide=wide["NLL"][-1], x_ece_wide=wide["ECE"][-1], x_brier_wide=wide["Brier"][-1],
        x_nll_close=close["NLL"][-1], x_brier_close=close["Brier"][-1],
        x_rows=windows[-1] * first["rows_per_sequence"],
        x_ece_near=first["agreement"]["ECE"][at], x_brier_near=first["agreement"]["Brier"][at],
        x_gap_wide=gap["wide"], x_gap_near=gap["near"], windows=windows, extra=extra)
