"""Tests for standarderror.uncertainty.calibration (Episode 3).

Metrics are checked against established libraries (sklearn, scipy) or against plain loop
implementations written here; invariances are checked exactly (==). Tests that load the
model are marked slow and skipped until the checkpoint card exists.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import special, stats
from sklearn.metrics import brier_score_loss, log_loss

from standarderror.uncertainty import calibration as cb
from standarderror.uncertainty import selective


def synthetic(n_seq=48, length=16, classes=12, seed=0, sharp=1.0):
    """Logits of varied shapes and sharpness, labels drawn from the softmax of logits/sharp."""
    rng = np.random.default_rng(seed)
    n = n_seq * length
    z = rng.normal(size=(n, classes)) * rng.gamma(2.0, 1.0, size=(n, 1))
    z[rng.random(n) < 0.3, :3] += 2.0  # some rows with a few strong rivals
    q = np.exp(cb.scale(z / sharp, 1.0))
    y = (q.cumsum(axis=1) > rng.random((n, 1))).argmax(axis=1)
    logp = cb.scale(z, 1.0)
    return {"p": np.exp(logp), "logp": logp, "y": y, "sequence": np.repeat(np.arange(n_seq), length),
            "z": z}


@pytest.fixture(scope="module")
def data():
    return synthetic()


# ------------------------------------------------------------------ scaling and exactness

def test_scale_matches_scipy_log_softmax(data):
    for t in (0.2, 0.7, 1.0, 3.0):
        ours = cb.scale(data["z"], t)
        ref = special.log_softmax(data["z"] / t, axis=1)
        np.testing.assert_allclose(ours, ref, rtol=0, atol=1e-12)
        np.testing.assert_allclose(np.exp(ours).sum(axis=1), 1.0, atol=1e-12)


def test_scale_keeps_top_log_probability_accurate_when_rivals_are_tiny():
    z = np.array([[0.0, -40.0, -41.0]])
    # log p_top = -log(1 + e^-40/T + ...) ~ -(e^-200 + e^-205) at T = 0.2: not rounded to 0
    top = cb.scale(z, 0.2)[0, 0]
    assert top < 0
    assert top == pytest.approx(-(np.exp(-200.0) + np.exp(-205.0)), rel=1e-12)


def test_accuracy_is_identical_at_extreme_temperatures(data):
    logp, y = data["logp"], data["y"]
    base = (cb.scale(logp, 1.0).argmax(axis=1) == y).mean()
    for t in (0.2, 3.0):
        assert (cb.scale(logp, t).argmax(axis=1) == y).mean() == base
    assert cb.temperature_table((0.2, 1.0, 3.0), data=data)["accuracy_identical"] is True


def test_margin_aurc_is_identical_on_the_whole_grid(data):
    best = cb.best_temperature(data["p"], data["y"], "margin")
    values = list(best["curve"].values())
    assert list(best["curve"]) == [round(0.1 * k, 1) for k in range(2, 31)]
    assert len(values) == 29 and min(best["curve"]) == 0.2
    assert all(v == values[0] for v in values)
    assert best["temperature"] is None


def test_margin_is_invariant_with_zero_probabilities():
    rng = np.random.default_rng(3)
    z = rng.normal(size=(400, 6)) * 3
    z[rng.random((400, 6)) < 0.2] = -np.inf
    z[:, 0] = np.maximum(z[:, 0], 0.0)  # at least one finite entry per row
    p = np.exp(cb.scale(z, 1.0))
    y = rng.integers(0, 6, 400)
    curve = cb.best_temperature(p, y, "margin", temperatures=(0.2, 1.0, 3.0))["curve"]
    assert len(set(curve.values())) == 1


def test_margin_stays_exact_when_a_float32_model_makes_equal_gaps():
    """Many rows share their top two logits (as float32 logit gaps often coincide) and differ
    elsewhere. Through normalised float64 log-probabilities their margins differ by rounding
    noise, and the naive route (gap of the scaled log-probabilities) reorders them with T.
    confidence_scores(logp, T) keeps equal gaps equal and distinct gaps ordered."""
    rng = np.random.default_rng(12)
    n, classes = 4000, 20
    z = rng.normal(size=(n, classes)).astype(np.float32)
    tops = rng.normal(size=(25, 2)).astype(np.float32) + np.float32(3)
    z[:, :2] = tops[rng.integers(0, 25, n)]
    z[:, 1] = np.minimum(z[:, 1], z[:, 0] - np.float32(0.25))
    logp = cb.scale(z.astype(np.float64), 1.0)
    p = np.exp(logp)
    y = rng.integers(0, 3, n)
    ok = np.log(p).argmax(axis=1) == y
    naive = {t: cb.aurc(cb.confidence_scores(cb.scale(np.log(p), t))["margin"], ok)
             for t in cb.GRID}
    assert len(set(naive.values())) > 1  # the failure this guards against does occur here
    ours = cb.best_temperature(p, y, "margin")
    assert len(set(ours["curve"].values())) == 1 and ours["temperature"] is None


def test_max_probability_and_entropy_are_not_flat(data):
    for score in ("max probability", "entropy"):
        best = cb.best_temperature(data["p"], data["y"], score)
        assert best["temperature"] in best["curve"]
        assert best["aurc"] == min(best["curve"].values())
        assert len(set(best["curve"].values())) > 1


# ------------------------------------------------------------------ metrics vs libraries

def test_nll_matches_sklearn_log_loss(data):
    ours = cb.nll(data["p"], data["y"])
    ref = log_loss(data["y"], data["p"], labels=np.arange(data["p"].shape[1]))
    assert ours == pytest.approx(ref, rel=1e-12)


def test_nll_has_no_floor():
    p = np.array([[1.0, 0.0], [0.5, 0.5]])
    assert cb.nll(p, [1, 0]) == np.inf


def test_brier_matches_sklearn(data):
    ours = cb.brier(data["p"], data["y"])
    ref = brier_score_loss(data["y"], data["p"], labels=np.arange(data["p"].shape[1]))
    assert ours == pytest.approx(ref, rel=1e-12)


def _ece_loop(conf, correct, bins):
    edges = np.linspace(0.0, 1.0, bins + 1)
    total = 0.0
    for b in range(bins):
        lo, hi = edges[b], edges[b + 1]
        members = [i for i in range(len(conf)) if (lo < conf[i] <= hi) or (b == 0 and conf[i] == 0)]
        if members:
            acc = sum(correct[i] for i in members) / len(members)
            mean = sum(conf[i] for i in members) / len(members)
            total += len(members) / len(conf) * abs(acc - mean)
    return total


def _ece_equal_mass_loop(conf, correct, bins):
    """Equal-mass bins as a loop: position k of the sorted confidences has slot
    b(k) (array_split sizes), and every copy of a value takes the slot of its first copy."""
    order = sorted(range(len(conf)), key=lambda i: conf[i])  # stable
    n = len(conf)
    slot = []
    for b in range(bins):
        slot += [b] * (n // bins + (1 if b < n % bins else 0))
    first_pos = {}
    for k, i in enumerate(order):
        first_pos.setdefault(conf[i], k)
    members = {}
    for i in range(n):
        members.setdefault(slot[first_pos[conf[i]]], []).append(i)
    total = 0.0
    for rows in members.values():
        acc = sum(correct[i] for i in rows) / len(rows)
        mean = sum(conf[i] for i in rows) / len(rows)
        total += len(rows) / n * abs(acc - mean)
    return total


def test_equal_mass_bins_do_not_depend_on_row_order():
    """Tied confidences join one bin whatever the row order."""
    from standarderror.uncertainty import binning as bn

    rng = np.random.default_rng(0)
    conf = rng.choice([0.3, 0.55, 0.7, 0.8, 0.95], 400)
    ok = rng.random(400) < conf
    values = set()
    for _ in range(40):
        pi = rng.permutation(400)
        values.add((round(cb.ece(conf[pi], ok[pi], 10, adaptive=True), 12),
                    round(float(bn.ece_batch(conf[pi], ok[pi], 10, adaptive=True)[0]), 12),
                    round(float(bn.l2_batch(conf[pi], ok[pi], 10, adaptive=True)[0]), 12)))
    assert len(values) == 1
    which = cb.bin_index(conf, 10, adaptive=True)
    for v in np.unique(conf):
        assert np.unique(which[conf == v]).size == 1


@pytest.mark.parametrize("bins", [1, 10, 15])
def test_ece_matches_loop(data, bins):
    conf = np.exp(data["logp"].max(axis=1))
    ok = data["logp"].argmax(axis=1) == data["y"]
    assert cb.ece(conf, ok, bins=bins) == pytest.approx(_ece_loop(conf, ok, bins), abs=1e-12)
    assert cb.ece(conf, ok, bins=bins, adaptive=True) == pytest.approx(
        _ece_equal_mass_loop(conf, ok, bins), abs=1e-12)


def test_ece_bin_edges_are_right_closed():
    # 0.2 is an edge of 5 bins: it belongs to the first bin, (0.0, 0.2]
    conf = np.array([0.2, 0.3, 0.0])
    ok = np.array([1, 0, 0])
    # first bin {0.2, 0.0}: |0.5 - 0.1| x 2/3; second {0.3}: |0 - 0.3| x 1/3
    assert cb.ece(conf, ok, bins=5) == pytest.approx(11 / 30, abs=1e-15)
    assert _ece_loop(conf, ok, 5) == pytest.approx(11 / 30, abs=1e-15)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 1), st.booleans()), min_size=1, max_size=60),
       st.integers(1, 20), st.booleans())
def test_ece_properties(rows, bins, adaptive):
    conf = np.array([r[0] for r in rows])
    ok = np.array([r[1] for r in rows])
    value = cb.ece(conf, ok, bins=bins, adaptive=adaptive)
    assert 0 <= value <= 1
    if bins == 1:
        assert value == pytest.approx(abs(conf.mean() - ok.mean()), abs=1e-12)
    loop = (_ece_equal_mass_loop if adaptive else _ece_loop)(conf, ok, bins)
    assert value == pytest.approx(loop, abs=1e-12)


# ------------------------------------------------------------------ AURC and risk-coverage

def _aurc_loop(score, correct):
    """Plain risk-coverage curve: keep rows most confident first, average the error rate."""
    order = sorted(range(len(score)), key=lambda i: -score[i])
    errors, total = 0, 0.0
    for k, i in enumerate(order, start=1):
        errors += not correct[i]
        total += errors / k
    return total / len(score)


def test_aurc_matches_loop_without_ties(data):
    ok = data["logp"].argmax(axis=1) == data["y"]
    for name, s in cb.confidence_scores(data["logp"]).items():
        assert cb.aurc(s, ok) == pytest.approx(_aurc_loop(s, ok), rel=1e-12), name


def test_aurc_ties_are_the_average_over_random_tie_breaking():
    score = np.array([0.9, 0.5, 0.5, 0.5, 0.2, 0.2, 0.1])
    ok = np.array([1, 0, 1, 1, 0, 1, 0], dtype=bool)
    runs = []
    for perm in itertools.permutations(range(7)):
        if all(score[perm[i]] >= score[perm[i + 1]] for i in range(6)):
            errors, total = 0, 0.0
            for k, i in enumerate(perm, start=1):
                errors += not ok[i]
                total += errors / k
            runs.append(total / 7)
    assert len(runs) == 3 * 2 * 1 * 2  # 3! orders of the 0.5s times 2! of the 0.2s
    assert cb.aurc(score, ok) == pytest.approx(np.mean(runs), rel=1e-12)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 4), st.booleans()), min_size=1, max_size=40),
       st.randoms(use_true_random=False))
def test_aurc_does_not_depend_on_row_order(rows, rnd):
    score = np.array([r[0] for r in rows], dtype=float)
    ok = np.array([r[1] for r in rows])
    perm = list(range(len(rows)))
    rnd.shuffle(perm)
    assert cb.aurc(score[perm], ok[perm]) == cb.aurc(score, ok)
    oracle = cb.aurc(ok.astype(float), ok)
    assert oracle <= cb.aurc(score, ok) + 1e-15
    c, n = int(ok.sum()), len(rows)
    assert oracle == pytest.approx(sum((k - c) / k for k in range(c + 1, n + 1)) / n, abs=1e-12)


def test_risk_coverage_ends_at_the_error_rate(data):
    ok = data["logp"].argmax(axis=1) == data["y"]
    rc = cb.risk_coverage(cb.confidence_scores(data["logp"])["entropy"], ok)
    assert rc["coverage"][-1] == 1.0
    assert rc["risk"][-1] == pytest.approx(1 - ok.mean(), abs=1e-12)


# ------------------------------------------------------------------ the bootstrap engine

def test_bootstrap_weights_equal_a_replicated_dataset(data):
    ok = data["logp"].argmax(axis=1) == data["y"]
    seq_idx, n_seq = selective._sequence_index(data["sequence"], ok.size)
    counts = selective._draw_counts(n_seq, 6, seed=4)
    counts[0] = 1  # the identity draw
    boot = selective._Bootstrap(counts, seq_idx)
    scores = cb.confidence_scores(data["logp"])
    # an integer-valued score has ties; a continuous one has none
    for s in (scores["entropy"], np.round(scores["margin"] * 2)):
        fast = boot.aurc(s, ok, chunk=4)
        assert fast[0] == pytest.approx(cb.aurc(s, ok), rel=1e-11)
        for d in range(counts.shape[0]):
            rows = np.repeat(np.arange(ok.size), counts[d][seq_idx])
            assert fast[d] == pytest.approx(cb.aurc(s[rows], ok[rows]), rel=1e-11)


def test_abstention_intervals_match_a_loop_over_draws():
    d = synthetic(n_seq=20, length=16, seed=5)
    ts = (0.5, 1.0, 2.0)
    ab = cb.abstention(d["p"], d["y"], d["sequence"], temperatures=ts, draws=25, seed=9)
    logp = np.log(d["p"])
    ok = logp.argmax(axis=1) == d["y"]
    counts = selective._draw_counts(20, 25, 9)
    for name in cb.CONFIDENCE_SCORES:
        ref = cb.confidence_scores(logp)[name]
        for t in ts:
            s = cb.confidence_scores(logp, t)[name]
            diffs = []
            for c in counts:
                rows = np.repeat(np.arange(ok.size), c[d["sequence"]])
                diffs.append(cb.aurc(s[rows], ok[rows]) - cb.aurc(ref[rows], ok[rows]))
            low, high = np.percentile(diffs, [2.5, 97.5])
            r = ab["table"][(name, t)]
            assert r["aurc"] == pytest.approx(cb.aurc(s, ok), rel=1e-12)
            assert r["low"] == pytest.approx(low, abs=1e-12)
            assert r["high"] == pytest.approx(high, abs=1e-12)
            keep = round(0.2 * ok.size)
            top = np.argsort(-s, kind="stable")[:keep]
            assert r["top_fifth"] == pytest.approx(ok[top].mean(), abs=1e-12)  # no ties here
    assert ab["table"][("entropy", 1.0)]["difference"] == 0.0
    assert all(ab["table"][("margin", t)]["difference"] == 0.0 for t in ts)
    assert all(ab["table"][("margin", t)]["low"] == 0.0 for t in ts)
    assert ab["oracle"] == cb.aurc(ok.astype(float), ok)


def test_abstention_resamples_sequences_not_rows(data):
    """If every row were its own sequence the interval would be narrower: a sanity check that
    the sequence labels are used at all (rows in a window are made to share correctness)."""
    d = synthetic(n_seq=40, length=16, seed=6)
    # make correctness clustered by sequence: copy each window's first row into the window
    first = d["logp"][::16]
    logp = np.repeat(first, 16, axis=0) + np.random.default_rng(0).normal(0, 0.05, (640, 12))
    p = np.exp(cb.scale(logp, 1.0))
    y = np.repeat(d["y"][::16], 16)
    grouped = cb.abstention(p, y, d["sequence"], temperatures=(3.0,), draws=200)
    single = cb.abstention(p, y, np.arange(640), temperatures=(3.0,), draws=200)
    g = grouped["table"][("entropy", 3.0)]
    s = single["table"][("entropy", 3.0)]
    assert g["high"] - g["low"] > 1.5 * (s["high"] - s["low"])


# ------------------------------------------------------------------ Kendall and reordering

@pytest.mark.parametrize("ties", [False, True])
def test_kendall_matches_scipy(ties):
    rng = np.random.default_rng(7)
    x = rng.normal(size=3000)
    y = x + rng.normal(size=3000)
    if ties:
        x, y = np.round(x * 3), np.round(y * 2)
    ours = cb.kendall_tau(x, y)
    assert ours["tau"] == pytest.approx(stats.kendalltau(x, y).statistic, rel=1e-12)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5)), min_size=2, max_size=30))
def test_kendall_counts_match_brute_force(rows):
    x = np.array([r[0] for r in rows], dtype=float)
    y = np.array([r[1] for r in rows], dtype=float)
    n = len(rows)
    dis = sum((x[i] - x[j]) * (y[i] - y[j]) < 0 for i in range(n) for j in range(i + 1, n))
    con = sum((x[i] - x[j]) * (y[i] - y[j]) > 0 for i in range(n) for j in range(i + 1, n))
    if len(set(x)) == 1 or len(set(y)) == 1:
        with pytest.raises(ValueError, match="constant"):
            cb.kendall_tau(x, y)
        return
    ours = cb.kendall_tau(x, y)
    assert (ours["discordant"], ours["concordant"]) == (dis, con)
    assert ours["tau"] == pytest.approx(stats.kendalltau(x, y).statistic, rel=1e-12, abs=1e-14)


def test_reordering_on_synthetic_predictions(data):
    table = cb.temperature_table((0.5, 1.0, 2.0, 3.0), data=data)
    rows = {r["temperature"]: r for r in cb.reordering(table)}
    assert rows[1.0]["tau"] == 1.0 and rows[1.0]["pairs_reordered"] == 0.0
    assert rows[1.0]["top_overlap"] == 1.0
    assert rows[3.0]["tau"] < rows[2.0]["tau"] < 1.0  # varied shapes do reorder
    conf = {t: np.exp(cb.scale(data["logp"], t).max(axis=1)) for t in (1.0, 3.0)}
    assert rows[3.0]["tau"] == pytest.approx(stats.kendalltau(conf[1.0], conf[3.0]).statistic,
                                             abs=1e-9)
    k = round(0.01 * len(data["y"]))
    top1 = set(np.argsort(-conf[1.0])[:k])
    top3 = set(np.argsort(-conf[3.0])[:k])
    assert rows[3.0]["top_overlap"] == pytest.approx(len(top1 & top3) / k)


def test_temperature_table_rows(data):
    table = cb.temperature_table(data=data)
    assert [r["temperature"] for r in table["rows"]] == list(cb.TEMPERATURES)
    for r in table["rows"]:
        lt = cb.scale(data["logp"], r["temperature"])
        p = np.exp(lt)
        assert r["nll"] == pytest.approx(log_loss(data["y"], p, labels=np.arange(12)), rel=1e-10)
        ok = lt.argmax(axis=1) == data["y"]
        assert r["ece"] == pytest.approx(_ece_loop(p.max(axis=1), ok, 15), abs=1e-12)
        assert r["confidence"] == pytest.approx(p.max(axis=1).mean(), rel=1e-12)


# ------------------------------------------------------------------ swap pair and control

def test_swap_pair():
    pair = cb.swap_pair()
    c = pair["confidence"]
    assert c[0.5][1] > c[0.5][0] and c[1.0][1] > c[1.0][0]  # crowd more confident cold
    assert c[2.0][0] > c[2.0][1] and c[3.0][0] > c[3.0][1]  # one rival more confident hot
    assert all(a == (0, 0) for a in pair["argmax"].values())
    assert 1.0 < pair["crossing"] < 2.0
    one, crowd = pair["logits"]
    assert np.sum(one[1:] > one[0] - 1) == 1  # one close rival
    assert np.all(crowd[1:] == crowd[1]) and crowd[0] - crowd[1] > 2  # four distant rivals
    for t, (a, b) in c.items():
        assert a == pytest.approx(1 / np.exp((one - one[0]) / t).sum(), rel=1e-12)
        assert b == pytest.approx(1 / np.exp((crowd - crowd[0]) / t).sum(), rel=1e-12)


def test_shared_shape_control_cannot_reorder(data):
    control = cb.shared_shape(data["logp"])
    np.testing.assert_array_equal(control.argmax(axis=1), data["logp"].argmax(axis=1))
    np.testing.assert_allclose(control.max(axis=1), data["logp"].max(axis=1), rtol=1e-10)
    table = cb.temperature_table((0.2, 0.5, 1.0, 2.0, 3.0), data={"logp": control, "y": data["y"]})
    for r in cb.reordering(table):
        assert r["tau"] == 1.0 and r["pairs_reordered"] == 0.0 and r["top_overlap"] == 1.0
    p = np.exp(control)
    for score in cb.CONFIDENCE_SCORES:
        curve = cb.best_temperature(p, data["y"], score, temperatures=(0.2, 1.0, 3.0))["curve"]
        assert len(set(curve.values())) == 1, score


# ------------------------------------------------------------------ fitted temperature

def test_fitted_temperature_recovers_a_known_overconfidence():
    # labels drawn from softmax(z / 2), the model reports softmax(z): the right T is 2
    d = synthetic(n_seq=200, length=16, seed=11, sharp=2.0)
    fit = cb.fitted_temperature(d["p"], d["y"], d["sequence"], halves=6, seed=1)
    assert fit["low"] <= fit["mean"] <= fit["high"] and len(fit["values"]) == 6
    assert fit["all"] == pytest.approx(2.0, abs=0.15)
    # the fit is the NLL minimiser
    logp = np.log(d["p"])
    best = min(np.linspace(1.5, 2.5, 201), key=lambda t: cb.nll(np.exp(cb.scale(logp, t)), d["y"]))
    assert fit["all"] == pytest.approx(best, abs=0.006)


# ------------------------------------------------------------------ bad input

def test_bad_input_names_the_argument(data):
    p, y, seq = data["p"], data["y"], data["sequence"]
    bad = p.copy()
    bad[0, 0] += 0.1
    with pytest.raises(ValueError, match="p must sum to one|rows of p"):
        cb.abstention(bad, y, seq, draws=2)
    nan = p.copy()
    nan[3, 1] = np.nan
    with pytest.raises(ValueError, match="p contains NaN"):
        cb.nll(nan, y)
    for t in (0.0, -1.0, np.nan):
        with pytest.raises(ValueError, match="temperature"):
            cb.scale(data["logp"], t)
    with pytest.raises(ValueError, match="temperatures"):
        cb.abstention(p, y, seq, temperatures=(1.0, 0.0), draws=2)
    with pytest.raises(ValueError, match=r"y must lie in \[0, 12\)"):
        cb.nll(p, np.where(y == 0, 12, y))
    with pytest.raises(ValueError, match="y has"):
        cb.brier(p, y[:-1])
    with pytest.raises(ValueError, match="sequence has"):
        cb.abstention(p, y, seq[:-1], draws=2)
    with pytest.raises(ValueError, match="sequence holds 1 distinct"):
        cb.abstention(p, y, np.zeros_like(seq), draws=2)
    with pytest.raises(ValueError, match="sequence holds 1 distinct"):
        cb.fitted_temperature(p, y, np.zeros_like(seq), halves=2)
    with pytest.raises(ValueError, match="mismatched lengths"):
        cb.ece(p.max(axis=1), (p.argmax(axis=1) == y)[:-1])
    with pytest.raises(ValueError, match="confidence must lie in"):
        cb.ece(p.max(axis=1) + 1, p.argmax(axis=1) == y)
    with pytest.raises(ValueError, match="score contains NaN"):
        cb.aurc(np.array([0.1, np.nan]), np.array([True, False]))
    with pytest.raises(ValueError, match="logp"):
        cb.confidence_scores(data["z"])  # logits, not log-probabilities
    with pytest.raises(ValueError, match="score must be one of"):
        cb.best_temperature(p, y, "variance")
    with pytest.raises(ValueError, match="draws"):
        cb.abstention(p, y, seq, draws=0)


# ------------------------------------------------------------------ the committed model

@pytest.fixture(scope="module")
def real():
    from standarderror.llm.predictions import predictions
    return predictions(count=24, size=16, seed=1)


@pytest.mark.slow
def test_real_accuracy_identical_to_the_bit(real):
    logp = np.log(real["p"])
    base = (logp.argmax(axis=1) == real["y"]).mean()
    for t in (0.2, 3.0):
        assert (cb.scale(logp, t).argmax(axis=1) == real["y"]).mean() == base
    from standarderror.llm.predictions import predictions

    held_out = predictions(count=10, size=16, seed=0)
    assert cb.temperature_table(data=held_out)["accuracy_identical"] is True


@pytest.mark.slow
def test_real_margin_aurc_identical_on_the_grid(real):
    best = cb.best_temperature(real["p"], real["y"], "margin")
    assert len(set(best["curve"].values())) == 1 and 0.2 in best["curve"]
    assert best["temperature"] is None


def test_temperature_row_on_a_case_worked_by_hand():
    # four predictions, each alone in its ECE bin: the ECE is the mean |confidence - correct|
    row = cb.temperature_row(0.5, [0, 1, 1, 2], [0.9, 0.6, 0.8, 0.5], [0.1, 0.5, 2.0, 0.7],
                             [0, 1, 0, 2], bins=15)
    assert row["temperature"] == 0.5
    assert row["accuracy"] == 0.75
    assert row["nll"] == pytest.approx(0.825, abs=1e-15)
    assert row["confidence"] == pytest.approx(0.7, abs=1e-15)
    assert row["gap"] == pytest.approx(-0.05, abs=1e-15)
    assert row["ece"] == pytest.approx((0.1 + 0.4 + 0.8 + 0.5) / 4, abs=1e-15)


def test_the_nll_curve_does_not_depend_on_how_many_threads_share_its_rows(monkeypatch):
    from standarderror.uncertainty import scaling

    rng = np.random.default_rng(3)
    z = rng.standard_normal((999, 13)) * 3
    y = (z / 1.5 + rng.gumbel(size=z.shape)).argmax(axis=1)  # drawn at T = 1.5
    got = {}
    for workers, entries in ((1, 1 << 30), (3, 100)):
        monkeypatch.setattr(scaling, "_WORKERS", workers)
        monkeypatch.setattr(scaling, "_ENTRIES_PER_THREAD", entries)
        monkeypatch.setattr(scaling, "_POOL", [])
        f = scaling._nll_curve(z - np.log(np.exp(z).sum(1, keepdims=True)), y)
        got[workers] = [f(t) for t in (0.3, 1.0, 4.0)] + [scaling.fit_temperature(z, y)]
    assert got[1] == got[3]
    # and the value is the NLL at T, computed plainly
    lt = z / 2.0 - np.log(np.exp(z / 2.0).sum(1, keepdims=True))
    f = scaling._nll_curve(z, y)
    assert f(2.0) == pytest.approx(-lt[np.arange(999), y].mean(), rel=1e-12)


# --------------------------------------------------------------------------------------
# The fit on a grid of temperatures (predictions streamed in blocks: experiments.measure)
# --------------------------------------------------------------------------------------

def _nll_by_logsumexp(z, y, t):
    """Summed NLL at T from scipy's logsumexp of z / T: an independent formula."""
    return float(np.sum(special.logsumexp(z / t, axis=1) - z[np.arange(len(y)), y] / t))


def test_grid_nll_sums_are_the_nll_and_blocks_add_up():
    rng = np.random.default_rng(5)
    z = rng.normal(scale=3.0, size=(500, 7))
    y = rng.integers(0, 7, 500)
    grid = np.exp(np.linspace(np.log(0.25), np.log(4.0), 9))
    sums = cb.grid_nll_sums(z, y, grid)
    ref = np.array([_nll_by_logsumexp(z, y, t) for t in grid])
    np.testing.assert_allclose(sums, ref, rtol=1e-12)
    # a constant added to a row (logits vs log-probabilities) changes nothing
    np.testing.assert_allclose(cb.grid_nll_sums(z - z.max(1, keepdims=True) + 5.0, y, grid),
                               sums, rtol=1e-12)
    parts = cb.grid_nll_sums(z[:123], y[:123], grid) + cb.grid_nll_sums(z[123:], y[123:], grid)
    np.testing.assert_allclose(parts, sums, rtol=1e-12)


def test_fit_on_a_grid_finds_a_parabolas_vertex_and_says_when_it_is_a_bound():
    grid = np.exp(np.linspace(np.log(0.25), np.log(4.0), 25))
    x = np.log(grid)
    # an NLL that is exactly a parabola in log T: the vertex is recovered exactly
    got = cb.fit_temperature_on_grid(grid, 2.0 + (x - np.log(1.3)) ** 2)
    assert got["at_bound"] is False
    assert got["temperature"] == pytest.approx(1.3, rel=1e-10)
    assert got["nll"] == pytest.approx(2.0, abs=1e-10)
    # still falling at the top of the grid: the bound, flagged
    got = cb.fit_temperature_on_grid(grid, -x)
    assert got == {"temperature": float(grid[-1]), "nll": float(-x[-1]), "at_bound": True}
    # two equal lowest neighbours: the vertex lies half-way between them in log T
    two = np.abs(x - x[10])
    two[9] = two[10] = 0.0
    got = cb.fit_temperature_on_grid(grid, two)
    assert got["temperature"] == pytest.approx(np.sqrt(grid[9] * grid[10]), rel=1e-10)


def test_fit_on_the_measure_grid_agrees_with_the_bounded_fit():
    """The grid-and-parabola fit of streamed predictions against fit_temperature's bounded
    minimisation on the same rows: on a 25-point log grid the two agree to 1%."""
    from standarderror.experiments.measure import FIT_GRID

    rng = np.random.default_rng(11)
    for scale, true_t in ((2.0, 1.0), (4.0, 2.5), (1.0, 0.5)):
        z = rng.normal(scale=scale, size=(4000, 6))
        p = np.exp(z / true_t - special.logsumexp(z / true_t, axis=1, keepdims=True))
        y = np.array([rng.choice(6, p=row) for row in p])
        grid_fit = cb.fit_temperature_on_grid(FIT_GRID, cb.grid_nll_sums(z, y, FIT_GRID) / len(y))
        exact = cb.fit_temperature(z, y)
        assert grid_fit["at_bound"] is False
        assert abs(np.log(grid_fit["temperature"] / exact)) < 0.01, (scale, grid_fit, exact)


@pytest.mark.parametrize("grid, nll, match", [
    ([0.5, 1.0], [1.0, 2.0], "length >= 3"),
    ([0.5, 1.0, 2.0], [1.0, 2.0], "same length"),
    ([1.0, 0.5, 2.0], [1.0, 0.5, 2.0], "increasing"),
    ([0.0, 0.5, 2.0], [1.0, 0.5, 2.0], "increasing"),
    ([0.5, 1.0, 2.0], [1.0, np.nan, 2.0], "nll must be finite"),
])
def test_fit_on_a_grid_refuses_bad_input(grid, nll, match):
    with pytest.raises(ValueError, match=match):
        cb.fit_temperature_on_grid(grid, nll)


def test_grid_nll_sums_refuses_bad_input():
    z = np.zeros((3, 4))
    with pytest.raises(ValueError, match="grid"):
        cb.grid_nll_sums(z, [0, 1, 2], [1.0, -1.0])
    with pytest.raises(ValueError, match="y"):
        cb.grid_nll_sums(z, [0, 1, 4], [1.0])
    with pytest.raises(ValueError, match="2 dimensions"):
        cb.grid_nll_sums(z[0], [0], [1.0])


def test_table_headline_reads_the_quoted_rows_and_checks_the_grid():
    rng = np.random.default_rng(3)
    logp = cb.scale(rng.normal(size=(400, 6)) * 2, 1.0)
    y = rng.integers(0, 6, 400)
    table = cb.temperature_table(data={"logp": logp, "y": y})
    h = cb.table_headline(table, grid=cb.GRID)
    rows = {r["temperature"]: r for r in table["rows"]}
    assert isinstance(h, cb.TableHeadline)
    assert (h.n_table, h.ece_bins, h.acc) == (400, 15, rows[1.0]["accuracy"])
    assert (h.ece_t1, h.ece_t05, h.ece_t3) == (rows[1.0]["ece"], rows[0.5]["ece"],
                                               rows[3.0]["ece"])
    assert (h.gap_t05, h.gap_t1, h.gap_t3) == (rows[0.5]["gap"], rows[1.0]["gap"],
                                               rows[3.0]["gap"])
    assert (h.nll_t1, h.nll_t125) == (rows[1.0]["nll"], rows[1.25]["nll"])
    assert h.argmax_identical is True
    with pytest.raises(ValueError, match="lacks"):
        cb.table_headline(cb.temperature_table((1.0, 2.0), data={"logp": logp, "y": y}))


@pytest.mark.slow
def test_episode3_table_reads_as_its_figure_says():
    """Episode 3's figure and alt text: ECE falls to T = 1 and rises after it; the gap falls
    at every step and crosses zero between T = 1 and 1.25; below T = 1 the two lines nearly
    coincide. Accuracy is one value at every temperature, and the argmax one array."""
    from standarderror.llm.predictions import predictions

    table = cb.temperature_table(data=predictions(count=10, size=16, seed=0))
    h = cb.table_headline(table, grid=cb.GRID)
    assert h.argmax_identical
    rows = {r["temperature"]: r for r in table["rows"]}
    assert len({r["accuracy"] for r in table["rows"]}) == 1
    seven = sorted(rows)
    ece_by_t = [rows[t]["ece"] for t in seven]
    i1 = seven.index(1.0)
    assert min(ece_by_t) == h.ece_t1
    assert all(np.diff(ece_by_t[:i1 + 1]) < 0) and all(np.diff(ece_by_t[i1:]) > 0)
    assert all(np.diff([rows[t]["gap"] for t in seven]) < 0)
    assert rows[1.0]["gap"] > 0 > rows[1.25]["gap"]
    assert all(abs(rows[t]["ece"] - abs(rows[t]["gap"])) < 0.01 for t in seven if t < 1)


def test_reorder_headline_reads_the_quoted_temperatures():
    rng = np.random.default_rng(5)
    logp = cb.scale(rng.normal(size=(300, 6)) * 2, 1.0)
    table = cb.temperature_table((0.5, 1.0, 1.25, 2.0, 3.0), data={"logp": logp,
                                                                   "y": rng.integers(0, 6, 300)})
    rows = cb.reordering(table)
    h = cb.reorder_headline(rows)
    at = {r["temperature"]: r for r in rows}
    assert (h.tau_t05, h.tau_t125, h.tau_t2, h.tau_t3) == tuple(
        at[t]["tau"] for t in (0.5, 1.25, 2.0, 3.0))
    assert h.pairs_t2 == at[2.0]["pairs_reordered"]
    assert h.top_left_t2 == 1 - at[2.0]["top_overlap"]
    assert h.top_kept_t3 == at[3.0]["top_overlap"]
    with pytest.raises(ValueError, match="lack"):
        cb.reorder_headline(rows[:2])


def test_abstention_headline_reads_the_quoted_cells():
    rng = np.random.default_rng(6)
    p = rng.dirichlet(np.ones(5), size=240)
    y = rng.integers(0, 5, 240)
    seq = np.repeat(np.arange(30), 8)
    ab = cb.abstention(p, y, seq, temperatures=(0.5, 1.0, 1.25, 1.5, 2.0, 3.0), draws=20)
    h = cb.abstention_headline(ab)
    mp, ent, mar = ({t: ab["table"][(s, t)] for t in ab["temperatures"]}
                    for s in cb.CONFIDENCE_SCORES)
    assert (h.n_rows, h.n_seq, h.oracle) == (240, 30, ab["oracle"])
    assert (h.mp_aurc_t1, h.ent_aurc_t1, h.mar_aurc) == (
        mp[1.0]["aurc"], ent[1.0]["aurc"], mar[1.0]["aurc"])
    assert (h.mp_d125, h.mp_lo125, h.mp_hi125, h.mp_d3) == (
        mp[1.25]["difference"], mp[1.25]["low"], mp[1.25]["high"], mp[3.0]["difference"])
    assert h.mp_rel_t3 == mp[3.0]["difference"] / mp[1.0]["aurc"]
    assert (h.ent_d3, h.ent_lo3, h.ent_hi3) == (
        ent[3.0]["difference"], ent[3.0]["low"], ent[3.0]["high"])
    assert h.ent_rel_t3 == ent[3.0]["difference"] / ent[1.0]["aurc"]
    assert (h.ent_top_t1, h.ent_top_t3) == (ent[1.0]["top_fifth"], ent[3.0]["top_fifth"])
    assert h.mar_changes == 1          # the margin's order cannot move with T
    assert (h.ent_aurc_t125, h.ent_aurc_t15) == (ent[1.25]["aurc"], ent[1.5]["aurc"])
    with pytest.raises(ValueError, match="lacks"):
        cb.abstention_headline(cb.abstention(p, y, seq, temperatures=(1.0, 2.0), draws=5))


def test_fit_headline_reads_the_fit_the_best_temperatures_and_the_sharpened_row():
    rng = np.random.default_rng(7)
    p = rng.dirichlet(np.ones(5) * 0.7, size=240)
    y = np.array([rng.choice(5, p=row) for row in p])
    seq = np.repeat(np.arange(30), 8)
    fit = cb.fitted_temperature(p, y, seq, halves=4)
    best = {s: cb.best_temperature(p, y, s) for s in cb.CONFIDENCE_SCORES}
    ab = cb.abstention(p, y, seq, temperatures=(0.5, 1.0), draws=10)
    at = cb.abstention(p, y, seq, temperatures=(fit["mean"],), draws=10)["table"]
    at_fit = {s: at[(s, fit["mean"])] for s in cb.CONFIDENCE_SCORES}
    h = cb.fit_headline(fit, best, at_fit, ab, near=1.1)
    mpc, entc = best["max probability"], best["entropy"]
    assert (h.fit_mean, h.fit_low, h.fit_high) == (fit["mean"], fit["low"], fit["high"])
    assert (h.mp_best, h.mp_best_aurc) == (mpc["temperature"], mpc["aurc"])
    assert h.mp_aurc_t11 == mpc["curve"][1.1]
    assert h.mp_worst == max(mpc["curve"].values())
    assert (h.ent_best, h.ent_best_aurc) == (entc["temperature"], entc["aurc"])
    assert (h.mp_at_fit, h.ent_at_fit) == (at_fit["max probability"]["aurc"],
                                           at_fit["entropy"]["aurc"])
    assert (h.ent_d_fit, h.ent_lo_fit, h.ent_hi_fit) == tuple(
        at_fit["entropy"][k] for k in ("difference", "low", "high"))
    assert h.mar_flat == 1 and h.grid_points == len(best["margin"]["curve"])
    assert (h.mp_d05, h.ent_d05) == (ab["table"][("max probability", 0.5)]["difference"],
                                     ab["table"][("entropy", 0.5)]["difference"])
