"""Named results that compare several quantities of this package on the same answers: fitted
temperatures by number of answers and by embedder, confidence scores by AUROC, the exact and
the authors' arithmetic, the authors' diagnostic conventions, and the shuffled-target control.

Each function returns a frozen dataclass. Its number fields are what a lecture quotes (and
pins, under the field's name); arrays and dicts it also returns (for a figure or a table) are
not numbers and are not pinned. Each is built from the public functions of this package in the
order a reader would call them, so its numbers are those functions' numbers, bit for bit.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..uncertainty.metrics import ece as _ece
from ._gram import EPS
from .baselines import auroc, auroc_difference, kernel_language_entropy, semantic_entropy
from .diagrams import _halves, reliability, reliability_grid
from .scores import (
    AUTHORS_GRID,
    eigenvalues,
    entropy,
    fit_spectral_temperature,
    null_share,
    outside_share,
    risk,
    risk_curve,
    temperature_difference,
    temperature_interval,
)
from .targets import calibration_curve

#: The answers per question at which :func:`temperature_intervals` fits the development split.
INTERVAL_SIZES = (100, 20, 10, 5)


@dataclass(frozen=True)
class TemperatureIntervals:
    """The fitted matrix temperature with its bootstrap interval on the first ``m`` answers of
    the development split, for ``m`` in :data:`INTERVAL_SIZES`, and on the whole test split
    (``t_test_m20``). ``intervals`` maps ``(split, m)`` to :func:`temperature_interval`'s
    dict."""

    t_dev_m100: float
    t_dev_m100_lo: float
    t_dev_m100_hi: float
    t_dev_m20: float
    t_dev_m20_lo: float
    t_dev_m20_hi: float
    t_dev_m10: float
    t_dev_m10_lo: float
    t_dev_m10_hi: float
    t_dev_m5: float
    t_dev_m5_lo: float
    t_dev_m5_hi: float
    t_test_m20: float
    t_test_m20_lo: float
    t_test_m20_hi: float
    intervals: dict = field(repr=False)


def temperature_intervals(dev_answers, dev_targets, answers, targets, *, m=INTERVAL_SIZES,
                          seed: int = 0, level: float = 0.95) -> TemperatureIntervals:
    """:func:`temperature_interval` on the first ``k`` development answers for each ``k`` of
    ``m`` (the fields are named for :data:`INTERVAL_SIZES`, its only accepted value), and on the
    test split (which must have 20 answers per question)."""
    if tuple(m) != INTERVAL_SIZES:
        raise ValueError(f"m must be {INTERVAL_SIZES}, the sizes the fields are named for, got {m}")
    if np.shape(answers)[1] != 20:
        raise ValueError(f"the test split must have 20 answers per question, got {np.shape(answers)[1]}")
    t_m = {}
    for k in m:
        t_m["development", k] = temperature_interval(dev_answers[:, :k], dev_targets, seed=seed,
                                                     level=level)
    t_m["test", 20] = temperature_interval(answers, targets, seed=seed, level=level)
    values = {}
    for (split, k), r in t_m.items():
        key = f"t_{'dev' if split == 'development' else 'test'}_m{k}"
        values.update({key: r["temperature"], f"{key}_lo": r["low"], f"{key}_hi": r["high"]})
    return TemperatureIntervals(**values, intervals=t_m)


#: The pairs of confidence scores :func:`auroc_comparison` compares, by their names there.
AUROC_PAIRS = {
    "se_lmax": ("se", "lmax"), "se_ent": ("se", "ent"), "lmax_fit": ("lmax_fit", "lmax"),
    "ent_fit": ("ent_fit", "ent"), "ent_kle": ("ent", "kle"), "lmax_kle": ("lmax", "kle"),
}


@dataclass(frozen=True)
class AurocComparison:
    """How well six confidence scores detect wrong answers: the AUROC of each (``auc_*``),
    the largest bootstrap standard deviation among them, the questions whose answers are one
    repeated string, and the paired differences of :data:`AUROC_PAIRS` with their intervals
    (``dauc_*``). ``scores`` maps each score's display name to its values, ``aurocs`` each
    display name to :func:`auroc`'s dict."""

    auc_lmax: float
    auc_lmax_fit: float
    auc_ent: float
    auc_ent_fit: float
    auc_se: float
    auc_kle: float
    auc_se_bar: float
    one_word_questions: int
    dauc_se_lmax: float
    dauc_se_lmax_lo: float
    dauc_se_lmax_hi: float
    dauc_se_ent: float
    dauc_se_ent_lo: float
    dauc_se_ent_hi: float
    dauc_lmax_fit: float
    dauc_lmax_fit_lo: float
    dauc_lmax_fit_hi: float
    dauc_ent_fit: float
    dauc_ent_fit_lo: float
    dauc_ent_fit_hi: float
    dauc_ent_kle: float
    dauc_ent_kle_lo: float
    dauc_ent_kle_hi: float
    dauc_lmax_kle: float
    dauc_lmax_kle_lo: float
    dauc_lmax_kle_hi: float
    scores: dict = field(repr=False)
    aurocs: dict = field(repr=False)


def auroc_comparison(answers, correct, temperature: float, texts, *, seed: int = 0,
                     level: float = 0.95, draws: int = 20, paired_draws: int = 1000,
                     threshold: float = 0.9) -> AurocComparison:
    """The AUROC of :math:`\\lambda_{\\max}` and of the negated entropy at T = 1 and at
    ``temperature``, of negated semantic entropy (cosine ``threshold``) and of negated kernel
    language entropy, each with ``draws`` bootstrap draws for its standard deviation; and the
    paired difference of each pair of :data:`AUROC_PAIRS` (``auroc_difference``, with
    ``paired_draws`` draws of the questions). ``texts`` are the answers as strings, one
    sequence per question."""
    t = temperature
    short = ("lmax", "lmax_fit", "ent", "ent_fit", "se", "kle")
    scores = {
        "λmax": eigenvalues(answers)[:, 0],
        f"λmax, T = {t:.2f}": eigenvalues(answers, t)[:, 0],
        "−entropy": -entropy(answers),
        f"−entropy, T = {t:.2f}": -entropy(answers, t),
        "−semantic entropy": -semantic_entropy(answers, threshold=threshold)["entropy"],
        "−kernel language entropy": -kernel_language_entropy(answers),
    }
    aucs = {k: auroc(v, correct, bootstrap=draws, seed=seed) for k, v in scores.items()}
    name = dict(zip(short, scores))
    values = {f"auc_{s}": aucs[name[s]]["auroc"] for s in short}
    values["auc_se_bar"] = max(a["se"] for a in aucs.values())
    values["one_word_questions"] = sum(len(set(a)) == 1 for a in texts)
    for k, (a, b) in AUROC_PAIRS.items():
        r = auroc_difference(scores[name[a]], scores[name[b]], correct, bootstrap=paired_draws,
                             seed=seed, level=level)
        values.update({f"dauc_{k}": r["difference"], f"dauc_{k}_lo": r["low"],
                       f"dauc_{k}_hi": r["high"]})
    return AurocComparison(**values, scores=scores, aurocs=aucs)


@dataclass(frozen=True)
class BinClusterGrid:
    """The clustered diagram's gap over a grid of bin and cluster counts, each value read at
    the three decimals the grid's table prints: its smallest and largest value at T = 1, its
    largest at the fitted temperature, and how many settings rise with scaling; and the mean
    Frobenius cosine similarity of two predicted matrices within a cluster and within a bin
    (of the reference diagram). ``rows`` are the table's rows."""

    ece_grid_min_1: float
    ece_grid_max_1: float
    ece_grid_max_fit: float
    n_higher_fit: int
    within_cluster: float
    within_bin: float
    rows: list = field(repr=False)


def bin_cluster_grid(answers, targets, temperature: float, reference: dict, *, bins=(6, 8, 10),
                     clusters=(3, 5, 7)) -> BinClusterGrid:
    """:func:`reliability_grid` at T = 1 and at ``temperature`` (one linkage per bin, cut at
    every cluster count); ``reference`` is the :func:`reliability` dict whose within-cluster and
    within-bin similarities are reported."""
    at_1, at_fit = (reliability_grid(answers, targets, t, bins=bins, clusters=clusters)
                    for t in (1.0, temperature))
    rows = [(b, c, f"{at_1[b, c]['ece']:.3f}", f"{at_fit[b, c]['ece']:.3f}")
            for b in bins for c in clusters]
    grid = np.array([[float(r[2]), float(r[3])] for r in rows])
    return BinClusterGrid(
        ece_grid_min_1=grid[:, 0].min(), ece_grid_max_1=grid[:, 0].max(),
        ece_grid_max_fit=grid[:, 1].max(), n_higher_fit=int(np.sum(grid[:, 1] > grid[:, 0])),
        within_cluster=reference["within_cluster"], within_bin=reference["within_bin"],
        rows=rows)


@dataclass(frozen=True)
class EmbedderComparison:
    """A second embedder's answers beside the first's: its fitted temperature at 20 answers
    (``t_fit_hash``) with the bootstrap interval and the share of draws at or below one, at
    100 answers, and its difference from the first embedder's refitted on the same resampled
    questions (``dt_hash``); its dimension; the clustered diagram's gap before and after its
    scaling; and its AUROCs, with paired differences from the first embedder's scores.
    ``gaps`` maps each temperature to the gap; ``aurocs`` each score's name to its AUROC."""

    t_fit_hash: float
    hash_dim: int
    t_hash_lo: float
    t_hash_hi: float
    t_hash_at_most_1: float
    dt_hash: float
    dt_hash_lo: float
    dt_hash_hi: float
    t_hash_m100: float
    t_hash_m100_lo: float
    t_hash_m100_hi: float
    ece_hash_1: float
    ece_hash_fit: float
    auc_hash_lmax: float
    auc_hash_ent: float
    dauc_hash_lmax: float
    dauc_hash_lmax_hi: float
    dauc_hash_ent_lo: float
    dauc_hash_ent_hi: float
    gaps: dict = field(repr=False)
    aurocs: dict = field(repr=False)


def embedder_comparison(dev_answers, dev_targets, answers, targets, first_dev_answers,
                        first_dev_targets, first_scores: dict, correct, *, seed: int = 0,
                        level: float = 0.95) -> EmbedderComparison:
    """The second embedder's development answers (100 per question; the fit uses the first
    20) and test answers, against the first embedder's development answers at 20 per question
    and its test scores ``first_scores`` (keys ``"λmax"`` and ``"−entropy"``, as in
    :func:`auroc_comparison`)."""
    fit = fit_spectral_temperature(dev_answers[:, :20], dev_targets)  # m = 20, the test m
    th = fit["temperature"]
    t_h = {m: temperature_interval(dev_answers[:, :m], dev_targets, seed=seed, level=level)
           for m in (20, 100)}
    # both embedders refitted on the same resampled questions
    d_t = temperature_difference(dev_answers[:, :20], dev_targets, first_dev_answers,
                                 first_dev_targets, seed=seed, level=level)
    gaps = {t: reliability(answers, targets, t)["ece"] for t in (1.0, th)}
    aucs = {name: auroc(s, correct, bootstrap=20, seed=seed)["auroc"] for name, s in (
        ("λmax", eigenvalues(answers)[:, 0]), ("λmax TS", eigenvalues(answers, th)[:, 0]),
        ("−entropy", -entropy(answers)), ("−entropy TS", -entropy(answers, th)))}
    d = {k: auroc_difference(h, first_scores[k], correct, seed=seed, level=level)
         for k, h in (("λmax", eigenvalues(answers)[:, 0]), ("−entropy", -entropy(answers)))}
    return EmbedderComparison(
        t_fit_hash=th, hash_dim=np.shape(answers)[2], t_hash_lo=t_h[20]["low"],
        t_hash_hi=t_h[20]["high"], t_hash_at_most_1=np.mean(t_h[20]["draws"] <= 1),
        dt_hash=d_t["difference"], dt_hash_lo=d_t["low"], dt_hash_hi=d_t["high"],
        t_hash_m100=t_h[100]["temperature"], t_hash_m100_lo=t_h[100]["low"],
        t_hash_m100_hi=t_h[100]["high"], ece_hash_1=gaps[1.0], ece_hash_fit=gaps[th],
        auc_hash_lmax=aucs["λmax"], auc_hash_ent=aucs["−entropy"],
        dauc_hash_lmax=d["λmax"]["difference"], dauc_hash_lmax_hi=d["λmax"]["high"],
        dauc_hash_ent_lo=d["−entropy"]["low"], dauc_hash_ent_hi=d["−entropy"]["high"],
        gaps=gaps, aurocs=aucs)


#: The two arithmetics :func:`arithmetic_comparison` runs.
ARITHMETIC_PAIR = ("exact", "authors")


@dataclass(frozen=True)
class ArithmeticComparison:
    """The matrix temperature fitted exactly and the authors' way on a development and a test
    split: on :data:`AUTHORS_GRID` (``*_grid_*``; its size and ends ``grid_n``, ``grid_lo``,
    ``grid_hi``) and continuously (``*_cont_*``); the authors' risk at T = 1 and at their fit
    on the development split; and the authors' fit with the floor at 1e-3. ``fits`` maps
    ``(split, arithmetic)`` (and ``(split, arithmetic, "c")``, continuous) to
    :func:`fit_spectral_temperature`'s dict, ``curves`` ``(split, arithmetic)`` to
    :func:`risk_curve`'s dict over ``temperatures``."""

    grid_n: int
    grid_lo: float
    grid_hi: float
    t_dev_grid_exact: float
    t_dev_grid_auth: float
    t_test_grid_exact: float
    t_test_grid_auth: float
    t_dev_cont_auth: float
    t_dev_cont_exact: float
    t_test_cont_exact: float
    t_test_cont_auth: float
    risk_dev_auth_1: float
    risk_dev_auth_fit: float
    t_dev_auth_eps3: float
    t_test_auth_eps3: float
    fits: dict = field(repr=False)
    curves: dict = field(repr=False)


def arithmetic_comparison(splits: dict, temperatures, *,
                          meet_below: float | None = None) -> ArithmeticComparison:
    """Both arithmetics on each split of ``splits`` (``{name: (answers, targets)}``, the
    development split first, then the test split). With ``meet_below``, the authors'-way
    continuous fit on the development split must have risk minus average entropy below it in
    absolute value (where the floor does not bind, the exponential-family identity makes them
    equal at an interior minimum), or a ValueError says by how much it is not."""
    ag = AUTHORS_GRID
    fits, curves = {}, {}
    for s, (a_, y_) in splits.items():
        for ar in ARITHMETIC_PAIR:
            fits[s, ar] = fit_spectral_temperature(a_, y_, arithmetic=ar, grid=ag)
            fits[s, ar, "c"] = fit_spectral_temperature(a_, y_, arithmetic=ar,
                                                        grid="continuous")
            curves[s, ar] = risk_curve(a_, y_, temperatures, arithmetic=ar)
    dv, te = splits
    fa = fits[dv, "authors", "c"]
    if meet_below is not None and not abs(fa["risk"] - fa["entropy"]) < meet_below:
        raise ValueError(f"the authors'-way fit on {dv!r}: risk - entropy = "
                         f"{fa['risk'] - fa['entropy']:.3g}, not below {meet_below:g}")
    eps3 = {s: fit_spectral_temperature(a_, y_, eps=1e-3, arithmetic="authors")
            for s, (a_, y_) in splits.items()}  # the same decompositions, another floor
    return ArithmeticComparison(
        grid_n=len(ag), grid_lo=ag[0], grid_hi=ag[-1],
        t_dev_grid_exact=fits[dv, "exact"]["temperature"],
        t_dev_grid_auth=fits[dv, "authors"]["temperature"],
        t_test_grid_exact=fits[te, "exact"]["temperature"],
        t_test_grid_auth=fits[te, "authors"]["temperature"],
        t_dev_cont_auth=fits[dv, "authors", "c"]["temperature"],
        t_dev_cont_exact=fits[dv, "exact", "c"]["temperature"],
        t_test_cont_exact=fits[te, "exact", "c"]["temperature"],
        t_test_cont_auth=fits[te, "authors", "c"]["temperature"],
        risk_dev_auth_1=fits[dv, "authors"]["risk_at_one"],
        risk_dev_auth_fit=fits[dv, "authors"]["risk"],
        t_dev_auth_eps3=eps3[dv]["temperature"], t_test_auth_eps3=eps3[te]["temperature"],
        fits=fits, curves=curves)


#: The variations of the authors' recipe that :func:`null_space_comparison` separates.
HALVES = ("float64-abs", "float32-clip", "float64-clip")


@dataclass(frozen=True)
class NullSpaceComparison:
    """Each half of the authors' recipe alone, and neither: the fitted temperature of each
    variation of :data:`HALVES` (``t_*``), and the mean null-space share of the scaled
    spectrum at T = 2 and T = 5 (``null_*``). ``fits`` maps each variation to its fitted
    temperature, ``shares`` ``(arithmetic, T)`` to the mean share (also for ``"authors"``)."""

    t_f64abs: float
    t_f32clip: float
    t_f64clip: float
    null_auth_2: float
    null_auth_5: float
    null_f64_5: float
    null_clip_2: float
    null_clip_5: float
    fits: dict = field(repr=False)
    shares: dict = field(repr=False)


def null_space_comparison(answers, targets, *,
                          float64_below: float | None = None) -> NullSpaceComparison:
    """:func:`fit_spectral_temperature` and :func:`null_share` under each variation. With
    ``float64_below``, the mean share of ``"float64-abs"`` at T = 2 must lie below it, or a
    ValueError says it does not."""
    fits = {ar: fit_spectral_temperature(answers, targets, arithmetic=ar)["temperature"]
            for ar in HALVES}
    null = {(ar, t): null_share(answers, t, arithmetic=ar).mean() for t in (2.0, 5.0)
            for ar in ("authors",) + HALVES}
    if float64_below is not None and not null["float64-abs", 2.0] < float64_below:
        raise ValueError(f"the float64 null-space share at T = 2 is {null['float64-abs', 2.0]:.3g}"
                         f", not below {float64_below:g}")
    return NullSpaceComparison(
        t_f64abs=fits["float64-abs"], t_f32clip=fits["float32-clip"],
        t_f64clip=fits["float64-clip"], null_auth_2=null["authors", 2.0],
        null_auth_5=null["authors", 5.0], null_f64_5=null["float64-abs", 5.0],
        null_clip_2=null["float32-clip", 2.0], null_clip_5=null["float32-clip", 5.0],
        fits=fits, shares=null)


@dataclass(frozen=True)
class FitSensitivity:
    """What else moves the fitted temperature, exactly and the authors' way, on one split:
    the floor (1e-3, 1e-20), their log grid cut short or run long (its last points
    ``grid_stop_short``, ``grid_stop_long``), 20 answers per question, and a second embedder.
    ``fits`` maps each change's key to ``{arithmetic: T}``; ``labels`` each key to its
    description."""

    t_auth_eps3: float
    t_auth_eps20: float
    t_auth_top25: float
    t_auth_top20: float
    t_exact_top20: float
    t_auth_m20: float
    t_exact_m20: float
    t_auth_hash: float
    t_exact_hash: float
    grid_stop_short: float
    grid_stop_long: float
    fits: dict = field(repr=False)
    labels: dict = field(repr=False)


def fit_sensitivity(answers, targets, base: dict, answers_m20, other_answers,
                    other_targets) -> FitSensitivity:
    """Each change of one split, one at a time: ``base`` is ``{arithmetic: T}`` of the split
    as it is (100 answers, :data:`EPS`, :data:`AUTHORS_GRID`); ``answers_m20`` its first 20
    answers; ``other_*`` the split under a second embedder."""

    def both(a_, y_, grid=AUTHORS_GRID, **kw):  # fitted T: exact, and the authors' way
        return {ar: fit_spectral_temperature(a_, y_, arithmetic=ar, grid=grid, **kw)
                ["temperature"] for ar in ARITHMETIC_PAIR}

    label = {"as above": f"as above (m = 100, all-MiniLM-L6-v2, eps = {EPS:g}, "
                         f"top {AUTHORS_GRID[-1]:g})"}
    dep = {"as above": dict(base)}
    for name, e in (("eps3", 1e-3), ("eps20", 1e-20)):
        label[name], dep[name] = f"eps = {e:g}", both(answers, targets, eps=e)
    tops = {}
    for name, top in (("top25", 5), ("top20", 14)):
        g = np.round([10 ** (i / 10) for i in range(-3, top)], 2)  # their law, cut at top
        tops[top] = g[-1]
        label[name] = f"their log grid from {g[0]:g} to {g[-1]:g}"
        dep[name] = both(answers, targets, grid=g)
    label["m20"], dep["m20"] = "m = 20 answers", both(answers_m20, targets)
    label["hash"] = f"hashing embedder ({np.shape(other_answers)[2]} dims)"
    dep["hash"] = both(other_answers, other_targets)
    return FitSensitivity(
        t_auth_eps3=dep["eps3"]["authors"], t_auth_eps20=dep["eps20"]["authors"],
        t_auth_top25=dep["top25"]["authors"], t_auth_top20=dep["top20"]["authors"],
        t_exact_top20=dep["top20"]["exact"], t_auth_m20=dep["m20"]["authors"],
        t_exact_m20=dep["m20"]["exact"], t_auth_hash=dep["hash"]["authors"],
        t_exact_hash=dep["hash"]["exact"], grid_stop_short=tops[5], grid_stop_long=tops[14],
        fits=dep, labels=label)


@dataclass(frozen=True)
class FloorTerm:
    """The floor's share of the gap between risk and average entropy at an exact fit: the mean
    share of a target outside its answers' span (``q_mean`` on the fitting split, also at 100
    answers per question and on the test split), the gap, the floor's term
    :math:`\\overline{q(-\\log\\varepsilon - H)}`, and :math:`-\\log\\varepsilon`."""

    q_mean: float
    q_mean_test: float
    gap_exact: float
    q_mean_100: float
    eps_term: float
    eps_nats: float


def floor_term(answers, targets, fit: dict, test_answers, test_targets,
               answers_100) -> FloorTerm:
    """At the exact fit ``fit`` (:func:`fit_spectral_temperature` on ``answers``)."""
    q = outside_share(answers, targets)
    h = entropy(answers, fit["temperature"])
    return FloorTerm(
        q_mean=q.mean(), q_mean_test=outside_share(test_answers, test_targets).mean(),
        gap_exact=fit["risk"] - fit["entropy"],
        q_mean_100=outside_share(answers_100, targets).mean(),
        eps_term=np.mean(q * (-np.log(EPS) - h)), eps_nats=-np.log(EPS))


@dataclass(frozen=True)
class ShuffleControl:
    """The control that breaks the link between question and target: the temperature fitted
    with targets shuffled across questions (one permutation, and the range over ``n_perm``),
    and on the shuffled test split the clustered diagram's gap, the risk at T = 1 and at the
    refit, and the average entropy at the refit."""

    n_perm: int
    t_perm_lo: float
    t_perm_hi: float
    t_fit_shuffled: float
    ece_shuf_1: float
    ece_shuf_fit: float
    risk_shuf_fit: float
    risk_shuf_1: float
    entropy_shuf_fit: float


def shuffle_control(dev_answers, dev_targets, answers, targets, *, seed: int = 0,
                    permutations: int = 20, permutation_seed: int = 100) -> ShuffleControl:
    """Shuffle each split's targets with ``default_rng(seed)`` (development first), refit on the
    development split, and repeat the refit over ``permutations`` permutations drawn with
    ``default_rng(permutation_seed + k)``."""
    rng = np.random.default_rng(seed)
    y_dev = dev_targets[rng.permutation(len(dev_targets))]
    y = targets[rng.permutation(len(targets))]
    ts = fit_spectral_temperature(dev_answers, y_dev)["temperature"]
    t_perm = np.array([fit_spectral_temperature(dev_answers, dev_targets[np.random.default_rng(
        permutation_seed + k).permutation(len(dev_targets))])["temperature"]
        for k in range(permutations)])
    return ShuffleControl(
        n_perm=len(t_perm), t_perm_lo=t_perm.min(), t_perm_hi=t_perm.max(), t_fit_shuffled=ts,
        ece_shuf_1=reliability(answers, y, 1.0)["ece"],
        ece_shuf_fit=reliability(answers, y, ts)["ece"], risk_shuf_fit=risk(answers, y, ts),
        risk_shuf_1=risk(answers, y, 1.0), entropy_shuf_fit=entropy(answers, ts).mean())


#: The authors' conventions of the clustered diagram that :func:`authors_diagnostics` tries
#: one at a time (the keyword of :func:`reliability` each sets).
CONVENTIONS = {"singletons": dict(min_cluster=2), "quantile": dict(binning="quantile"),
               "distance": dict(distance="rows"), "unscaled": dict(cluster_on="unscaled")}


@dataclass(frozen=True)
class AuthorsDiagnostics:
    """The diagnostics with the authors' conventions beside ours, on one split: the clustered
    diagram's gap and its bins whose prediction exceeds the target (all conventions, and the
    cluster distance ``row5`` or dropped singletons ``row3`` alone, at T = 1); the AUROC of
    :math:`\\lambda_{\\max}` with their ± (``auc_lmax_auth_pm``) beside our bootstrap standard
    deviation (``auc_lmax_se``); their kernel language entropy's AUROC and its paired
    differences from ours and from :math:`\\lambda_{\\max}`; and the argmin of their
    :math:`\\mathrm{Cal}_S` on the grid. ``diagrams`` maps ``(convention, T)`` to
    :func:`reliability`'s dict, ``over`` to its bins over; ``aurocs`` each score's name to
    their :func:`auroc`; ``calibration`` is their :math:`\\mathrm{Cal}_S` on the grid."""

    dauc_kle_auth: float
    dauc_kle_auth_lo: float
    dauc_kle_auth_hi: float
    dauc_kle_auth_lmax_lo: float
    dauc_kle_auth_lmax_hi: float
    auc_lmax_se: float
    ece_auth_1: float
    ece_auth_fit: float
    over_auth_1: int
    over_auth_fit: int
    ece_row3_1: float
    over_row3_1: int
    ece_row5_1: float
    over_row5_1: int
    auc_lmax_auth: float
    auc_lmax_auth_pm: float
    auc_kle_auth: float
    argmin_cal_auth: float
    diagrams: dict = field(repr=False)
    over: dict = field(repr=False)
    aurocs: dict = field(repr=False)
    calibration: list = field(repr=False)


def authors_diagnostics(answers, targets, temperature: float, ours: dict,
                        scores: AurocComparison, correct, grid, *, seed: int = 0,
                        level: float = 0.95, calibration_questions: int = 500,
                        calibration_clusters: int = 30,
                        kle_time: float = 0.4) -> AuthorsDiagnostics:
    """``ours`` maps T = 1 and ``temperature`` to our clustered diagram; ``scores`` is
    :func:`auroc_comparison` on the same answers. Their :math:`\\mathrm{Cal}_S` runs on the
    first ``calibration_questions`` questions with ``calibration_clusters`` clusters; their
    kernel language entropy uses the heat kernel's time ``kle_time``."""
    a, y, t = answers, targets, temperature
    rel = {}
    for s in (1.0, t):
        rel["ours", s] = ours[s]
        rel["authors", s] = reliability(a, y, s, variant="authors")
    for row, opt in CONVENTIONS.items():
        rel[row, t] = reliability(a, y, t, **opt)
        if row in ("singletons", "distance"):
            rel[row, 1.0] = reliability(a, y, 1.0, **opt)
    over = {k: int(np.sum(r["predicted"] > r["target"])) for k, r in rel.items()}
    auc_a = {k: auroc(v, correct, bootstrap=20, seed=seed, variant="authors")
             for k, v in scores.scores.items()}
    kle_a = kernel_language_entropy(a, variant="authors", time=kle_time)
    auc_kle_a = auroc(-kle_a, correct, bootstrap=20, seed=seed)["auroc"]
    d_kle = {k: auroc_difference(-kle_a, scores.scores[k], correct, seed=seed, level=level)
             for k in ("−kernel language entropy", "λmax")}
    sub = slice(0, calibration_questions)
    cal_a = [ce["calibration"] for ce in calibration_curve(
        a[sub], y[sub], grid, clusters=calibration_clusters, variant="authors")]
    return AuthorsDiagnostics(
        dauc_kle_auth=d_kle["−kernel language entropy"]["difference"],
        dauc_kle_auth_lo=d_kle["−kernel language entropy"]["low"],
        dauc_kle_auth_hi=d_kle["−kernel language entropy"]["high"],
        dauc_kle_auth_lmax_lo=d_kle["λmax"]["low"], dauc_kle_auth_lmax_hi=d_kle["λmax"]["high"],
        auc_lmax_se=scores.aurocs["λmax"]["se"],
        ece_auth_1=rel["authors", 1.0]["ece"], ece_auth_fit=rel["authors", t]["ece"],
        over_auth_1=over["authors", 1.0], over_auth_fit=over["authors", t],
        ece_row3_1=rel["singletons", 1.0]["ece"], over_row3_1=over["singletons", 1.0],
        ece_row5_1=rel["distance", 1.0]["ece"], over_row5_1=over["distance", 1.0],
        auc_lmax_auth=auc_a["λmax"]["auroc"], auc_lmax_auth_pm=auc_a["λmax"]["se"],
        auc_kle_auth=auc_kle_a, argmin_cal_auth=np.asarray(grid)[int(np.argmin(cal_a))],
        diagrams=rel, over=over, aurocs=auc_a, calibration=cal_a)


@dataclass(frozen=True)
class AuthorsAfterScaling:
    """The AUROC of the authors' negated entropy, computed their way, at T = 1, at their
    fitted temperature and at the grid's 2.51 and 3.16; its paired change from T = 1 to their
    fit, and that of their :math:`\\lambda_{\\max}`; and the right answers among the questions.
    ``aurocs`` maps each grid temperature from 1 up to the AUROC there."""

    auc_ent_auth_1: float
    auc_ent_auth_fit: float
    auc_ent_auth_251: float
    auc_ent_auth_316: float
    dauc_ent_auth: float
    dauc_ent_auth_lo: float
    dauc_ent_auth_hi: float
    dauc_lmax_auth_lo: float
    dauc_lmax_auth_hi: float
    right_300: int
    aurocs: dict = field(repr=False)


def authors_after_scaling(answers, correct, temperature: float, *, points=(2.51, 3.16),
                          seed: int = 0, level: float = 0.95) -> AuthorsAfterScaling:
    """Their scores at each point of :data:`AUTHORS_GRID` from 1 up (the entropy) and at 1 and
    their fitted ``temperature`` (:math:`\\lambda_{\\max}`), in their arithmetic; the
    entropy's AUROC is also reported at the two grid ``points`` (the fields ``_251`` and
    ``_316``)."""
    ag = AUTHORS_GRID
    ent_a = {t: -entropy(answers, t, arithmetic="authors") for t in ag[ag >= 1]}
    lmax_a = {t: eigenvalues(answers, t, arithmetic="authors")[:, 0]
              for t in (1.0, temperature)}
    auc_after = {t: auroc(v, correct, bootstrap=20, seed=seed)["auroc"]
                 for t, v in ent_a.items()}
    d = {k: auroc_difference(v[temperature], v[1.0], correct, seed=seed, level=level)
         for k, v in (("ent", ent_a), ("lmax", lmax_a))}
    return AuthorsAfterScaling(
        auc_ent_auth_1=auc_after[1.0], auc_ent_auth_fit=auc_after[temperature],
        auc_ent_auth_251=auc_after[points[0]], auc_ent_auth_316=auc_after[points[1]],
        dauc_ent_auth=d["ent"]["difference"], dauc_ent_auth_lo=d["ent"]["low"],
        dauc_ent_auth_hi=d["ent"]["high"], dauc_lmax_auth_lo=d["lmax"]["low"],
        dauc_lmax_auth_hi=d["lmax"]["high"], right_300=int(np.sum(correct)),
        aurocs=auc_after)


@dataclass(frozen=True)
class SamplingTemperatureSearch:
    """Lamb et al.'s choice of a sampling temperature: the grid temperature ``t_star`` at
    which the share of the most frequent answer best predicts correctness (the ECE over
    equal-width bins, questions whose answers all agree left out), with the range of the
    central ``level`` interval of the choice over bootstrap resamples of the questions; the
    ECE at the choice, at the top of the grid and at the grid point nearest 0.5; the right
    answers; and the grid's size and ends. ``ece`` is the ECE at each grid temperature."""

    t_star: float
    t_star_lo: float
    t_star_hi: float
    lamb_ece_min: float
    lamb_ece_3: float
    lamb_ece_05: float
    lamb_n_ok: int
    lamb_n: int
    lamb_lo: float
    lamb_hi: float
    ece: np.ndarray = field(repr=False)


def sampling_temperature_search(answers_by_temperature, correct, grid, *, seed: int = 0,
                                resamples: int = 200, bins: int = 15,
                                level: float = 0.95) -> SamplingTemperatureSearch:
    """``answers_by_temperature``: for each temperature of ``grid``, the answers (strings) to
    each question; ``correct``: whether each question's judged answer is right."""
    grid = np.asarray(grid)
    share = np.array([[np.unique(a, return_counts=True)[1].max() / len(a) for a in block]
                      for block in answers_by_temperature])
    ok = np.asarray(correct)
    n = len(ok)

    def ece_rows(rows):  # their ECE: answers of share one left out
        return [_ece(s[rows][s[rows] < 1], ok[rows][s[rows] < 1], bins=bins) for s in share]

    curve = np.array(ece_rows(np.arange(n)))
    rng = np.random.default_rng(seed)
    boot = np.array([grid[np.argmin(ece_rows(rng.integers(0, n, n)))]
                     for _ in range(resamples)])
    q = round((1 - level) / 2, 12)
    return SamplingTemperatureSearch(
        t_star=float(grid[np.argmin(curve)]),
        t_star_lo=np.quantile(boot, q, method="inverted_cdf"),
        t_star_hi=np.quantile(boot, 1 - q, method="inverted_cdf"),
        lamb_ece_min=curve.min(), lamb_ece_3=curve[-1],
        lamb_ece_05=curve[np.argmin(np.abs(grid - 0.5))], lamb_n_ok=int(ok.sum()),
        lamb_n=len(grid), lamb_lo=grid[0], lamb_hi=grid[-1], ece=curve)


@dataclass(frozen=True)
class SamplingBaselineGaps:
    """The clustered diagram's gap on the same questions answered at the original sampling
    temperature (``ece_sub_05``), at another one (``ece_sub_tstar``), and at the original with
    matrix temperature scaling (``ece_sub_ts``); and, over random halves of the questions, the
    range of each change from the original (``lamb_up_*``, ``ts_down_*``)."""

    ece_sub_05: float
    ece_sub_tstar: float
    ece_sub_ts: float
    lamb_up_lo: float
    lamb_up_hi: float
    ts_down_lo: float
    ts_down_hi: float


def sampling_baseline_gaps(answers, targets, resampled, resampled_targets, temperature: float,
                           *, halves_seed: int = 40) -> SamplingBaselineGaps:
    """``answers`` sampled at the original temperature, ``resampled`` at the chosen one (the
    same questions, targets alike), and the matrix ``temperature``."""
    n = len(answers)
    e_b = reliability(resampled, resampled_targets, 1.0)["ece"]
    e_0 = reliability(answers, targets, 1.0)["ece"]
    e_ts = reliability(answers, targets, temperature)["ece"]
    half = np.array([[reliability(a_[h], y_[h], t)["ece"] for a_, y_, t in (
        (answers, targets, 1.0), (resampled, resampled_targets, 1.0),
        (answers, targets, temperature))] for h in _halves(n, halves_seed)])
    up, down = half[:, 1] - half[:, 0], half[:, 2] - half[:, 0]
    return SamplingBaselineGaps(
        ece_sub_05=e_0, ece_sub_tstar=e_b, ece_sub_ts=e_ts, lamb_up_lo=up.min(),
        lamb_up_hi=up.max(), ts_down_lo=down.min(), ts_down_hi=down.max())


@dataclass(frozen=True)
class FloorRefit:
    """The exact fit with another floor ``eps`` (the exercise's :math:`10^{-3}`): the fitted
    temperature (``t_fit_eps3``) and risk minus average entropy there (``gap_eps3``). ``fit``
    is :func:`fit_spectral_temperature`'s dict."""

    t_fit_eps3: float
    gap_eps3: float
    fit: dict = field(repr=False)


def floor_refit(answers, targets, *, eps: float = 1e-3) -> FloorRefit:
    """:func:`fit_spectral_temperature` with the floor ``eps``, in exact arithmetic."""
    f = fit_spectral_temperature(answers, targets, eps=eps)
    return FloorRefit(t_fit_eps3=f["temperature"], gap_eps3=f["risk"] - f["entropy"], fit=f)


#: The clusters per bin that :func:`cluster_counts` compares (its fields' suffixes).
CLUSTER_COUNTS = (2, 20)


@dataclass(frozen=True)
class ClusterCounts:
    """The clustered diagram at two cluster counts per bin, :data:`CLUSTER_COUNTS`: its gap
    (``ece_c*``), the bins whose target exceeds the prediction (``under_c*``), the mean of
    target minus prediction over the bins (``mean_gap_c*``), and that difference in the top
    bin at the larger count (``top_gap_c20``). ``ece`` maps each count to the gap, ``gaps``
    each count to target minus prediction per bin."""

    ece_c2: float
    ece_c20: float
    under_c2: int
    under_c20: int
    mean_gap_c2: float
    mean_gap_c20: float
    top_gap_c20: float
    ece: dict = field(repr=False)
    gaps: dict = field(repr=False)


def cluster_counts(answers, targets, temperature: float = 1.0) -> ClusterCounts:
    """:func:`reliability` at ``temperature`` with each count of :data:`CLUSTER_COUNTS`."""
    rel = {c: reliability(answers, targets, temperature, clusters=c) for c in CLUSTER_COUNTS}
    ece = {c: r["ece"] for c, r in rel.items()}
    gaps = {c: r["target"] - r["predicted"] for c, r in rel.items()}
    under = {c: int(np.sum(g > 0)) for c, g in gaps.items()}  # bins with target above
    mean_gap = {c: g.mean() for c, g in gaps.items()}
    few, many = CLUSTER_COUNTS
    return ClusterCounts(
        ece_c2=ece[few], ece_c20=ece[many], under_c2=under[few], under_c20=under[many],
        mean_gap_c2=mean_gap[few], mean_gap_c20=mean_gap[many], top_gap_c20=gaps[many][-1],
        ece=ece, gaps=gaps)


@dataclass(frozen=True)
class EntropyRiskIdentity:
    """Both sides of :math:`R - \\bar H = \\beta R'(\\beta)` under the authors' arithmetic at
    one temperature: risk minus average entropy (``identity_lhs``) and :math:`\\beta` times a
    central difference of the risk in :math:`\\beta = 1/T` (``identity_rhs``)."""

    identity_lhs: float
    identity_rhs: float


def entropy_risk_identity(answers, targets, temperature: float = 2.0, *, step: float = 1e-4,
                          tolerance: float | None = None) -> EntropyRiskIdentity:
    """Both sides at ``temperature``, the derivative a central difference of half-width
    ``step`` in :math:`\\beta`. With ``tolerance``, the sides must differ by less than it, or a
    ValueError says by how much they do."""
    beta = 1 / temperature

    def r_auth(b):  # the risk at T = 1 / b, the authors' way
        return risk(answers, targets, 1 / b, arithmetic="authors")

    lhs = r_auth(beta) - entropy(answers, temperature, arithmetic="authors").mean()
    rhs = beta * (r_auth(beta + step) - r_auth(beta - step)) / (2 * step)
    if tolerance is not None and not abs(lhs - rhs) < tolerance:
        raise ValueError(f"risk - entropy = {lhs:.6g} and beta R'(beta) = {rhs:.6g} differ by "
                         f"{abs(lhs - rhs):.3g}, not less than {tolerance:g}")
    return EntropyRiskIdentity(identity_lhs=lhs, identity_rhs=rhs)
