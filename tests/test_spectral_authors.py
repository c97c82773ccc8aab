"""The authors' computation (``arithmetic="authors"`` and its halves, ``variant="authors"``)
against small cases worked out by hand and a plain dense implementation written here; and
extreme inputs (row scales, temperatures whose reciprocal overflows)."""

import numpy as np
import pytest
import scipy.linalg
from scipy.cluster import hierarchy
from scipy.spatial.distance import pdist
from sklearn.metrics import roc_auc_score
from threadpoolctl import threadpool_limits

from standarderror import _parallel
from standarderror import spectral as sp
from standarderror.spectral import _gram
from standarderror.spectral import authors as sp_authors
from standarderror.spectral import diagrams as sp_diagrams

EPS = 1e-10


def unit(x):
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


@pytest.fixture(scope="module")
def data():
    """Twelve questions, m = 4 answers in d = 9 with repeats (rank-deficient), noisy targets."""
    rng = np.random.default_rng(3)
    n, m, d = 12, 4, 9
    base = rng.normal(size=(n, 3, d))
    pick = rng.integers(0, 3, size=(n, m))
    a = base[np.arange(n)[:, None], pick] + 0.05 * rng.normal(size=(n, m, d))
    a[:, 1] = a[:, 0]  # exact repeats
    y = base[np.arange(n), rng.integers(0, 3, size=n)] + 0.3 * rng.normal(size=(n, d))
    return unit(a), unit(y)


# --------------------------------------------------------------------------------------
# Plain dense implementation of the authors' arithmetic, one question at a time
# --------------------------------------------------------------------------------------


def ref_eig(e, arithmetic):
    """``e``: one question's unit rows as the package normalises them (null-space round-off
    changes with the last bit of the input, so the reference starts from the same rows)."""
    dt = np.float64 if arithmetic.startswith("float64") else np.float32
    e = e.astype(dt)
    with threadpool_limits(1):  # round-off in the null space depends on BLAS blocking
        w, u = np.linalg.eigh((e.T @ e) / dt(len(e)))
    w = w.astype(float)
    w = np.clip(w, 0, None) if arithmetic.endswith("-clip") else np.abs(w)
    return w, u


def ref_scaled(w, t):
    mu = np.zeros_like(w)
    pos = w > 0
    mu[pos] = w[pos] ** (1.0 / t)
    return mu / mu.sum()


def ref_score(e, y, t, arithmetic, eps=EPS):
    w, u = ref_eig(e, arithmetic)
    mu = ref_scaled(w, t)
    mu = np.maximum(mu, eps)  # their floor: every scaled eigenvalue below eps becomes eps
    c = (u.T @ y.astype(u.dtype)).astype(float)
    return float(np.sum(c * c * -np.log(mu)))


def ref_entropy(e, t, arithmetic):
    mu = ref_scaled(ref_eig(e, arithmetic)[0], t)
    mu = mu[mu > 0]
    return float(-np.sum(mu * np.log(mu)))


@pytest.mark.parametrize("arithmetic", ["authors", "float64-abs", "float32-clip", "float64-clip"])
@pytest.mark.parametrize("t", [0.5, 1.0, 2.0, 5.01])
def test_dense_arithmetic_matches_plain_reference(data, arithmetic, t):
    a, y = data
    au = _gram._answers(a)  # the rows the package decomposes (its input normalisation)
    got = sp.log_score(a, y, t, arithmetic=arithmetic)
    want = [ref_score(au[i], y[i], t, arithmetic) for i in range(len(a))]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    ent = sp.entropy(a, t, arithmetic=arithmetic)
    np.testing.assert_allclose(ent, [ref_entropy(au[i], t, arithmetic) for i in range(len(a))],
                               rtol=1e-5, atol=1e-6)
    curve = sp.risk_curve(a, y, [t], arithmetic=arithmetic)
    assert curve["risk"][0] == pytest.approx(np.mean(want), rel=1e-5)
    assert sp.risk(a, y, t, arithmetic=arithmetic) == pytest.approx(np.mean(want), rel=1e-5)


@pytest.mark.parametrize("precision", ["float32", "float64"])
def test_dense_decompositions_do_not_depend_on_the_worker_count(data, precision, monkeypatch):
    """The questions are shared out among threads, each question one single-threaded product
    and one LAPACK call: one worker and three give the same bits."""
    a, y = data
    au = _gram._answers(a)
    got = {}
    for workers in (1, 3):
        monkeypatch.setattr(_parallel, "WORKERS", workers)
        monkeypatch.setattr(sp_authors, "_DENSE_CACHE", {})
        raw = sp_authors._dense_raw(au, _gram._targets(y, *au.shape[::2]), precision)
        got[workers] = (raw["w"].tobytes(), raw["proj"].tobytes())
    assert got[1] == got[3]


def test_hand_worked_two_orthogonal_answers():
    # answers e1, e2 in R^3: eigenvalues (1/2, 1/2, 0), exact in float32 too.
    a = np.array([[[1.0, 0, 0], [0, 1.0, 0]]])
    for ar in ("exact", "authors", "float32-clip", "float64-abs"):
        for t in (0.5, 1.0, 3.0):
            assert sp.log_score(a, [[1.0, 0, 0]], t, arithmetic=ar)[0] == pytest.approx(np.log(2))
            assert sp.entropy(a, t, arithmetic=ar)[0] == pytest.approx(np.log(2))
            # the third direction has eigenvalue exactly 0 in every arithmetic: it costs -log eps
            assert sp.log_score(a, [[0, 0, 1.0]], t, arithmetic=ar)[0] == pytest.approx(-np.log(EPS))


def test_hand_worked_round_off_is_raised_to_one_over_t():
    # Two answers at 60 degrees: the exact null space of the 3 x 3 matrix is one direction.
    # Whatever float32 leaves there (|w| <= a few 1e-8), raising it to 1/T lifts it.
    a = np.array([[[1.0, 0, 0], [0.5, np.sqrt(0.75), 0]]])
    w, _ = ref_eig(_gram._answers(a)[0], "authors")
    assert w.min() < 1e-6
    share = sp.null_share(a, 3.0, arithmetic="authors")[0]
    small = np.sort(w)[0]
    big = np.sort(w)[1:]
    want = small ** (1 / 3) / (small ** (1 / 3) + np.sum(big ** (1 / 3))) if small > 0 else 0.0
    assert share == pytest.approx(want, rel=1e-6, abs=1e-12)
    assert sp.null_share(a, 3.0, arithmetic="exact")[0] == 0.0


def test_authors_grids_are_their_log_spaced_grids():
    # the eleven values of np.round([10**(i/10) for i in range(-3, 8)], 2), written out
    assert sp.AUTHORS_GRID.tolist() == [0.5, 0.63, 0.79, 1.0, 1.26, 1.58, 2.0, 2.51, 3.16,
                                        3.98, 5.01]
    assert 2.51 in sp.AUTHORS_GRID  # the paper's fitted T lies on it
    # Lamb et al.'s sampling temperatures: 20 values, ratio constant, from 0.1 to 3.0
    g = sp.LAMB_GRID
    assert len(g) == 20 and g[0] == pytest.approx(0.1) and g[-1] == pytest.approx(3.0)
    np.testing.assert_allclose(g[1:] / g[:-1], 30 ** (1 / 19), rtol=1e-12)


def many_copies(k):
    """k copies of e1 and one of e2 in R^2: the density matrix is diag(k, 1)/(k + 1), which
    float32 holds to its rounding (the sums are exact integers), so the eigenvalues are known
    by hand."""
    a = np.zeros((1, k + 1, 2))
    a[0, :k, 0] = 1.0
    a[0, k, 1] = 1.0
    return a


def test_floor_binds_below_one_hand_worked():
    # 3 copies of e1, 1 of e2: eigenvalues 3/4 and 1/4, so mu_2(T) = 1 / (3^(1/T) + 1).
    a = many_copies(3)
    y = [[0.0, 1.0]]
    for ar in ("authors", "float64-abs", "float32-clip"):
        # T = 0.05: 3^20 + 1 = 3,486,784,402, so mu_2 = 2.87e-10 > 1e-10 and is scored itself
        assert sp.log_score(a, y, 0.05, arithmetic=ar)[0] == pytest.approx(
            np.log(3.0 ** 20 + 1), rel=1e-6)
        # T = 0.04: mu_2 = 1 / (3^25 + 1) = 1.18e-12 < 1e-10: the floor binds, cost -log eps
        assert sp.log_score(a, y, 0.04, arithmetic=ar)[0] == pytest.approx(
            -np.log(1e-10), rel=1e-6)
        # the entropy has no floor: -sum mu log mu of (1 - mu_2, mu_2) at T = 0.04
        mu2 = 1 / (3.0 ** 25 + 1)
        want = -(1 - mu2) * np.log1p(-mu2) - mu2 * np.log(mu2)
        assert sp.entropy(a, 0.04, arithmetic=ar)[0] == pytest.approx(want, rel=1e-5)
    # exact arithmetic keeps its own convention: no floor on positive eigenvalues
    assert sp.log_score(a, y, 0.04)[0] == pytest.approx(np.log(3.0 ** 25 + 1), rel=1e-9)


def test_floor_binds_above_one_for_eps_1e3_hand_worked():
    # 100,000 copies of e1 and one of e2: mu_2(T) = 1 / (100000^(1/T) + 1).
    a = many_copies(100_000)
    y = [[0.0, 1.0]]
    # T = 1.26: 10^(5/1.26) = 9,290.4, so mu_2 = 1.08e-4 < 1e-3: the floor binds
    got = sp.log_score(a, y, 1.26, eps=1e-3, arithmetic="authors")[0]
    assert got == pytest.approx(-np.log(1e-3), rel=1e-6)
    # T = 2: 10^2.5 + 1 = 317.23, so mu_2 = 3.15e-3 > 1e-3: scored itself
    got = sp.log_score(a, y, 2.0, eps=1e-3, arithmetic="authors")[0]
    assert got == pytest.approx(np.log(10 ** 2.5 + 1), rel=1e-5)
    # with the default eps = 1e-10 nothing binds at T = 1.26
    got = sp.log_score(a, y, 1.26, arithmetic="authors")[0]
    assert got == pytest.approx(np.log(10 ** (5 / 1.26) + 1), rel=1e-5)
    # so the authors' fit on the risk curve depends on eps here: their grid, target e2
    fit3 = sp.fit_spectral_temperature(a, y, eps=1e-3, arithmetic="authors")
    fit10 = sp.fit_spectral_temperature(a, y, arithmetic="authors")
    assert fit3["grid_risk"][4] == pytest.approx(-np.log(1e-3), rel=1e-6)  # T = 1.26
    assert fit10["grid_risk"][4] == pytest.approx(np.log(10 ** (5 / 1.26) + 1), rel=1e-5)


def test_authors_grid_and_fit(data):
    a, y = data
    fit = sp.fit_spectral_temperature(a, y, arithmetic="authors")
    risks = [np.mean([ref_score(a[i], y[i], t, "authors") for i in range(len(a))])
             for t in sp.AUTHORS_GRID]
    assert fit["temperature"] == sp.AUTHORS_GRID[int(np.argmin(risks))]
    np.testing.assert_allclose(fit["grid_risk"], risks, rtol=1e-5)
    # exact arithmetic on a grid: the argmin over that grid
    g = [0.5, 1.0, 2.0]
    ex = sp.fit_spectral_temperature(a, y, grid=g)
    assert ex["temperature"] == g[int(np.argmin([sp.risk(a, y, t) for t in g]))]
    # continuous fit under the authors' arithmetic
    assert sp.fit_spectral_temperature(a, y, arithmetic="authors", grid="continuous")["grid"] is None


def test_exponential_family_identity_under_authors_arithmetic():
    """With every scaled eigenvalue positive, R(alpha) - H(alpha) = alpha R'(alpha); at an
    interior minimiser the mean score equals the mean entropy, calibrated or not."""
    rng = np.random.default_rng(0)
    a = unit(rng.normal(size=(20, 3, 6)))
    y = unit(rng.normal(size=(20, 6)))
    fit = sp.fit_spectral_temperature(a, y, arithmetic="float64-abs", grid="continuous",
                             bounds=(0.05, 1e4), eps=1e-300)
    if not fit["at_bound"]:
        assert fit["risk"] == pytest.approx(fit["entropy"], abs=1e-5)
    # the identity at any temperature, with a central difference in alpha
    for t in (0.7, 1.3):
        al, h = 1.0 / t, 1e-5
        # eps far below any scaled eigenvalue: the floor binds nowhere, as the identity needs
        r = lambda x: sp.risk(a, y, 1.0 / x, eps=1e-300, arithmetic="authors")  # noqa: E731
        deriv = (r(al + h) - r(al - h)) / (2 * h)
        gap = r(al) - sp.entropy(a, t, arithmetic="authors").mean()
        assert gap == pytest.approx(al * deriv, rel=1e-3, abs=1e-4)


def test_exact_gap_is_the_eps_term_at_the_fit(data):
    """Exact arithmetic: R - H = alpha R'(alpha) + mean[q (-log eps - H)], q = outside share;
    at the continuous fit the first term vanishes."""
    a, y = data
    fit = sp.fit_spectral_temperature(a, y)
    q = sp.outside_share(a, y)
    h = sp.entropy(a, fit["temperature"])
    assert not fit["at_bound"]
    assert fit["risk"] - fit["entropy"] == pytest.approx(np.mean(q * (-np.log(EPS) - h)),
                                                         abs=1e-4)


def test_outside_share_matches_projection(data):
    a, y = data
    for i in range(len(a)):
        u, sv, _ = np.linalg.svd(a[i].T, full_matrices=False)
        p = u[:, sv > 1e-8]
        want = 1 - np.sum((p.T @ y[i]) ** 2)
        assert sp.outside_share(a[i:i + 1], y[i:i + 1])[0] == pytest.approx(want, abs=1e-10)


# --------------------------------------------------------------------------------------
# Algorithm 1, Cal_S, AUROC, KLE: the authors' conventions
# --------------------------------------------------------------------------------------


def test_quantile_bins_hand_worked():
    v = np.array([0.1, 0.1, 0.1, 0.5, 0.9, 0.9])
    # quantiles at 0, 1/3, 2/3, 1: 0.1, 0.1, 0.5 + (1/3) 0.4, 0.9 -> unique -> one inner edge
    groups = sp_diagrams._quantile_bins(v, 3)
    assert [g.tolist() for g in groups] == [[0, 1, 2, 3], [4, 5]]
    # ours splits the ties by order instead
    assert [g.tolist() for g in sp_diagrams._equal_mass(v, 3)] == [[0, 1], [2, 3], [4, 5]]


def dense_scaled_matrix(e, t):
    e = unit(e)
    w, u = np.linalg.eigh(e.T @ e / len(e))
    w = np.where(w > 1e-12, w, 0.0)
    mu = np.where(w > 0, w, 0.0) ** (1 / t) * (w > 0)
    mu = mu / mu.sum()
    return (u * mu) @ u.T


def ref_algorithm1(a, y, t, bins, clusters):
    """The authors' Algorithm 1 from dense matrices: quantile/unique/digitize bins on the
    scaled lambda_max, clusters of the unscaled matrices by Euclidean distance between rows of
    their cosine-similarity matrix (average linkage), clusters below 2 members dropped."""
    scaled = [dense_scaled_matrix(e, t) for e in a]
    plain = [dense_scaled_matrix(e, 1.0) for e in a]
    top = np.array([np.linalg.eigvalsh(s)[-1] for s in scaled])
    edges = np.unique(np.quantile(top, np.linspace(0, 1, bins + 1)))
    idx = np.digitize(top, edges[1:-1])
    pred, targ, count = [], [], []
    for b in range(len(edges) - 1):
        g = np.flatnonzero(idx == b)
        if not len(g):
            continue
        fl = np.array([plain[i].ravel() for i in g])
        fl = fl / np.linalg.norm(fl, axis=1, keepdims=True)
        sim = fl @ fl.T
        k = min(clusters, len(g))
        if k == 1:
            lab = np.zeros(len(g), int)
        elif k == len(g):
            lab = np.arange(len(g))
        else:
            lab = hierarchy.fcluster(hierarchy.linkage(pdist(sim), "average"), k, "maxclust")
        tc = []
        for c in np.unique(lab):
            rows = y[g][lab == c]
            if len(rows) >= 2:
                tc.append(np.linalg.eigvalsh(rows.T @ rows / len(rows))[-1])
        pred.append(top[g].mean())
        targ.append(np.mean(tc) if tc else np.nan)
        count.append(len(g))
    pred, targ, count = map(np.array, (pred, targ, count))
    has = np.isfinite(targ)
    return pred, targ, float(count[has] @ np.abs(pred - targ)[has] / count[has].sum())


@pytest.mark.parametrize("t", [1.0, 2.5])
def test_algorithm1_authors_matches_dense(t):
    rng = np.random.default_rng(5)
    n, m, d = 24, 5, 7
    base = rng.normal(size=(4, d))
    a = unit(base[rng.integers(0, 4, size=(n, m))] + 0.4 * rng.normal(size=(n, m, d)))
    y = unit(base[rng.integers(0, 4, size=n)] + 0.3 * rng.normal(size=(n, d)))
    got = sp.reliability(a, y, t, bins=3, clusters=3, variant="authors")
    pred, targ, ece = ref_algorithm1(a, y, t, 3, 3)
    np.testing.assert_allclose(got["predicted"], pred, atol=1e-10)
    np.testing.assert_allclose(got["target"], targ, atol=1e-10)
    assert got["ece"] == pytest.approx(ece, abs=1e-10)


def test_algorithm1_drops_singletons_hand_worked():
    # One bin, two clusters: three identical predictions and one far away. Ours averages the
    # singleton's lambda_max = 1 in; the authors' drops it.
    e1, e2 = np.eye(3)[0], np.eye(3)[1]
    a = np.array([[e1, e1], [e1, e1], [e1, e1], [e2, e2]])
    y = np.array([e1, e2, e1, e2])  # cluster {0,1,2}: targets e1,e2,e1 -> lambda_max 2/3
    ours = sp.reliability(a, y, bins=1, clusters=2)
    assert ours["target"][0] == pytest.approx((2 / 3 + 1) / 2)
    theirs = sp.reliability(a, y, bins=1, clusters=2, min_cluster=2)
    assert theirs["target"][0] == pytest.approx(2 / 3)


def test_calibration_error_authors_is_unweighted_mean_over_clusters(data):
    a, y = data
    lab = np.array([0] * 3 + [1] * 9)
    per = [sp.calibration_error(a[lab == c], y[lab == c], 1.7, labels=np.zeros(np.sum(lab == c),
                                int))["calibration"] for c in (0, 1)]
    theirs = sp.calibration_error(a, y, 1.7, labels=lab, variant="authors")
    ours = sp.calibration_error(a, y, 1.7, labels=lab)
    assert theirs["calibration"] == pytest.approx(np.mean(per), rel=1e-10)
    assert ours["calibration"] == pytest.approx((3 * per[0] + 9 * per[1]) / 12, rel=1e-10)
    # re-clustered at each temperature with the rows distance
    r = sp.calibration_error(a, y, 1.7, clusters=3, variant="authors")
    sim = sp.similarity(a, 1.7)
    want = hierarchy.fcluster(hierarchy.linkage(pdist(sim), "average"), 3, "maxclust")
    assert len(np.unique(r["labels"])) == len(np.unique(want))
    assert np.array_equal(np.unique(r["labels"], return_inverse=True)[1],
                          np.unique(want, return_inverse=True)[1])


def test_auroc_authors_is_mean_of_bootstrap_and_sd_over_draws():
    rng = np.random.default_rng(2)
    s = rng.normal(size=60)
    c = (s + rng.normal(size=60) > 0).astype(int)
    got = sp.auroc(s, c, bootstrap=20, seed=4, variant="authors")
    idx = np.random.default_rng(4).integers(0, 60, size=(20, 60))
    draws = np.array([roc_auc_score(c[i], s[i]) for i in idx])
    assert got["auroc"] == pytest.approx(draws.mean(), abs=1e-12)
    assert got["se"] == pytest.approx(draws.std(ddof=1) / 20, abs=1e-12)  # pandas' ddof
    ours = sp.auroc(s, c, bootstrap=20, seed=4)
    assert ours["auroc"] == pytest.approx(roc_auc_score(c, s), abs=1e-12)
    assert ours["se"] == pytest.approx(draws.std(ddof=1), abs=1e-12)


def test_kle_authors_matches_expm(data):
    a, _ = data
    got = sp.kernel_language_entropy(a, variant="authors")
    m = a.shape[1]
    want = []
    for e in a:
        g = e @ e.T
        w = np.clip(g, 0, None)
        np.fill_diagonal(w, 0)
        k = scipy.linalg.expm(-0.4 * (np.diag(w.sum(1)) - w))
        kn = k / np.sqrt(np.outer(np.diag(k), np.diag(k))) / m
        lam = np.clip(np.linalg.eigvalsh(kn), 0, None)
        lam = lam[lam > 0]
        want.append(-np.sum(lam * np.log(lam)))
    np.testing.assert_allclose(got, want, atol=1e-10)
    # hand case: identical answers -> all weights 1, K's diagonal constant; the normalised
    # kernel is then K / tr K, and the authors' t = 0.4 gives ours at time 0.4
    same = np.repeat(np.eye(4)[:1][None], 3, axis=1)
    assert sp.kernel_language_entropy(same, variant="authors")[0] == pytest.approx(
        sp.kernel_language_entropy(same, 0.4)[0], abs=1e-12)


def test_options_are_validated(data):
    a, y = data
    with pytest.raises(ValueError, match="arithmetic"):
        sp.risk(a, y, arithmetic="float16")
    with pytest.raises(ValueError, match="variant"):
        sp.reliability(a, y, bins=2, clusters=2, variant="theirs")
    with pytest.raises(ValueError, match="grid"):
        sp.fit_spectral_temperature(a, y, grid="coarse")
    with pytest.raises(ValueError, match="binning"):
        sp.reliability(a, y, bins=2, clusters=2, binning="equal")


# --------------------------------------------------------------------------------------
# Extreme scales and temperatures
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("scale", [1e154, 1e-200, 1e300, 1e-300])
def test_rows_at_extreme_scales_give_the_unit_results(data, scale):
    a, y = data
    want = sp.log_score(a, y, 1.3)
    np.testing.assert_allclose(sp.log_score(a * scale, y * scale, 1.3), want, rtol=1e-10)
    np.testing.assert_allclose(sp.eigenvalues(a * scale), sp.eigenvalues(a), atol=1e-12)


def test_temperature_whose_reciprocal_overflows_is_rejected(data):
    a, y = data
    for f in (lambda t: sp.entropy(a, t), lambda t: sp.risk(a, y, t),
              lambda t: sp.eigenvalues(a, t)):
        with pytest.raises(ValueError, match="temperature"):
            f(1e-320)


# --------------------------------------------------------------------------------------
# Intervals, and AUROC without silent NaN
# --------------------------------------------------------------------------------------


def test_auroc_needs_two_draws_and_names_bootstrap():
    s = np.arange(6.0)
    c = np.array([0, 1, 0, 1, 1, 0])
    for nb in (0, 1):
        for variant in ("ours", "authors"):
            with pytest.raises(ValueError, match="bootstrap"):
                sp.auroc(s, c, bootstrap=nb, variant=variant)


def test_auroc_single_class_draws():
    # one correct answer in 40 questions: about (39/40)^40 = 36% of draws miss it
    s = np.linspace(0, 1, 40)
    c = np.zeros(40, int)
    c[-1] = 1
    idx = np.random.default_rng(0).integers(0, 40, size=(20, 40))
    both = np.array([c[i].min() != c[i].max() for i in idx])
    assert 0 < both.sum() < 20
    ours = sp.auroc(s, c, bootstrap=20, seed=0)
    assert len(ours["draws"]) == both.sum()  # single-class draws skipped, not NaN
    want = [roc_auc_score(c[i], s[i]) for i in idx[both]]
    assert ours["se"] == pytest.approx(np.std(want, ddof=1), abs=1e-12)
    # the authors' roc_auc_score raises on such a draw: so does their variant here
    with pytest.raises(ValueError, match="single class"):
        sp.auroc(s, c, bootstrap=20, seed=0, variant="authors")
    # when fewer than two draws hold both classes, ours refuses instead of returning NaN
    c2 = np.array([1, 0, 0])
    for seed in range(100):  # a seed whose three draws hold both classes at most once
        idx = np.random.default_rng(seed).integers(0, 3, size=(3, 3))
        if sum(c2[i].min() != c2[i].max() for i in idx) < 2:
            break
    with pytest.raises(ValueError, match="both classes"):
        sp.auroc([0.0, 1.0, 2.0], c2, bootstrap=3, seed=seed)


@pytest.mark.slow  # its reference: 400 AUROCs by scikit-learn, one per bootstrap draw
def test_auroc_difference_is_paired():
    rng = np.random.default_rng(7)
    n = 300
    c = (rng.random(n) < 0.3).astype(int)
    base = c + rng.normal(size=n)
    a = base + 0.3 * rng.normal(size=n)
    b = base + 0.3 * rng.normal(size=n)
    got = sp.auroc_difference(a, b, c, bootstrap=200, seed=3)
    assert got["difference"] == pytest.approx(roc_auc_score(c, a) - roc_auc_score(c, b),
                                              abs=1e-12)
    idx = np.random.default_rng(3).integers(0, n, size=(200, n))
    want = np.array([roc_auc_score(c[i], a[i]) - roc_auc_score(c[i], b[i]) for i in idx])
    np.testing.assert_allclose(got["draws"], want, atol=1e-12)
    assert got["low"] == pytest.approx(np.quantile(want, 0.025), abs=1e-12)
    assert got["high"] == pytest.approx(np.quantile(want, 0.975), abs=1e-12)
    # the paired spread is far below the separate ones (the scores share their noise)
    sep = np.hypot(sp.auroc(a, c, bootstrap=200, seed=3)["se"],
                   sp.auroc(b, c, bootstrap=200, seed=3)["se"])
    assert got["se"] < 0.6 * sep
    # a score against itself: difference 0 in every draw
    same = sp.auroc_difference(a, a, c, bootstrap=50)
    assert same["difference"] == 0 and same["low"] == 0 and same["high"] == 0


def test_temperature_interval_draws_are_refits(data):
    a, y = data
    g = [0.5, 0.8, 1.0, 1.3, 2.0]
    got = sp.temperature_interval(a, y, bootstrap=30, seed=2, grid=g)
    n = len(a)
    idx = np.random.default_rng(2).integers(0, n, size=(30, n))
    want = [sp.fit_spectral_temperature(a[i], y[i], grid=g)["temperature"] for i in idx]
    np.testing.assert_array_equal(got["draws"], want)
    assert got["temperature"] == sp.fit_spectral_temperature(a, y, grid=g)["temperature"]
    assert got["low"] <= got["temperature"] <= got["high"] or got["at_edge"] > 0
    # the default fine grid agrees with the continuous fit to its 2% step
    fine = sp.temperature_interval(a, y, bootstrap=20)
    assert fine["temperature"] == pytest.approx(sp.fit_spectral_temperature(a, y)["temperature"],
                                                rel=0.021)
    with pytest.raises(ValueError, match="level"):
        sp.temperature_interval(a, y, level=1.5)
    with pytest.raises(ValueError, match="bootstrap"):
        sp.temperature_interval(a, y, bootstrap=1)


def test_temperature_difference_refits_both_on_the_same_resampled_questions(data):
    """Each draw is the difference of two refits on one resample of the questions: m = 4
    answers against the first 2 of them, refitted by hand on the same indices."""
    a, y = data
    g = [0.5, 0.8, 1.0, 1.3, 2.0]
    got = sp.temperature_difference(a, y, a[:, :2], y, bootstrap=30, seed=2, grid=g)
    n = len(a)
    idx = np.random.default_rng(2).integers(0, n, size=(30, n))
    want = [sp.fit_spectral_temperature(a[i], y[i], grid=g)["temperature"]
            - sp.fit_spectral_temperature(a[i][:, :2], y[i], grid=g)["temperature"] for i in idx]
    np.testing.assert_array_equal(got["draws"], want)
    assert got["difference"] == (sp.fit_spectral_temperature(a, y, grid=g)["temperature"]
                                 - sp.fit_spectral_temperature(a[:, :2], y, grid=g)["temperature"])
    assert got["share_at_most_zero"] == np.mean(np.array(want) <= 0)
    assert got["low"] == np.quantile(want, 0.025, method="inverted_cdf")
    same = sp.temperature_difference(a, y, a, y, bootstrap=20, grid=g)
    assert same["low"] == same["high"] == same["difference"] == 0
    with pytest.raises(ValueError, match="same questions"):
        sp.temperature_difference(a, y, a[:5], y[:5])
    with pytest.raises(ValueError, match="level"):
        sp.temperature_difference(a, y, a, y, level=0)


def test_the_authors_eigenvalues_are_the_dense_spectrum_scaled(data):
    """The authors' eigenvalues: all d of the float32 dense decomposition, absolute and
    renormalised, descending (checked at T = 1 against a plain float32 decomposition); at T,
    those raised to 1/T and renormalised; their top m agree with the exact ones to float32."""
    a, _ = data
    u = (a / np.linalg.norm(a, axis=2, keepdims=True)).astype(np.float32)
    dense = np.abs(np.linalg.eigvalsh(np.stack([q.T @ q for q in u]) / np.float32(u.shape[1])))
    want = -np.sort(-dense / dense.sum(1, keepdims=True), axis=1)
    one = sp.eigenvalues(a, arithmetic="authors")
    assert one.shape == (len(a), a.shape[2])
    np.testing.assert_allclose(one, want, atol=1e-6)
    scaled = one ** (1 / 2.5)
    np.testing.assert_allclose(sp.eigenvalues(a, 2.5, arithmetic="authors"),
                               scaled / scaled.sum(1, keepdims=True), rtol=1e-9)
    exact = sp.eigenvalues(a)
    np.testing.assert_allclose(one[:, :exact.shape[1]], exact, atol=1e-6)


def test_the_authors_quantile_bins_put_a_value_on_an_edge_in_the_bin_below():
    from standarderror.spectral.diagrams import _quantile_bins

    # edges: quantiles 0, 0.5, 1 = 0.1, 0.2, 0.4; the tied values 0.2 sit on the inner edge
    got = _quantile_bins(np.array([0.1, 0.2, 0.2, 0.3, 0.4]), 2)
    assert [g.tolist() for g in got] == [[0, 1, 2], [3, 4]]


def test_the_authors_bin_without_clusters_has_target_zero_and_counts(data):
    """Eight questions in two bins of four, four clusters each: every cluster is a singleton,
    so the authors' variant drops them all; each bin's target is 0 and its whole predicted
    value is its gap. Ours, asked to drop singletons too, leaves no bin with a target: an
    error, not a NaN."""
    a, y = data
    a, y = a[:8], y[:8]
    got = sp.reliability(a, y, 1.0, bins=2, clusters=4, variant="authors", binning="split")
    assert got["target"].tolist() == [0.0, 0.0]
    assert got["ece"] == pytest.approx(float(got["count"] @ got["predicted"]) / 8, rel=1e-12)
    with pytest.raises(ValueError, match="no bin keeps a cluster of at least min_cluster=2"):
        sp.reliability(a, y, 1.0, bins=2, clusters=4, min_cluster=2)

