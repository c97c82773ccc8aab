"""The named results of the set-size review (``standarderror.experiments.set_size_results``),
on a synthetic family of checkpoints and on the synthetic demonstration: each equals the
functions it is built from, and each invariant the page once asserted holds."""

import dataclasses

import numpy as np
import pytest

from standarderror.experiments import multiple_choice as mc
from standarderror.experiments import set_size_results as ssr
from standarderror.uncertainty import coverage as cv


def synthetic_family(count=720, checkpoints=4, seed=0):
    """Option scores of checkpoints that grow sharper, in the layout of ``mc.family``: whole
    words score at most what their prefixes score (a word may go on)."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 6, size=count)
    noise = rng.normal(size=(count, 6))
    logits = []
    for k in range(checkpoints):
        z = noise + (0.5 + 0.5 * k) * np.eye(6)[y]
        logits.append(np.log(np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)))
    logits = np.stack(logits)
    prefix = logits + rng.uniform(0.0, 0.6, size=logits.shape)
    cal = np.zeros(count, dtype=bool)
    cal[rng.permutation(count)[: count // 2]] = True
    return {"steps": [400 * (k + 1) for k in range(checkpoints)], "logits": logits,
            "prefix_logits": prefix, "y": y, "calibration": cal}


@pytest.fixture(scope="module")
def fam():
    return synthetic_family()


@pytest.fixture(scope="module")
def res(fam):
    return mc.analysis(fam, alpha=0.1)


@pytest.fixture(scope="module")
def demo():
    return cv.demonstration(seed=0)


def test_word_boundary_by_hand(fam):
    r = ssr.word_boundary(fam)
    last, pre = fam["logits"][-1], fam["prefix_logits"][-1]
    rows = np.arange(fam["y"].size)
    go_true = [1 - np.exp(last[i, fam["y"][i]] - pre[i, fam["y"][i]]) for i in rows]
    assert np.isclose(r.task_go_true, np.mean(go_true), rtol=1e-12)
    assert 0 <= r.task_go_true < 1 and 0 <= r.task_go_other < 1
    flips = [np.mean(z.argmax(1) != p.argmax(1))
             for z, p in zip(fam["logits"], fam["prefix_logits"])]
    assert np.allclose(r.flips, flips, rtol=0, atol=0)
    assert r.task_flip_lo <= r.task_flip_last <= r.task_flip_hi
    gain = np.mean(last.argmax(1) == fam["y"]) - np.mean(pre.argmax(1) == fam["y"])
    assert np.isclose(r.task_gain, gain, rtol=0, atol=1e-15)


def test_word_boundary_without_a_boundary_changes_nothing(fam):
    same = dict(fam, prefix_logits=fam["logits"].copy())
    r = ssr.word_boundary(same)
    assert r.task_go_true == 0 and r.task_go_other == 0
    assert r.task_flip_hi == 0 and r.task_gain == 0 and r.task_gain_p == 1


def test_demonstration_panels(demo):
    c = ssr.identical_sets(demo)
    assert c.c_identical_rows == c.c_test_rows == 2000     # half of the 4000 questions
    assert isinstance(c.c_identical_rows, int) and isinstance(c.c_test_rows, int)
    assert c.c_acc_a > 0.8 > 0.2 > c.c_acc_b
    a = ssr.opposite_orders(demo)
    assert a.a_sharp_acc > a.a_medium_acc
    assert a.a_sharp_lac < a.a_medium_lac and a.a_sharp_aps > a.a_medium_aps
    assert a.a_sharp_aps_q == demo["a"]["sharp"]["aps"]["qhat"]
    b = ssr.saturation(demo)
    assert b.b_aps_q == 1.0 and b.b_aps_cov == 1.0 and b.b_aps_size == 6.0
    assert b.b_ones > 0.1                         # more ties than the tail alpha may skip
    with pytest.raises(dataclasses.FrozenInstanceError):
        b.b_acc = 0.5


def test_randomised_aps_undoes_the_ties(demo):
    b = demo["b"]["saturating"]
    r = ssr.randomised_aps(demo, seed=0)
    # deterministic APS sets far larger than LAC's and randomised APS's
    assert b["aps"]["mean_size"] > 3 * max(b["lac"]["mean_size"], r.b_rand_size)
    assert 0.85 < r.b_rand_cov < 0.95
    cal = demo["calibration"]
    again = cv.conformal_sets(b["p"][cal], b["y"][cal], b["p"][~cal], score="aps",
                              randomized=True, seed=0)
    assert np.array_equal(again["sets"], r.sets["sets"])
    assert r.b_rand_size == cv.set_summary(again["sets"], b["y"][~cal])["mean_size"]


def test_family_ranking_and_correlations(fam, res):
    r = ssr.family_ranking(fam, res)
    base = res["at"][1.0]
    assert r.fam_questions == 720 and r.fam_context == mc.CONTEXT
    assert r.fam_pairs == 6                        # four checkpoints: 4 * 3 / 2
    assert r.fam_acc_first == base["accuracy"][0] and r.fam_aps_last == base["aps_size"][-1]
    assert r.fam_acc_first < r.fam_acc_last        # the checkpoints grow sharper
    rho = ssr.accuracy_and_size(res)
    assert rho.rho_lac == res["spearman"]["lac"] and rho.rho_avg == res["spearman"]["average"]


def test_temperature_leaves_accuracy_alone(fam, res):
    for t in res["at"]:
        assert np.array_equal(res["at"][t]["accuracy"], res["at"][1.0]["accuracy"])
    r = ssr.temperature_effects(res)
    assert r.t_fit_lo == res["fitted"]["temperature"].min() <= r.t_fit_hi
    assert r.t_lac_tau == res["temperature"]["lac"]["tau_extremes"]
    assert 0 <= r.t_aps_changed <= 4


def test_lemma_terms_add_up(fam, res):
    r = ssr.lemma_terms(fam)
    n = r.counts
    assert n["n_true"] + n["n_other"] == n["n_sets"]          # the lemma, on counts: exact
    assert n["n_test"] == int((~fam["calibration"]).sum())
    assert np.isclose(r.ex_true_rate + r.ex_other_rate, r.ex_size, rtol=0, atol=1e-12)
    assert r.ex_size == res["at"][1.0]["lac_size"][-1]       # the analysis' own sets


def test_split_noise_and_its_averages(fam):
    noise = ssr.split_noise(fam, splits=6, seed=2)
    ctrl = mc.split_control(fam, splits=6, seed=2)
    assert noise.ctrl_within == ctrl["within"].mean()
    assert noise.ctrl_within_min <= noise.ctrl_within
    av = ssr.averaged_over_splits(noise)
    assert av.ctrl_splits == 6 and av.ctrl_half == 3
    # sharper checkpoints get smaller sets at every later step, under both scores
    assert all((np.diff(v) < 0).all() for v in av.mean_sizes.values())
    assert av.ctrl_avg_tau == 1.0 and av.ctrl_avg_disc == 0


def test_overshoot_parts(fam):
    r = ssr.overshoot_parts(fam, halvings=5, seed=3, from_step=800)
    ov = mc.overshoot(fam, splits=5, seed=3)
    assert r.ov_step_first == 400 and r.ov_step_last == 1600
    assert r.fresh_gain.shape == (5, 4) and r.fresh_coverage["ye"].shape == (5, 4)
    # the fallback's gain is the share of empty sets whose top option is right
    assert np.allclose(r.fresh_gain, ov["empty_top_right"]["aps"][1:], rtol=0, atol=1e-12)
    assert r.gain_lo[-1] == r.ov_gain_last_lo <= r.ov_gain_last <= r.ov_gain_last_hi
    assert r.ov_tb_lo <= r.ov_tb_hi and r.ov_ye_lo <= r.ov_ye_hi
    assert 0 <= r.ov_top_right <= 1 and 0 <= r.ov_at_one <= 5
    late = np.array(fam["steps"]) >= 800
    assert r.ov_empty_hi == ov["empty"]["aps"]["textbook"][0, late].max()


def test_inversions_pair_up(fam, res):
    stretched = dict(res)
    # a made-up inversion table: one LAC pair, and that pair and another under APS
    stretched["inversions"] = {
        "lac": {"count": 1, "pairs": 6, "which": [(3, 2)]},
        "aps": {"count": 2, "pairs": 6, "which": [(3, 2), (2, 0)]},
        "average": {"count": 0, "pairs": 6, "which": []}}
    r = ssr.inversions(fam, stretched)
    test = ~fam["calibration"]
    assert r.inv_n_test == int(test.sum()) == 360
    assert r.inv_aps_only == 1 and (r.inv_aps_hi, r.inv_aps_lo) == (1200, 400)
    right = fam["logits"].argmax(2)[:, test] == fam["y"][test]
    assert r.inv_aps_gap == pytest.approx(right[2].sum() - right[0].sum(), abs=1e-9)
    assert r.inv_lac_gap == r.inv_lac_small                 # one LAC pair: both ends
    acc = res["at"][1.0]["accuracy"].mean()
    assert r.inv_se_q == np.sqrt(acc * (1 - acc) * 360)


def test_stability_and_calibration_resampling(fam):
    with pytest.raises(ValueError):
        ssr.stability_table(fam, questions=(600, 200))
    s = ssr.stability_table(fam, questions=(720, 200), splits=4, seed=2)
    assert s.ex_lac_720 == ssr.stability(fam, 720, "lac", False, splits=4, seed=2)
    assert set(s.table) == {(n, name) for n in (720, 200)
                            for name, _, _ in ssr.STABILITY_SCORES}
    assert all(-1 <= v <= 1 for v in s.table.values())
    r = ssr.calibration_resampling(fam, draws=4, seed=3)
    assert len(r.sizes["lac"]) == 4 and len(r.sizes["aps"][0]) == 4
    assert all(-1 <= v <= 1 for v in (r.cal_within, r.cal_lac, r.cal_aps))
