"""Episode 1 machinery: the finite-sample level, the Beta / beta-binomial spread of coverage,
random splits by rows and by sequences, and the escalation policy."""

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from standarderror.uncertainty import coverage as cv
from standarderror.uncertainty import exchangeability as ex

# --------------------------------------------------------------------------------------
# The level and the spread
# --------------------------------------------------------------------------------------


def test_finite_sample_level_known_values():
    # n = 9, alpha = 0.1: k = ceil(10 * 0.9) = 9, level 9/10 exactly.
    assert ex.finite_sample_level(9, 0.1) == pytest.approx(0.9, abs=1e-15)
    # n = 10, alpha = 0.1: k = ceil(11 * 0.9) = ceil(9.9) = 10, level 10/11.
    assert ex.finite_sample_level(10, 0.1) == pytest.approx(10 / 11, abs=1e-15)
    # n = 12288 (the lecture's half): k = ceil(12289 * 0.9) = 11061.
    assert ex.finite_sample_level(12288, 0.1) == pytest.approx(11061 / 12289, abs=1e-15)


@given(n=st.integers(20, 5000), alpha=st.floats(0.05, 0.5))
@settings(max_examples=60, deadline=None)
def test_level_brackets(n, alpha):
    level = ex.finite_sample_level(n, alpha)
    assert 1 - alpha - 1e-9 <= level < 1 - alpha + 1 / (n + 1) + 1e-12


def test_level_rejects_too_small_and_bad_arguments():
    with pytest.raises(ValueError, match="n=5"):
        ex.finite_sample_level(5, 0.1)
    with pytest.raises(ValueError, match="n must be a positive integer"):
        ex.finite_sample_level(0, 0.1)
    with pytest.raises(ValueError, match="alpha"):
        ex.finite_sample_level(100, 1.5)


def test_coverage_distribution_against_scipy():
    n, m, alpha = 500, 300, 0.1
    d = ex.coverage_distribution(n, m, alpha)
    k = math.ceil((n + 1) * (1 - alpha))
    assert d["k"] == k
    assert d["sd_calibration"] == pytest.approx(stats.beta(k, n + 1 - k).std(), rel=1e-10)
    assert d["level"] == pytest.approx(stats.beta(k, n + 1 - k).mean(), rel=1e-12)
    law = stats.betabinom(m, k, n + 1 - k)
    assert d["sd"] == pytest.approx(law.std() / m, rel=1e-10)
    # The decomposition: total variance = Beta part + binomial part.
    assert d["sd"] ** 2 == pytest.approx(d["sd_calibration"] ** 2 + d["sd_test"] ** 2, rel=1e-12)
    assert d["low"] == law.ppf(0.025) / m and d["high"] == law.ppf(0.975) / m
    assert d["below"] == pytest.approx(law.cdf(math.ceil(m * 0.9) - 1), rel=1e-12)


def test_betabinomial_is_the_exact_law_of_random_splits_of_one_pool():
    # Enumerate every split of a pool of 10 distinct scores into n = 6 calibration and m = 4 test:
    # the count of covered test points follows BetaBinomial(m, k, n + 1 - k) exactly.
    n, m, alpha = 6, 4, 0.3
    scores = np.arange(n + m, dtype=float)
    counts = np.zeros(m + 1)
    for cal in itertools.combinations(range(n + m), n):
        mask = np.zeros(n + m, bool)
        mask[list(cal)] = True
        r = ex.split_coverage(scores, mask[None, :], alpha)
        counts[int(round(r["coverage"][0] * m))] += 1
    k = math.ceil((n + 1) * (1 - alpha) - 1e-9)
    np.testing.assert_allclose(counts / counts.sum(), stats.betabinom(m, k, n + 1 - k).pmf(np.arange(m + 1)),
                               rtol=1e-12)
    mean = (counts / counts.sum()) @ (np.arange(m + 1) / m)
    assert mean == pytest.approx(ex.finite_sample_level(n, alpha), rel=1e-12)


# --------------------------------------------------------------------------------------
# Splits
# --------------------------------------------------------------------------------------


def test_masks_sizes_and_whole_sequences():
    seq = np.repeat(np.arange(20), 8)
    for by in ("row", "sequence"):
        m = ex.calibration_masks(seq, share=0.5, splits=30, by=by, seed=3)
        assert m.shape == (30, 160) and m.dtype == bool
        assert np.all(m.sum(axis=1) == 80)
    m = ex.calibration_masks(seq, splits=30, by="sequence", seed=3)
    per_seq = m.reshape(30, 20, 8)
    assert np.all(per_seq.all(axis=2) | ~per_seq.any(axis=2))  # each window wholly in or out
    r = ex.calibration_masks(seq, splits=30, by="row", seed=3).reshape(30, 20, 8)
    assert not np.all(r.all(axis=2) | ~r.any(axis=2))  # rows split windows apart


def test_masks_are_seeded_and_errors():
    seq = np.repeat(np.arange(10), 4)
    a = ex.calibration_masks(seq, splits=5, seed=1)
    assert np.array_equal(a, ex.calibration_masks(seq, splits=5, seed=1))
    assert not np.array_equal(a, ex.calibration_masks(seq, splits=5, seed=2))
    with pytest.raises(ValueError, match="by must be one of"):
        ex.calibration_masks(seq, by="window")
    with pytest.raises(ValueError, match="equal-sized"):
        ex.calibration_masks(np.r_[seq, 99])
    with pytest.raises(ValueError, match="share"):
        ex.calibration_masks(seq, share=1.0)
    with pytest.raises(ValueError, match="share=0.05 of 10 groups leaves no calibration"):
        ex.calibration_masks(seq, share=0.05)
    with pytest.raises(ValueError, match="splits"):
        ex.calibration_masks(seq, splits=0)
    with pytest.raises(ValueError, match="single group"):
        ex.calibration_masks(np.zeros(8))


def test_split_coverage_matches_conformal_sets():
    # The vectorised coverage of each split equals the coverage of the sets coverage.py builds.
    rng = np.random.default_rng(0)
    p = rng.dirichlet(np.full(6, 0.5), size=400)
    y = np.array([rng.choice(6, p=row) for row in p])
    s = cv.label_scores(p, score="lac")[np.arange(400), y]
    masks = ex.calibration_masks(np.repeat(np.arange(40), 10), splits=4, by="sequence", seed=0)
    r = ex.split_coverage(s, masks, alpha=0.2)
    for i, mask in enumerate(masks):
        sets = cv.conformal_sets(p[mask], y[mask], p[~mask], alpha=0.2, score="lac")
        assert r["qhat"][i] == sets["qhat"]
        assert r["coverage"][i] == cv.set_summary(sets["sets"], y[~mask])["coverage"]
    assert r["n"] == 200 and r["m"] == 200


@given(seed=st.integers(0, 10_000), alpha=st.floats(0.05, 0.4))
@settings(max_examples=40, deadline=None)
def test_split_coverage_properties(seed, alpha):
    rng = np.random.default_rng(seed)
    s = rng.random(120)
    masks = ex.calibration_masks(np.arange(120), share=0.5, splits=10, seed=seed)
    r = ex.split_coverage(s, masks, alpha)
    assert np.all((r["coverage"] >= 0) & (r["coverage"] <= 1))
    np.testing.assert_allclose(r["coverage"] * r["m"], np.round(r["coverage"] * r["m"]), atol=1e-9)
    # A higher alpha can only lower the threshold and the coverage.
    r2 = ex.split_coverage(s, masks, min(alpha + 0.1, 0.9))
    assert np.all(r2["qhat"] <= r["qhat"]) and np.all(r2["coverage"] <= r["coverage"])


def test_row_splits_match_the_betabinomial_spread():
    # i.i.d. continuous scores: the spread over 400 random row splits is the beta-binomial's.
    rng = np.random.default_rng(5)
    s = rng.random(2000)
    masks = ex.calibration_masks(np.arange(2000), splits=400, seed=7)
    r = ex.split_coverage(s, masks, 0.1)
    d = ex.coverage_distribution(r["n"], r["m"], 0.1)
    assert r["mean"] == pytest.approx(d["level"], abs=4 * d["sd"] / math.sqrt(400))
    assert r["sd"] == pytest.approx(d["sd"], rel=0.15)


def test_grouped_scores_inflate_sequence_spread_and_shuffle_removes_it():
    # Scores that share a per-sequence offset: whole-sequence splits vary more than row splits;
    # shuffling the rows among sequences (the control) brings the spread back.
    rng = np.random.default_rng(1)
    seq = np.repeat(np.arange(100), 20)
    s = rng.normal(size=100)[seq] + 0.5 * rng.normal(size=seq.size)
    rows = ex.split_coverage(s, ex.calibration_masks(seq, splits=500, by="row", seed=2), 0.1)
    whole = ex.split_coverage(s, ex.calibration_masks(seq, splits=500, by="sequence", seed=2), 0.1)
    shuffled = ex.shuffle_groups(seq, seed=3)
    control = ex.split_coverage(s, ex.calibration_masks(shuffled, splits=500, by="sequence", seed=2), 0.1)
    predicted = ex.coverage_distribution(rows["n"], rows["m"], 0.1)["sd"]
    assert whole["sd"] > 2 * predicted
    assert rows["sd"] == pytest.approx(predicted, rel=0.15)
    assert control["sd"] == pytest.approx(predicted, rel=0.2)
    assert np.array_equal(np.sort(shuffled), np.sort(seq))


def test_split_coverage_errors():
    s = np.random.default_rng(0).random(10)
    good = np.zeros((2, 10), bool)
    good[:, :5] = True
    with pytest.raises(ValueError, match="calibrating must be a boolean"):
        ex.split_coverage(s, good.astype(int))
    with pytest.raises(ValueError, match="calibrating must be a boolean"):
        ex.split_coverage(s, good[:, :9])
    uneven = good.copy()
    uneven[1, 6] = True
    with pytest.raises(ValueError, match="same number"):
        ex.split_coverage(s, uneven)
    with pytest.raises(ValueError, match="scores"):
        ex.split_coverage(np.r_[s[:9], np.nan], good)
    with pytest.raises(ValueError, match="too small"):
        ex.split_coverage(s, good, alpha=0.1)  # n = 5 cannot support alpha = 0.1
    with pytest.raises(ValueError, match="at least one calibration"):
        ex.split_coverage(s, np.ones((1, 10), bool))


# --------------------------------------------------------------------------------------
# Escalation
# --------------------------------------------------------------------------------------


def test_escalation_by_hand():
    sets = np.array([
        [True, False, False],   # singleton, right
        [False, True, False],   # singleton, wrong
        [True, True, False],    # escalated, covered
        [False, False, False],  # empty: escalated, not covered
        [True, True, True],     # escalated, covered
    ])
    y = np.array([0, 2, 1, 0, 2])
    r = ex.escalation(sets, y)
    assert r["kept"] == pytest.approx(0.4) and r["escalated"] == pytest.approx(0.6)
    assert r["kept_accuracy"] == pytest.approx(0.5)
    assert r["escalated_coverage"] == pytest.approx(2 / 3)
    assert r["escalated_size"] == pytest.approx(5 / 3)
    assert r["empty"] == pytest.approx(0.2) and r["coverage"] == pytest.approx(0.6)
    assert r["kept_rows"] == 2


def test_escalation_errors():
    with pytest.raises(ValueError, match="sets"):
        ex.escalation(np.ones((3, 2)), [0, 1, 0])
    with pytest.raises(ValueError, match="y"):
        ex.escalation(np.ones((3, 2), bool), [0, 1])
    with pytest.raises(ValueError, match="y"):
        ex.escalation(np.ones((3, 2), bool), [0, 1, 2])


def test_shuffle_groups_errors():
    with pytest.raises(ValueError, match="sequence"):
        ex.shuffle_groups(np.zeros((2, 2)))
    with pytest.raises(ValueError, match="equal-sized"):
        ex.shuffle_groups([0, 0, 1])


def test_spread_interval_covers_the_true_sd():
    rng = np.random.default_rng(0)
    hits = 0
    for _ in range(400):
        r = ex.spread_interval(rng.normal(scale=2.0, size=50), 0.9)
        hits += r["low"] <= 2.0 <= r["high"]
        assert r["low"] < r["sd"] < r["high"]
    assert 0.85 < hits / 400 < 0.95


def test_spread_interval_against_scipy_and_errors():
    v = np.array([1.0, 2.0, 4.0, 7.0])
    r = ex.spread_interval(v, 0.95)
    assert r["sd"] == pytest.approx(np.std(v, ddof=1))
    assert r["high"] == pytest.approx(np.std(v, ddof=1) * math.sqrt(3 / stats.chi2(3).ppf(0.025)))
    with pytest.raises(ValueError, match="values"):
        ex.spread_interval([1.0, 2.0])
    with pytest.raises(ValueError, match="level"):
        ex.spread_interval(v, 1.0)


def test_one_split_names_what_episode_1_quotes_and_agrees_with_the_vectorised_path():
    rng = np.random.default_rng(4)
    windows, width, labels = 40, 8, 5
    p = rng.dirichlet(np.ones(labels) * 0.5, size=windows * width)
    y = np.array([rng.choice(labels, p=row) for row in p])
    pred = {"p": p, "y": y, "sequence": np.repeat(np.arange(windows), width),
            "position": np.tile(np.arange(width), windows)}
    s = ex.one_split(pred, 0.1, share=0.5, seed=0)
    cal = ex.calibration_masks(pred["sequence"], share=0.5, splits=1, by="sequence", seed=0)[0]
    assert np.array_equal(s.calibrating, cal)
    made = cv.conformal_sets(p[cal], y[cal], p[~cal], alpha=0.1, score="lac")
    summary = cv.set_summary(made["sets"], y[~cal])
    assert (s.window, s.rows, s.windows) == (width, windows * width, windows)
    assert (s.n_cal, s.n_test) == (int(cal.sum()), int((~cal).sum()))
    assert s.qhat == made["qhat"] and s.p_min == 1 - made["qhat"]
    assert s.coverage_one == summary["coverage"] and s.mean_size == summary["mean_size"]
    assert s.level == ex.finite_sample_level(s.n_cal, 0.1)
    assert s.accuracy == float((p[~cal].argmax(axis=1) == y[~cal]).mean())
    assert np.array_equal(s.sets, made["sets"])
    # the one split, recomputed by the vectorised path of the page's later cells
    scores = cv.label_scores(p, score="lac")[np.arange(y.size), y]
    assert ex.split_coverage(scores, cal[None, :], 0.1)["coverage"][0] == s.coverage_one
