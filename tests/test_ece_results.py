"""Episode 2's named results (uncertainty.ece_results), on synthetic predictions whose true
temperature is known: what each field means, and the invariants the lecture reads off its
model."""

import dataclasses

import numpy as np
import pytest

from standarderror.uncertainty import ece_results as er
from standarderror.uncertainty import metrics


def synthetic(windows=320, window=64, labels=20, true_t=1.0, seed=0):
    """Log-probabilities at T = 1 of random logits, and labels drawn from the softmax at
    ``true_t``: the model is calibrated at ``true_t`` and nowhere else."""
    rng = np.random.default_rng(seed)
    rows = windows * window
    z = rng.normal(size=(rows, labels)) * rng.uniform(0.5, 3.0, rows)[:, None]
    logp = z - np.log(np.exp(z - z.max(axis=1, keepdims=True)).sum(axis=1, keepdims=True)) \
        - z.max(axis=1, keepdims=True)
    q = np.exp(z / true_t - (z / true_t).max(axis=1, keepdims=True))
    q /= q.sum(axis=1, keepdims=True)
    y = (q.cumsum(axis=1) < rng.random(rows)[:, None]).sum(axis=1)
    sequence = np.repeat(np.arange(windows), window)
    return np.exp(logp), logp, np.minimum(y, labels - 1), sequence


@pytest.fixture(scope="module")
def calibrated():
    return synthetic(true_t=1.0)


def test_stand_in_fields(calibrated):
    p, _, y, seq = calibrated
    s = er.calibrated_stand_in(p, y, seq, seed=0, windows=16, windows_seed=1)
    assert s.rows == y.size and s.small_rows == 16 * 64
    assert s.accuracy == np.mean(p.argmax(axis=1) == y)
    assert s.ece_model == metrics.ece(p.max(axis=1), p.argmax(axis=1) == y)
    assert set(np.unique(s.fake)) <= {0, 1}
    # the stand-in is calibrated: on all rows its ECE is small, on the small set larger
    assert s.ece_fake < s.ece_fake_small
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.rows = 0


@pytest.fixture(scope="module")
def law(calibrated):
    p = calibrated[0]
    return er.floor_law(p.max(axis=1), draws=40, seed=0)


def test_floor_law_below_the_exact_bound(law):
    """Proposition prop-ep2-floor: every mean ECE sits below sqrt(pi/2) a sqrt(B/n)."""
    for mode in er.MODES:
        assert np.all(law.bound[mode] < 1)
        assert np.all(law.bound[mode] > 0.5)        # and the normal approximation is close
    assert law.points == 2 * 4 * 5 and law.floor_draws == 40
    assert law.pred_width_low <= law.fit_width * 1.1 and law.fit_width <= law.pred_width_high * 1.1
    assert law.floor_256 > law.floor_1024 > law.floor_16384
    # quadruple the data, about halve the floor
    assert law.floor_256 / law.floor_1024 == pytest.approx(2, rel=0.15)


def test_floor_prediction_and_data_for_floor(law, calibrated):
    guess = er.floor_prediction(law)
    assert guess.guess_1024 == law.fits["equal width"]["constant"] * np.sqrt(15 / 1024)
    assert guess.sim_15_1024 == law.rows15[1024]["mean"]
    # the same ratio of bins to predictions, the same floor
    assert guess.sim_60_4096 == pytest.approx(guess.sim_15_1024, rel=0.1)
    ses = [r["sd"] / np.sqrt(law.floor["equal width"]["draws"]) for r in guess.cells]
    assert guess.sim_se == max(ses)
    assert guess.sim_z == max(abs(r["mean"] - guess.guess_1024) / e
                              for r, e in zip(guess.cells, ses))
    conf = calibrated[0].max(axis=1)
    needed = er.data_for_floor(conf, bins=15, target=0.02, draws=20, seed=5)
    # the least n whose predicted floor a sqrt(15/n) reaches the target
    assert needed.a15 * np.sqrt(15 / needed.need) <= 0.02
    assert needed.a15 * np.sqrt(15 / (needed.need - 1)) > 0.02
    assert needed.need_share == needed.need / conf.size
    assert needed.need_mean == pytest.approx(0.02, rel=0.15)


def test_temperature_tests_find_a_hot_temperature_and_pass_the_calibrated_one(calibrated):
    p, logp, y, seq = calibrated
    correct = p.argmax(axis=1) == y
    t = er.temperature_tests(p, y, seq, logp, correct, T=(1.0, 1.3), draws=200, seed=0,
                             control_draws=200, control_seed=7, level=0.05)
    assert t.fitted_t == pytest.approx(1.0, abs=0.05)
    assert t.p_t13 == 1 / 201                    # beyond every redraw: the smallest p-value
    assert t.p_t1 > 0.01
    assert t.null_draws == 200 and t.control_tries == 200
    # the control's labels are calibrated: it rejects at about its level
    assert t.control_rate == pytest.approx(0.05, abs=0.05)
    assert list(t.tests) == [1.0, t.fitted_t, 1.3]


def test_subset_tests_fields(calibrated):
    p, _, y, seq = calibrated
    s = er.subset_tests(p.max(axis=1), p.argmax(axis=1) == y, seq, windows=16, subsets=10,
                        draws=50, seed=0, level=0.05)
    assert s.sub_sets == 10 and s.sub_rows == 16 * 64
    assert s.sub_detect == np.mean(s.result["p_values"] <= 0.05)


def test_debiased_is_below_the_plug_in(law):
    p, logp, y, _ = synthetic(windows=100, true_t=1.0, seed=2)
    correct = p.argmax(axis=1) == y
    d = er.debiased_errors(law, logp, correct, 1.3, T=1.0)
    plug, db = d.model[1.3]
    assert db < plug                        # the debiased estimate subtracts a variance
    assert d.plug_rms_fit == np.sqrt(plug) and d.rms_fit == np.sqrt(db)
    assert d.l2_plug_256 > d.l2_plug_16384 > 0
    assert d.l2_max_z < 4                    # calibrated rows: debiased means near zero


def test_verdicts_prefer_the_true_temperature():
    """Labels drawn at T = 1.1: on all the data every metric prefers 1.1 to 1.0 and to 1.2."""
    p, logp, y, seq = synthetic(windows=400, true_t=1.1, seed=3)
    v = er.temperature_verdicts(logp, y, seq, T=(1.0, 1.1, 1.2),
                                windows=(2, 16, 64), draws=40, seed=0)
    for pair in v.pairs:
        assert set(v.preferred[pair].values()) == {1.1}, (pair, v.preferred[pair])
    assert v.fewest_rows == 2 * 64 and v.most_rows == 64 * 64 and v.verdict_draws == 40
    more = er.more_verdicts(logp, y, seq, v, T=((1.0, 1.3), (1.12, 1.15)), windows=(4, 64),
                            draws=40, seed=0)
    assert more.x_rows == 64 * 64
    assert more.x_ece_near == v.verdict[(1.0, 1.1)]["agreement"]["ECE"][-1]
    assert more.x_gap_wide >= 0 and more.x_gap_near >= 0
    assert more.x_brier_near == v.verdict[(1.0, 1.1)]["agreement"]["Brier"][-1]
    assert more.x_nll_close == more.extra[(1.12, 1.15)]["agreement"]["NLL"][-1]
    assert all(0 <= a <= 1 for a in (more.x_nll_wide, more.x_ece_wide, more.x_brier_wide))
