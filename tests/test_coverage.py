"""Tests of the split-conformal toolkit in standarderror.uncertainty.coverage.

Expected values come from arguments made here (order statistics, exchangeability, plain loops
written independently of the package), or from scipy; never from the package's own output.
"""

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from standarderror.uncertainty import coverage as cv
from standarderror.uncertainty.ranks import kendall_tau
from standarderror.uncertainty.scaling import fit_temperature


def _probs(rng, n, k=6, scale=2.0):
    z = rng.normal(0, scale, (n, k))
    p = np.exp(z - z.max(1, keepdims=True))
    return p / p.sum(1, keepdims=True)


def _draw(rng, n, k=6, scale=2.0):
    """Exchangeable (p, y): labels sampled from the model's own probabilities."""
    p = _probs(rng, n, k, scale)
    y = (rng.random(n)[:, None] > np.cumsum(p, 1)).sum(1)
    return p, np.minimum(y, k - 1)


# ---------------------------------------------------------------- plain-loop references


def _loop_scores(p_row, label, score, u=None):
    if score == "lac":
        return 1.0 - p_row[label]
    order = sorted(range(len(p_row)), key=lambda j: (-p_row[j], j))
    total = 0.0
    for j in order:
        if j == label:
            if u is None:
                return min(total + p_row[j], 1.0) if j != order[-1] else 1.0
            return total + u * p_row[j]
        total += p_row[j]
    raise AssertionError("label not found")


def _loop_sets(p_cal, y_cal, p_test, alpha, score, u_cal=None, u_test=None):
    n = len(y_cal)
    cal = sorted(_loop_scores(p_cal[i], y_cal[i], score, None if u_cal is None else u_cal[i])
                 for i in range(n))
    k = math.ceil((n + 1) * (1 - Fraction(str(alpha))))
    qhat = cal[k - 1]
    sets = np.zeros(p_test.shape, dtype=bool)
    for i in range(p_test.shape[0]):
        for lab in range(p_test.shape[1]):
            s = _loop_scores(p_test[i], lab, score, None if u_test is None else u_test[i])
            sets[i, lab] = s <= qhat
    return sets, qhat


@pytest.mark.parametrize("score,randomized", [("lac", False), ("aps", False), ("aps", True)])
@pytest.mark.parametrize("alpha", [0.1, 0.2, 0.05])
def test_sets_match_plain_loop(score, randomized, alpha):
    rng = np.random.default_rng(3)
    p_cal, y_cal = _draw(rng, 137)
    p_test, _ = _draw(rng, 61)
    r = cv.conformal_sets(p_cal, y_cal, p_test, alpha=alpha, score=score, randomized=randomized, seed=11)
    u_cal = u_test = None
    if randomized:  # the documented draw order: calibration uniforms, then test uniforms
        g = np.random.default_rng(11)
        u_cal, u_test = g.random(137), g.random(61)
    sets, qhat = _loop_sets(p_cal, y_cal, p_test, alpha, score, u_cal, u_test)
    assert r["qhat"] == pytest.approx(qhat, abs=1e-12)
    np.testing.assert_array_equal(r["sets"], sets)


def test_aps_last_label_scores_exactly_one_and_ties_broken_by_index():
    p = np.array([[0.5, 0.2, 0.2, 0.1], [0.1, 0.2, 0.3, 0.4]])
    s = cv.label_scores(p, score="aps")
    assert s[0, 3] == 1.0 and s[1, 0] == 1.0
    # tie between labels 1 and 2 in row 0: label 1 comes first
    assert s[0, 1] == pytest.approx(0.7) and s[0, 2] == pytest.approx(0.9)
    np.testing.assert_allclose(cv.label_scores(p, score="lac"), 1 - p)


# ---------------------------------------------------------------- coverage guarantees


def _mean_coverage(n_cal, alpha, score, randomized=False, quantile="textbook", splits=600, seed=0):
    rng = np.random.default_rng(seed)
    n_test = 100
    p, y = _draw(rng, splits * (n_cal + n_test), scale=1.5)
    p = p.reshape(splits, n_cal + n_test, -1)
    y = y.reshape(splits, n_cal + n_test)
    cov = np.empty(splits)
    for s in range(splits):
        r = cv.conformal_sets(p[s, :n_cal], y[s, :n_cal], p[s, n_cal:], alpha=alpha, score=score,
                              randomized=randomized, seed=s, quantile=quantile)
        cov[s] = r["sets"][np.arange(n_test), y[s, n_cal:]].mean()
    return cov.mean(), cov.std(ddof=1) / math.sqrt(splits)


@pytest.mark.parametrize("score,randomized", [("lac", False), ("aps", False), ("aps", True)])
def test_marginal_coverage_is_k_over_n_plus_one(score, randomized):
    # With continuous scores (no ties) the test score is equally likely to fall in any of the
    # n + 1 gaps between calibration scores, so E[coverage] = k / (n + 1) exactly:
    # n = 50, alpha = 0.1 -> k = ceil(45.9) = 46 -> 46/51 = 0.90196, inside
    # [1 - alpha, 1 - alpha + 1/(n+1)] = [0.9, 0.91961].
    n, alpha = 50, 0.1
    mean, se = _mean_coverage(n, alpha, score, randomized)
    assert mean >= 1 - alpha - 4 * se
    assert abs(mean - 46 / 51) < 4 * se
    if randomized:
        assert mean <= 1 - alpha + 1 / (n + 1) + 4 * se


def test_ye_quantile_is_one_order_statistic_more_conservative():
    # For k < n, np.quantile(..., k/n, method="higher") takes sorted index ceil(k - k/n) = k
    # (0-based), i.e. the (k+1)-th smallest score: expected coverage (k+1)/(n+1).
    n, alpha = 50, 0.1
    mean, se = _mean_coverage(n, alpha, "aps", True, quantile="ye")
    assert abs(mean - 47 / 51) < 4 * se


@pytest.mark.parametrize("n,alpha", [(9, 0.1), (10, 0.1), (20, 0.1), (100, 0.1), (5000, 0.1),
                                     (19, 0.05), (37, 0.05), (50, 0.3), (3, 0.3), (4, 0.25)])
def test_ye_vs_textbook_threshold(n, alpha):
    rng = np.random.default_rng(n)
    s = rng.random(n)  # distinct with probability one
    srt = np.sort(s)
    k = math.ceil((n + 1) * (1 - Fraction(str(alpha))))  # exact rational arithmetic
    assert k <= n
    assert cv.conformal_quantile(s, alpha) == srt[k - 1]
    expected_ye = srt[k] if k < n else srt[n - 1]
    assert cv.conformal_quantile(s, alpha, quantile="ye") == expected_ye
    if k < n:
        assert cv.conformal_quantile(s, alpha, quantile="ye") > cv.conformal_quantile(s, alpha)
    # with a tie between the k-th and (k+1)-th scores the two constructions coincide
    if k < n:
        t = srt.copy()
        t[k] = t[k - 1]
        assert cv.conformal_quantile(t, alpha, quantile="ye") == cv.conformal_quantile(t, alpha)


@pytest.mark.parametrize("n,alpha", [(8, 0.1), (1, 0.1), (18, 0.05), (2, 0.3)])
def test_threshold_missing_when_k_exceeds_n(n, alpha):
    # k = ceil((n+1)(1-alpha)) > n: no order statistic; both constructions refuse.
    k = math.ceil((n + 1) * (1 - Fraction(str(alpha))))
    assert k > n
    s = np.linspace(0, 1, n)
    with pytest.raises(ValueError, match="calibration"):
        cv.conformal_quantile(s, alpha)
    with pytest.raises(ValueError, match="calibration"):
        cv.conformal_quantile(s, alpha, quantile="ye")


def test_minimum_calibration():
    # n >= 1/alpha - 1
    assert cv.minimum_calibration(0.1) == 9
    assert cv.minimum_calibration(0.05) == 19
    assert cv.minimum_calibration(0.3) == 3
    assert cv.minimum_calibration(0.25) == 3
    assert cv.minimum_calibration(0.5) == 1
    with pytest.raises(ValueError, match="at least 9"):
        cv.conformal_sets(np.full((8, 2), 0.5), np.zeros(8, int), np.full((1, 2), 0.5), alpha=0.1)


# ---------------------------------------------------------------- options


def test_nonempty_adds_top_label_only_to_empty_sets():
    rng = np.random.default_rng(5)
    p_cal, y_cal = _draw(rng, 300, scale=3)
    p_test, y_test = _draw(rng, 300, scale=3)
    plain = cv.conformal_sets(p_cal, y_cal, p_test, score="aps", randomized=True, seed=1)["sets"]
    full = cv.conformal_sets(p_cal, y_cal, p_test, score="aps", randomized=True, seed=1,
                              nonempty=True)["sets"]
    empty = ~plain.any(1)
    assert empty.any()
    np.testing.assert_array_equal(full[~empty], plain[~empty])
    np.testing.assert_array_equal(full[empty].sum(1), 1)
    np.testing.assert_array_equal(full[empty].argmax(1), p_test[empty].argmax(1))


def test_set_summary_by_hand():
    sets = np.array([[1, 0, 0], [1, 1, 0], [0, 0, 0], [1, 1, 1]], dtype=bool)
    y = np.array([0, 2, 1, 2])
    s = cv.set_summary(sets, y)
    assert s["coverage"] == 0.5          # rows 0 and 3
    assert s["mean_size"] == 1.5         # (1 + 2 + 0 + 3) / 4
    assert s["median_size"] == 1.5
    assert s["singleton"] == 0.25 and s["empty"] == 0.25


def test_by_confidence_by_hand():
    sets = np.array([[1, 0], [1, 1], [0, 1], [1, 1]], dtype=bool)
    y = np.array([0, 1, 0, 1])
    conf = np.array([0.55, 0.6, 0.95, 1.0])
    r = cv.by_confidence(sets, y, conf, bands=(0.5, 0.9, 1.0))
    np.testing.assert_array_equal(r["count"], [2, 2])
    np.testing.assert_allclose(r["coverage"], [1.0, 0.5])
    np.testing.assert_allclose(r["mean_size"], [1.5, 1.5])


# ---------------------------------------------------------------- ranking analyses


@pytest.mark.parametrize("seed", range(6))
def test_kendall_tau_matches_scipy(seed):
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 6, 16).astype(float)  # ties included
    b = rng.integers(0, 6, 16).astype(float)
    r = kendall_tau(a, b)
    assert r["tau"] == pytest.approx(stats.kendalltau(a, b).statistic, abs=1e-12)
    disc = sum((a[i] - a[j]) * (b[i] - b[j]) < 0 for i in range(16) for j in range(i + 1, 16))
    conc = sum((a[i] - a[j]) * (b[i] - b[j]) > 0 for i in range(16) for j in range(i + 1, 16))
    assert r["discordant"] == disc and r["concordant"] == conc and r["pairs"] == 120


def test_kendall_reversal_and_identity():
    a = np.arange(8.0)
    assert kendall_tau(a, a)["tau"] == 1.0
    r = kendall_tau(a, -a)
    assert r["tau"] == -1.0 and r["discordant"] == 28


def test_spearman_matches_rank_pearson():
    rng = np.random.default_rng(2)
    a, b = rng.random(12), rng.random(12)
    ra, rb = stats.rankdata(a), stats.rankdata(b)
    assert cv.spearman(a, b) == pytest.approx(np.corrcoef(ra, rb)[0, 1])


def test_inversions_by_hand():
    acc = np.array([0.9, 0.8, 0.7, 0.7])
    size = np.array([2.0, 1.5, 1.0, 3.0])
    r = cv.inversions(acc, size)
    # pairs with distinct accuracy: (0,1),(0,2),(0,3),(1,2),(1,3) = 5;
    # more accurate has larger size: (0,1),(0,2),(1,2) = 3
    assert r["pairs"] == 5 and r["count"] == 3
    assert sorted(r["which"]) == [(0, 1), (0, 2), (1, 2)]


def test_temperature_keeps_argmax_and_fit_recovers_temperature():
    rng = np.random.default_rng(4)
    z = rng.normal(0, 3, (20000, 6))
    for t in (0.2, 1.0, 5.0):
        np.testing.assert_array_equal(cv.softmax_logits(z, t).argmax(1), z.argmax(1))
    true_t = 2.0
    p = cv.softmax_logits(z, true_t)
    y = (rng.random(len(z))[:, None] > np.cumsum(p, 1)).sum(1).clip(max=5)
    t_hat = fit_temperature(z, y)
    assert abs(t_hat - true_t) < 0.1


# ---------------------------------------------------------------- validation


def test_bad_inputs_name_the_argument():
    rng = np.random.default_rng(0)
    p, y = _draw(rng, 50)
    for a in (0, 1, -0.1, 1.5):
        with pytest.raises(ValueError, match="alpha"):
            cv.conformal_sets(p, y, p, alpha=a)
    with pytest.raises(ValueError, match="p_test"):
        cv.conformal_sets(p, y, p[:, :5] / p[:, :5].sum(1, keepdims=True))
    with pytest.raises(ValueError, match="y_cal"):
        cv.conformal_sets(p, y[:-1], p)
    with pytest.raises(ValueError, match="p_cal"):
        cv.conformal_sets(p * 1.1 / 1.1 + 0.01, y, p)
    with pytest.raises(ValueError, match="p_cal"):
        cv.conformal_sets(np.log(p), y, p)
    with pytest.raises(ValueError, match="score"):
        cv.conformal_sets(p, y, p, score="raps")
    with pytest.raises(ValueError, match="quantile"):
        cv.conformal_sets(p, y, p, quantile="linear")
    with pytest.raises(ValueError, match="randomized"):
        cv.conformal_sets(p, y, p, score="lac", randomized=True)
    with pytest.raises(ValueError, match="calibration"):
        cv.conformal_sets(p[:5], y[:5], p, alpha=0.1)
    with pytest.raises(ValueError, match="sets"):
        cv.set_summary(np.ones((3, 2)), [0, 1, 0])
    with pytest.raises(ValueError, match="y"):
        cv.set_summary(np.ones((3, 2), bool), [0, 1])
    with pytest.raises(ValueError, match="constant"):
        kendall_tau([1, 1, 1], [1, 2, 3])
    with pytest.raises(ValueError, match="mismatched"):
        kendall_tau([1, 2, 3], [1, 2])


# ---------------------------------------------------------------- the demonstration


def test_demonstration_panels():
    d = cv.demonstration(seed=0)
    a = d["a"]
    # Panel A: the two scores order the two models oppositely
    assert a["sharp"]["lac"]["mean_size"] < a["medium"]["lac"]["mean_size"]
    assert a["sharp"]["aps"]["mean_size"] > a["medium"]["aps"]["mean_size"]
    assert a["sharp"]["accuracy"] > a["medium"]["accuracy"]
    # Panel B: APS threshold one, every option admitted, coverage 100%; LAC near nominal
    b = d["b"]["saturating"]
    assert b["aps"]["qhat"] == 1.0 and b["aps"]["coverage"] == 1.0 and b["aps"]["mean_size"] == 6.0
    assert 0.88 < b["lac"]["coverage"] < 0.93 and b["lac"]["mean_size"] < 1.2
    # Panel C: identical sets; accuracy 90% and 5% by construction (exact counts)
    c = d["c"]
    assert c["identical"]
    assert c["a"]["accuracy"] == 0.9 and c["b"]["accuracy"] == 0.05
    assert c["a"]["lac"]["coverage"] == c["b"]["lac"]["coverage"] == 0.97
    assert c["a"]["lac"]["mean_size"] == c["b"]["lac"]["mean_size"] == 2.0


# ---------------------------------------------------------------- Ye et al.'s rule, by hand
#
# The facts of Ye et al.'s released computation (rule="ye"): softmax and every score in the
# logits' float32; APS running sums in the order of numpy's ascending argsort reversed, not
# capped at one; q = np.quantile(scores, ceil((n+1)(1-alpha))/n, method="higher"); LAC keeps
# p >= 1 - q, APS keeps options while the running sum is <= q; an empty set gets the top
# option. With n = 4 and alpha = 0.5 the level is ceil(2.5)/4 = 3/4 and numpy's "higher"
# takes sorted index ceil(0.75 * 3) = 3: the largest of the four calibration scores.

_F32 = np.float32


def _ye_case(p_cal, y_cal, p_test, score, **kw):
    return cv.conformal_sets(np.array(p_cal, _F32), np.array(y_cal), np.array(p_test, _F32),
                             alpha=0.5, score=score, rule="ye", **kw)


def test_ye_empty_lac_set_gets_the_argmax():
    # true-option probabilities 0.9, 0.8, 0.7, 0.75 -> LAC scores 0.1, 0.2, 0.3, 0.25;
    # q = 1 - 0.7 (exact in float32 by Sterbenz) and 1 - q is float32(0.7) again.
    p_cal = [[0.9, 0.05, 0.05], [0.1, 0.8, 0.1], [0.2, 0.1, 0.7], [0.75, 0.2, 0.05]]
    p_test = [[0.5, 0.3, 0.2],      # nothing reaches 0.7: empty, gets option 0
              [0.1, 0.2, 0.7],      # exactly 0.7 = 1 - q: kept
              [0.25, 0.4, 0.35]]    # empty, gets option 1
    r = _ye_case(p_cal, [0, 1, 2, 0], p_test, "lac")
    assert r["qhat"] == float(_F32(1) - _F32(0.7))
    np.testing.assert_array_equal(r["sets"], [[1, 0, 0], [0, 0, 1], [0, 1, 0]])
    off = _ye_case(p_cal, [0, 1, 2, 0], p_test, "lac", nonempty=False)
    np.testing.assert_array_equal(off["sets"], [[0, 0, 0], [0, 0, 1], [0, 0, 0]])


def test_ye_empty_aps_set_gets_the_first_option_of_ye_order():
    # APS calibration scores: 0.5 (row 0, label 0), 0.8 (0.5 + 0.3), 0.7 (0.7), 0.6 (0.6)
    p_cal = [[0.5, 0.3, 0.2], [0.5, 0.3, 0.2], [0.7, 0.2, 0.1], [0.1, 0.3, 0.6]]
    r = _ye_case(p_cal, [0, 1, 0, 2], [[0.9, 0.06, 0.04], [0.45, 0.45, 0.1]], "aps")
    assert r["qhat"] == float(_F32(0.5) + _F32(0.3))
    # row 0: 0.9 > q, empty: the fallback adds option 0 (its top)
    np.testing.assert_array_equal(r["sets"][0], [1, 0, 0])
    # row 1: a tie at 0.45. The first running sum 0.45 <= q, the second 0.9 > q, so exactly
    # one of the tied options is kept: the one numpy's ascending argsort puts last.
    order = np.argsort(np.array([0.45, 0.45, 0.1], _F32))
    assert r["sets"][1].sum() == 1 and r["sets"][1][order[-1]]
    off = _ye_case(p_cal, [0, 1, 0, 2], [[0.9, 0.06, 0.04]], "aps", nonempty=False)
    assert not off["sets"].any()


def test_ye_aps_running_sum_rounds_above_one():
    # float32: 0.6 + 0.33 rounds up to 0.93000007, and + 0.07 gives 1.0000001, although the
    # exact sum of the three float32 values is 1 + 3.7e-8, which would round to 1.0.
    a, b, c = _F32(0.6), _F32(0.33), _F32(0.07)
    assert _F32(a + b) == _F32(0.93000007) and _F32(_F32(a + b) + c) > 1
    exact = sum(Fraction(float(v)) for v in (a, b, c))
    assert 1 < exact < 1 + Fraction(1, 2 ** 24)
    # calibration scores 1, 1, 0.5, 0.8 (two rows whose true option ranks last; 0.5 + 0.3
    # + 0.2 is exactly 1.0 in float32): q = 1.0 under both rules
    p_cal = [[0.5, 0.3, 0.2]] * 4
    ye = _ye_case(p_cal, [2, 2, 0, 1], [[0.6, 0.33, 0.07]], "aps")
    assert ye["qhat"] == 1.0 and ye["scores_test"][0, 2] > 1
    np.testing.assert_array_equal(ye["sets"], [[1, 1, 0]])   # the last sum is above q
    tb = cv.conformal_sets(np.array(p_cal), [2, 2, 0, 1], np.array([[0.6, 0.33, 0.07]]),
                           alpha=0.5, score="aps")
    assert tb["qhat"] == 1.0 and tb["scores_test"][0, 2] == 1.0
    np.testing.assert_array_equal(tb["sets"], [[1, 1, 1]])   # textbook pins it to one


def _ye_loop(z_cal, y_cal, z_test, alpha, score, fallback=True):
    """Ye et al.'s rule restated row by row with float32 scalars and plain Python lists."""
    def probs(z):
        z = [_F32(v) for v in z]
        top = max(z)
        e = [_F32(np.exp(_F32(v - top))) for v in z]
        total = _F32(0)
        for v in e:
            total = _F32(total + v)
        return [_F32(v / total) for v in e]

    def order(p):
        return list(np.argsort(np.array(p, _F32)))[::-1]

    def running(p):
        out, total = {}, _F32(0)
        for j in order(p):
            total = _F32(total + p[j])
            out[j] = total
        return out

    cal = []
    for z, lab in zip(z_cal, y_cal):
        p = probs(z)
        cal.append(_F32(1) - p[lab] if score == "lac" else running(p)[lab])
    cal.sort()
    n = len(cal)
    k = math.ceil((n + 1) * (1 - Fraction(str(alpha))))
    q = cal[k] if k < n else cal[n - 1]
    sets = np.zeros((len(z_test), len(z_test[0])), bool)
    for i, z in enumerate(z_test):
        p = probs(z)
        if score == "lac":
            keep = [j for j in range(len(p)) if p[j] >= _F32(1) - q]
            top = int(np.argmax(p))
        else:
            run = running(p)
            keep = [j for j in order(p) if run[j] <= q]
            top = order(p)[0]
        if not keep and fallback:
            keep = [top]
        sets[i, keep] = True
    return sets, q


@pytest.mark.parametrize("score", ["lac", "aps"])
@pytest.mark.parametrize("fallback", [True, False])
def test_ye_rule_matches_a_row_by_row_float32_restatement(score, fallback):
    rng = np.random.default_rng(21)
    z = (rng.normal(0, 4, (400, 6)) * rng.uniform(0.2, 3, (400, 1))).astype(_F32)
    z[::9, 3] = z[::9, 1]                           # exact ties between two options
    y = rng.integers(0, 6, 400)
    p = cv.ye_softmax(z)
    assert p.dtype == _F32
    r = cv.conformal_sets(p[:250], y[:250], p[250:], score=score, rule="ye",
                          nonempty=fallback)
    sets, q = _ye_loop(z[:250], y[:250], z[250:], 0.1, score, fallback)
    assert r["qhat"] == float(q)
    np.testing.assert_array_equal(r["sets"], sets)
    if score == "aps":
        assert (r["scores_test"].max(1) != 1).any()   # uncapped: some totals are not 1.0


def test_ye_softmax_is_the_row_by_row_float32_softmax():
    rng = np.random.default_rng(4)
    z = (rng.normal(0, 6, (3000, 6))).astype(_F32)
    p = cv.ye_softmax(z)
    for i in range(0, 3000, 7):
        e = np.exp(z[i] - np.max(z[i]))
        np.testing.assert_array_equal(p[i], e / e.sum())
    assert cv.ye_softmax(z.astype(np.float64)).dtype == np.float64
    np.testing.assert_array_equal(cv.ye_softmax(z, 2.0), cv.ye_softmax(z / _F32(2.0)))


def test_ye_rule_bad_inputs():
    p = cv.ye_softmax(np.zeros((20, 3), _F32))
    y = np.zeros(20, int)
    with pytest.raises(ValueError, match="rule"):
        cv.conformal_sets(p, y, p, rule="mapie")
    with pytest.raises(ValueError, match="quantile"):
        cv.conformal_sets(p, y, p, rule="ye", quantile="textbook")
    with pytest.raises(ValueError, match="randomized"):
        cv.conformal_sets(p, y, p, rule="ye", score="aps", randomized=True)
    with pytest.raises(ValueError, match="logits"):
        cv.ye_softmax(np.array([[np.nan, 1.0]]))
    with pytest.raises(ValueError, match="p_cal"):
        cv.conformal_sets(p * 2, y, p, rule="ye")


def test_paired_accuracy_by_hand():
    # 10 questions: both right on 5, a only on 3, b only on 1, both wrong on 1
    a = np.array([1, 1, 1, 1, 1, 1, 1, 1, 0, 0])
    b = np.array([1, 1, 1, 1, 1, 0, 0, 0, 1, 0])
    r = cv.paired_accuracy(a, b)
    assert (r["n"], r["a_only"], r["b_only"]) == (10, 3, 1)
    assert r["difference"] == pytest.approx(0.2)
    # d = (0 x5, 1 x3, -1, 0): mean 0.2, mean of squares 0.4, variance 0.36, se 0.6/sqrt(10)
    assert r["se"] == pytest.approx(0.6 / math.sqrt(10))
    # exact McNemar: P(X <= 1) + P(X >= 3) for X ~ Binomial(4, 1/2) = (1 + 4 + 4 + 1) / 16
    assert r["mcnemar_p"] == pytest.approx(10 / 16)
    same = cv.paired_accuracy(a, a)
    assert same["se"] == 0 and same["mcnemar_p"] == 1.0 and same["difference"] == 0
    with pytest.raises(ValueError, match="correct_b"):
        cv.paired_accuracy(a, np.full(10, 0.5))
    with pytest.raises(ValueError, match="correct_a"):
        cv.paired_accuracy(a[:9], b)


def test_paired_se_is_the_spread_of_the_differences():
    rng = np.random.default_rng(8)
    a = rng.random(500) < 0.7
    b = np.where(rng.random(500) < 0.8, a, ~a)          # mostly right on the same questions
    r = cv.paired_accuracy(a, b)
    d = a.astype(float) - b
    assert r["se"] == pytest.approx(d.std() / math.sqrt(500))
    unpaired = math.sqrt(a.mean() * (1 - a.mean()) / 500)
    assert r["se"] < unpaired
    k, m = r["a_only"], r["a_only"] + r["b_only"]
    tail = sum(math.comb(m, j) for j in range(m + 1)
               if math.comb(m, j) <= math.comb(m, k)) / 2 ** m
    assert r["mcnemar_p"] == pytest.approx(tail)
