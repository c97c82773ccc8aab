"""Named results of the review of set size as uncertainty (``lectures/review_set_size.md``).

Each function returns a frozen dataclass. Its number fields are what the page quotes (and
pins, under the field's name); arrays and dicts it also returns, for a table or a figure, are
held in fields that are not numbers, so they are not pinned. Each is built from the public
functions of :mod:`standarderror.uncertainty` and
:mod:`standarderror.experiments.multiple_choice`, so its numbers are those functions' numbers,
bit for bit.

``fam`` is :func:`~standarderror.experiments.multiple_choice.family`'s dict, ``res`` is
:func:`~standarderror.experiments.multiple_choice.analysis` of it and ``demo`` is
:func:`~standarderror.uncertainty.set_size_demo.demonstration`'s dict.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..uncertainty import coverage as cv
from ..uncertainty.ranks import kendall_tau
from . import multiple_choice as mc


@dataclass(frozen=True)
class WordBoundary:
    """What scoring an option as a whole word (with the word boundary after it) changes,
    against scoring it as a bare prefix.

    ``task_go_true`` and ``task_go_other``: at the last checkpoint, the mean probability that
    the true word (resp. a distractor) goes on into a longer word; ``task_flip_last``,
    ``task_flip_lo``, ``task_flip_hi``: the share of questions whose answer changes, at the
    last checkpoint and its least and most over checkpoints; ``task_gain``, ``task_gain_se``,
    ``task_gain_p``: whole-word minus prefix accuracy at the last checkpoint, its paired
    standard error and McNemar's p (:func:`~standarderror.uncertainty.set_size.paired_accuracy`).
    ``flips``: the share of changed answers per checkpoint.
    """

    task_go_true: float
    task_go_other: float
    task_flip_last: float
    task_flip_lo: float
    task_flip_hi: float
    task_gain: float
    task_gain_se: float
    task_gain_p: float
    flips: np.ndarray = field(repr=False)


def word_boundary(fam: dict) -> WordBoundary:
    """The whole-word scoring of ``fam`` against its prefix scoring (``prefix_logits``)."""
    right = fam["y"]
    go_on = 1 - np.exp(fam["logits"] - fam["prefix_logits"])   # P(the word goes on)
    is_true = np.zeros(go_on.shape[1:], dtype=bool)
    is_true[np.arange(right.size), right] = True
    flips = (fam["logits"].argmax(2) != fam["prefix_logits"].argmax(2)).mean(axis=1)
    word = cv.paired_accuracy(fam["logits"][-1].argmax(1) == right,
                              fam["prefix_logits"][-1].argmax(1) == right)
    return WordBoundary(task_go_true=go_on[-1][is_true].mean(),
                        task_go_other=go_on[-1][~is_true].mean(),
                        task_flip_last=flips[-1], task_flip_lo=flips.min(),
                        task_flip_hi=flips.max(), task_gain=word["difference"],
                        task_gain_se=word["se"], task_gain_p=word["mcnemar_p"], flips=flips)


@dataclass(frozen=True)
class IdenticalSets:
    """Panel C: two models with the same LAC sets. ``c_identical_rows`` of ``c_test_rows``
    test rows have identical sets; ``c_size`` and ``c_cov`` are model A's mean size and
    coverage; ``c_acc_a`` and ``c_acc_b`` the two accuracies."""

    c_identical_rows: int
    c_test_rows: int
    c_size: float
    c_cov: float
    c_acc_a: float
    c_acc_b: float


def identical_sets(demo: dict) -> IdenticalSets:
    """Panel C of the demonstration, compared row by row."""
    c = demo["c"]
    same = (c["a"]["lac"]["sets"] == c["b"]["lac"]["sets"]).all(axis=1)
    return IdenticalSets(c_identical_rows=int(same.sum()), c_test_rows=same.size,
                         c_size=c["a"]["lac"]["mean_size"], c_cov=c["a"]["lac"]["coverage"],
                         c_acc_a=c["a"]["accuracy"], c_acc_b=c["b"]["accuracy"])


@dataclass(frozen=True)
class OppositeOrders:
    """Panel A: the sharp and the medium model's accuracy (``a_*_acc``), LAC and APS mean set
    sizes (``a_*_lac``, ``a_*_aps``) and the sharp model's APS threshold (``a_sharp_aps_q``)."""

    a_sharp_acc: float
    a_medium_acc: float
    a_sharp_lac: float
    a_sharp_aps: float
    a_medium_lac: float
    a_medium_aps: float
    a_sharp_aps_q: float


def opposite_orders(demo: dict) -> OppositeOrders:
    """Panel A of the demonstration."""
    a = demo["a"]
    return OppositeOrders(
        a_sharp_acc=a["sharp"]["accuracy"], a_medium_acc=a["medium"]["accuracy"],
        a_sharp_lac=a["sharp"]["lac"]["mean_size"], a_sharp_aps=a["sharp"]["aps"]["mean_size"],
        a_medium_lac=a["medium"]["lac"]["mean_size"],
        a_medium_aps=a["medium"]["aps"]["mean_size"], a_sharp_aps_q=a["sharp"]["aps"]["qhat"])


@dataclass(frozen=True)
class FamilyRanking:
    """The family at T = 1 on its own split: Kendall's tau of the LAC and APS size rankings
    (``fam_tau``), its discordant pairs (``fam_disc``) of ``fam_pairs``; accuracy, LAC and APS
    mean size at the first and last checkpoint; the questions (``fam_questions``) and the
    characters of context of each (``fam_context``)."""

    fam_tau: float
    fam_disc: int
    fam_pairs: int
    fam_acc_first: float
    fam_acc_last: float
    fam_lac_first: float
    fam_lac_last: float
    fam_aps_first: float
    fam_aps_last: float
    fam_questions: int
    fam_context: int


def family_ranking(fam: dict, res: dict) -> FamilyRanking:
    """The size rankings of ``res`` at T = 1."""
    tau, base = res["tau_lac_aps"], res["at"][1.0]
    return FamilyRanking(
        fam_tau=tau["tau"], fam_disc=tau["discordant"], fam_pairs=tau["pairs"],
        fam_acc_first=base["accuracy"][0], fam_acc_last=base["accuracy"][-1],
        fam_lac_first=base["lac_size"][0], fam_lac_last=base["lac_size"][-1],
        fam_aps_first=base["aps_size"][0], fam_aps_last=base["aps_size"][-1],
        fam_questions=len(fam["y"]), fam_context=mc.CONTEXT)


@dataclass(frozen=True)
class Saturation:
    """Panel B: the saturating model's accuracy (``b_acc``), the share of its APS calibration
    scores exactly one (``b_ones``), the APS threshold, coverage and mean size, and LAC's
    coverage and mean size."""

    b_acc: float
    b_ones: float
    b_aps_q: float
    b_aps_cov: float
    b_aps_size: float
    b_lac_cov: float
    b_lac_size: float


def saturation(demo: dict) -> Saturation:
    """Panel B of the demonstration."""
    b = demo["b"]["saturating"]
    return Saturation(b_acc=b["accuracy"], b_ones=(b["aps"]["scores_cal"] == 1.0).mean(),
                      b_aps_q=b["aps"]["qhat"], b_aps_cov=b["aps"]["coverage"],
                      b_aps_size=b["aps"]["mean_size"], b_lac_cov=b["lac"]["coverage"],
                      b_lac_size=b["lac"]["mean_size"])


@dataclass(frozen=True)
class RandomisedAPS:
    """Panel B's control: the randomised APS sets of the saturating model, their coverage
    (``b_rand_cov``) and mean size (``b_rand_size``). ``sets`` is
    :func:`~standarderror.uncertainty.conformal.conformal_sets`'s dict (``qhat`` among it)."""

    b_rand_cov: float
    b_rand_size: float
    sets: dict = field(repr=False)


def randomised_aps(demo: dict, *, seed: int = 0) -> RandomisedAPS:
    """Randomised APS on Panel B's saturating model and split."""
    b, cal = demo["b"]["saturating"], demo["calibration"]
    rand = cv.conformal_sets(b["p"][cal], b["y"][cal], b["p"][~cal], score="aps",
                             randomized=True, seed=seed)
    rs = cv.set_summary(rand["sets"], b["y"][~cal])
    return RandomisedAPS(b_rand_cov=rs["coverage"], b_rand_size=rs["mean_size"], sets=rand)


@dataclass(frozen=True)
class OvershootParts:
    """Where APS coverage above the nominal level comes from on the family
    (:func:`~standarderror.experiments.multiple_choice.overshoot`, APS).

    On the family's own split: the least and most share of empty textbook sets at steps from
    ``from_step`` on (``ov_empty_lo``, ``ov_empty_hi``), and the least and most coverage of
    textbook (``ov_tb_*``) and Ye et al.'s sets (``ov_ye_*``). Over the fresh halvings, per
    checkpoint means: textbook coverage (``ov_tb_mean_*``), what Ye et al.'s quantile adds
    (``ov_quant_*``), the largest move of float32 (``ov_f32``), what the fallback adds at the
    first and last checkpoint (``ov_gain_first``, ``ov_gain_last``) and its band (by default
    5-95%) at the last (``ov_gain_last_lo``, ``ov_gain_last_hi``); the share of empty sets whose top option
    is right (``ov_top_right``), the most APS calibration scores tied at one
    (``ov_tied_max``), the halvings with a threshold of one (``ov_at_one``), the most
    saturated questions (``ov_saturated``), the most empty LAC sets (``ov_lac_empty``), and
    the first and last step.

    ``fresh_coverage``: ``{variant: array}``, APS coverage over the fresh halvings (rows) by
    checkpoint; ``fresh_gain``: the fallback's gain, the same shape; ``gain_lo``, ``gain_hi``:
    its 5-95% band per checkpoint; ``variants``, ``steps``.
    """

    ov_empty_lo: float
    ov_empty_hi: float
    ov_tb_lo: float
    ov_tb_hi: float
    ov_ye_lo: float
    ov_ye_hi: float
    ov_tb_mean_lo: float
    ov_tb_mean_hi: float
    ov_quant_lo: float
    ov_quant_hi: float
    ov_f32: float
    ov_gain_first: float
    ov_gain_last: float
    ov_gain_last_lo: float
    ov_gain_last_hi: float
    ov_top_right: float
    ov_tied_max: float
    ov_at_one: int
    ov_saturated: float
    ov_lac_empty: float
    ov_step_first: int
    ov_step_last: int
    fresh_coverage: dict = field(repr=False)
    fresh_gain: np.ndarray = field(repr=False)
    gain_lo: np.ndarray = field(repr=False)
    gain_hi: np.ndarray = field(repr=False)
    variants: tuple = field(repr=False)
    steps: np.ndarray = field(repr=False)


def overshoot_parts(fam: dict, *, halvings: int = 40, seed: int = 3, from_step: int = 800,
                    band=(5, 95)) -> OvershootParts:
    """:func:`~standarderror.experiments.multiple_choice.overshoot` over ``halvings`` fresh
    halvings (seeded), summarised; ``band`` gives the percentiles of the fallback's band."""
    ov = mc.overshoot(fam, splits=halvings, seed=seed)
    steps = np.array(fam["steps"])
    cov, emp = ov["coverage"]["aps"], ov["empty"]["aps"]
    late = steps >= from_step
    fresh = slice(1, None)                        # row 0 is the family's split
    gain = cov["ye"] - cov["ye_no_fallback"]      # what the fallback adds, per split
    g_lo, g_hi = np.percentile(gain[fresh], list(band), axis=0)
    tb_mean = cov["textbook"][fresh].mean(axis=0)
    quant = (cov["ye_quantile"] - cov["textbook"])[fresh].mean(axis=0)
    f32 = (cov["ye_no_fallback"] - cov["ye_quantile"])[fresh].mean(axis=0)
    top_right = (ov["empty_top_right"]["aps"][fresh].sum()
                 / ov["empty"]["aps"]["ye_no_fallback"][fresh].sum())
    return OvershootParts(
        ov_empty_lo=emp["textbook"][0, late].min(), ov_empty_hi=emp["textbook"][0, late].max(),
        ov_tb_lo=cov["textbook"][0].min(), ov_tb_hi=cov["textbook"][0].max(),
        ov_ye_lo=cov["ye"][0].min(), ov_ye_hi=cov["ye"][0].max(),
        ov_tb_mean_lo=tb_mean.min(), ov_tb_mean_hi=tb_mean.max(),
        ov_quant_lo=quant.min(), ov_quant_hi=quant.max(), ov_f32=np.abs(f32).max(),
        ov_gain_first=gain[fresh, 0].mean(), ov_gain_last=gain[fresh, -1].mean(),
        ov_gain_last_lo=g_lo[-1], ov_gain_last_hi=g_hi[-1], ov_top_right=top_right,
        ov_tied_max=ov["tied_at_one"].max(), ov_at_one=int(ov["qhat_at_one"].sum()),
        ov_saturated=ov["saturated"].max(), ov_lac_empty=ov["empty"]["lac"]["ye_no_fallback"].max(),
        ov_step_first=steps[0], ov_step_last=steps[-1],
        fresh_coverage={v: cov[v][fresh] for v in ov["variants"]}, fresh_gain=gain[fresh],
        gain_lo=g_lo, gain_hi=g_hi, variants=ov["variants"], steps=steps)


@dataclass(frozen=True)
class Inversions:
    """Pairs of checkpoints in which the more accurate one has the larger mean set size.

    ``inv_lac``, ``inv_aps``, ``inv_avg``: such pairs under LAC, APS and their average, of
    ``inv_pairs``; ``inv_n_test``: test questions; ``inv_se_q``: one accuracy's binomial
    standard error, in questions, at the mean accuracy ``inv_acc_mid``. The LAC inversion with
    the largest accuracy gap (``inv_lac_gap`` questions, paired SE ``inv_lac_se``, McNemar
    ``inv_lac_p``) and the smallest (``inv_lac_small``, ``inv_lac_small_p``). The APS
    inversions LAC does not have (``inv_aps_only``), the widest of them between steps
    ``inv_aps_hi`` and ``inv_aps_lo``, ``inv_aps_gap`` questions apart (``inv_aps_p``).

    ``which``: ``{kind: [(i, j), ...]}`` the inverted pairs (more accurate first);
    ``paired``: ``{kind: [paired_accuracy dict, ...]}`` in the same order.
    """

    inv_lac: int
    inv_aps: int
    inv_avg: int
    inv_pairs: int
    inv_n_test: int
    inv_se_q: float
    inv_acc_mid: float
    inv_lac_gap: float
    inv_lac_se: float
    inv_lac_p: float
    inv_lac_small: float
    inv_lac_small_p: float
    inv_aps_only: int
    inv_aps_hi: int
    inv_aps_lo: int
    inv_aps_gap: float
    inv_aps_p: float
    which: dict = field(repr=False)
    paired: dict = field(repr=False)


def inversions(fam: dict, res: dict) -> Inversions:
    """The inversions of ``res`` (T = 1), each compared question by question."""
    inv, base, steps = res["inversions"], res["at"][1.0], np.array(res["steps"])
    test = ~fam["calibration"]
    n_test = int(test.sum())
    right = fam["logits"].argmax(2)[:, test] == fam["y"][test]   # checkpoints x questions
    paired = {k: [cv.paired_accuracy(right[i], right[j]) for i, j in v["which"]]
              for k, v in inv.items()}
    acc_mid = base["accuracy"].mean()
    se_q = np.sqrt(acc_mid * (1 - acc_mid) * n_test)  # one accuracy's SE, in questions
    aps_only = [(ij, p) for ij, p in zip(inv["aps"]["which"], paired["aps"])
                if ij not in inv["lac"]["which"]]
    (hi, lo), big = max(aps_only, key=lambda item: item[1]["difference"])
    lac_big = max(paired["lac"], key=lambda p: p["difference"])
    lac_small = min(paired["lac"], key=lambda p: p["difference"])
    return Inversions(
        inv_lac=inv["lac"]["count"], inv_aps=inv["aps"]["count"],
        inv_avg=inv["average"]["count"], inv_pairs=inv["lac"]["pairs"], inv_n_test=n_test,
        inv_se_q=se_q, inv_acc_mid=acc_mid, inv_lac_gap=lac_big["difference"] * n_test,
        inv_lac_se=lac_big["se"] * n_test, inv_lac_p=lac_big["mcnemar_p"],
        inv_lac_small=lac_small["difference"] * n_test,
        inv_lac_small_p=lac_small["mcnemar_p"], inv_aps_only=len(aps_only),
        inv_aps_hi=int(steps[hi]), inv_aps_lo=int(steps[lo]),
        inv_aps_gap=big["difference"] * n_test, inv_aps_p=big["mcnemar_p"],
        which={k: v["which"] for k, v in inv.items()}, paired=paired)


@dataclass(frozen=True)
class TemperatureEffects:
    """How temperature moves the size rankings of ``res``. Between the lowest and the highest
    shared temperature: Kendall's tau per score (``t_*_tau``) and the checkpoints whose rank
    changes (``t_*_changed``); each checkpoint's fitted temperature, least and most
    (``t_fit_lo``, ``t_fit_hi``); tau between T = 1 and the fitted temperatures per score
    (``t_fit_*_tau``). ``fitted``: the fitted temperatures."""

    t_lac_tau: float
    t_aps_tau: float
    t_lac_changed: int
    t_aps_changed: int
    t_avg_changed: int
    t_fit_lo: float
    t_fit_hi: float
    t_fit_aps_tau: float
    t_fit_lac_tau: float
    t_fit_avg_tau: float
    fitted: np.ndarray = field(repr=False)


def temperature_effects(res: dict) -> TemperatureEffects:
    """The temperature rows of ``res``."""
    tt, fit_t = res["temperature"], res["fitted"]["temperature"]
    return TemperatureEffects(
        t_lac_tau=tt["lac"]["tau_extremes"], t_aps_tau=tt["aps"]["tau_extremes"],
        t_lac_changed=tt["lac"]["changed_extremes"],
        t_aps_changed=tt["aps"]["changed_extremes"],
        t_avg_changed=tt["average"]["changed_extremes"], t_fit_lo=fit_t.min(),
        t_fit_hi=fit_t.max(), t_fit_aps_tau=tt["aps"]["tau_fitted"],
        t_fit_lac_tau=tt["lac"]["tau_fitted"], t_fit_avg_tau=tt["average"]["tau_fitted"],
        fitted=fit_t)


@dataclass(frozen=True)
class AccuracyAndSize:
    """Spearman's correlation between accuracy and mean set size across the checkpoints, under
    LAC, APS and their average."""

    rho_lac: float
    rho_aps: float
    rho_avg: float


def accuracy_and_size(res: dict) -> AccuracyAndSize:
    """The Spearman correlations of ``res``."""
    rho = res["spearman"]
    return AccuracyAndSize(rho_lac=rho["lac"], rho_aps=rho["aps"], rho_avg=rho["average"])


@dataclass(frozen=True)
class SplitNoise:
    """The split control (:func:`~standarderror.experiments.multiple_choice.split_control`):
    mean Kendall's tau of LAC against APS on one halving (``ctrl_within``, least
    ``ctrl_within_min``), and of one score against itself on the next halving (``ctrl_lac``,
    ``ctrl_aps``). ``control``: the control's dict."""

    ctrl_within: float
    ctrl_lac: float
    ctrl_aps: float
    ctrl_within_min: float
    control: dict = field(repr=False)


def split_noise(fam: dict, *, splits: int = 20, seed: int = 2) -> SplitNoise:
    """The split control over ``splits`` random halvings (seeded)."""
    ctrl = mc.split_control(fam, splits=splits, seed=seed)
    return SplitNoise(ctrl_within=ctrl["within"].mean(), ctrl_lac=ctrl["across_lac"].mean(),
                      ctrl_aps=ctrl["across_aps"].mean(), ctrl_within_min=ctrl["within"].min(),
                      control=ctrl)


@dataclass(frozen=True)
class AveragedOverSplits:
    """The split control's sizes averaged over its halvings (``ctrl_splits``): tau of the LAC
    and APS rankings of the averages (``ctrl_avg_tau``, ``ctrl_avg_disc`` discordant pairs),
    and of one score's average over the first ``ctrl_half`` halvings against the rest
    (``ctrl_half_aps``, ``ctrl_half_aps_disc``, ``ctrl_half_lac``). ``mean_sizes``:
    ``{score: array}``, each checkpoint's mean size over the halvings."""

    ctrl_splits: int
    ctrl_avg_tau: float
    ctrl_avg_disc: int
    ctrl_half: int
    ctrl_half_aps: float
    ctrl_half_aps_disc: int
    ctrl_half_lac: float
    mean_sizes: dict = field(repr=False)


def averaged_over_splits(noise: SplitNoise) -> AveragedOverSplits:
    """The averages of :func:`split_noise`'s control."""
    ctrl = noise.control
    return AveragedOverSplits(
        ctrl_splits=len(ctrl["within"]), ctrl_avg_tau=ctrl["averaged"]["tau"],
        ctrl_avg_disc=ctrl["averaged"]["discordant"], ctrl_half=len(ctrl["within"]) // 2,
        ctrl_half_aps=ctrl["halves"]["aps"]["tau"],
        ctrl_half_aps_disc=ctrl["halves"]["aps"]["discordant"],
        ctrl_half_lac=ctrl["halves"]["lac"]["tau"],
        mean_sizes={s: v.mean(axis=0) for s, v in ctrl["sizes"].items()})


@dataclass(frozen=True)
class LemmaTerms:
    """The two terms of the set-size lemma for the last checkpoint's LAC sets (Ye et al.'s
    rule, T = 1) on the family's split: the inclusion rate of the true option
    (``ex_true_rate``, the coverage), the summed inclusion rate of the others
    (``ex_other_rate``) and the mean size (``ex_size``). ``counts``: the inclusions of the
    true option (``n_true``) and of the others (``n_other``), all inclusions (``n_sets``) and
    the test questions (``n_test``)."""

    ex_true_rate: float
    ex_other_rate: float
    ex_size: float
    counts: dict = field(repr=False)


def lemma_terms(fam: dict) -> LemmaTerms:
    """Split the last checkpoint's mean LAC set size into the true option and the others."""
    cal_q = fam["calibration"]
    p_last = cv.ye_softmax(fam["logits"][-1].astype(np.float32))
    sets = cv.conformal_sets(p_last[cal_q], fam["y"][cal_q], p_last[~cal_q],
                             score="lac", rule="ye")["sets"]
    y_test = fam["y"][~cal_q]
    truth = np.zeros_like(sets)
    truth[np.arange(y_test.size), y_test] = True
    n_true, n_other = int(sets[truth].sum()), int(sets[~truth].sum())
    return LemmaTerms(ex_true_rate=n_true / y_test.size, ex_other_rate=n_other / y_test.size,
                      ex_size=cv.set_summary(sets, y_test)["mean_size"],
                      counts={"n_true": n_true, "n_other": n_other, "n_sets": int(sets.sum()),
                              "n_test": int(y_test.size)})


#: The scores :func:`stability` compares: (name, score, randomised).
STABILITY_SCORES = (("LAC", "lac", False), ("APS", "aps", False),
                    ("randomised APS", "aps", True))


def stability(fam: dict, n_questions: int, score: str, randomized: bool, *, splits: int = 20,
              seed: int = 2) -> float:
    """Mean Kendall's tau between the size rankings of consecutive random halvings of the
    first ``n_questions`` questions, with textbook sets (float64 softmax)."""
    p = [cv.softmax_logits(z[:n_questions]) for z in fam["logits"]]
    y = fam["y"][:n_questions]
    rng = np.random.default_rng(seed)
    sizes = []
    for k in range(splits):
        c = np.zeros(n_questions, dtype=bool)
        c[rng.permutation(n_questions)[: n_questions // 2]] = True
        row = []
        for pi in p:
            r = cv.conformal_sets(pi[c], y[c], pi[~c], score=score,
                                  randomized=randomized, seed=k)
            row.append(cv.set_summary(r["sets"], y[~c])["mean_size"])
        sizes.append(row)
    taus = [kendall_tau(a, b)["tau"] for a, b in zip(sizes, sizes[1:])]
    return np.mean(taus)


@dataclass(frozen=True)
class Stability:
    """:func:`stability` of LAC, APS and randomised APS on all 720 questions and on the first
    200 (``ex_<score>_<questions>``). ``table``: ``{(questions, name): tau}``."""

    ex_lac_720: float
    ex_aps_720: float
    ex_rand_720: float
    ex_lac_200: float
    ex_aps_200: float
    ex_rand_200: float
    table: dict = field(repr=False)


def stability_table(fam: dict, *, questions=(720, 200), splits: int = 20,
                    seed: int = 2) -> Stability:
    """:func:`stability` for each score of :data:`STABILITY_SCORES` at each count of
    ``questions`` (the fields name the counts 720 and 200)."""
    if tuple(questions) != (720, 200):
        raise ValueError(f"the named result holds the counts 720 and 200, got {questions!r}")
    stab = {(n, name): stability(fam, n, score, rnd, splits=splits, seed=seed)
            for n in questions for name, score, rnd in STABILITY_SCORES}
    short = {"LAC": "lac", "APS": "aps", "randomised APS": "rand"}
    return Stability(**{f"ex_{short[name]}_{n}": v for (n, name), v in stab.items()},
                     table=stab)


@dataclass(frozen=True)
class CalibrationResampling:
    """The split control with the test half fixed and the calibration questions resampled
    with replacement: mean tau of LAC against APS on one draw (``cal_within``) and of one
    score against itself on the next draw (``cal_lac``, ``cal_aps``). ``sizes``: ``{score:
    [sizes per checkpoint, per draw]}``."""

    cal_within: float
    cal_lac: float
    cal_aps: float
    sizes: dict = field(repr=False)


def calibration_resampling(fam: dict, *, draws: int = 20, seed: int = 3) -> CalibrationResampling:
    """Ye et al.'s sets on the family's test half, calibrated on ``draws`` resamples (seeded)
    of its calibration half."""
    p_all = [cv.ye_softmax(z.astype(np.float32)) for z in fam["logits"]]
    y_all, test = fam["y"], ~fam["calibration"]
    cal_idx = np.flatnonzero(fam["calibration"])
    rng = np.random.default_rng(seed)
    by_score = {"lac": [], "aps": []}

    def mean_size(p, rows, score):
        sets = cv.conformal_sets(p[rows], y_all[rows], p[test], score=score,
                                 rule="ye")["sets"]
        return cv.set_summary(sets, y_all[test])["mean_size"]

    def mean_tau(pairs):
        return np.mean([kendall_tau(a, b)["tau"] for a, b in pairs])

    for _ in range(draws):
        draw = rng.choice(cal_idx, size=cal_idx.size, replace=True)
        for score in by_score:
            by_score[score].append([mean_size(p, draw, score) for p in p_all])
    across = {s: mean_tau(zip(v, v[1:])) for s, v in by_score.items()}
    return CalibrationResampling(cal_within=mean_tau(zip(by_score["lac"], by_score["aps"])),
                                 cal_lac=across["lac"], cal_aps=across["aps"], sizes=by_score)
