"""standarderror.spectral against a plain dense d x d reference written here, plus the
invariants and identities the paper states (Lemma 1, Lemma 2, Theorem 1, Theorem 3)."""

from collections import OrderedDict

import numpy as np
import pytest
import scipy.linalg
import scipy.stats
from scipy.cluster import hierarchy
from scipy.spatial.distance import squareform
from sklearn.metrics import roc_auc_score

from standarderror import spectral as sp
from standarderror._immutable import frozen, immutable
from standarderror.spectral import _gram
from standarderror.spectral import authors as sp_authors
from standarderror.spectral import clusters as sp_clusters

ZERO = 1e-12
TOL = 1e-8


# --------------------------------------------------------------------------------------
# Dense reference: every quantity from explicit d x d matrices
# --------------------------------------------------------------------------------------


def unit(x):
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def dense_density(e):
    e = unit(e)
    return e.T @ e / len(e)


def dense_eig(mat):
    w, u = np.linalg.eigh(mat)
    return np.where(w > ZERO, w, 0.0), u


def dense_scaled(mat, t):
    w, u = dense_eig(mat)
    mu = np.where(w > 0, w, 0.0) ** (1.0 / t)
    mu = np.where(w > 0, mu, 0.0)
    mu = mu / mu.sum()
    return (u * mu) @ u.T


def dense_neglog(mat, eps=1e-10):
    w, u = dense_eig(mat)
    w = np.where(w > 0, w, eps)
    return (u * -np.log(w)) @ u.T


def dense_entropy(mat):
    w, _ = dense_eig(mat)
    w = w[w > 0]
    return -np.sum(w * np.log(w))


def dense_lmax(mat):
    return np.linalg.eigvalsh(mat)[-1]


def dense_all(answers, t=1.0):
    return [dense_scaled(dense_density(e), t) for e in answers]


def dense_similarity(mats):
    n = len(mats)
    s = np.empty((n, n))
    for i in range(n):
        for j in range(n):
            s[i, j] = np.sum(mats[i] * mats[j]) / np.linalg.norm(mats[i]) / np.linalg.norm(mats[j])
    return s


def dense_divergence(m1, m2, eps=1e-10):
    return -dense_entropy(m1) - np.trace(m1 @ -dense_neglog(m2, eps))


def clusters_from(sim, k):
    dist = np.clip(1 - sim, 0, None)
    dist = (dist + dist.T) / 2
    np.fill_diagonal(dist, 0)
    lab = hierarchy.fcluster(hierarchy.linkage(squareform(dist, checks=False), "average"), k, "maxclust")
    return np.unique(lab, return_inverse=True)[1]


# --------------------------------------------------------------------------------------
# Synthetic data: semantic modes, exact duplicates, targets inside and outside the span
# --------------------------------------------------------------------------------------


def make(n=12, m=6, d=24, seed=0, noise=0.3):
    rng = np.random.default_rng(seed)
    modes = rng.normal(size=(n, 3, d))
    pick = rng.integers(0, 3, size=(n, m))
    a = modes[np.arange(n)[:, None], pick] + noise * rng.normal(size=(n, m, d))
    a[:, 1] = a[:, 0]  # an exact duplicate in every question: a singular Gram matrix
    a[0, :] = a[0, 0]  # question 0: all answers identical (rank one)
    y = modes[np.arange(n), rng.integers(0, 3, size=n)] + noise * rng.normal(size=(n, d))
    y[1] = a[1, 3]  # a target inside the span
    return a * rng.uniform(0.5, 2.0, size=(n, m, 1)), y


@pytest.fixture(scope="module")
def data():
    return make()


TEMPS = [0.3, 1.0, 2.7]


# --------------------------------------------------------------------------------------
# Agreement with the dense reference
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("t", TEMPS)
def test_eigenvalues_match_dense(data, t):
    a, _ = data
    got = sp.eigenvalues(a, t)
    for i, mat in enumerate(dense_all(a, t)):
        ref = np.sort(np.linalg.eigvalsh(mat))[::-1][: a.shape[1]]
        np.testing.assert_allclose(got[i], np.clip(ref, 0, None), atol=TOL)
    np.testing.assert_allclose(got.sum(1), 1.0, atol=1e-12)
    assert np.all(np.diff(got, axis=1) <= 1e-15)
    assert np.all(got >= 0)


def test_eigenvalues_when_m_exceeds_d():
    a, _ = make(n=5, m=9, d=4, seed=3)
    got = sp.eigenvalues(a, 1.7)
    for i, mat in enumerate(dense_all(a, 1.7)):
        ref = np.sort(np.linalg.eigvalsh(mat))[::-1]
        np.testing.assert_allclose(got[i, :4], ref, atol=TOL)
        np.testing.assert_allclose(got[i, 4:], 0.0, atol=TOL)


@pytest.mark.parametrize("t", TEMPS)
def test_entropy_matches_dense(data, t):
    a, _ = data
    got = sp.entropy(a, t)
    ref = [dense_entropy(mat) for mat in dense_all(a, t)]
    np.testing.assert_allclose(got, ref, atol=TOL)
    assert got[0] == pytest.approx(0.0, abs=1e-12)  # all answers identical: a pure state


@pytest.mark.parametrize("t", TEMPS)
@pytest.mark.parametrize("eps", [1e-10, 1e-3])
def test_log_score_matches_dense(data, t, eps):
    a, y = data
    got = sp.log_score(a, y, t, eps=eps)
    yy = unit(y)
    ref = [yy[i] @ dense_neglog(mat, eps) @ yy[i] for i, mat in enumerate(dense_all(a, t))]
    np.testing.assert_allclose(got, ref, atol=TOL, rtol=1e-10)
    assert sp.risk(a, y, t, eps=eps) == pytest.approx(np.mean(ref), abs=TOL)


def test_log_score_m_exceeds_d():
    a, y = make(n=5, m=9, d=4, seed=3)
    got = sp.log_score(a, y, 0.8)
    yy = unit(y)
    ref = [yy[i] @ dense_neglog(mat) @ yy[i] for i, mat in enumerate(dense_all(a, 0.8))]
    np.testing.assert_allclose(got, ref, atol=TOL)


@pytest.mark.parametrize("t", TEMPS)
def test_similarity_matches_dense(data, t):
    a, _ = data
    got = sp.similarity(a, t)
    ref = dense_similarity(dense_all(a, t))
    np.testing.assert_allclose(got, ref, atol=TOL)
    assert np.array_equal(got, got.T)  # each pair computed once (clusters._inner)


def test_both_similarity_routes_agree(data):
    a, _ = data
    via_distinct = sp_clusters._inner_distinct(np.concatenate([a, a]))  # half the vectors repeat
    assert via_distinct is not None
    F, owner, _, _ = sp_clusters._factors(np.concatenate([a, a]), 1.0)
    np.testing.assert_allclose(via_distinct, sp_clusters._inner(F, owner, 2 * len(a)), atol=1e-13)


def test_similarity_at_one_is_the_cross_gram_formula(data):
    a, _ = data
    e = unit(a)
    m = a.shape[1]
    cross = np.einsum("iad,jbd->ijab", e, e)
    inner = np.sum(cross ** 2, axis=(2, 3)) / m**2
    norm = np.sqrt(np.diag(inner))
    np.testing.assert_allclose(sp.similarity(a), inner / np.outer(norm, norm), atol=1e-12)


@pytest.mark.parametrize("t", [0.5, 1.0, 2.0])
def test_calibration_error_matches_dense(data, t):
    a, y = data
    labels = np.array([0, 0, 1, 1, 1, 2, 2, 2, 2, 0, 1, 2])
    got = sp.calibration_error(a, y, t, labels=labels)
    mats = dense_all(a, t)
    yy = unit(y)
    ybar = yy.T @ yy / len(yy)
    cal = sharp = 0.0
    for c in range(3):
        idx = np.flatnonzero(labels == c)
        yc = yy[idx].T @ yy[idx] / len(idx)
        dc = sum(mats[i] for i in idx) / len(idx)
        cal += len(idx) / len(yy) * dense_divergence(yc, dc)
        sharp += len(idx) / len(yy) * dense_divergence(yc, ybar)
    assert got["calibration"] == pytest.approx(cal, abs=TOL)
    assert got["sharpness"] == pytest.approx(sharp, abs=TOL)
    assert got["noise"] == pytest.approx(dense_entropy(ybar), abs=TOL)
    assert got["calibration"] >= 0 and got["sharpness"] >= -1e-12


@pytest.mark.parametrize("fixed", [True, False])
def test_calibration_curve_is_calibration_error_at_each_temperature(data, fixed):
    """What the curve shares across temperatures (the spectra, the targets' terms) changes no
    bit: each entry is exactly the single-temperature result, with fixed labels or
    re-clustered at each temperature."""
    a, y = data
    ts = (0.5, 1.0, 2.0)
    kw = {"labels": np.array([0, 0, 1, 1, 1, 2, 2, 2, 2, 0, 1, 2])} if fixed else {"clusters": 4}
    curve = sp.calibration_curve(a, y, ts, **kw)
    assert len(curve) == len(ts)
    for t, got in zip(ts, curve):
        alone = sp.calibration_error(a, y, t, **kw)
        assert {k: v for k, v in got.items() if k not in ("labels", "sizes")} == \
            {k: v for k, v in alone.items() if k not in ("labels", "sizes")}
        assert got["labels"].tolist() == alone["labels"].tolist()
    with pytest.raises(ValueError, match="temperature"):
        sp.calibration_curve(a, y, (1.0, 0.0), **kw)


def test_calibration_error_full_rank_cluster_route():
    a, y = make(n=10, m=6, d=8, seed=9)  # one cluster stacks up to 60 factor rows > d = 8
    labels = np.zeros(10, dtype=int)
    got = sp.calibration_error(a, y, 1.4, labels=labels)
    mats = dense_all(a, 1.4)
    yy = unit(y)
    ybar = yy.T @ yy / len(yy)
    assert got["calibration"] == pytest.approx(dense_divergence(ybar, sum(mats) / 10), abs=TOL)


def test_calibration_error_clusters_like_dense(data):
    a, y = data
    got = sp.calibration_error(a, y, 1.3, clusters=4)
    ref = clusters_from(dense_similarity(dense_all(a, 1.3)), 4)
    assert np.array_equal(got["labels"], ref)


@pytest.mark.parametrize("t", [0.6, 1.0, 1.9])
def test_naive_reliability_matches_dense(data, t):
    a, y = data
    got = sp.naive_reliability(a, y, t, bins=3)
    mats = dense_all(a, t)
    top = np.array([dense_lmax(mat) for mat in mats])
    order = np.argsort(top, kind="stable")
    yy = unit(y)
    for b, g in enumerate(np.array_split(order, 3)):
        assert got["predicted"][b] == pytest.approx(top[g].mean(), abs=TOL)
        assert got["target"][b] == pytest.approx(dense_lmax(yy[g].T @ yy[g] / len(g)), abs=TOL)


@pytest.mark.parametrize("t", [0.6, 1.0, 1.9])
def test_algorithm_one_matches_dense(t):
    a, y = make(n=24, m=5, d=16, seed=7)
    got = sp.reliability(a, y, t, bins=3, clusters=3)
    mats = dense_all(a, t)
    top = np.array([dense_lmax(mat) for mat in mats])
    order = np.argsort(top, kind="stable")
    yy = unit(y)
    for b, g in enumerate(np.array_split(order, 3)):
        lab = clusters_from(dense_similarity([mats[i] for i in g]), 3)
        tc = [dense_lmax(yy[g][lab == c].T @ yy[g][lab == c] / np.sum(lab == c))
              for c in range(lab.max() + 1)]
        assert got["predicted"][b] == pytest.approx(top[g].mean(), abs=TOL)
        assert got["target"][b] == pytest.approx(np.mean(tc), abs=TOL)
    assert got["ece"] == pytest.approx(np.mean(np.abs(got["predicted"] - got["target"])), abs=1e-12)
    assert 0 <= got["within_bin"] <= got["within_cluster"] <= 1


def test_factors_from_a_larger_spectrum_are_the_same_to_the_bit():
    """reliability_grid decomposes every question once and hands each bin its rows of the
    spectrum; the similarities must be exactly those that decomposing the bin alone gives."""
    a, _ = make(n=30, m=6, d=16, seed=3)
    a[5, 3] = a[5, 1]  # repeated answers: zero eigenvalues, dropped from the factors
    a[9, :3] = a[9, 3:]
    full = sp_clusters._spectrum(a, vectors=True)
    g = np.array([9, 2, 5, 17, 5, 28, 11])
    for alpha in (0.4, 1.0, 2.5):
        alone = sp_clusters._cosine(a[g], alpha)
        given = sp_clusters._cosine(a[g], alpha, {"lam": full["lam"][g], "vec": full["vec"][g]})
        assert np.array_equal(alone, given)


def test_reliability_grid_matches_dense_at_every_pair():
    """Each bin's linkage is cut at every C: every pair of the grid agrees with the dense
    reference, and is exactly what a call for that pair alone returns."""
    a, y = make(n=24, m=5, d=16, seed=7)
    t = 0.6
    grid = sp.reliability_grid(a, y, t, bins=(2, 3), clusters=(1, 2, 4))
    assert list(grid) == [(2, 1), (2, 2), (2, 4), (3, 1), (3, 2), (3, 4)]
    mats = dense_all(a, t)
    top = np.array([dense_lmax(mat) for mat in mats])
    order = np.argsort(top, kind="stable")
    yy = unit(y)
    for (b, k), got in grid.items():
        for i, g in enumerate(np.array_split(order, b)):
            lab = clusters_from(dense_similarity([mats[j] for j in g]), k)
            tc = [dense_lmax(yy[g][lab == c].T @ yy[g][lab == c] / np.sum(lab == c))
                  for c in range(lab.max() + 1)]
            assert got["target"][i] == pytest.approx(np.mean(tc), abs=TOL)
        alone = sp.reliability(a, y, t, b, k)
        assert got["ece"] == alone["ece"]
        assert got["within_cluster"] == alone["within_cluster"]
        assert [s.tolist() for s in got["cluster_sizes"]] == [s.tolist() for s in alone["cluster_sizes"]]
    with pytest.raises(ValueError, match="clusters"):
        sp.reliability_grid(a, y, t, bins=(2, 3), clusters=(2, 9))


def test_variant_defaults_are_the_documented_settings():
    """Leaving an option out means the variant's documented setting (ours: split bins, cosine
    distance, clustering of the scaled answers, singleton clusters kept, size-weighted
    targets; the authors': quantile bins, Euclidean rows, unscaled answers, clusters of at
    least 2, uniform weights), and a value outside an option's set is a clear error."""
    a, y = make(n=24, m=5, d=16, seed=7)
    t = 0.6
    ours = dict(binning="split", distance="cosine", cluster_on="scaled", min_cluster=1)
    theirs = dict(binning="quantile", distance="rows", cluster_on="unscaled", min_cluster=2)
    for variant, spelled in (("ours", ours), ("authors", theirs)):
        left_out = sp.reliability_grid(a, y, t, bins=(2, 3), clusters=(2,), variant=variant)
        given = sp.reliability_grid(a, y, t, bins=(2, 3), clusters=(2,), variant=variant,
                                    **spelled)
        assert [(k, v["ece"]) for k, v in left_out.items()] == \
            [(k, v["ece"]) for k, v in given.items()]
    assert sp.reliability_grid(a, y, t, (3,), (2,))[(3, 2)]["ece"] != \
        sp.reliability_grid(a, y, t, (3,), (2,), **theirs)[(3, 2)]["ece"]
    for variant, weighting in (("ours", "size"), ("authors", "uniform")):
        left_out = sp.calibration_curve(a, y, (t,), clusters=3, variant=variant)
        given = sp.calibration_curve(a, y, (t,), clusters=3, variant=variant,
                                     weighting=weighting,
                                     distance="rows" if variant == "authors" else "cosine")
        assert left_out[0]["calibration"] == given[0]["calibration"]
    for option, value in (("binning", "equal"), ("cluster_on", "raw")):
        with pytest.raises(ValueError, match=f"{option} must be .* got '{value}'"):
            sp.reliability_grid(a, y, t, (2,), (2,), **{option: value})
    with pytest.raises(ValueError, match="weighting must be 'uniform' or 'size', got 'all'"):
        sp.calibration_curve(a, y, (t,), clusters=3, weighting="all")


def test_kernel_language_entropy_matches_expm(data):
    a, _ = data
    got = sp.kernel_language_entropy(a, time=0.7)
    for i, e in enumerate(unit(a)):
        w = np.clip(e @ e.T, 0, None)
        np.fill_diagonal(w, 0)
        k = scipy.linalg.expm(-0.7 * (np.diag(w.sum(1)) - w))
        k /= np.trace(k)
        lam = np.linalg.eigvalsh(k)
        assert got[i] == pytest.approx(-np.sum(lam * np.log(lam)), abs=TOL)


def test_kernel_language_entropy_ties_questions_of_one_repeated_answer():
    """Questions whose m answers are one word repeated have equal answer graphs in exact
    arithmetic (the complete graph, every weight 1), whichever the word: their entropies must
    be equal to the bit, in both variants, and equal the complete graph's in closed form."""
    rng = np.random.default_rng(5)
    m, d = 6, 24
    words = rng.normal(size=(40, d))
    a = np.repeat(words[:, None, :], m, axis=1)
    u = words / np.linalg.norm(words, axis=1, keepdims=True)
    assert np.any(np.einsum("qd,qd->q", u, u) != 1.0)  # the cosines are 1 only within rounding
    mixed = a.copy()
    mixed[:, 0] = rng.normal(size=(40, d))  # one other answer: graphs that differ
    for variant, t in (("ours", 1.0), ("authors", 0.4)):
        k = sp.kernel_language_entropy(a, variant=variant)
        assert np.unique(k).size == 1, variant
        # the complete graph's Laplacian has eigenvalues 0 (once) and m (m - 1 times)
        if variant == "ours":
            z = np.array([1.0] + [np.exp(-t * m)] * (m - 1))
        else:  # exp(-tL) over m times its (constant) diagonal
            diag = np.exp(-t * m) + (1 - np.exp(-t * m)) / m
            z = np.array([1.0] + [np.exp(-t * m)] * (m - 1)) / (m * diag)
        kappa = z / z.sum()
        assert k[0] == pytest.approx(-np.sum(kappa * np.log(kappa)), rel=1e-9)
        assert np.unique(sp.kernel_language_entropy(mixed, variant=variant)).size > 1


# --------------------------------------------------------------------------------------
# Invariants and the paper's identities
# --------------------------------------------------------------------------------------


def test_temperature_one_is_identity(data):
    a, y = data
    raw = np.array([np.sort(np.linalg.eigvalsh(dense_density(e)))[::-1][: a.shape[1]] for e in a])
    np.testing.assert_allclose(sp.eigenvalues(a, 1.0), np.where(raw > ZERO, raw, 0), atol=1e-13)
    yy = unit(y)
    ref = [yy[i] @ dense_neglog(dense_density(e)) @ yy[i] for i, e in enumerate(a)]
    np.testing.assert_allclose(sp.log_score(a, y, 1.0), ref, atol=TOL)


def test_extreme_temperatures_stay_finite(data):
    a, y = data
    for t in (0.02, 200.0):
        ev = sp.eigenvalues(a, t)
        assert np.all(np.isfinite(ev)) and np.allclose(ev.sum(1), 1)
        assert np.all(np.isfinite(sp.log_score(a, y, t)))
    # T -> 0 concentrates on the top eigenvalue; T -> inf flattens over the non-zero ones
    assert np.all(sp.eigenvalues(a, 0.02)[:, 0] >= sp.eigenvalues(a)[:, 0])
    assert np.median(sp.eigenvalues(a, 0.02)[:, 0]) > 0.99
    rank = (sp.eigenvalues(a) > 0).sum(1)
    flat = sp.eigenvalues(a, 1e6)
    np.testing.assert_allclose(flat[:, 0], 1.0 / rank, rtol=1e-4)


def _replicated(a):
    """Each question repeated m times, the target running over its own m answers: the empirical
    target density matrix given the prediction is the prediction itself (matrix calibrated)."""
    n, m, d = a.shape
    return np.repeat(a, m, axis=0), a.reshape(n * m, d)


def test_lemma_one_risk_equals_entropy_when_calibrated(data):
    a, _ = data
    ar, yr = _replicated(a)
    assert sp.risk(ar, yr) == pytest.approx(sp.entropy(a).mean(), abs=1e-10)
    # and nowhere else: any other temperature has strictly larger risk (properness)
    for t in (0.7, 1.4):
        assert sp.risk(ar, yr, t) > sp.risk(ar, yr) + 1e-6


def test_fig2_constant_predictor_is_minimised_at_one():
    rng = np.random.default_rng(5)
    targets = unit(rng.normal(size=(40, 16)) + 2 * rng.normal(size=(1, 16)))
    answers = np.broadcast_to(targets, (40, 40, 16))
    fit = sp.fit_spectral_temperature(answers, targets, bounds=(0.1, 10))
    assert fit["temperature"] == pytest.approx(1.0, abs=1e-4)
    curve = sp.risk_curve(answers, targets, [0.5, 0.8, 1.0, 1.25, 2.0])
    assert np.argmin(curve["risk"]) == 2
    assert curve["gap"][2] == pytest.approx(0.0, abs=1e-10)  # risk touches the entropy at T = 1


def test_fit_temperature_matches_dense_grid(data):
    a, y = data
    fit = sp.fit_spectral_temperature(a, y, bounds=(0.05, 20))
    yy = unit(y)
    grid = np.exp(np.linspace(np.log(0.05), np.log(20), 400))
    dense_risk = [np.mean([yy[i] @ dense_neglog(mat) @ yy[i] for i, mat in enumerate(dense_all(a, t))])
                  for t in grid[::20]]
    assert fit["risk"] <= min(dense_risk) + 1e-9
    assert fit["risk"] == pytest.approx(sp.risk(a, y, fit["temperature"]), abs=1e-12)
    assert fit["risk"] <= fit["risk_at_one"]


def test_risk_curve_agrees_with_pointwise(data):
    a, y = data
    ts = [0.4, 1.0, 3.0]
    curve = sp.risk_curve(a, y, ts)
    for k, t in enumerate(ts):
        assert curve["risk"][k] == pytest.approx(sp.risk(a, y, t), abs=1e-12)
        assert curve["entropy"][k] == pytest.approx(sp.entropy(a, t).mean(), abs=1e-12)


def _grouped(seed=11, groups=4, per=5, m=4, d=10):
    """Questions in groups that share an identical prediction; targets replicate the answers so
    each group is exactly matrix calibrated."""
    rng = np.random.default_rng(seed)
    base = rng.normal(size=(groups, m, d)) + rng.normal(size=(groups, 1, d))
    a = np.repeat(base, per, axis=0)
    labels = np.repeat(np.arange(groups), per)
    y = unit(base[labels, rng.integers(0, m, size=len(labels))] + 0.2 * rng.normal(size=(len(labels), d)))
    return a, y, labels


@pytest.mark.parametrize("t", [0.5, 1.0, 2.5])
def test_lemma_two_decomposition_is_exact_for_a_partition_of_equal_predictions(t):
    a, y, labels = _grouped()
    got = sp.calibration_error(a, y, t, labels=labels)
    assert got["risk"] == pytest.approx(got["decomposed"], abs=1e-9)


def test_theorem_three_change_in_risk_is_change_in_calibration():
    a, y, labels = _grouped()
    base = sp.calibration_error(a, y, 1.0, labels=labels)
    for t in (0.4, 1.7, 6.0):
        r = sp.calibration_error(a, y, t, labels=labels)
        assert r["risk"] - base["risk"] == pytest.approx(r["calibration"] - base["calibration"], abs=1e-9)
        assert r["sharpness"] == pytest.approx(base["sharpness"], abs=1e-12)


def test_theorem_one_naive_diagram_underestimates_algorithm_one_does_not():
    # Two groups with the same lambda_max but orthogonal leading directions: each group is
    # matrix calibrated (targets run over the answers); pooling them lowers the target lambda_max.
    d, m = 6, 4
    e = np.eye(d)
    g1 = np.stack([e[0], e[0], e[0], e[1]])
    g2 = np.stack([e[2], e[2], e[2], e[3]])
    a = np.concatenate([np.repeat(g1[None], m, 0), np.repeat(g2[None], m, 0)])
    y = np.concatenate([g1, g2])
    naive = sp.naive_reliability(a, y, bins=1)
    alg = sp.reliability(a, y, bins=1, clusters=2)
    assert naive["predicted"][0] == pytest.approx(0.75)
    assert naive["target"][0] == pytest.approx(0.375)  # strictly below: Eq. 12
    assert alg["target"][0] == pytest.approx(0.75)  # equal: Eq. 11
    assert alg["ece"] == pytest.approx(0.0, abs=1e-12)
    assert alg["within_cluster"] == pytest.approx(1.0) and alg["within_bin"] < 1


def test_subsample_estimator_is_biased_upwards():
    a, _ = make(n=30, m=12, d=20, seed=2, noise=0.8)
    res = sp.max_eigenvalue_subsample(a, [3, 6, 12], draws=200, seed=0)
    ref = np.array([dense_lmax(dense_density(e)) for e in a])
    np.testing.assert_allclose(res["reference"], ref, atol=TOL)
    assert res["mean"][-1] == pytest.approx(ref.mean(), abs=1e-12)  # s = m: no randomness
    assert res["std"][-1] == pytest.approx(0.0, abs=1e-12)
    # Jensen: E[lambda_max(subset)] >= lambda_max(E[subset]) = lambda_max(all m), strictly here
    assert res["bias"][0] > res["bias"][1] > 0


def test_auroc_matches_sklearn_with_ties():
    rng = np.random.default_rng(0)
    s = rng.integers(0, 5, size=300).astype(float)
    c = (rng.random(300) < 0.3 + 0.1 * s).astype(int)
    got = sp.auroc(s, c, bootstrap=50, seed=1)
    assert got["auroc"] == pytest.approx(roc_auc_score(c, s), abs=1e-12)
    idx = np.random.default_rng(1).integers(0, 300, size=(50, 300))
    ref = [roc_auc_score(c[i], s[i]) for i in idx]
    np.testing.assert_allclose(got["draws"], ref, atol=1e-12)
    assert got["se"] == pytest.approx(np.std(ref, ddof=1), abs=1e-12)


def test_counted_auroc_is_the_rank_formula_bit_for_bit():
    # the Mann-Whitney statistic from average ranks (scipy.stats.rankdata) on each resample,
    # whose sums are exact: the counted AUROC must give the same floats, ties included
    from standarderror.spectral import baselines

    rng = np.random.default_rng(7)
    for n, levels in ((300, 4), (257, None), (40, 2)):
        s = rng.normal(size=n) if levels is None else rng.integers(0, levels, n).astype(float)
        c = (rng.random(n) < 0.4).astype(float)
        idx = np.random.default_rng(n).integers(0, n, size=(60, n))
        r = scipy.stats.rankdata(s[idx], axis=-1)
        cc = c[idx]
        pos, neg = cc.sum(-1), n - cc.sum(-1)
        with np.errstate(invalid="ignore", divide="ignore"):
            ranked = (np.sum(r * cc, axis=-1) - pos * (pos + 1) / 2) / (pos * neg)
        counted = baselines._auc(s, c, baselines._draw_counts(n, 60, n))
        assert np.array_equal(counted, ranked, equal_nan=True)
        assert baselines._auc(s, c)[0] == pytest.approx(roc_auc_score(c, s), abs=1e-15)
    one = baselines._auc(np.array([0.1, 0.2, 0.3]), np.ones(3))  # a single class: no AUROC
    assert np.isnan(one).all()


def test_semantic_entropy_counts_classes():
    rng = np.random.default_rng(4)
    base = rng.normal(size=(3, 5, 32))
    pick = np.array([[0, 0, 0, 0, 0, 0], [0, 1, 2, 0, 1, 0], [0, 1, 2, 3, 4, 4]])
    a = base[np.arange(3)[:, None], pick]
    got = sp.semantic_entropy(a, threshold=0.99)
    for i in range(3):
        counts = np.unique(pick[i], return_counts=True)[1]
        assert got["classes"][i] == len(counts)
        assert got["entropy"][i] == pytest.approx(scipy.stats.entropy(counts), abs=1e-12)
        assert got["largest"][i] == pytest.approx(counts.max() / 6)
    # threshold -1 < t: everything similar enough merges into one class
    assert np.all(sp.semantic_entropy(np.abs(a), threshold=-0.5)["classes"] == 1)


def test_chunking_does_not_change_results(data, monkeypatch):
    a, y = data
    before = (sp.log_score(a, y, 0.7), sp.similarity(a, 0.7), sp.eigenvalues(a, 1.3))
    small = 8 * a.shape[1] * a.shape[2] * 2
    # patched where it is read: the Gram spectra (_gram) and the Frobenius inner products
    # (clusters._inner) each import the budget into their own module
    monkeypatch.setattr(_gram, "_CHUNK_BYTES", small)
    monkeypatch.setattr(sp_clusters, "_CHUNK_BYTES", small)
    empty_cache(monkeypatch)  # else the spectra of ``before`` would be served again
    assert _gram._chunk(a.shape[1], a.shape[2]) < len(a)  # several chunks of questions
    after = (sp.log_score(a, y, 0.7), sp.similarity(a, 0.7), sp.eigenvalues(a, 1.3))
    for u, v in zip(before, after):
        np.testing.assert_allclose(u, v, atol=1e-13)
    assert np.array_equal(after[1], after[1].T)  # chunks of questions: still each pair once


def empty_cache(monkeypatch):
    monkeypatch.setattr(_gram, "_CACHE", OrderedDict())
    monkeypatch.setattr(_gram, "_BY_ID", {})


def test_answers_are_cached_by_content_read_only_and_bit_identical(data, monkeypatch):
    empty_cache(monkeypatch)
    a, y = data
    first = _gram._answers(a)
    assert not first.flags.writeable
    with pytest.raises(ValueError):
        first[0, 0, 0] = 1.0  # no caller can change a cached entry
    assert _gram._answers(a.copy()) is first  # the same numbers: the same object
    assert _gram._answers(a.astype(np.float32)) is not first  # other numbers
    # what the cache serves is what the computation gives, bit for bit
    fresh = _gram._checked_unit(np.asarray(a, dtype=float), "answers")
    assert np.array_equal(first, fresh)
    spec = _gram._spectrum(first, vectors=True)
    assert _gram._spectrum(first)["lam"] is spec["lam"]  # decomposed once
    direct = _gram._decompose(first, None, vectors=True)
    assert np.array_equal(spec["lam"], direct["lam"]) and np.array_equal(spec["vec"], direct["vec"])
    assert _gram._spectrum(first.copy())["lam"] is not spec["lam"]  # not a cached object
    # a public result from cached inputs equals the one from an empty cache
    again = (sp.reliability(a, y, 0.8, bins=2, clusters=3), sp.eigenvalues(a, 1.3),
             sp.similarity(a, 0.7))
    empty_cache(monkeypatch)
    cold = (sp.reliability(a, y, 0.8, bins=2, clusters=3), sp.eigenvalues(a, 1.3),
            sp.similarity(a, 0.7))
    assert again[0]["ece"] == cold[0]["ece"]
    assert np.array_equal(again[0]["target"], cold[0]["target"])
    assert np.array_equal(again[1], cold[1]) and np.array_equal(again[2], cold[2])


def test_the_cache_follows_the_content_of_a_changed_array(data, monkeypatch):
    empty_cache(monkeypatch)
    a, _ = data
    a = a.copy()
    before = sp.eigenvalues(a)
    a[0] = a[1]  # the caller changes its array in place: the next call must see it
    after = sp.eigenvalues(a)
    assert np.array_equal(after[1], before[1]) and np.array_equal(after[0], before[1])
    assert not np.array_equal(after[0], before[0])


def test_the_cache_is_bounded_and_streamed_chunks_stay_out(data, monkeypatch):
    empty_cache(monkeypatch)
    a, y = data
    monkeypatch.setattr(_gram, "_CACHE_SIZE", 3)
    for k in range(6):
        _gram._answers(a * (k + 1.5))
        assert len(_gram._CACHE) <= 3 and len(_gram._BY_ID) == len(_gram._CACHE)
    monkeypatch.setattr(_gram, "_CACHE_BYTES", 2 * a.nbytes)
    _gram._answers(a[:, :, ::-1])  # over the byte budget with the three kept: oldest leave
    assert sum(e["unit"].nbytes for e in _gram._CACHE.values()) <= 2 * a.nbytes
    empty_cache(monkeypatch)
    sp.spectrum([(a, y)])  # a streamed chunk is seen once: not kept
    assert not _gram._CACHE
    monkeypatch.setattr(_gram, "_CACHE_BYTES", a.nbytes - 1)
    _gram._answers(a)  # larger than the whole budget: computed, not kept
    assert not _gram._CACHE


def test_only_arrays_on_immutable_memory_count_as_immutable():
    x = np.arange(24.0).reshape(2, 3, 4)
    f = frozen(x)
    assert f.shape == x.shape and f.dtype == x.dtype and np.array_equal(f, x)
    assert immutable(f) and immutable(f[:1, :, ::2])  # views of it too
    for a in (f, f.base):
        with pytest.raises(ValueError):
            a.flags.writeable = True  # numpy refuses: the memory is a bytes object
    with pytest.raises(ValueError):
        f[0, 0, 0] = 1.0
    assert not immutable(x)
    ro = x.copy()
    ro.flags.writeable = False  # read-only, but its owner may undo that:
    assert not immutable(ro)
    ro.flags.writeable = True
    ro[0, 0, 0] = 5.0
    view = x[:1]
    view.flags.writeable = False
    assert not immutable(view)  # x, its base, is writeable
    assert not immutable(np.frombuffer(bytearray(x.tobytes())))  # a bytearray can change
    assert frozen(np.zeros((0, 3))).shape == (0, 3)


def test_immutable_answers_are_hashed_once_and_others_at_every_call(data, monkeypatch):
    empty_cache(monkeypatch)
    monkeypatch.setattr(_gram, "_DIGESTS", {})
    a, y = data
    hashed = []
    real = _gram.digest
    monkeypatch.setattr(_gram, "digest", lambda x: hashed.append(x.shape) or real(x))
    f = frozen(a)
    first = sp.eigenvalues(f, 1.3)
    assert np.array_equal(first, sp.eigenvalues(a, 1.3))  # the same numbers either way
    hashed.clear()
    for _ in range(3):
        assert np.array_equal(sp.eigenvalues(f, 1.3), first)
    assert hashed == []  # the same immutable object: its digest is kept
    # the key is the digest of the content: equal to the plain array's, which is hashed
    # at every call (its owner may have changed it since)
    assert _gram.content_key(f) == real(a)
    plain = a.copy()
    _gram.content_key(plain)
    _gram.content_key(plain)
    assert hashed == [a.shape] * 2
    # the kept digest goes with the array
    key = id(f)
    del f
    import gc
    gc.collect()
    assert key not in _gram._DIGESTS


def test_immutable_answers_are_scanned_once_and_others_at_every_call(data, monkeypatch):
    """_answers looks an immutable float64 array up before it scans it for NaN and infinity:
    found, those bytes were scanned when they were cached. Any other array is scanned at
    every call, and an immutable array that was never cached is scanned (and refused)."""
    empty_cache(monkeypatch)
    monkeypatch.setattr(_gram, "_DIGESTS", {})
    a, _ = data
    scanned = []
    real = _gram._checks.array
    monkeypatch.setattr(_gram._checks, "array",
                        lambda x, name, **kw: scanned.append(np.shape(x)) or real(x, name, **kw))
    f = frozen(a)
    unit = _gram._answers(f)
    assert scanned == [a.shape]
    scanned.clear()
    assert _gram._answers(f) is unit and _gram._answers(frozen(a)) is unit
    assert scanned == []  # the same bytes, cached: not scanned again
    assert _gram._answers(a) is unit and _gram._answers(a) is unit
    assert scanned == [a.shape] * 2  # a writeable array: at every call
    bad = a.copy()
    bad[1, 0, 2] = np.nan
    for _ in range(2):
        with pytest.raises(ValueError, match="NaN or infinite"):
            _gram._answers(frozen(bad))
    assert _gram._answers(frozen(a.astype(np.float32))).dtype == np.float64  # scanned, cast


def test_the_authors_decompositions_are_found_without_hashing_the_cached_answers(
        data, monkeypatch):
    empty_cache(monkeypatch)
    monkeypatch.setattr(sp_authors, "_DENSE_CACHE", {})
    a, y = data
    unit = _gram._answers(a)
    assert _gram.answers_key(unit) == ("cached", _gram.digest(a))
    hashed = []
    real = _gram.digest
    monkeypatch.setattr(_gram, "digest", lambda x: hashed.append(x.shape) or real(x))
    first = sp.fit_spectral_temperature(a, y, arithmetic="authors")
    hashed.clear()
    again = sp.fit_spectral_temperature(frozen(a), y, arithmetic="authors")
    assert again["temperature"] == first["temperature"] and again["risk"] == first["risk"]
    assert hashed.count(a.shape) == 1  # the frozen copy, once; the cached unit answers never
    assert len(sp_authors._DENSE_CACHE) == 1
    # an array that is not the cached object is keyed by its bytes, apart from it
    assert _gram.answers_key(unit.copy()) == ("bytes", real(unit))


def test_permutation_of_answers_changes_nothing(data):
    a, y = data
    perm = np.random.default_rng(0).permutation(a.shape[1])
    np.testing.assert_allclose(sp.log_score(a, y, 1.5), sp.log_score(a[:, perm], y, 1.5), atol=1e-12)


# --------------------------------------------------------------------------------------
# Bad input
# --------------------------------------------------------------------------------------


def test_bad_inputs_name_the_argument(data):
    a, y = data
    with pytest.raises(ValueError, match="answers"):
        sp.eigenvalues(a[:, :1])
    with pytest.raises(ValueError, match="answers"):
        sp.eigenvalues(a[0])
    with pytest.raises(ValueError, match="targets"):
        sp.log_score(a, y[:, :-1])
    with pytest.raises(ValueError, match="targets"):
        sp.log_score(a, y[:-1])
    z = a.copy()
    z[2, 3] = 0
    with pytest.raises(ValueError, match="answers.*zero-norm"):
        sp.entropy(z)
    z = a.copy()
    z[2, 3, 1] = np.nan
    with pytest.raises(ValueError, match="answers.*NaN"):
        sp.entropy(z)
    yz = y.copy()
    yz[0] = 0
    with pytest.raises(ValueError, match="targets.*zero-norm"):
        sp.risk(a, yz)
    for t in (0, -1, np.inf, np.nan):
        with pytest.raises(ValueError, match="temperature"):
            sp.eigenvalues(a, t)
    with pytest.raises(ValueError, match="eps"):
        sp.log_score(a, y, eps=0)
    with pytest.raises(ValueError, match="bins"):
        sp.naive_reliability(a, y, bins=13)
    with pytest.raises(ValueError, match="bins"):
        sp.reliability(a, y, bins=0)
    with pytest.raises(ValueError, match="clusters"):
        sp.reliability(a, y, bins=3, clusters=5)
    with pytest.raises(ValueError, match="clusters"):
        sp.calibration_error(a, y, clusters=13)
    with pytest.raises(ValueError, match="labels"):
        sp.calibration_error(a, y, labels=np.zeros(3, int))
    with pytest.raises(ValueError, match="sizes"):
        sp.max_eigenvalue_subsample(a, [7])
    with pytest.raises(ValueError, match="correct"):
        sp.auroc(np.arange(4.0), np.ones(4))
    with pytest.raises(ValueError, match="method"):
        sp.cluster(a, 2, method="ward")


# --------------------------------------------------------------------------------------
# Streamed spectra (10^5 questions in bounded memory)
# --------------------------------------------------------------------------------------


def test_streamed_spectrum_gives_the_curve_and_fit_of_the_whole_arrays():
    a, y = make(n=30, m=6, d=24, seed=3)
    ts = [0.3, 1.0, 2.7]
    whole = sp.risk_curve(a, y, ts)
    fit = sp.fit_spectral_temperature(a, y)
    chunks = ((a[s:s + 7], y[s:s + 7]) for s in range(0, 30, 7))  # uneven chunks
    spec = sp.spectrum(chunks)
    assert spec["lam"].shape == spec["proj"].shape == (30, 6)
    streamed = sp.risk_curve(spec, None, ts)
    for key in ("risk", "risk_se", "entropy", "entropy_se", "gap"):
        np.testing.assert_allclose(streamed[key], whole[key], rtol=0, atol=1e-13)
    f2 = sp.fit_spectral_temperature(spec, None)
    assert f2["temperature"] == pytest.approx(fit["temperature"], rel=1e-6)
    assert f2["risk"] == pytest.approx(fit["risk"], abs=1e-12)
    # against the dense d x d reference, question by question
    yy = unit(y)
    for k, t in enumerate(ts):
        ref = np.mean([yy[i] @ dense_neglog(mat) @ yy[i] for i, mat in enumerate(dense_all(a, t))])
        assert streamed["risk"][k] == pytest.approx(ref, abs=TOL)
    # one pair is one chunk
    one = sp.spectrum((a, y))
    np.testing.assert_allclose(one["lam"], spec["lam"], atol=1e-13)


def test_streamed_spectrum_bad_inputs_name_the_argument():
    a, y = make(n=6, m=4, d=10)
    with pytest.raises(ValueError, match="chunks is empty"):
        sp.spectrum(iter([]))
    with pytest.raises(ValueError, match="pairs"):
        sp.spectrum([a])
    with pytest.raises(ValueError, match=r"chunk 1.*same m and d"):
        sp.spectrum([(a, y), (a[:, :3], y)])
    with pytest.raises(ValueError, match=r"targets \(chunk 0\)"):
        sp.spectrum([(a, y[:, :5])])
    spec = sp.spectrum((a, y))
    with pytest.raises(ValueError, match="targets must be None"):
        sp.risk_curve(spec, y, [1.0])
    with pytest.raises(ValueError, match="exact"):
        sp.fit_spectral_temperature(spec, None, arithmetic="authors")


@pytest.mark.parametrize("seed", range(6))
def test_unique_rows_is_numpys_unique(seed):
    """The distinct-rows shortcut returns exactly ``np.unique(axis=0)``'s rows, inverse and
    counts, also when rows tie on leading fields and when a zero is signed (equal as numbers,
    different as bytes)."""
    rng = np.random.default_rng(seed)
    base = rng.integers(-2, 3, size=(rng.integers(2, 40), 5)).astype(float) * rng.random()
    base[rng.random(base.shape) < 0.2] = 0.0
    x = base[rng.integers(0, len(base), 500)]
    x[rng.random(x.shape) < 0.1 * (x == 0)] = -0.0
    got = sp_clusters._unique_rows(x)
    want = np.unique(x, axis=0, return_inverse=True, return_counts=True)
    assert np.signbit(x[x == 0]).any() and (~np.signbit(x[x == 0])).any()  # both zeros occur
    assert [g.tolist() for g in got] == [want[0].tolist(), want[1].ravel().tolist(), want[2].tolist()]
    with pytest.raises(ValueError, match="2-D"):
        sp_clusters._unique_rows(x[0])


def test_bins_and_clusters_shared_among_threads_give_the_serial_results(data, monkeypatch):
    """reliability_grid's bins and calibration_curve's clusters run on a thread pool
    (``_parallel.ordered_map``, numpy's BLAS on one thread): the same numbers as one thread."""
    from standarderror import _parallel

    a, y = data
    runs = []
    for workers in (1, 2, 3):
        monkeypatch.setattr(_parallel, "WORKERS", workers)
        empty_cache(monkeypatch)
        grid = sp.reliability_grid(a, y, 0.8, bins=(2, 3), clusters=(2, 3))
        curve = sp.calibration_curve(a, y, [0.7, 1.3], clusters=3)
        runs.append(([(r["ece"], r["target"], r["within_cluster"], r["within_bin"])
                      for r in grid.values()],
                     [(c["calibration"], c["labels"]) for c in curve]))
    for other in runs[1:]:
        for (e0, t0, c0, b0), (e1, t1, c1, b1) in zip(runs[0][0], other[0]):
            assert e0 == e1 and np.array_equal(t0, t1) and c0 == c1 and b0 == b1
        for (k0, l0), (k1, l1) in zip(runs[0][1], other[1]):
            assert k0 == k1 and np.array_equal(l0, l1)


def test_ordered_map_keeps_the_order_and_the_errors():
    from standarderror import _parallel

    assert _parallel.ordered_map(lambda x: x * x, range(7)) == [x * x for x in range(7)]
    assert _parallel.ordered_map(abs, []) == []
    with pytest.raises(ZeroDivisionError):
        _parallel.ordered_map(lambda x: 1 / x, [1, 0, 2])


@pytest.mark.parametrize("n", [40, 384])
def test_thin_svd_is_numpys_bit_for_bit(n):
    """targets._thin_svd skips numpy.linalg.svd's left singular vectors (a cluster mean's
    decomposition): on either side of dgesdd's QR threshold (11 n / 6 rows), full rank and
    rank-deficient (repeated rows, as repeated answers give), the singular values and right
    vectors must be numpy's exactly."""
    from standarderror.spectral import targets

    rng = np.random.default_rng(n)
    cut = int(n * 11 / 6)
    for rows in (n + 1, cut - 1, cut, cut + 1, 3 * n):
        x = rng.standard_normal((rows, n)) * np.exp(-np.arange(n) / 8)
        deficient = x[rng.integers(0, n // 2, rows)]
        for a in (x, deficient):
            sv, vt = targets._thin_svd(a)
            _, ref_sv, ref_vt = np.linalg.svd(a, full_matrices=False)
            assert np.array_equal(sv, ref_sv) and np.array_equal(vt, ref_vt), (rows, n)


def test_kept_similarities_are_the_computed_ones(monkeypatch):
    """clusters._cosine keeps each (temperature, rows) similarity with the cached answers
    (_gram._memo): served again it must be the same object, equal bit for bit to a fresh
    computation, read-only; sp.similarity hands out a writable copy; the memo is bounded."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((30, 6, 16))
    a = _gram._answers(x)
    rows = np.array([3, 1, 4, 15, 9, 2, 6])
    for alpha, g in ((1.0, None), (0.5, rows), (2.0, rows)):
        s1 = sp_clusters._cosine(a, alpha, rows=g)
        assert sp_clusters._cosine(a, alpha, rows=g) is s1 and not s1.flags.writeable
        fresh = sp_clusters._cosine_of(a, alpha, None, g)
        assert np.array_equal(s1, fresh)
    open_copy = sp.similarity(x, temperature=2.0)
    assert open_copy.flags.writeable
    assert np.array_equal(open_copy, sp_clusters._cosine_of(a, 0.5, None, None))
    not_cached = a.copy()  # not the cached object: computed, never kept
    assert sp_clusters._cosine(not_cached, 0.5) is not sp_clusters._cosine(not_cached, 0.5)
    monkeypatch.setattr(_gram, "_MEMO_SIZE", 2)
    for k in range(5):
        sp_clusters._cosine(a, 0.5, rows=rows[:k + 2])
    assert len(_gram._CACHE[_gram._BY_ID[id(a)]]["memo"]) == 2


def test_a_map_inside_a_map_runs_in_its_thread(monkeypatch):
    """_parallel.ordered_map shares items out among threads, but one called from a pool
    thread (clusters._inner inside a reliability bin) runs its items in turn there: no pool
    inside a pool; the results are the plain loop's either way."""
    import threading

    from standarderror import _parallel

    monkeypatch.setattr(_parallel, "WORKERS", 2)
    seen = []

    def inner(x):
        seen.append((threading.get_ident(), x))
        return x * x

    def outer(x):
        me = threading.get_ident()
        got = _parallel.ordered_map(inner, range(x, x + 3))
        assert {t for t, v in seen if v in range(x, x + 3)} == {me}  # all in this thread
        return got

    assert _parallel.ordered_map(outer, [0, 10]) == [[0, 1, 4], [100, 121, 144]]
    top = _parallel.ordered_map(inner, range(6))  # at top level: shared out again
    assert top == [x * x for x in range(6)]


def test_projections_of_cached_answers_are_the_decompositions_bit_for_bit(data, monkeypatch):
    """_spectrum with targets, on answers the cache holds, takes the projections from the kept
    eigenvectors instead of decomposing every question again: the numbers of _decompose with
    the targets, bit for bit, kept read-only and served again for the same targets."""
    empty_cache(monkeypatch)
    a, y = data
    unit = _gram._answers(a)
    yy = _gram._targets(y, *unit.shape[::2])
    direct = _gram._decompose(unit, yy, vectors=True)
    got = _gram._spectrum(unit, yy, vectors=True)
    for k in ("lam", "proj", "vec"):
        assert np.array_equal(got[k], direct[k]), k
    assert not got["proj"].flags.writeable
    assert _gram._spectrum(unit, yy.copy())["proj"] is got["proj"]  # the same targets: kept
    other = _gram._targets(y[::-1].copy(), *unit.shape[::2])
    again = _gram._spectrum(unit, other)
    assert np.array_equal(again["proj"], _gram._decompose(unit, other, vectors=False)["proj"])
    assert not np.array_equal(again["proj"], got["proj"])  # other targets: their own
    # a public score from the kept projections equals one from an empty cache
    warm = sp.log_score(a, y, 0.7)
    empty_cache(monkeypatch)
    assert np.array_equal(warm, sp.log_score(a, y, 0.7))


def test_decompositions_and_subsets_shared_among_threads_give_the_serial_results(
        data, monkeypatch):
    """_decompose's chunks of questions and max_eigenvalue_subsample's chunks of draws run on
    the thread pool: with chunks small enough for several, the numbers of one thread."""
    from standarderror import _parallel
    from standarderror.spectral import subsample

    a, y = data
    unit = _gram._answers(a, cache=False)
    yy = _gram._targets(y, *unit.shape[::2])
    n, m, d = unit.shape
    monkeypatch.setattr(_gram, "_CHUNK_BYTES", 8 * m * d * 5)  # five questions a chunk
    monkeypatch.setattr(subsample, "_CHUNK_BYTES", 8 * n * 4 * 4 * 3)  # three draws at s = 4
    runs = []
    for workers in (1, 2, 3):
        monkeypatch.setattr(_parallel, "WORKERS", workers)
        empty_cache(monkeypatch)
        dec = _gram._decompose(unit, yy, vectors=True)
        sub = sp.max_eigenvalue_subsample(a, [2, 4], draws=10, seed=1)
        runs.append((dec, sub))
    assert n > 5  # several chunks
    for dec, sub in runs[1:]:
        for k in ("lam", "proj", "vec"):
            assert np.array_equal(dec[k], runs[0][0][k]), k
        for k in ("mean", "std", "bias", "reference"):
            assert np.array_equal(sub[k], runs[0][1][k]), k
