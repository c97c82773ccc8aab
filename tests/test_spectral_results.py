"""The named results of ``standarderror.spectral`` (frozen dataclasses whose number fields a
lecture pins): each equals the functions it is built from, and is immutable."""

import dataclasses

import numpy as np
import pytest

from standarderror import spectral as sp


def unit(x):
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(3)
    centres = unit(rng.normal(size=(4, 12)))
    pick = rng.integers(0, 4, size=(80, 6))
    answers = unit(centres[pick] + 0.4 * rng.normal(size=(80, 6, 12)))
    targets = unit(centres[pick[:, 0]] + 0.4 * rng.normal(size=(80, 12)))
    return answers, targets


TS = np.exp(np.linspace(np.log(0.25), np.log(8), 41))


def test_temperature_effect_matches_its_parts(data):
    a, y = data
    r = sp.temperature_effect(a[:40], y[:40], a[40:], y[40:], seed=1, bootstrap=200)
    fit = sp.fit_spectral_temperature(a[:40], y[:40])
    assert r.t_fit == fit["temperature"] and r.risk_dev_fit == fit["risk"]
    change = sp.log_score(a[40:], y[40:], r.t_fit) - sp.log_score(a[40:], y[40:], 1.0)
    assert r.d_risk_test == change.mean()
    assert r.d_risk_lo <= r.d_risk_test <= r.d_risk_hi
    assert r.entropy_test_fit == sp.entropy(a[40:], r.t_fit).mean()
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.t_fit = 1.0


def test_constant_predictor_is_calibrated_on_its_targets(data):
    _, y = data
    r = sp.constant_predictor(y[:30], TS)
    assert r.const_argmin_t == pytest.approx(1.0)
    at_one = np.argmin(np.abs(TS - 1))
    assert abs(r.curve["gap"][at_one]) < 1e-9  # entropy equals risk under calibration


def test_reliability_comparison_matches_its_parts(data):
    a, y = data
    r = sp.reliability_comparison(a, y, 0.8, bins=4, clusters=2)
    assert r.ece_alg_fit == sp.reliability(a, y, 0.8, bins=4, clusters=2)["ece"]
    assert r.ece_naive_1 == sp.naive_reliability(a, y, 1.0, bins=4)["ece"]
    assert r.n_halves == 6 and r.gap_alg_lo <= r.gap_alg_hi
    assert 0 <= r.bins_over_1 <= 4 and 0 <= r.singleton_share <= 1


def test_cominimisation_matches_its_parts(data):
    a, y = data
    grid = np.array([0.5, 0.8, 1.0, 2.0])
    r = sp.cominimisation(a, y, grid, 0.8, clusters=5)
    ces = sp.calibration_curve(a, y, grid, labels=sp.cluster(a, 5))
    assert r.cal_1 == ces[2]["calibration"] and r.noise_1 == ces[2]["noise"]
    assert r.argmin_risk == grid[np.argmin([c["risk"] for c in ces])]
    assert r.dcal_minus_drisk == pytest.approx(
        (ces[1]["calibration"] - ces[2]["calibration"]) - (ces[1]["risk"] - ces[2]["risk"]))


def test_max_eigenvalue_bias_reads_five_and_twenty():
    rng = np.random.default_rng(0)
    a = unit(rng.normal(size=(10, 25, 8)))
    r = sp.max_eigenvalue_bias(a, [2, 5, 20], draws=3)
    assert r.bias_m5 == r.subsample["bias"][1] and r.bias_m20 == r.subsample["bias"][2]
    assert r.bias_m5 > 0  # lambda_max is convex: a subset's estimate is biased upwards
    with pytest.raises(ValueError):
        sp.max_eigenvalue_bias(a, [2, 5], draws=3)


def test_authors_grid_holds_their_fitted_temperature():
    assert 2.51 in sp.AUTHORS_GRID


@pytest.fixture(scope="module")
def splits():
    """A development split (100 answers per question) and a test split (20), in fewer
    dimensions than answers' span so that targets leave it."""
    rng = np.random.default_rng(7)
    centres = unit(rng.normal(size=(5, 40)))

    def make(n, m):
        pick = rng.integers(0, 5, size=(n, m))
        a = unit(centres[pick] + 0.5 * rng.normal(size=(n, m, 40)))
        y = unit(centres[pick[:, 0]] + 0.5 * rng.normal(size=(n, 40)))
        return a, y

    return make(40, 100), make(60, 20)


def test_temperature_intervals_match_temperature_interval(splits):
    (ad, yd), (a, y) = splits
    r = sp.temperature_intervals(ad, yd, a, y, seed=2)
    one = sp.temperature_interval(ad[:, :10], yd, seed=2)
    assert (r.t_dev_m10, r.t_dev_m10_lo, r.t_dev_m10_hi) == (one["temperature"], one["low"],
                                                             one["high"])
    assert r.intervals["test", 20]["temperature"] == r.t_test_m20
    with pytest.raises(ValueError):
        sp.temperature_intervals(ad, yd, a[:, :10], y)
    with pytest.raises(ValueError):  # the fields are named for (100, 20, 10, 5)
        sp.temperature_intervals(ad, yd, a, y, m=(100, 20, 10))


def test_auroc_comparison_matches_auroc(splits):
    _, (a, y) = splits
    correct = np.arange(len(a)) % 3 == 0
    texts = [["x"] * 20 if i < 4 else [str(j) for j in range(20)] for i in range(len(a))]
    r = sp.auroc_comparison(a, correct, 0.8, texts, seed=1)
    assert r.one_word_questions == 4
    assert r.auc_lmax == sp.auroc(sp.eigenvalues(a)[:, 0], correct, bootstrap=20, seed=1)["auroc"]
    d = sp.auroc_difference(r.scores["−entropy"], r.scores["−kernel language entropy"], correct,
                            seed=1)
    assert (r.dauc_ent_kle, r.dauc_ent_kle_lo, r.dauc_ent_kle_hi) == (d["difference"], d["low"],
                                                                      d["high"])
    fewer = sp.auroc_comparison(a, correct, 0.8, texts, seed=1, draws=5, paired_draws=50)
    assert fewer.auc_lmax == r.auc_lmax  # the draws move the spreads, not the AUROC
    d = sp.auroc_difference(r.scores["λmax"], r.scores["−kernel language entropy"], correct,
                            bootstrap=50, seed=1)
    assert (fewer.dauc_lmax_kle_lo, fewer.dauc_lmax_kle_hi) == (d["low"], d["high"])
    assert fewer.aurocs["λmax"]["se"] == sp.auroc(r.scores["λmax"], correct, bootstrap=5,
                                                  seed=1)["se"]


def test_floor_term_accounts_for_the_exact_gap(splits):
    (ad, yd), (a, y) = splits
    fit = sp.fit_spectral_temperature(ad[:, :20], yd)
    assert not fit["at_bound"]
    r = sp.floor_term(ad[:, :20], yd, fit, a, y, ad)
    assert r.q_mean > 0.1  # targets leave the span of 20 answers in 40 dimensions
    assert abs(r.gap_exact - r.eps_term) < 1e-3  # risk - entropy = the floor's term at the fit
    assert r.eps_nats == -np.log(sp.EPS)


def test_arithmetic_comparison_and_the_exponential_family_identity(splits):
    (ad, yd), (a, y) = splits
    r = sp.arithmetic_comparison({"dev": (ad[:, :20], yd), "test": (a, y)}, TS[::8])
    assert (r.grid_n, r.grid_lo, r.grid_hi) == (11, 0.5, 5.01)
    assert r.t_dev_grid_auth == r.fits["dev", "authors"]["temperature"]
    fa = r.fits["dev", "authors", "c"]
    if not fa["at_bound"]:  # risk meets entropy at an interior fit the authors' way
        assert abs(fa["risk"] - fa["entropy"]) < 1e-4


def test_shuffle_control_refits_on_shuffled_targets(splits):
    (ad, yd), (a, y) = splits
    r = sp.shuffle_control(ad[:, :20], yd, a, y, seed=0, permutations=3)
    rng = np.random.default_rng(0)
    shuffled = yd[rng.permutation(len(yd))]
    assert r.t_fit_shuffled == sp.fit_spectral_temperature(ad[:, :20], shuffled)["temperature"]
    assert r.n_perm == 3 and r.t_perm_lo <= r.t_perm_hi


def test_null_space_and_after_scaling_run_the_authors_way(splits):
    (ad, yd), (a, y) = splits
    ns = sp.null_space_comparison(ad[:, :20], yd)
    assert 0 <= ns.null_auth_2 <= 1 and ns.t_f32clip in sp.AUTHORS_GRID
    correct = np.arange(len(a)) % 3 == 0
    r = sp.authors_after_scaling(a, correct, 2.51, seed=0)
    assert r.right_300 == correct.sum() and r.auc_ent_auth_fit == r.auc_ent_auth_251


def test_sampling_temperature_search_picks_the_lowest_ece():
    rng = np.random.default_rng(4)
    grid = np.array([0.5, 1.0, 2.0])
    answers = [[list(rng.choice(list("abcd")[:k + 2], size=10)) for _ in range(40)]
               for k in range(3)]
    correct = rng.random(40) < 0.4
    r = sp.sampling_temperature_search(answers, correct, grid, seed=0, resamples=20)
    assert r.t_star == grid[np.argmin(r.ece)] and r.lamb_ece_min == r.ece.min()
    assert (r.lamb_lo, r.lamb_hi, r.lamb_n_ok, r.lamb_n) == (0.5, 2.0, correct.sum(), 3)
    assert r.t_star_lo <= r.t_star_hi


def test_sampling_baseline_gaps_match_reliability():
    rng = np.random.default_rng(5)
    a = unit(rng.normal(size=(100, 6, 10)))
    y = unit(rng.normal(size=(100, 10)))
    b = unit(a + 0.3 * rng.normal(size=a.shape))
    r = sp.sampling_baseline_gaps(a, y, b, y, 0.8, halves_seed=1)
    assert r.ece_sub_ts == sp.reliability(a, y, 0.8)["ece"]
    assert r.lamb_up_lo <= r.lamb_up_hi and r.ts_down_lo <= r.ts_down_hi


def test_floor_refit_is_the_exact_fit_with_another_floor(splits):
    (ad, yd), _ = splits
    ad = ad[:, :20]  # 20 answers in 40 dimensions: targets leave the span
    r = sp.floor_refit(ad, yd, eps=1e-3)
    f = sp.fit_spectral_temperature(ad, yd, eps=1e-3)
    assert r.t_fit_eps3 == f["temperature"] and r.gap_eps3 == f["risk"] - f["entropy"]
    # exactly, the floor adds q (-log eps) at every T: a larger floor leaves the fit alone
    # and shrinks the gap between risk and entropy
    base = sp.fit_spectral_temperature(ad, yd)
    assert r.t_fit_eps3 == pytest.approx(base["temperature"], rel=1e-3)
    assert r.gap_eps3 < base["risk"] - base["entropy"]


def test_cluster_counts_read_both_diagrams():
    rng = np.random.default_rng(12)  # eight bins of 25: room for 20 clusters in each
    centres = unit(rng.normal(size=(4, 12)))
    pick = rng.integers(0, 4, size=(200, 6))
    a = unit(centres[pick] + 0.4 * rng.normal(size=(200, 6, 12)))
    y = unit(centres[pick[:, 0]] + 0.4 * rng.normal(size=(200, 12)))
    r = sp.cluster_counts(a, y, 1.0)
    assert tuple(r.ece) == sp.comparisons.CLUSTER_COUNTS == (2, 20)
    for c, ece, under, mean in ((2, r.ece_c2, r.under_c2, r.mean_gap_c2),
                                (20, r.ece_c20, r.under_c20, r.mean_gap_c20)):
        d = sp.reliability(a, y, 1.0, clusters=c)
        gap = d["target"] - d["predicted"]
        assert ece == d["ece"] and under == np.sum(gap > 0) and mean == gap.mean()
    assert r.top_gap_c20 == r.gaps[20][-1]
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.ece_c2 = 0.0


def test_cluster_counts_smaller_clusters_raise_the_targets():
    # a cluster of k targets has lambda_max >= 1/k: ten times more clusters per bin cannot
    # lower the mean target on answers with no structure
    rng = np.random.default_rng(11)
    a = unit(rng.normal(size=(160, 5, 16)))
    y = unit(rng.normal(size=(160, 16)))
    r = sp.cluster_counts(a, y, 1.0)
    assert r.mean_gap_c20 > r.mean_gap_c2


def test_entropy_risk_identity_holds_the_authors_way(data):
    a, y = data
    r = sp.entropy_risk_identity(a, y, 2.0, step=1e-4, tolerance=1e-6)
    lhs = sp.risk(a, y, 2.0, arithmetic="authors") - sp.entropy(a, 2.0,
                                                                 arithmetic="authors").mean()
    assert r.identity_lhs == lhs
    assert abs(r.identity_lhs - r.identity_rhs) < 1e-6
    with pytest.raises(ValueError):  # the check can fail: no two numbers differ by under 0
        sp.entropy_risk_identity(a, y, 2.0, tolerance=0.0)


def test_entropy_risk_identity_fails_exactly(data):
    # in exact arithmetic the floor charges the null space at every T: the sides differ
    a, y = data
    lhs = sp.risk(a, y, 2.0) - sp.entropy(a, 2.0).mean()
    h = 1e-4
    rhs = 0.5 * (sp.risk(a, y, 1 / (0.5 + h)) - sp.risk(a, y, 1 / (0.5 - h))) / (2 * h)
    assert abs(lhs - rhs) > 1


def test_float64_null_share_is_small_and_checked(splits):
    (ad, yd), _ = splits
    ns = sp.null_space_comparison(ad[:, :20], yd, float64_below=0.001)
    assert ns.shares["float64-abs", 2.0] < 0.001  # float64 round-off, to the power 1/2
    assert ns.shares["float64-abs", 2.0] < ns.shares["float32-clip", 2.0]
    with pytest.raises(ValueError):
        sp.null_space_comparison(ad[:, :20], yd, float64_below=0.0)


def test_authors_risk_meets_entropy_at_their_continuous_fit(splits):
    (ad, yd), (a, y) = splits
    # 100 answers span all 40 dimensions: every scaled eigenvalue stays above the floor, and
    # the fit is interior, where the exponential-family identity makes risk equal entropy
    ts = TS[::8]
    r = sp.arithmetic_comparison({"dev": (ad, yd), "test": (a, y)}, ts, meet_below=1e-4)
    fa = r.fits["dev", "authors", "c"]
    assert not fa["at_bound"] and abs(fa["risk"] - fa["entropy"]) < 1e-4
    with pytest.raises(ValueError):  # 20 answers: the floor binds and the fit runs to a bound
        sp.arithmetic_comparison({"dev": (ad[:, :20], yd), "test": (a, y)}, ts,
                                 meet_below=1e-4)
