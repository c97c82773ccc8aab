"""Episode 4's named results (standarderror.experiments.overconfidence), on their own inputs."""

import dataclasses

import numpy as np
import pytest
from scipy import stats

from standarderror.experiments import overconfidence as ov
from standarderror.experiments import trajectory as tj
from standarderror.llm import tiny
from standarderror.uncertainty import calibration as cb
from standarderror.uncertainty.training import checkpoint_metrics, window_difference


def _row(step, t, gap, loss=2.0, acc=0.4, conf=0.45, ece=0.05, val=2.1, train=1.9, rows=64):
    return {"step": step, "temperature": t, "gap": gap, "loss": loss, "accuracy": acc,
            "confidence": conf, "ece": ece, "temperature_low": t - 0.01,
            "temperature_high": t + 0.02, "rows": rows, "card_val_loss": val,
            "card_train_loss": train}


def _card(**over):
    card = {"steps": 400, "tokens_per_step": 4096, "corpus": {"train_chars": 30000},
            "held_out_plays": {"validation": ["a", "b"], "test": ["c"]},
            "parameters": 10, "vocab_size": 5, "config": {"width": 8, "block": 4},
            "optimizer": {"weight_decay": 0.1}, "seed": 0, "schedule": "cosine",
            "batch": 64, "threads": 1, "wall_seconds": 600.0,
            "curve": [{"step": s, "val_loss": v, "train_loss": tr}
                      for s, v, tr in ((25, 3.0, 2.9), (50, 2.5, 2.2), (75, 2.4, 1.8),
                                       (100, 2.6, 1.5))]}
    card.update(over)
    return card


def _pinned(result):
    """The fields pin(result) pins: every number field."""
    return {f.name for f in dataclasses.fields(result)
            if isinstance(getattr(result, f.name), (int, float, np.number))}


def test_committed_run_takes_extremes_late_minimum_and_passes():
    rows = [_row(100, 1.05, 0.02, loss=2.0), _row(1200, 1.20, 0.03),
            _row(1600, 1.10, 0.01, loss=1.5, ece=0.03)]
    main = {"rows": rows, "card": _card(steps=3200, corpus={"train_chars": 1000})}
    r = ov.committed_run(main, late_step=1200)
    assert (r.main_t_low, r.main_t_high) == (1.05, 1.20)
    assert (r.main_gap_low, r.main_gap_high) == (0.01, 0.03)
    assert r.main_t_late_low == 1.10          # the step-100 checkpoint is left out
    assert ov.committed_run(main, late_step=0).main_t_late_low == 1.05
    assert (r.main_loss_first, r.main_loss_last, r.main_ece_last) == (2.0, 1.5, 0.03)
    assert np.isclose(r.main_band_max, 0.03)   # every band is 0.01 below to 0.02 above
    assert r.main_passes == 3200 * 4096 / 1000
    assert r.main_plays == len(tiny.plays()) - 3
    assert (r.width, r.context, r.vocab, r.rows) == (8, 4, 5, 64)


def test_excerpt_run_reads_the_log_and_refuses_an_uneven_one():
    over = {"rows": [_row(s, 1.0 + s / 1000, s / 4000) for s in (100, 200, 300, 400)],
            "minimum": 300, "card": _card()}
    main = {"card": _card(corpus={"train_chars": 3_000_000})}
    r = ov.excerpt_run(over, main)
    assert r.over_every == 25
    assert (r.over_min_step, r.over_min_loss, r.over_last_loss) == (75, 2.4, 2.6)
    assert r.over_rise == 2.6 - 2.4
    assert (r.over_train_at_min, r.over_train_last) == (1.8, 1.5)
    assert r.over_share == 30000 / 3_000_000 and r.over_passes == 400 * 4096 / 30000
    assert (r.over_t_200, r.over_gap_400, r.over_test_minimum) == (1.2, 0.1, 300)
    bad = _card()
    bad["curve"] = bad["curve"][:2] + bad["curve"][3:]   # 25, 50, 100: not evenly spaced
    with pytest.raises(ValueError, match="evenly spaced"):
        ov.excerpt_run({**over, "card": bad}, main)


def _held(seed=0, windows=12, per=5, k=6):
    rng = np.random.default_rng(seed)
    n = windows * per
    base = rng.standard_normal((n, k))
    y = (base + rng.standard_normal((n, k))).argmax(axis=1)   # labels the logits half-predict
    logp = {}
    for s in (300, 400):
        z = (base + 0.3 * rng.standard_normal((n, k))) * (s / 200)
        logp[s] = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    return {"logp": logp, "y": y, "sequence": np.repeat(np.arange(windows), per)}


def test_late_differences_score_the_predictions_checkpoint_metrics_scores():
    held = _held()
    r = ov.late_differences(held, draws=200, seed=1, level=0.9)
    for s in (300, 400):     # the same accuracy and loss as a checkpoint's table row
        m = checkpoint_metrics(held["logp"][s], held["y"], held["sequence"], halves=2)
        assert np.isclose(r.ok[s].mean(), m["accuracy"], rtol=0, atol=1e-12)
        assert np.isclose(r.loss[s].mean(), m["loss"], rtol=0, atol=1e-9)
    d = window_difference(r.conf[400] - r.conf[300], held["sequence"], draws=200, seed=1,
                          level=0.9)
    assert (r.conf_rise, r.conf_rise_lo, r.conf_rise_hi) == (d["mean"], d["low"], d["high"])
    assert r.windows == 12
    assert r.acc_rise_lo <= r.acc_rise <= r.acc_rise_hi


def test_weight_decay_control_refuses_runs_that_differ_in_more_than_decay():
    over = {"rows": [_row(200, 1.2, 0.05), _row(400, 1.4, 0.12)], "card": _card()}
    wd = {"rows": [_row(200, 1.1, 0.04), _row(400, 1.3, 0.11, loss=2.3)],
          "card": _card(optimizer={"weight_decay": 1.0}, wall_seconds=1200.0)}
    main = {"rows": [_row(400, 1.04, 0.016)], "card": _card(steps=3200)}
    r = ov.weight_decay_control(over, wd, main)
    assert (r.decay, r.wd_decay, r.decay_ratio) == (0.1, 1.0, 1.0 / 0.1)
    assert (r.schedule_ratio, r.over_minutes, r.wd_minutes) == (8.0, 10.0, 20.0)
    assert (r.wd_t_400, r.wd_loss_400, r.main_t_400, r.wd_train_last) == (1.3, 2.3, 1.04, 1.5)
    with pytest.raises(ValueError, match="more than weight decay"):
        ov.weight_decay_control(over, {**wd, "card": {**wd["card"], "seed": 1}}, main)
    with pytest.raises(ValueError, match="committed recipe"):
        ov.weight_decay_control(over, wd, {**main, "card": _card(optimizer={"weight_decay": 0.5})})
    with pytest.raises(ValueError, match="one thread"):
        ov.weight_decay_control({**over, "card": _card(threads=2)},
                                {**wd, "card": {**wd["card"], "threads": 2}}, main)


def test_shift_summary_averages_over_seeds():
    same = np.array([[1.0, 1.1, 1.15, 1.25], [0.98, 1.08, 1.16, 1.23]])
    other = same + np.array([[0.1, 0.1, 0.15, 0.2]])
    gap = np.array([[0.0, 0.0, 0.0, 0.08], [0.0, 0.0, 0.0, 0.1]])
    ctl = {"steps": [100, 200, 300, 400], "same play": {"temperature": same, "gap": gap},
           "test plays": {"temperature": other}}
    r = ov.shift_summary(ctl, tiny.CHECKPOINT_DIR / "overfit")
    assert (r.ctl_same_100_lo, r.ctl_same_100_hi) == (0.98, 1.0)
    assert (r.ctl_same_300_lo, r.ctl_same_400_hi) == (1.15, 1.25)
    assert np.isclose(r.ctl_rise_same, (0.25 + 0.25) / 2)
    assert np.isclose(r.ctl_rise_other, 0.35)
    assert r.ctl_share == r.ctl_rise_same / r.ctl_rise_other
    assert np.isclose(r.ctl_offset_400, 0.2) and np.isclose(r.ctl_gap_same_400, 0.09)
    assert r.ctl_rest_chars == len(tj.training_remainder(tiny.CHECKPOINT_DIR / "overfit"))
    with pytest.raises(ValueError, match="steps"):
        ov.shift_summary({**ctl, "steps": [100, 400]}, tiny.CHECKPOINT_DIR / "overfit")


def test_gap_correlation_pools_the_runs_and_ranks_within_each():
    main = {"rows": [_row(s, t, 0, val=v, train=1.0) for s, t, v in
                     ((100, 1.05, 1.01), (400, 1.04, 1.03), (800, 1.08, 1.05))]}
    over = {"rows": [_row(s, t, 0, val=v, train=1.0) for s, t, v in
                     ((100, 1.1, 1.2), (200, 1.2, 1.5), (400, 1.4, 1.9))]}
    wd = {"rows": [_row(s, t, 0, val=v, train=1.0) for s, t, v in
                   ((200, 1.1, 1.4), (400, 1.3, 1.7))]}
    r = ov.gap_correlation(main, over, wd)
    assert r.n_checkpoints == 8
    xs = [x for run in (main, over, wd) for x in (q["card_val_loss"] - 1.0 for q in run["rows"])]
    ts = [q["temperature"] for run in (main, over, wd) for q in run["rows"]]
    assert r.rho == stats.spearmanr(xs, ts).statistic
    assert r.rho_over == 1.0 and r.rho_main_step == 1.0
    assert np.isclose(r.rho_main, 0.5)
    assert np.isclose(r.gap_wd_400, 0.7) and np.isclose(r.gap_main_400, 0.03)
    assert "points" not in _pinned(r)


def test_cross_fitted_scores_each_half_with_the_other_halfs_temperature():
    held = _held(seed=3)
    lp, y = held["logp"][400], held["y"]
    half = ov.random_half(held["sequence"], seed=0)
    assert half.sum() == y.size // 2   # six of the twelve windows, five predictions each
    loss, conf, temps = ov.cross_fitted(lp, y, half)
    assert temps == [cb.fit_temperature(lp[half], y[half]), cb.fit_temperature(lp[~half], y[~half])]
    scaled = cb.scale(lp[half], temps[1])   # the first half is scored by the second's fit
    np.testing.assert_array_equal(loss[half], -scaled[np.arange(half.sum()), y[half]])
    np.testing.assert_array_equal(conf[half], np.exp(scaled.max(axis=1)))


def test_scaling_repair_and_stopping_choice_use_the_cross_fit():
    held = _held(seed=5)
    late = ov.late_differences(held, draws=100)
    over = {"rows": [_row(300, 1.3, 0.1), _row(400, 1.4, 0.12, ece=0.12)]}
    r = ov.scaling_repair(held, late, over, draws=100)
    assert r.over_ece_400 == 0.12
    assert r.over_ece_xf_400 == cb.ece(r.xf[400][1], late.ok[400] == 1)
    assert r.scaled_diff == pytest.approx((r.xf[400][0] - r.xf[300][0]).mean())
    c = ov.stopping_choice(held["logp"], held["y"], r.half)
    assert c.ex_scaled_400 == r.xf[400][0].mean()
    assert c.raw[c.ex_best_raw] == min(c.raw.values())
    assert c.scaled[c.ex_best_scaled] == min(c.scaled.values())


@pytest.mark.parametrize("t", [0.3, 1.0, 1.4, 3.0])
def test_temperature_changes_no_top_label(t):
    lp = _held(seed=7, windows=50)["logp"][400]
    assert ov.argmax_check(lp, t).ex_changed == 0
    assert _pinned(ov.argmax_check(lp, t)) == {"ex_changed"}


@pytest.mark.slow  # runs three checkpoints of the excerpt run on 160 windows
def test_the_excerpt_runs_gap_grows_and_the_shift_control_repeats_the_table():
    d = tiny.CHECKPOINT_DIR / "overfit"
    run = tj.trajectory(d, (200, 300, 400), count=10, size=16, seed=0, halves=2)
    gap = [r["gap"] for r in run["rows"]]
    assert gap[0] < gap[1] < gap[2]      # Figure fig-ep4-overfit: grows from step 200 on
    ctl = tj.shift_control(d, (200, 400), seeds=(0,))
    np.testing.assert_allclose(ctl["test plays"]["temperature"][0],
                               [r["temperature"] for r in run["rows"][::2]], rtol=0, atol=1e-4)
