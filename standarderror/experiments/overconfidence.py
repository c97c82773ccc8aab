"""Episode 4's named results: when a training run becomes overconfident.

Each function takes what :mod:`standarderror.experiments.trajectory` measured (a run's
``trajectory`` dict, ``held_out`` predictions, a ``shift_control``) and returns a frozen
dataclass. Its number fields are what the lecture quotes, under the pin names; arrays and
dicts it also returns (for a table, a figure or a later cell) are ``repr=False`` fields and
are not pinned. Every number is computed by this package's public functions, in the order the
lecture's prose describes them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from scipy import stats

from standarderror.experiments import trajectory as tj
from standarderror.llm import tiny
from standarderror.uncertainty.metrics import ece
from standarderror.uncertainty.scaling import fit_temperature, scale
from standarderror.uncertainty.training import turning_point, window_difference

#: The card entries two runs must share to differ in weight decay alone.
SAME_RECIPE = ("corpus", "seed", "schedule", "steps", "batch", "config")


def _by_step(run: dict) -> dict:
    return {r["step"]: r for r in run["rows"]}


@dataclass(frozen=True)
class CommittedRun:
    """The committed run's eight checkpoints, measured on the same held-out predictions.

    ``main_loss_first``/``main_loss_last``: held-out loss (nats per character) at the first and
    last checkpoint; ``main_t_low``/``main_t_high``: the smallest and largest fitted
    temperature; ``main_gap_low``/``main_gap_high``: the same for confidence minus accuracy;
    ``main_t_last``, ``main_ece_last``: the last checkpoint's temperature and ECE;
    ``main_t_late_low``: the smallest temperature from ``late_step`` on; ``main_band_max``:
    the widest range of the temperature over random halves; ``rows``: predictions per
    checkpoint. From the card: ``parameters``, ``vocab``, ``width``, ``context``,
    ``main_train_chars``, ``main_steps``, ``main_plays`` (training plays: every play but the
    held-out ones) and ``main_passes`` (characters trained on over training characters)."""

    main_loss_first: float
    main_loss_last: float
    main_t_low: float
    main_t_high: float
    main_gap_low: float
    main_gap_high: float
    main_t_last: float
    main_ece_last: float
    main_t_late_low: float
    parameters: int
    vocab: int
    main_train_chars: int
    rows: int
    main_band_max: float
    main_plays: int
    main_steps: int
    width: int
    context: int
    main_passes: float


def committed_run(main: dict, *, late_step: int = 1200) -> CommittedRun:
    """:class:`CommittedRun` of a ``trajectory(...)`` of the committed model."""
    card = main["card"]
    first, last = main["rows"][0], main["rows"][-1]
    mt = [r["temperature"] for r in main["rows"]]
    mg = [r["gap"] for r in main["rows"]]
    band = [r["temperature_high"] - r["temperature_low"] for r in main["rows"]]
    held = sum(len(names) for names in card["held_out_plays"].values())
    return CommittedRun(
        main_loss_first=first["loss"], main_loss_last=last["loss"],
        main_t_low=min(mt), main_t_high=max(mt), main_gap_low=min(mg), main_gap_high=max(mg),
        main_t_last=last["temperature"], main_ece_last=last["ece"],
        main_t_late_low=min(r["temperature"] for r in main["rows"] if r["step"] >= late_step),
        parameters=card["parameters"], vocab=card["vocab_size"],
        main_train_chars=card["corpus"]["train_chars"], rows=first["rows"],
        main_band_max=max(band), main_plays=len(tiny.plays()) - held,
        main_steps=card["steps"], width=card["config"]["width"],
        context=card["config"]["block"],
        main_passes=card["steps"] * card["tokens_per_step"] / card["corpus"]["train_chars"])


@dataclass(frozen=True)
class ExcerptRun:
    """The run on a short excerpt: its training log and its checkpoints on the test plays.

    ``over_chars``: characters of the excerpt; ``over_share``: their share of the committed
    run's training text; ``over_steps``: training steps; ``over_passes``: passes over the
    excerpt; ``over_every``: steps between the log's entries. From the log (validation
    plays): ``over_min_step``,
    ``over_min_loss`` (the lowest held-out loss and its step), ``over_last_loss``,
    ``over_rise`` (last minus lowest), ``over_train_at_min``, ``over_train_last`` (training
    loss at the minimum and at the end). On the test plays: ``over_test_minimum`` (the
    checkpoint of lowest loss), and at steps 100 to 400 the fitted temperature ``over_t_*``
    and confidence minus accuracy ``over_gap_*``; accuracy, loss and mean confidence at steps
    300 and 400. ``turn`` is :func:`turning_point` of the log, ``curve`` the log itself."""

    over_chars: int
    over_steps: int
    over_share: float
    over_passes: float
    over_min_step: int
    over_min_loss: float
    over_last_loss: float
    over_rise: float
    over_train_at_min: float
    over_train_last: float
    over_test_minimum: int
    over_t_100: float
    over_t_200: float
    over_t_300: float
    over_t_400: float
    over_gap_100: float
    over_gap_200: float
    over_gap_300: float
    over_gap_400: float
    over_every: int
    over_acc_300: float
    over_acc_400: float
    over_loss_300: float
    over_loss_400: float
    over_conf_300: float
    over_conf_400: float
    turn: dict = field(repr=False)
    curve: list = field(repr=False)


def excerpt_run(over: dict, main: dict) -> ExcerptRun:
    """:class:`ExcerptRun` of the excerpt run's ``trajectory`` (``over``), with the committed
    run's (``main``) for the share of text. Raises ValueError if the training log is not
    evenly spaced (then no single ``over_every`` exists)."""
    card = over["card"]
    curve = card["curve"]
    rows = _by_step(over)
    chars = card["corpus"]["train_chars"]
    every = {b["step"] - a["step"] for a, b in zip(curve, curve[1:])}
    if len(every) != 1:
        raise ValueError(f"the training log is not evenly spaced: steps apart {sorted(every)}")
    turn = turning_point([c["step"] for c in curve], [c["val_loss"] for c in curve])
    over_t = {f"over_t_{s}": rows[s]["temperature"] for s in (100, 200, 300, 400)}
    over_gap = {f"over_gap_{s}": rows[s]["gap"] for s in (100, 200, 300, 400)}
    return ExcerptRun(
        over_chars=chars, over_steps=card["steps"], over_share=chars / main["card"]["corpus"]["train_chars"],
        over_passes=card["steps"] * card["tokens_per_step"] / chars,
        over_min_step=turn["step"], over_min_loss=turn["loss"], over_last_loss=turn["last"],
        over_rise=turn["rise"], over_train_at_min=curve[turn["index"]]["train_loss"],
        over_train_last=curve[-1]["train_loss"], over_test_minimum=over["minimum"],
        **over_t, **over_gap, over_every=every.pop(),
        over_acc_300=rows[300]["accuracy"], over_acc_400=rows[400]["accuracy"],
        over_loss_300=rows[300]["loss"], over_loss_400=rows[400]["loss"],
        over_conf_300=rows[300]["confidence"], over_conf_400=rows[400]["confidence"],
        turn=turn, curve=curve)


@dataclass(frozen=True)
class LateDifferences:
    """Checkpoint ``late`` minus checkpoint ``early`` on the same predictions, each with a
    central bootstrap interval over resampled windows (:func:`window_difference`):
    ``acc_rise*`` (accuracy), ``conf_rise*`` (top probability), ``loss_rise*`` (NLL), the mean
    and its ``_lo``/``_hi`` ends; ``windows``: how many windows the predictions come from.
    ``ok``, ``conf``, ``loss`` map each step to its per-prediction
    correctness (0/1), confidence and NLL; ``differences`` maps ``accuracy``, ``confidence``,
    ``held-out loss`` to the window_difference dicts."""

    acc_rise: float
    acc_rise_lo: float
    acc_rise_hi: float
    conf_rise: float
    conf_rise_lo: float
    conf_rise_hi: float
    loss_rise: float
    loss_rise_lo: float
    loss_rise_hi: float
    windows: int
    ok: dict = field(repr=False)
    conf: dict = field(repr=False)
    loss: dict = field(repr=False)
    differences: dict = field(repr=False)


def per_prediction(logp, y) -> tuple:
    """Correctness (1.0 or 0.0), top probability and NLL of each row of ``logp``."""
    idx = np.arange(y.size)
    return ((logp.argmax(axis=1) == y).astype(float), np.exp(logp.max(axis=1)),
            -logp[idx, y])


def late_differences(held: dict, *, early: int = 300, late: int = 400, draws: int = 2000,
                     seed: int = 0, level: float = 0.95) -> LateDifferences:
    """:class:`LateDifferences` of ``held_out(...)`` predictions holding both checkpoints."""
    lp, y, window = held["logp"], held["y"], held["sequence"]
    ok, conf, loss = {}, {}, {}
    for s in lp:
        ok[s], conf[s], loss[s] = per_prediction(lp[s], y)
    d_acc, d_conf, d_loss = (window_difference(v[late] - v[early], window, draws=draws,
                                               seed=seed, level=level)
                             for v in (ok, conf, loss))
    return LateDifferences(
        acc_rise=d_acc["mean"], acc_rise_lo=d_acc["low"], acc_rise_hi=d_acc["high"],
        conf_rise=d_conf["mean"], conf_rise_lo=d_conf["low"], conf_rise_hi=d_conf["high"],
        loss_rise=d_loss["mean"], loss_rise_lo=d_loss["low"], loss_rise_hi=d_loss["high"],
        windows=d_acc["windows"], ok=ok, conf=conf, loss=loss,
        differences={"accuracy": d_acc, "confidence": d_conf, "held-out loss": d_loss})


@dataclass(frozen=True)
class WeightDecayControl:
    """The excerpt run against the same run with a stronger weight decay, and against the
    committed run at the same step. ``decay``/``wd_decay``: the two coefficients,
    ``decay_ratio`` their ratio; ``schedule_ratio``: the committed run's steps over the
    excerpt run's; ``over_minutes``/``wd_minutes``: training wall time; for the decay run at
    step 400 its fitted temperature, confidence minus accuracy, loss and accuracy
    (``wd_*_400``), its temperature at step 200, its last training loss; the committed run's
    temperature and gap at step 400. ``turn`` is :func:`turning_point` of the decay run's
    log."""

    decay: float
    wd_decay: float
    decay_ratio: float
    schedule_ratio: float
    over_minutes: float
    wd_minutes: float
    wd_t_400: float
    wd_gap_400: float
    wd_loss_400: float
    wd_acc_400: float
    wd_t_200: float
    wd_train_last: float
    main_t_400: float
    main_gap_400: float
    turn: dict = field(repr=False)


def weight_decay_control(over: dict, wd: dict, main: dict) -> WeightDecayControl:
    """:class:`WeightDecayControl` of three ``trajectory`` dicts. Raises ValueError unless the
    excerpt run uses the committed recipe's weight decay, the decay run differs from it in
    nothing of :data:`SAME_RECIPE`, and both trained on one thread."""
    card, wd_card = over["card"], wd["card"]
    decay = card["optimizer"]["weight_decay"]
    if decay != main["card"]["optimizer"]["weight_decay"]:
        raise ValueError("the excerpt run's weight decay is not the committed recipe's")
    differ = [key for key in SAME_RECIPE if wd_card[key] != card[key]]
    if differ:
        raise ValueError(f"the two excerpt runs differ in more than weight decay: {differ}")
    if not card["threads"] == wd_card["threads"] == 1:
        raise ValueError("the excerpt runs' wall times are comparable on one thread only")
    w_rows, m_rows = _by_step(wd), _by_step(main)
    curve = wd_card["curve"]
    return WeightDecayControl(
        decay=decay, wd_decay=wd_card["optimizer"]["weight_decay"],
        decay_ratio=wd_card["optimizer"]["weight_decay"] / decay,
        schedule_ratio=main["card"]["steps"] / card["steps"],
        over_minutes=card["wall_seconds"] / 60, wd_minutes=wd_card["wall_seconds"] / 60,
        wd_t_400=w_rows[400]["temperature"], wd_gap_400=w_rows[400]["gap"],
        wd_loss_400=w_rows[400]["loss"], wd_acc_400=w_rows[400]["accuracy"],
        wd_t_200=w_rows[200]["temperature"], wd_train_last=curve[-1]["train_loss"],
        main_t_400=m_rows[400]["temperature"], main_gap_400=m_rows[400]["gap"],
        turn=turning_point([c["step"] for c in curve], [c["val_loss"] for c in curve]))


@dataclass(frozen=True)
class ShiftControl:
    """Fitted temperatures on unseen text of the training play (``same``) and on the test
    plays (``other``), over the window seeds of a ``shift_control``. ``ctl_rest_chars``:
    characters of the unseen rest of the play; ``ctl_same_S_lo``/``_hi``: the smallest and
    largest temperature over seeds at step S (and ``ctl_other_400_*`` on the test plays);
    ``ctl_rise_same``/``ctl_rise_other``: the rise from the first to the last step, averaged
    over seeds, and ``ctl_share`` their ratio; ``ctl_offset_*``: test plays minus same play,
    averaged; ``ctl_gap_same_400``: confidence minus accuracy on the same play at the last
    step, averaged. ``same``/``other``: the arrays (seeds x steps)."""

    ctl_rest_chars: int
    ctl_same_100_lo: float
    ctl_same_100_hi: float
    ctl_same_300_lo: float
    ctl_same_300_hi: float
    ctl_same_400_lo: float
    ctl_same_400_hi: float
    ctl_other_400_lo: float
    ctl_other_400_hi: float
    ctl_rise_same: float
    ctl_rise_other: float
    ctl_share: float
    ctl_offset_100: float
    ctl_offset_400: float
    ctl_gap_same_400: float
    same: np.ndarray = field(repr=False)
    other: np.ndarray = field(repr=False)


def shift_summary(ctl: dict, directory: Path | str) -> ShiftControl:
    """:class:`ShiftControl` of ``shift_control(directory, (100, 200, 300, 400), ...)``."""
    if list(ctl["steps"]) != [100, 200, 300, 400]:
        raise ValueError(f"the control must measure steps 100, 200, 300, 400, got {ctl['steps']}")
    same, other = ctl["same play"]["temperature"], ctl["test plays"]["temperature"]
    rise_same = (same[:, -1] - same[:, 0]).mean()
    rise_other = (other[:, -1] - other[:, 0]).mean()
    return ShiftControl(
        ctl_rest_chars=len(tj.training_remainder(directory)),
        ctl_same_100_lo=same[:, 0].min(), ctl_same_100_hi=same[:, 0].max(),
        ctl_same_300_lo=same[:, 2].min(), ctl_same_300_hi=same[:, 2].max(),
        ctl_same_400_lo=same[:, -1].min(), ctl_same_400_hi=same[:, -1].max(),
        ctl_other_400_lo=other[:, -1].min(), ctl_other_400_hi=other[:, -1].max(),
        ctl_rise_same=rise_same, ctl_rise_other=rise_other, ctl_share=rise_same / rise_other,
        ctl_offset_100=(other[:, 0] - same[:, 0]).mean(),
        ctl_offset_400=(other[:, -1] - same[:, -1]).mean(),
        ctl_gap_same_400=ctl["same play"]["gap"][:, -1].mean(),
        same=same, other=other)


@dataclass(frozen=True)
class GapCorrelation:
    """Fitted temperature against the generalisation gap (the card's validation loss minus
    training loss) over the checkpoints of three runs. ``rho``: Spearman's rank correlation
    over all ``n_checkpoints``; ``rho_main``, ``rho_over``: within the committed and the
    excerpt run; ``rho_main_step``: step against gap in the committed run; ``gap_*_400``: each
    run's gap at step 400. ``points`` maps ``main``, ``over``, ``wd`` to (gaps, temperatures)."""

    rho: float
    n_checkpoints: int
    rho_main: float
    rho_main_step: float
    rho_over: float
    gap_main_400: float
    gap_over_400: float
    gap_wd_400: float
    points: dict = field(repr=False)


def gap_correlation(main: dict, over: dict, wd: dict) -> GapCorrelation:
    """:class:`GapCorrelation` of three ``trajectory`` dicts."""
    xs, ts, within, at_400, points = [], [], {}, {}, {}
    for key, run in (("main", main), ("over", over), ("wd", wd)):
        x = [r["card_val_loss"] - r["card_train_loss"] for r in run["rows"]]
        t = [r["temperature"] for r in run["rows"]]
        steps = [r["step"] for r in run["rows"]]
        points[key] = (x, t)
        xs += x
        ts += t
        at_400[key] = x[steps.index(400)]
        within[key] = (stats.spearmanr(x, t).statistic if len(x) > 2 else None,
                       stats.spearmanr(steps, x).statistic if len(x) > 2 else None)
    return GapCorrelation(
        rho=stats.spearmanr(xs, ts).statistic, n_checkpoints=len(xs),
        rho_main=within["main"][0], rho_main_step=within["main"][1],
        rho_over=within["over"][0], gap_main_400=at_400["main"],
        gap_over_400=at_400["over"], gap_wd_400=at_400["wd"], points=points)


def random_half(window, *, seed: int = 0) -> np.ndarray:
    """Which predictions belong to a random half of the windows (``window``: 0..W-1)."""
    n = np.bincount(window).size
    return np.isin(window, np.random.default_rng(seed).permutation(n)[:n // 2])


def cross_fitted(logp, y, half) -> tuple:
    """Scaled NLL and confidence of each prediction, with the temperature fitted on the other
    half (``half`` and its complement), and the two temperatures."""
    out_loss, out_conf, temps = np.empty(y.size), np.empty(y.size), []
    for fit in (half, ~half):
        t = fit_temperature(logp[fit], y[fit])
        scaled = scale(logp[~fit], t)
        out_loss[~fit] = -scaled[np.arange(scaled.shape[0]), y[~fit]]
        out_conf[~fit] = np.exp(scaled.max(axis=1))
        temps.append(t)
    return out_loss, out_conf, temps


@dataclass(frozen=True)
class ScalingRepair:
    """One cross-fitted temperature per checkpoint (:func:`cross_fitted`). ``over_ece_400``:
    the last checkpoint's ECE before (from the trajectory) and ``over_ece_xf_400`` after;
    ``scaled_diff`` (``_lo``, ``_hi``): step 400 minus step 300 in scaled NLL with its window
    bootstrap interval. ``half``: the half of the windows; ``xf`` maps each step to
    :func:`cross_fitted`'s triple; ``difference``: the window_difference dict."""

    over_ece_400: float
    over_ece_xf_400: float
    scaled_diff: float
    scaled_diff_lo: float
    scaled_diff_hi: float
    half: np.ndarray = field(repr=False)
    xf: dict = field(repr=False)
    difference: dict = field(repr=False)


def scaling_repair(held: dict, late: LateDifferences, over: dict, *, seed: int = 0,
                   draws: int = 2000, level: float = 0.95) -> ScalingRepair:
    """:class:`ScalingRepair` of the ``held_out`` predictions at steps 300 and 400."""
    lp, y, window = held["logp"], held["y"], held["sequence"]
    half = random_half(window, seed=seed)
    xf = {s: cross_fitted(lp[s], y, half) for s in lp}
    d = window_difference(xf[400][0] - xf[300][0], window, draws=draws, seed=seed, level=level)
    return ScalingRepair(
        over_ece_400=_by_step(over)[400]["ece"],
        over_ece_xf_400=ece(xf[400][1], late.ok[400] == 1),
        scaled_diff=d["mean"], scaled_diff_lo=d["low"], scaled_diff_hi=d["high"],
        half=half, xf=xf, difference=d)


@dataclass(frozen=True)
class ArgmaxCheck:
    """``ex_changed``: rows whose top label differs after dividing the logits by one
    temperature."""

    ex_changed: int


def argmax_check(logp, temperature: float) -> ArgmaxCheck:
    """:class:`ArgmaxCheck` of log-probabilities ``logp`` at one temperature."""
    top_scaled = scale(logp, temperature).argmax(axis=1)
    return ArgmaxCheck(ex_changed=int((top_scaled != logp.argmax(axis=1)).sum()))


@dataclass(frozen=True)
class StoppingChoice:
    """Early stopping by raw held-out NLL against by cross-fitted scaled NLL.
    ``ex_best_raw``/``ex_best_scaled``: the step each picks; ``ex_scaled_300``/``_400``: the
    scaled NLL at steps 300 and 400. ``raw``/``scaled`` map every step to its NLL."""

    ex_best_raw: int
    ex_best_scaled: int
    ex_scaled_300: float
    ex_scaled_400: float
    raw: dict = field(repr=False)
    scaled: dict = field(repr=False)


def stopping_choice(logp: dict, y, half) -> StoppingChoice:
    """:class:`StoppingChoice` of log-probabilities by step (``logp``) on labels ``y``."""
    idx = np.arange(y.size)
    raw = {s: -logp[s][idx, y].mean() for s in sorted(logp)}
    scaled = {s: cross_fitted(logp[s], y, half)[0].mean() for s in sorted(logp)}
    return StoppingChoice(ex_best_raw=min(raw, key=raw.get),
                          ex_best_scaled=min(scaled, key=scaled.get),
                          ex_scaled_300=scaled[300], ex_scaled_400=scaled[400],
                          raw=raw, scaled=scaled)


@dataclass(frozen=True)
class GainNorms:
    """The final LayerNorm's mean gain (``ex_gain_*``) and the token embedding's mean row norm
    (``ex_emb_*``) of the excerpt run at steps 100 and 400 and of the decay run at step 400.
    ``table`` maps (run name, step) to (gain, norm) for every checkpoint of both runs."""

    ex_gain_100: float
    ex_gain_400: float
    ex_gain_wd_400: float
    ex_emb_100: float
    ex_emb_400: float
    ex_emb_wd_400: float
    table: dict = field(repr=False)


def gain_norms(over: dict, wd: dict) -> GainNorms:
    """:class:`GainNorms` of the two excerpt runs' ``trajectory`` dicts (loads each
    checkpoint, hash-verified)."""
    table = {}
    for name, run in (("decay 0.1", over), ("decay 1.0", wd)):
        for r in run["rows"]:
            net = tiny.load(r["step"], directory=run["directory"])["model"]
            table[name, r["step"]] = (float(net.ln.weight.detach().mean()),
                                      float(net.tok.weight.detach().norm(dim=1).mean()))
    (g100, e100), (g400, e400) = table["decay 0.1", 100], table["decay 0.1", 400]
    g_wd, e_wd = table["decay 1.0", 400]
    return GainNorms(ex_gain_100=g100, ex_gain_400=g400, ex_gain_wd_400=g_wd, ex_emb_100=e100,
                     ex_emb_400=e400, ex_emb_wd_400=e_wd, table=table)
