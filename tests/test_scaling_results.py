"""Episode 3's named results (standarderror.uncertainty.scaling_results), on their own inputs."""

import dataclasses

import numpy as np
import pytest
from scipy import stats

from standarderror.uncertainty import calibration as cb
from standarderror.uncertainty import scaling_results as sr


def _pinned(result):
    """The fields pin(result) pins: every number field."""
    return {f.name for f in dataclasses.fields(result)
            if isinstance(getattr(result, f.name), (int, float, np.number))}


def _data(seed=0, windows=30, per=8, k=7):
    """Log-probabilities whose labels the logits half-predict, rows in windows."""
    rng = np.random.default_rng(seed)
    n = windows * per
    z = rng.standard_normal((n, k)) * rng.uniform(0.5, 3.0, (n, 1))
    y = (z + rng.standard_normal((n, k))).argmax(axis=1)
    logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    return logp, y, np.repeat(np.arange(windows), per)


def test_swap_numbers_read_the_pair():
    pair = cb.swap_pair()
    r = sr.swap_numbers(pair)
    one, crowd = pair["logits"]
    assert r.rival_gap == one[0] - one[1] and r.crowd_gap == crowd[0] - crowd[1]
    assert np.all(crowd[1:] == crowd[1])     # the crowd's rivals all sit equally far behind
    assert (r.swap_one_t1, r.swap_crowd_t1) == tuple(pair["confidence"][1.0])
    assert r.swap_crowd_t1 > r.swap_one_t1 and r.swap_one_t3 > r.swap_crowd_t3
    assert 1.0 < r.swap_cross < 3.0


def test_rows_of_one_shape_never_reorder():
    """Proposition prop-ep3-shape: the shared-shape control keeps one order at every T."""
    logp, y, _ = _data(seed=1)
    control = cb.shared_shape(logp)
    table = cb.temperature_table(data={"logp": control, "y": y})
    rows = cb.reordering(table)
    assert all(r["tau"] == 1.0 and r["pairs_reordered"] == 0 for r in rows)
    r = sr.control_order(rows)
    assert (r.control_tau_min, r.control_pairs_max) == (1.0, 0)
    # the real rows, whose shapes differ, do reorder: the control is not vacuous
    real = sr.control_order(cb.reordering(cb.temperature_table(data={"logp": logp, "y": y})))
    assert real.control_tau_min < 1.0 and real.control_pairs_max > 0


def test_tail_shares_against_a_plain_loop():
    logp, _, _ = _data(seed=2, windows=3, per=4)
    r = sr.tail_shares(logp)
    for t, (h_share, p_tail) in ((1.0, (r.tail_h_t1, r.tail_p_t1)),
                                 (3.0, (r.tail_h_t3, r.tail_p_t3))):
        h_all = h_tail = p_sum = 0.0
        for row in logp:
            p = np.exp(row / t) / np.exp(row / t).sum()
            order = np.argsort(-p)
            terms = -p * np.log(p)
            h_all += terms.sum()
            h_tail += terms[order[2:]].sum()
            p_sum += p[order[2:]].sum()
        assert h_share == pytest.approx(h_tail / h_all, rel=1e-12)
        assert p_tail == pytest.approx(p_sum / len(logp), rel=1e-12)
    assert r.tail_p_t3 > r.tail_p_t1     # flattening moves mass into the tail


def test_abstention_keeps_the_margin_flat_at_95_percent():
    """What the abstention cell quotes: 95% intervals, and a margin AURC that no temperature
    changes (Corollary cor-ep3-margin), exactly."""
    logp, y, seq = _data(seed=3)
    ab = cb.abstention(np.exp(logp), y, seq, temperatures=(0.5, 1.25, 3.0), draws=50)
    assert ab["level"] == 0.95
    assert {ab["table"][("margin", t)]["difference"] for t in (0.5, 1.25, 3.0)} == {0.0}
    assert ab["table"][("entropy", 3.0)]["difference"] != 0.0


def test_margin_gaps_resample_windows_as_a_plain_loop_does():
    logp, y, seq = _data(seed=4)
    ok = logp.argmax(axis=1) == y
    table = cb.abstention(np.exp(logp), y, seq, temperatures=(1.0,), draws=20)["table"]
    r = sr.margin_gaps(logp, ok, seq, table, draws=40, seed=5, level=0.9)
    assert r.mar_vs_mp == table[("margin", 1.0)]["aurc"] - table[("max probability", 1.0)]["aurc"]
    s1 = cb.confidence_scores(logp, 1.0)
    rng = np.random.default_rng(5)
    d = []
    for _ in range(40):
        rows = np.concatenate([np.flatnonzero(seq == w) for w in rng.integers(0, 30, 30)])
        d.append(cb.aurc(s1["margin"][rows], ok[rows]) - cb.aurc(s1["entropy"][rows], ok[rows]))
    assert (r.mar_vs_ent_lo, r.mar_vs_ent_hi) == tuple(np.percentile(d, [5, 95]))
    with pytest.raises(ValueError, match="level"):
        sr.margin_gaps(logp, ok, seq, table, draws=2, level=1.0)


def test_tied_margins_count_exact_ties():
    logp = np.log(np.array([[0.5, 0.25, 0.25], [0.6, 0.2, 0.2], [0.4, 0.2, 0.4],
                            [0.7, 0.2, 0.1]]))
    r = sr.tied_margins(logp, np.array([True, False, True, True]))
    gaps = np.sort([np.log(0.5) - np.log(0.25), np.log(0.6) - np.log(0.2), 0.0,
                    np.log(0.7) - np.log(0.2)])
    assert r.tied_share == np.mean(np.diff(gaps) == 0)
    assert set(r.naive) == {float(t) for t in cb.GRID}
    assert _pinned(r) == {"tied_share"}


def test_pair_entropies_against_scipy():
    pair = cb.swap_pair()
    logp, _, _ = _data(seed=6, windows=5)
    s = cb.confidence_scores(logp, 1.0)
    r = sr.pair_entropies(cb.scale(pair["logits"], 1.0), s)
    p = np.exp(cb.scale(pair["logits"], 1.0))
    assert r.pair_h_one == pytest.approx(stats.entropy(p[0]), rel=1e-12)
    assert r.pair_h_crowd == pytest.approx(stats.entropy(p[1]), rel=1e-12)
    assert r.tau_mp_ent == pytest.approx(stats.kendalltau(s["max probability"],
                                                          s["entropy"]).statistic, abs=1e-12)
    assert 0 < r.disc_mp_ent < 0.5


def test_a_rechosen_threshold_gives_back_the_margins_set_exactly():
    logp, _, _ = _data(seed=7)
    r = sr.threshold_shift(logp, 1.4, answered=0.8)
    assert r.re_mar == 0                       # the margin's order never moves
    assert r.thr_mp_cov < 0.8 and r.thr_mar_cov < 0.8   # flattening answers fewer
    assert r.thr_mp_moved >= round((0.8 - r.thr_mp_cov) * logp.shape[0])
    assert _pinned(r) == {
        "thr_mp_cov", "thr_mp_moved", "re_mp", "thr_ent_cov", "thr_ent_moved", "re_ent",
        "thr_mar_cov", "thr_mar_moved", "re_mar"}
    assert sr.threshold_shift(logp, 1.0, answered=0.8).re_ent == 0   # no scaling, no change


def test_a_sharpened_model_is_fitted_back():
    logp, y, seq = _data(seed=8)
    ours = cb.fitted_temperature(np.exp(logp), y, seq, halves=4)["mean"]
    r = sr.cold_model(logp, y, seq, sharpen=0.5, halves=4, draws=20)
    # sharpening to T = 0.5 doubles every logit, so the fit doubles (up to the fits' halves)
    assert r.cold_fit == pytest.approx(2 * ours, rel=1e-3)
    assert r.cold_mar_aurc == r.detail["table"][("margin", r.detail["temperature"])]["aurc"]
    assert "detail" not in _pinned(r)


def test_model_facts_read_the_card():
    model = {"parameters": 811392, "card": {"config": {"width": 128, "block": 64}}}
    r = sr.model_facts(model, list("abc"))
    assert (r.params, r.vocab, r.width, r.context) == (811392, 3, 128, 64)


@pytest.mark.slow  # runs the committed model on 384 windows and scans the grid
def test_on_the_committed_model_the_margin_trails_the_top_probability_at_every_grid_t():
    """Episode 3, "Where a fitted temperature lands": the top probability's worst AURC on the
    grid is below the margin's flat one."""
    from standarderror.llm.predictions import predictions

    pred = predictions(count=24, size=16, seed=1)
    curve = {s: cb.best_temperature(pred["p"], pred["y"], s)["curve"]
             for s in ("max probability", "margin")}
    assert max(curve["max probability"].values()) < min(curve["margin"].values())
    assert len(set(curve["margin"].values())) == 1
