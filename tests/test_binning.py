"""Episode 2 machinery: batched ECE (checked against calibration.ece), the plug-in and debiased
L2 calibration error (checked by exact enumeration), the ECE floor and its scaling, consistency
resampling, and the temperature verdicts."""

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import special

from standarderror.uncertainty import binning as bn
from standarderror.uncertainty import calibration as cb

# --------------------------------------------------------------------------------------
# Batched ECE is calibration.ece, row by row
# --------------------------------------------------------------------------------------


@given(seed=st.integers(0, 10_000), n=st.integers(1, 300), bins=st.integers(1, 40),
       adaptive=st.booleans(), shared=st.booleans())
@settings(max_examples=80, deadline=None)
def test_ece_batch_equals_calibration_ece(seed, n, bins, adaptive, shared):
    rng = np.random.default_rng(seed)
    # Include exact bin edges and ties, where the bin rule matters.
    conf = rng.choice(np.r_[rng.random(50), np.arange(0, 11) / 10, 1 / 3], size=(1 if shared else 4, n))
    ok = rng.random((4, n)) < 0.6
    got = bn.ece_batch(conf[0] if shared else conf, ok, bins, adaptive)
    want = [cb.ece(conf[0 if shared else d], ok[d], bins=bins, adaptive=adaptive) for d in range(4)]
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-15)


def test_bin_index_rules():
    c = np.array([0.0, 0.1, 0.2, 1 / 3, 0.5, 0.99, 1.0])
    assert bn.bin_index(c, 5).tolist() == [0, 0, 0, 1, 2, 4, 4]  # (b/B, (b+1)/B], 0 in bin 0
    # Equal mass: 7 rows in 3 bins -> sizes 3, 2, 2 in confidence order.
    assert bn.bin_index(c[::-1], 3, adaptive=True).tolist() == [2, 2, 1, 1, 0, 0, 0]


def test_calibrated_labels_rate_and_shape():
    c = np.array([0.0, 0.25, 0.9, 1.0])
    ok = bn.calibrated_labels(c, draws=20_000, seed=0)
    assert ok.shape == (20_000, 4) and ok.dtype == bool
    assert ok[:, 0].sum() == 0 and ok[:, 3].all()
    np.testing.assert_allclose(ok.mean(axis=0)[1:3], [0.25, 0.9], atol=0.01)
    assert np.array_equal(ok, bn.calibrated_labels(c, draws=20_000, seed=0))
    assert bn.calibrated_labels(np.full((3, 5), 0.5), draws=99, seed=1).shape == (3, 5)


# --------------------------------------------------------------------------------------
# L2: plug-in vs debiased, by exact enumeration
# --------------------------------------------------------------------------------------


def _exact_mean(conf, truth, bins, debiased):
    """Expectation over every one of the 2^n label vectors, labels ~ Bernoulli(truth)."""
    n = conf.size
    outcomes = np.array(list(itertools.product([False, True], repeat=n)))
    prob = np.prod(np.where(outcomes, truth, 1 - truth), axis=1)
    return float(prob @ bn.l2_batch(conf, outcomes, bins, debiased=debiased))


def test_debiased_l2_is_exactly_unbiased_with_constant_confidence_per_bin():
    # Confidence constant within each of 4 bins; true accuracy differs from it in two bins.
    conf = np.array([0.1, 0.1, 0.1, 0.4, 0.4, 0.4, 0.6, 0.6, 0.6, 0.9, 0.9, 0.9])
    truth = np.array([0.1] * 3 + [0.3] * 3 + [0.6] * 3 + [0.7] * 3)
    true_l2 = (3 * (0.3 - 0.4) ** 2 + 3 * (0.7 - 0.9) ** 2) / 12
    assert _exact_mean(conf, truth, 4, debiased=True) == pytest.approx(true_l2, abs=1e-12)
    # The plug-in is biased upward by sum_b (n_b/n) mu_b (1 - mu_b) / n_b.
    bias = sum(mu * (1 - mu) / 12 for mu in (0.1, 0.3, 0.6, 0.7))
    assert _exact_mean(conf, truth, 4, debiased=False) == pytest.approx(true_l2 + bias, abs=1e-12)


def test_debiased_l2_over_corrects_by_the_within_bin_spread():
    # Calibrated labels, confidences varying inside one bin: E[debiased] = -var_b(c)/(n_b - 1) * n_b/n.
    conf = np.array([0.55, 0.6, 0.7, 0.95, 0.6, 0.65, 0.8, 0.9, 0.75, 0.85])
    n = conf.size
    expected = -n / n * conf.var() / (n - 1)  # one bin holds every row (bins=1)
    assert _exact_mean(conf, conf, 1, debiased=True) == pytest.approx(expected, abs=1e-12)


def test_l2_plugin_matches_a_direct_computation():
    rng = np.random.default_rng(4)
    c = rng.random(500)
    ok = rng.random(500) < c ** 2
    which = np.clip(np.ceil(c * 10).astype(int) - 1, 0, 9)
    want = sum((which == b).mean() * (ok[which == b].mean() - c[which == b].mean()) ** 2
               for b in range(10) if (which == b).any())
    assert bn.l2_batch(c, ok, 10, debiased=False)[0] == pytest.approx(want, rel=1e-12)


def test_debiased_l2_near_zero_on_calibrated_data_where_plugin_is_not():
    rng = np.random.default_rng(0)
    c = rng.beta(5, 2, 2000)
    ok = bn.calibrated_labels(c, draws=400, seed=1)
    plug = bn.l2_batch(c, ok, 15, debiased=False)
    db = bn.l2_batch(c, ok, 15, debiased=True)
    se = db.std(ddof=1) / math.sqrt(400)
    assert abs(db.mean()) < 4 * se + 2e-6
    assert plug.mean() > 10 * abs(db.mean()) and plug.mean() > 4e-5


# --------------------------------------------------------------------------------------
# The floor and its scaling
# --------------------------------------------------------------------------------------


@pytest.mark.slow  # a simulation: 150 draws at each of six sizes and bin counts
def test_floor_scales_with_sqrt_bins_over_n_and_matches_the_prediction():
    rng = np.random.default_rng(2)
    c = rng.beta(4, 2, 20_000)
    floor = bn.ece_floor(c, sizes=(500, 2000, 8000), bins=(5, 20), draws=150, adaptive=True, seed=0)
    x = np.array([r["x"] for r in floor["rows"]])
    y = np.array([r["mean"] for r in floor["rows"]])
    fit = bn.fit_scaling(x, y)
    assert fit["r2"] > 0.98
    predicted = [bn.predicted_constant(c, b, adaptive=True) for b in (5, 20)]
    assert min(predicted) * 0.9 < fit["constant"] < max(predicted) * 1.1


def test_predicted_constant_single_bin_by_hand():
    # One bin, every confidence 0.5: E|mean gap| ~ sqrt(2/pi) * 0.5 / sqrt(n) -> a = 0.5 sqrt(2/pi).
    assert bn.predicted_constant(np.full(100, 0.5), 1) == pytest.approx(0.5 * math.sqrt(2 / math.pi))


def test_fit_scaling_exact_and_errors():
    x = np.array([0.1, 0.2, 0.4])
    f = bn.fit_scaling(x, 0.3 * x)
    assert f["constant"] == pytest.approx(0.3) and f["r2"] == pytest.approx(1.0)
    assert f["max_relative"] == pytest.approx(0.0, abs=1e-12)
    with pytest.raises(ValueError, match="x"):
        bn.fit_scaling([0.0, 0.0], [1.0, 2.0])
    with pytest.raises(ValueError, match="mismatched"):
        bn.fit_scaling([0.1, 0.2], [1.0])


def test_subsample_distinct_and_errors():
    idx = bn.subsample(50, 20, draws=30, seed=0)
    assert idx.shape == (30, 20)
    assert all(len(set(row)) == 20 for row in idx.tolist()) and idx.max() < 50
    assert np.array_equal(np.sort(bn.subsample(5, 5, draws=2)[0]), np.arange(5))
    with pytest.raises(ValueError, match="size"):
        bn.subsample(5, 6)
    with pytest.raises(ValueError, match="draws"):
        bn.subsample(5, 2, draws=0)


# --------------------------------------------------------------------------------------
# Consistency resampling
# --------------------------------------------------------------------------------------


def test_consistency_test_calibrated_vs_miscalibrated():
    rng = np.random.default_rng(3)
    c = rng.uniform(0.5, 1.0, 3000)
    calibrated = rng.random(3000) < c
    r = bn.consistency_test(c, calibrated, draws=400, seed=1)
    assert r["observed"] == cb.ece(c, calibrated)
    assert r["p_value"] > 0.01
    over = rng.random(3000) < c - 0.1  # overconfident by ten points
    r = bn.consistency_test(c, over, draws=400, seed=1)
    assert r["p_value"] == pytest.approx(1 / 401)
    assert r["excess"] > 0.05


@pytest.mark.slow  # a simulation: 60 consistency tests of 199 draws each
def test_consistency_p_values_roughly_uniform_under_the_null():
    rng = np.random.default_rng(9)
    c = rng.uniform(0.3, 1.0, 400)
    ps = np.array([bn.consistency_test(c, rng.random(400) < c, draws=199, seed=s)["p_value"]
                   for s in range(60)])
    assert 0.05 < (ps <= 0.25).mean() < 0.5
    assert (ps <= 0.05).mean() < 0.2


# --------------------------------------------------------------------------------------
# Verdicts between two temperatures
# --------------------------------------------------------------------------------------


def _toy_model(seed=0, windows=40, per=16, classes=5):
    rng = np.random.default_rng(seed)
    logits = rng.normal(scale=2.0, size=(windows * per, classes))
    p_true = special.softmax(logits / 1.3, axis=1)  # the truth is a hotter model
    y = (rng.random(windows * per)[:, None] > np.cumsum(p_true, axis=1)).sum(axis=1)
    logp = special.log_softmax(logits, axis=1)
    return logp, y, np.repeat(np.arange(windows), per)


def test_verdicts_full_data_uses_the_module_metrics():
    logp, y, seq = _toy_model()
    v = bn.verdicts(logp, y, seq, temperatures=(1.0, 1.3), sizes=(5, 40), draws=50, seed=0)
    for t, i in ((1.0, 0), (1.3, 1)):
        lp = cb.scale(logp, t)
        p = np.exp(lp)
        assert v["full"]["NLL"][i] == pytest.approx(cb.nll(p, y), rel=1e-12)
        assert v["full"]["Brier"][i] == pytest.approx(cb.brier(p, y), rel=1e-12)
        assert v["full"]["ECE"][i] == pytest.approx(cb.ece(p.max(axis=1), lp.argmax(axis=1) == y), rel=1e-12)
    # The largest subset is every window: each metric agrees with itself on every draw.
    for k in bn.METRICS:
        assert v["agreement"][k][1] == 1.0
        assert 0 <= v["agreement"][k][0] <= 1
    # The truth is hotter, so NLL on all the data prefers T = 1.3.
    assert v["full"]["NLL"][2] == 1


def test_subset_metrics_match_full_data_metrics():
    # The batched per-row NLL and Brier terms average to calibration.nll / calibration.brier.
    logp, y, _ = _toy_model(1)
    t = bn._row_terms(logp, y)
    p = np.exp(logp)
    assert t["nll"].mean() == pytest.approx(cb.nll(p, y), rel=1e-12)
    assert t["brier"].mean() == pytest.approx(cb.brier(p, y), rel=1e-12)


def test_verdicts_errors():
    logp, y, seq = _toy_model()
    with pytest.raises(ValueError, match="temperatures"):
        bn.verdicts(logp, y, seq, temperatures=(1.0, 1.0))
    with pytest.raises(ValueError, match="temperatures"):
        bn.verdicts(logp, y, seq, temperatures=(1.0, -1.0))
    with pytest.raises(ValueError, match="sizes"):
        bn.verdicts(logp, y, seq, sizes=(41,))
    with pytest.raises(ValueError, match="sequence"):
        bn.verdicts(logp, y, seq[:-1])
    with pytest.raises(ValueError, match="equal-sized"):
        bn.verdicts(logp, y, np.r_[seq[:-1], 99])
    with pytest.raises(ValueError, match="logp"):
        bn.verdicts(np.exp(logp), y, seq)


# --------------------------------------------------------------------------------------
# Bad inputs
# --------------------------------------------------------------------------------------


def test_bad_inputs_name_the_argument():
    c = np.array([0.2, 0.8])
    with pytest.raises(ValueError, match="confidence"):
        bn.ece_batch([0.2, 1.2], [True, False])
    with pytest.raises(ValueError, match="confidence"):
        bn.ece_batch([0.2, np.nan], [True, False])
    with pytest.raises(ValueError, match="correct"):
        bn.ece_batch(c, [0, 2])
    with pytest.raises(ValueError, match="rows per draw"):
        bn.ece_batch(c, [True, False, True])
    with pytest.raises(ValueError, match="draws"):
        bn.ece_batch(np.full((2, 2), 0.5), np.ones((3, 2), bool))
    with pytest.raises(ValueError, match="bins"):
        bn.ece_batch(c, [True, False], bins=0)
    with pytest.raises(ValueError, match="bins"):
        bn.l2_batch(c, [True, False], bins=1.5)
    with pytest.raises(ValueError, match="draws"):
        bn.calibrated_labels(c, draws=0)
    with pytest.raises(ValueError, match="confidence"):
        bn.consistency_test(np.full((2, 2), 0.5), np.ones((2, 2), bool))
    with pytest.raises(ValueError, match="sizes"):
        bn.ece_floor(c, sizes=(0,))
    with pytest.raises(ValueError, match="confidence"):
        bn.predicted_constant(np.full((2, 2), 0.5))


def test_p_values_count_ties_as_extreme_and_vectorise():
    null = np.array([0.1, 0.2, 0.2, 0.3])
    assert bn.p_values(0.2, null) == pytest.approx((1 + 3) / 5)
    assert bn.p_values(0.35, null) == pytest.approx(1 / 5)
    np.testing.assert_allclose(bn.p_values([0.0, 0.25], null), [1.0, 2 / 5])
    with pytest.raises(ValueError, match="null"):
        bn.p_values(0.1, np.ones((2, 2)))
    with pytest.raises(ValueError, match="observed"):
        bn.p_values(np.ones((2, 2)), null)


def test_floor_reports_l2_with_debiased_near_zero():
    rng = np.random.default_rng(6)
    c = rng.beta(4, 2, 5000)
    f = bn.ece_floor(c, sizes=(500,), bins=(10,), draws=300, seed=1)
    r = f["rows"][0]
    assert r["l2_plugin"] > 0.002
    assert abs(r["l2_debiased"]) < 4 * r["l2_debiased_se"] + 1e-5


def test_subset_p_values_detect_only_what_is_there():
    rng = np.random.default_rng(8)
    seq = np.repeat(np.arange(60), 20)
    c = rng.uniform(0.4, 1.0, seq.size)
    calibrated = rng.random(seq.size) < c
    r = bn.subset_p_values(c, calibrated, seq, windows=20, subsets=30, draws=199, seed=0)
    assert r["rows"] == 400 and r["p_values"].shape == (30,)
    assert (r["p_values"] < 0.05).mean() < 0.25
    over = rng.random(seq.size) < c - 0.2
    r = bn.subset_p_values(c, over, seq, windows=20, subsets=10, draws=199, seed=0)
    assert np.all(r["p_values"] == 1 / 200)
    # Each subset's observed ECE is calibration.ece on that subset's rows.
    assert np.all((r["observed"] > 0.1) & (r["observed"] < 0.35))


def test_subset_p_values_errors():
    seq = np.repeat(np.arange(5), 4)
    c = np.full(20, 0.7)
    ok = np.ones(20, bool)
    with pytest.raises(ValueError, match="windows"):
        bn.subset_p_values(c, ok, seq, windows=6)
    with pytest.raises(ValueError, match="sequence"):
        bn.subset_p_values(c, ok, seq[:-1], windows=2)
    with pytest.raises(ValueError, match="correct"):
        bn.subset_p_values(c, ok[:-1], seq, windows=2)
    with pytest.raises(ValueError, match="subsets"):
        bn.subset_p_values(c, ok, seq, windows=2, subsets=0)


@pytest.mark.parametrize("adaptive", [False, True])
def test_l2_and_ece_match_the_authors_implementation(adaptive):
    # Kumar, Liang and Ma's own package (uncertainty-calibration) computes the plug-in and the
    # debiased squared error from binned (probability, label) pairs; feed it our bins.
    cal = pytest.importorskip("calibration", reason="uncertainty-calibration is not installed")
    rng = np.random.default_rng(12)
    c = rng.beta(3, 2, 700)
    ok = rng.random(700) < c ** 1.3
    for bins in (1, 7, 15, 60):
        which = bn.bin_index(c, bins, adaptive)
        binned = [list(zip(c[which == b], ok[which == b].astype(float))) for b in range(bins)]
        assert bn.l2_batch(c, ok, bins, adaptive, debiased=True)[0] == pytest.approx(
            cal.utils.unbiased_square_ce(binned), rel=1e-10, abs=1e-15)
        assert bn.l2_batch(c, ok, bins, adaptive, debiased=False)[0] == pytest.approx(
            cal.utils.plugin_ce(binned, power=2) ** 2, rel=1e-10)
        assert bn.ece_batch(c, ok, bins, adaptive)[0] == pytest.approx(
            cal.utils.plugin_ce(binned, power=1), rel=1e-10)
