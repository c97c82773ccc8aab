"""Episode 1's named results (uncertainty.coverage_results), on synthetic predictions: what
each field means, and the invariants the lecture reads off its model."""

import dataclasses

import numpy as np
import pytest

from standarderror.uncertainty import conformal
from standarderror.uncertainty import coverage_results as cr
from standarderror.uncertainty import exchangeability as ex

ALPHA = 0.1


def synthetic(windows=200, window=16, labels=50, seed=0, window_effect=0.0, early_harder=False):
    """Predictions of a calibrated model: each row's distribution is a softmax of random logits
    (sharper or flatter at random), and its label is drawn from that distribution. With
    ``window_effect`` the rows of one window share part of their sharpness; with
    ``early_harder`` the first four positions of each window are flatter."""
    rng = np.random.default_rng(seed)
    rows = windows * window
    sequence = np.repeat(np.arange(windows), window)
    position = np.tile(np.arange(window), windows)
    sharp = rng.uniform(1.0, 5.0, rows)
    if window_effect:
        shared = rng.uniform(1.0, 5.0, windows)[sequence]
        sharp = (1 - window_effect) * sharp + window_effect * shared
    if early_harder:
        sharp = np.where(position < 4, sharp * 0.3, sharp)
    logits = rng.normal(size=(rows, labels)) * sharp[:, None]
    p = np.exp(logits - logits.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    y = np.array([rng.choice(labels, p=row) for row in p])
    return p, y, sequence, position


@pytest.fixture(scope="module")
def data():
    return synthetic()


def true_scores(p, y):
    return conformal.label_scores(p, score="lac")[np.arange(y.size), y]


def test_results_are_frozen_and_arrays_are_not_in_the_repr(data):
    p, y, seq, _ = data
    rows = cr.row_splits(true_scores(p, y), seq, ALPHA, splits=20, seed=1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        rows.row_mean = 0.0
    assert "runs" not in repr(rows) and "row_mean" in repr(rows)


def test_row_splits_fields(data):
    p, y, seq, _ = data
    scores = true_scores(p, y)
    rows = cr.row_splits(scores, seq, ALPHA, splits=50, seed=1)
    assert rows.splits == 50
    assert rows.beta_only_excess == rows.bb_sd / rows.beta_sd - 1
    assert rows.row_below == np.mean(rows.runs["coverage"] < 1 - ALPHA)
    # half the rows calibrate, half test: the two parts of the spread are nearly equal
    assert rows.runs["n"] == rows.runs["m"] == y.size // 2
    assert rows.beta_sd == pytest.approx(rows.binom_sd, rel=0.01)
    # exchangeable rows: the mean coverage sits on the level, within four standard errors
    assert abs(rows.row_mean - rows.theory["level"]) < 4 * rows.bb_sd / np.sqrt(50)


def test_few_scores_level_and_tail(data):
    p, y, _, _ = data
    few = cr.few_scores(true_scores(p, y), ALPHA, n=15, splits=100, seed=2, low=0.8)
    assert few.few_n == 15 and few.few_splits == 100
    # k = ceil(16 * 0.9) = 15 = n: the threshold is the largest score, level 15/16
    assert few.few_level == 15 / 16
    # coverage below 1 - alpha when all 15 scores fall below the 90% point: about 0.9 ** 15
    assert few.few_theory_below == pytest.approx(0.9 ** 15, rel=0.05)
    assert few.few_min == few.runs["coverage"].min()
    assert few.few_low <= few.few_below


def test_lac_under_covers_the_least_confident_fifth(data):
    """The lecture's reading of its model, on a calibrated one: LAC's coverage falls short of
    1 - alpha on the least confident fifth and exceeds it on the most confident."""
    p, y, seq, _ = data
    split = ex.one_split({"p": p, "y": y, "sequence": seq, "position": seq * 0}, ALPHA, seed=0)
    cal = split.calibrating
    fifths = cr.confidence_fifths(split.sets, p[~cal], y[~cal])
    assert fifths.fifth_low_cov < 1 - ALPHA < fifths.fifth_high_cov
    assert fifths.fifth_low_size > fifths.fifth_high_size
    assert np.all(fifths.bands["count"] >= (~cal).sum() // 5 - 1)   # fifths by count
    assert fifths.fifth_edge == fifths.edges[1] < fifths.fifth_top_edge == fifths.edges[4]


def test_escalation_policy_shares(data):
    p, y, seq, _ = data
    half = seq < seq.max() // 2
    policy = cr.escalation_policy(p[half], y[half], p[~half], y[~half])
    assert list(policy.by_alpha) == [0.05, 0.1, 0.2, 0.3]
    assert policy.kept_10 + policy.esc_10 == pytest.approx(1.0, abs=1e-12)
    assert policy.kept_30 >= policy.kept_10            # looser level, smaller sets
    with pytest.raises(KeyError):
        cr.escalation_policy(p[half], y[half], p[~half], y[~half], alpha_levels=(0.1, 0.2))


def test_window_spread_detects_a_shared_window_effect():
    """Rows of a window that share their difficulty make window splits spread more than the
    beta-binomial law; shuffling the rows among windows brings the spread back to it."""
    p, y, seq, _ = synthetic(windows=300, window=16, seed=3, window_effect=0.9)
    scores = true_scores(p, y)
    cal = ex.calibration_masks(seq, splits=1, by="sequence", seed=0)[0]
    rows = cr.row_splits(scores, seq, ALPHA, splits=200, seed=1)
    spread = cr.window_spread(scores, seq, cal, rows, ALPHA, splits=200, seed=1,
                              shuffle_seed=3)
    bb = rows.bb_sd
    assert spread.seq_sd_low > bb                       # whole windows: over-dispersed
    assert spread.ctl_sd_low <= bb <= spread.ctl_sd_high  # the control: on the law
    assert spread.row_sd_low <= bb <= spread.row_sd_high
    assert spread.seq_ratio == spread.seq_sd / bb
    assert spread.cal_windows == 150
    assert set(spread.runs) == set(spread.intervals) == {"rows", "windows", "shuffled windows"}


def test_aps_comparison_matches_its_parts(data):
    p, y, seq, _ = data
    split = ex.one_split({"p": p, "y": y, "sequence": seq, "position": seq * 0}, ALPHA, seed=0)
    cal = split.calibrating
    fifths = cr.confidence_fifths(split.sets, p[~cal], y[~cal])
    aps = cr.aps_comparison(p[cal], y[cal], p[~cal], y[~cal], fifths, ALPHA, seed=0)
    assert aps.aps_dev == np.abs(aps.bands["coverage"] - (1 - ALPHA)).max()
    # randomised APS is exact on average: overall coverage within a few standard errors
    m = (~cal).sum()
    assert abs(aps.aps_cov - (1 - ALPHA)) < 4 * np.sqrt(0.09 / m) + 1 / (cal.sum() + 1)
    assert aps.aps_empty == aps.summary["empty"]


def test_ties_by_hand():
    scores = np.array([0.1, 0.1, 0.2, 0.3, 0.3, 0.3])
    position = np.array([0, 1, 0, 0, 2, 3])
    t = cr.ties(scores, position)
    assert t.tied == 5 / 6                # all but 0.2
    assert t.tied_first == 2 / 5          # rows 0 and 3 of the five tied rows


def test_level_by_size_by_hand():
    level = cr.level_by_size(0.1, largest=60)
    assert level.least_n == 9                                  # n >= 1/alpha - 1
    assert level.exact == [9, 19, 29, 39, 49, 59]              # n + 1 a multiple of ten
    assert (level.exact_first, level.exact_second, level.exact_count) == (9, 19, 6)
    # excess (ceil(0.9 (n+1)) - 0.9 (n+1)) / (n+1) is largest at n + 1 = 19: 0.9 / 19
    assert level.excess_at == 18
    assert level.excess_max == pytest.approx(0.9 / 19, abs=1e-12)
    assert level.excess_15 == pytest.approx(15 / 16 - 0.9, abs=1e-12)
    assert np.all(level.gap < 1 / (level.sizes + 1))
    assert level.gap[level.sizes == 19][0] == pytest.approx(0.0, abs=1e-12)


def test_spread_at_49_rank(data):
    p, y, _, _ = data
    r = cr.spread_at_49(true_scores(p, y), ALPHA, splits=50, seed=4)
    assert r.k49 == 45                                       # ceil(50 * 0.9)
    assert r.runs["n"] == 49 and r.theory["level"] == pytest.approx(0.9, abs=1e-15)
    assert r.sd49_low < r.sd49 < r.sd49_high
    # a large test set: the binomial part is small beside the Beta part
    assert r.sd49_test < r.sd49_beta / 5


def test_position_slices_break_exchangeability():
    """Early positions made harder: LAC calibrated on the later positions under-covers them,
    below the range exchangeable scores allow; calibrated on early positions it does not."""
    p, y, seq, position = synthetic(windows=400, window=16, seed=5, early_harder=True)
    split = ex.one_split({"p": p, "y": y, "sequence": seq, "position": position}, ALPHA,
                         seed=0)
    cal = split.calibrating
    aps = conformal.conformal_sets(p[cal], y[cal], p[~cal], alpha=ALPHA, score="aps")
    s = cr.position_slices(p, y, position, cal, split.sets, aps["sets"], ALPHA,
                           edges=(-0.5, 3.5, 9.5, 15.5), early_positions=4)
    assert s.shift_cov < s.shift_low
    assert s.same_low <= s.same_cov <= s.same_high
    assert s.conf_early < s.conf_later
    assert s.shifted["late"]["n"] == (cal & (position >= 4)).sum()
    assert s.pos_lac_early == s.coverage["LAC"][0] and s.pos_lac_late == s.coverage["LAC"][2]
