"""Property-based fuzzing of every public array function.

Two properties, over inputs drawn by hypothesis:

* **bad input is refused by name**: NaN, infinity, empty, wrong shape, wrong dtype (complex,
  strings), out-of-range labels, alpha outside (0, 1), and temperatures <= 0, non-finite or
  too small to invert each give a ``ValueError`` (or ``TypeError``) whose message names the
  argument;
* **valid input never gives NaN** (except where a function documents NaN for "no rows": the
  empty bands of ``coverage.by_confidence`` and the empty shares of
  ``exchangeability.escalation``).

The valid data are small (8 to 40 rows, 2 to 6 classes, windows of 2 rows), so each case is
cheap; the fast tier runs the valid-input cases, and the sweep of bad inputs (over 600 cases,
one per argument and corruption) runs in the slow tier. ``standarderror.spectral`` has its
own tests; the functions that run the model are fuzzed on their arguments only.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from standarderror.llm import semantic as se
from standarderror.llm import tiny
from standarderror.uncertainty import binning as bn
from standarderror.uncertainty import calibration as cb
from standarderror.uncertainty import coverage as cv
from standarderror.uncertainty import exchangeability as ex
from standarderror.uncertainty import training as tr

pytestmark = pytest.mark.filterwarnings(
    "ignore::standarderror.uncertainty.calibration.TemperatureAtBoundWarning")

FUZZ = settings(max_examples=6, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow])
#: a corrupted argument is refused whatever the rest of the data: one draw each suffices
BAD = settings(max_examples=1, deadline=None, derandomize=True,
               suppress_health_check=[HealthCheck.too_slow])


def make(seed: int, rows: int, k: int) -> dict:
    """Valid inputs of every kind, drawn from one seed."""
    rng = np.random.default_rng(seed)
    rows += rows % 2                                      # windows of two rows
    z = rng.normal(0, 2, (rows, k))
    logp = z - np.logaddexp.reduce(z, axis=1, keepdims=True)
    p = np.exp(logp)
    y = rng.integers(0, k, rows)
    y[:k] = np.arange(k)[: min(k, rows)]                  # every class present
    conf = p.max(axis=1)
    correct = p.argmax(axis=1) == y
    correct[:2] = [True, False]                           # both outcomes present
    seq = np.arange(rows) // 2
    sets = p >= np.sort(p, axis=1)[:, -2:-1]              # the two most probable labels
    cal = np.zeros(rows, dtype=bool)
    cal[: rows // 2] = True
    scores = 1 - p[np.arange(rows), y]
    masks = ex.calibration_masks(seq, splits=3, seed=seed)
    return {"z": z, "logp": logp, "p": p, "y": y, "conf": conf, "correct": correct,
            "seq": seq, "sets": sets, "cal": cal, "scores": scores, "masks": masks,
            "rows": rows, "k": k}


# name -> (call(d, **override), {argument: kind}); kind says which corruptions apply
SPECS = {
    # calibration
    "cb.scale": (lambda d, logp_or_logits=None, temperature=1.5: cb.scale(
        d["z"] if logp_or_logits is None else logp_or_logits, temperature),
        {"logp_or_logits": "logits nd", "temperature": "temperature"}),
    "cb.confidence_scores": (lambda d, logp=None, temperature=1.5: cb.confidence_scores(
        d["logp"] if logp is None else logp, temperature),
        {"logp": "logp", "temperature": "temperature"}),
    "cb.ece": (lambda d, confidence=None, correct=None, bins=5: cb.ece(
        d["conf"] if confidence is None else confidence,
        d["correct"] if correct is None else correct, bins, adaptive=True),
        {"confidence": "conf", "correct": "bool", "bins": "count"}),
    "cb.bin_index": (lambda d, confidence=None, bins=4: cb.bin_index(
        d["conf"] if confidence is None else confidence, bins, adaptive=True),
        {"confidence": "conf", "bins": "count"}),
    "cb.nll": (lambda d, p=None, y=None: cb.nll(d["p"] if p is None else p,
                                                d["y"] if y is None else y),
               {"p": "p", "y": "y"}),
    "cb.brier": (lambda d, p=None, y=None: cb.brier(d["p"] if p is None else p,
                                                    d["y"] if y is None else y),
                 {"p": "p", "y": "y"}),
    "cb.risk_coverage": (lambda d, score=None, correct=None: cb.risk_coverage(
        d["conf"] if score is None else score, d["correct"] if correct is None else correct),
        {"score": "score", "correct": "bool"}),
    "cb.aurc": (lambda d, score=None, correct=None: cb.aurc(
        d["conf"] if score is None else score, d["correct"] if correct is None else correct),
        {"score": "score", "correct": "bool"}),
    "cb.kendall_tau": (lambda d, x=None, y=None: cb.kendall_tau(
        d["conf"] if x is None else x, d["logp"][:, 0] if y is None else y),
        {"x": "score", "y": "score"}),
    "cb.temperature_table": (lambda d, temperatures=(0.5, 2.0): cb.temperature_table(
        temperatures, data={"logp": d["logp"], "y": d["y"]}),
        {"temperatures": "temperatures"}),
    "cb.reordering": (lambda d, top=0.1: cb.reordering(
        cb.temperature_table((0.5, 2.0), data={"logp": d["logp"], "y": d["y"]}), top),
        {"top": "fraction"}),
    "cb.swap_pair": (lambda d, temperatures=(0.5, 2.0): cb.swap_pair(temperatures),
                     {"temperatures": "temperatures"}),
    "cb.shared_shape": (lambda d, logp=None: cb.shared_shape(d["logp"] if logp is None else logp),
                        {"logp": "logp"}),
    "cb.abstention": (lambda d, p=None, y=None, temperatures=(0.5, 2.0): cb.abstention(
        d["p"] if p is None else p, d["y"] if y is None else y, d["seq"], temperatures, draws=5),
        {"p": "p", "y": "y", "temperatures": "temperatures"}),
    "cb.fit_temperature": (lambda d, logits=None, y=None: cb.fit_temperature(
        d["z"] if logits is None else logits, d["y"] if y is None else y),
        {"logits": "logits", "y": "y"}),
    "cb.fitted_temperature": (lambda d, p=None, y=None: cb.fitted_temperature(
        d["p"] if p is None else p, d["y"] if y is None else y, d["seq"], halves=2),
        {"p": "p", "y": "y"}),
    "cb.best_temperature": (lambda d, p=None, y=None, temperatures=(0.5, 2.0):
                            cb.best_temperature(d["p"] if p is None else p,
                                                d["y"] if y is None else y, "entropy",
                                                temperatures),
                            {"p": "p", "y": "y", "temperatures": "temperatures"}),
    # coverage
    "cv.conformal_rank": (lambda d, n=20, alpha=0.1: cv.conformal_rank(n, alpha),
                          {"n": "count", "alpha": "alpha"}),
    "cv.minimum_calibration": (lambda d, alpha=0.1: cv.minimum_calibration(alpha),
                               {"alpha": "alpha"}),
    "cv.label_scores": (lambda d, p=None: cv.label_scores(d["p"] if p is None else p,
                                                          score="aps"), {"p": "p"}),
    "cv.conformal_quantile": (lambda d, scores=None, alpha=0.3: cv.conformal_quantile(
        d["scores"] if scores is None else scores, alpha),
        {"scores": "vector", "alpha": "alpha"}),
    "cv.conformal_sets": (lambda d, p_cal=None, y_cal=None, p_test=None, alpha=0.3:
                          cv.conformal_sets(d["p"] if p_cal is None else p_cal,
                                            d["y"] if y_cal is None else y_cal,
                                            d["p"] if p_test is None else p_test, alpha=alpha,
                                            score="aps", randomized=True, seed=0),
                          {"p_cal": "p", "y_cal": "y", "p_test": "p", "alpha": "alpha"}),
    "cv.set_summary": (lambda d, sets=None, y=None: cv.set_summary(
        d["sets"] if sets is None else sets, d["y"] if y is None else y),
        {"sets": "sets", "y": "y"}),
    "cv.by_confidence": (lambda d, sets=None, y=None, confidence=None: cv.by_confidence(
        d["sets"] if sets is None else sets, d["y"] if y is None else y,
        d["conf"] if confidence is None else confidence),
        {"sets": "sets", "y": "y", "confidence": "conf"}),
    "cv.spearman": (lambda d, a=None, b=None: cv.spearman(
        d["conf"] if a is None else a, d["logp"][:, 0] if b is None else b),
        {"a": "vector", "b": "vector"}),
    "cv.ranking": (lambda d, values=None: cv.ranking(d["conf"] if values is None else values),
                   {"values": "vector"}),
    "cv.inversions": (lambda d, accuracy=None, size=None: cv.inversions(
        d["conf"] if accuracy is None else accuracy, d["logp"][:, 0] if size is None else size),
        {"accuracy": "vector", "size": "vector"}),
    "cv.softmax_logits": (lambda d, logits=None, temperature=2.0: cv.softmax_logits(
        d["z"] if logits is None else logits, temperature),
        {"logits": "finite2d", "temperature": "temperature"}),
    "cv.evaluate": (lambda d, p=None, y=None, alpha=0.3: cv.evaluate(
        d["p"] if p is None else p, d["y"] if y is None else y, d["cal"], alpha=alpha),
        {"p": "p", "y": "y", "alpha": "alpha"}),
    # binning
    "bn.calibrated_labels": (lambda d, confidence=None, draws=3: bn.calibrated_labels(
        d["conf"] if confidence is None else confidence, draws),
        {"confidence": "conf", "draws": "count"}),
    "bn.ece_batch": (lambda d, confidence=None, bins=4: bn.ece_batch(
        d["conf"] if confidence is None else confidence,
        bn.calibrated_labels(d["conf"], draws=3), bins, adaptive=True),
        {"confidence": "conf", "bins": "count"}),
    "bn.l2_batch": (lambda d, confidence=None, bins=4: bn.l2_batch(
        d["conf"] if confidence is None else confidence,
        bn.calibrated_labels(d["conf"], draws=3), bins),
        {"confidence": "conf", "bins": "count"}),
    "bn.subsample": (lambda d, rows=10, size=4, draws=3: bn.subsample(rows, size, draws),
                     {"rows": "count", "size": "count", "draws": "count"}),
    "bn.ece_floor": (lambda d, confidence=None, sizes=(4,), draws=3: bn.ece_floor(
        d["conf"] if confidence is None else confidence, sizes, (2, 3), draws=draws),
        {"confidence": "conf", "sizes": "count", "draws": "count"}),
    "bn.fit_scaling": (lambda d, x=None, y=None: bn.fit_scaling(
        np.arange(1.0, 6.0) if x is None else x,
        np.arange(1.0, 6.0) * 0.3 + 0.01 * np.sin(np.arange(5)) if y is None else y),
        {"x": "vector", "y": "vector"}),
    "bn.predicted_constant": (lambda d, confidence=None, bins=3: bn.predicted_constant(
        d["conf"] if confidence is None else confidence, bins),
        {"confidence": "conf", "bins": "count"}),
    "bn.consistency_test": (lambda d, confidence=None, correct=None, draws=5:
                            bn.consistency_test(d["conf"] if confidence is None else confidence,
                                                d["correct"] if correct is None else correct,
                                                3, draws=draws),
                            {"confidence": "conf", "correct": "bool", "draws": "count"}),
    "bn.subset_p_values": (lambda d, confidence=None, windows=2: bn.subset_p_values(
        d["conf"] if confidence is None else confidence, d["correct"], d["seq"], windows,
        subsets=2, draws=5, bins=2),
        {"confidence": "conf", "windows": "count"}),
    "bn.p_values": (lambda d, observed=None, null=None: bn.p_values(
        d["conf"][:3] if observed is None else observed, d["conf"] if null is None else null),
        {"observed": "vector", "null": "vector"}),
    "bn.verdicts": (lambda d, logp=None, y=None, temperatures=(1.0, 1.2): bn.verdicts(
        d["logp"] if logp is None else logp, d["y"] if y is None else y, d["seq"],
        temperatures, sizes=(2,), draws=5, bins=2),
        {"logp": "logp", "y": "y", "temperatures": "temperatures"}),
    # exchangeability
    "ex.finite_sample_level": (lambda d, n=20, alpha=0.1: ex.finite_sample_level(n, alpha),
                               {"n": "count", "alpha": "alpha"}),
    "ex.coverage_distribution": (lambda d, n=20, m=30, alpha=0.1: ex.coverage_distribution(
        n, m, alpha), {"n": "count", "m": "count", "alpha": "alpha"}),
    "ex.calibration_masks": (lambda d, share=0.5, splits=3: ex.calibration_masks(
        d["seq"], share=share, splits=splits),
        {"calibration": "alpha", "splits": "count"}),
    "ex.split_coverage": (lambda d, scores=None, alpha=0.3: ex.split_coverage(
        d["scores"] if scores is None else scores, d["masks"], alpha),
        {"scores": "vector", "alpha": "alpha"}),
    "ex.spread_interval": (lambda d, values=None, level=0.9: ex.spread_interval(
        d["conf"] if values is None else values, level),
        {"values": "vector", "level": "alpha"}),
    "ex.escalation": (lambda d, sets=None, y=None: ex.escalation(
        d["sets"] if sets is None else sets, d["y"] if y is None else y),
        {"sets": "sets", "y": "y"}),
    # training
    "tr.checkpoint_metrics": (lambda d, logp=None, y=None: tr.checkpoint_metrics(
        d["logp"] if logp is None else logp, d["y"] if y is None else y, d["seq"], bins=2,
        halves=2), {"logp": "logp", "y": "y"}),
    "tr.turning_point": (lambda d, losses=None: tr.turning_point(
        np.arange(d["rows"]), d["conf"] if losses is None else losses), {"losses": "vector"}),
}

#: Results that may hold NaN by documentation ("no rows" shares).
NAN_ALLOWED = {"cv.by_confidence", "ex.escalation"}


def corruptions(kind: str, d: dict):
    """(label, bad value) pairs for an argument of ``kind``."""
    rows, k = d["rows"], d["k"]
    nan_p = d["p"].copy()
    nan_p[0, 0] = np.nan
    if kind == "p":
        inf_p = d["p"].copy()
        inf_p[0, 0] = np.inf
        return [("nan", nan_p), ("inf", inf_p), ("1-D", d["p"][:, 0]),
                ("logits", d["z"]), ("complex", d["p"] + 0.3j),
                ("strings", d["p"].astype(str)), ("empty", np.empty((0, k)))]
    if kind in ("logp", "logits", "finite2d", "logits nd"):
        base = d["logp"] if kind == "logp" else d["z"]
        nan = base.copy()
        nan[0, 0] = np.nan
        inf = base.copy()
        inf[0, 0] = np.inf
        out = [("nan", nan), ("+inf", inf), ("complex", base + 0.3j),
               ("strings", base.astype(str)), ("empty", np.empty((0, k))),
               ("one class", base[:, :1])]
        if kind != "logits nd":  # scale() takes (..., classes): one row is valid
            out.append(("1-D", base[:, 0]))
        if kind == "logp":
            out.append(("probabilities", d["p"]))
        return out
    if kind in ("conf", "vector", "score"):
        v = d["conf"]
        nan = v.copy()
        nan[0] = np.nan
        # confidences may be (draws x rows) where batched: 3-D is wrong everywhere
        extra = np.stack([v, v]) if kind != "conf" else np.stack([v, v])[None]
        out = [("nan", nan), ("too many dims", extra), ("complex", v + 0.3j),
               ("strings", v.astype(str)), ("empty", np.empty(0))]
        if kind != "score":
            inf = v.copy()
            inf[0] = np.inf
            out.append(("inf", inf))
        if kind == "conf":
            out.append(("above 1", v + 1.5))
        return out
    if kind == "y":
        return [("too large", np.full(rows, k)), ("negative", np.full(rows, -1)),
                ("fractional", np.full(rows, 0.5)), ("strings", d["y"].astype(str)),
                ("complex", d["y"] + 0j), ("short", d["y"][:-1]), ("nan", np.full(rows, np.nan))]
    if kind == "bool":
        return [("not 0/1", np.full(rows, 2.0)), ("strings", d["correct"].astype(str)),
                ("complex", d["correct"] + 0j), ("short", d["correct"][:-1])]
    if kind == "sets":
        return [("not bool", d["sets"].astype(float)), ("1-D", d["sets"][:, 0]),
                ("empty", np.empty((0, k), bool))]
    if kind == "alpha":
        return [("zero", 0.0), ("one", 1.0), ("negative", -0.1), ("above 1", 1.5),
                ("nan", math.nan), ("string", "0.1"), ("complex", 0.1 + 0j)]
    if kind == "fraction":
        return [("zero", 0.0), ("one", 1.0), ("nan", math.nan), ("string", "0.1")]
    if kind == "temperature":
        return [("zero", 0.0), ("negative", -1.0), ("nan", math.nan), ("inf", math.inf),
                ("tiny", 1e-320), ("string", "2"), ("complex", 2 + 0j)]
    if kind == "temperatures":
        return [("zero", (0.0, 1.0)), ("negative", (-1.0,)), ("nan", (math.nan,)),
                ("inf", (math.inf,)), ("tiny", (1e-320,)), ("empty", ())]
    if kind == "count":
        return [("zero", 0), ("negative", -3), ("float", 2.5), ("bool", True), ("string", "3")]
    raise AssertionError(kind)


CASES = [(name, arg, label)
         for name, (_, args) in SPECS.items()
         for arg, kind in args.items()
         for label, _ in corruptions(kind, make(0, 10, 3))
         if label not in ("complex", "strings", "empty") or kind not in ("count",)]

SIZES = st.tuples(st.integers(0, 10 ** 6), st.integers(8, 40), st.integers(2, 6))


@pytest.mark.parametrize("name", sorted(SPECS))
@FUZZ
@given(SIZES)
def test_valid_input_never_gives_nan(name, sizes):
    d = make(*sizes)
    call, _ = SPECS[name]
    out = call(d)
    if name not in NAN_ALLOWED:
        assert not _has_nan(out), f"{name} returned NaN on valid input"


@pytest.mark.slow  # a sweep of 614 cases (every argument of every function, each corruption)
@pytest.mark.parametrize("name,arg,label", CASES, ids=["-".join(c) for c in CASES])
@BAD
@given(SIZES)
def test_bad_input_is_refused_by_name(name, arg, label, sizes):
    d = make(*sizes)
    call, args = SPECS[name]
    bad = dict(corruptions(args[arg], d))[label]
    with pytest.raises((ValueError, TypeError)) as info:
        call(d, **{arg: bad})
    message = str(info.value)
    assert _names(message, arg), f"{name}({arg}={label}) raised without naming {arg!r}: {message}"


def _names(message: str, arg: str) -> bool:
    """The message names the argument (as a word; ``y`` may appear as ``y_cal`` etc.)."""
    import re

    return re.search(rf"(?<![A-Za-z]){re.escape(arg)}(?![A-Za-z])", message) is not None


def _has_nan(x) -> bool:
    if isinstance(x, dict):
        return any(_has_nan(v) for v in x.values())
    if isinstance(x, (list, tuple)):
        return any(_has_nan(v) for v in x)
    if isinstance(x, float):
        return math.isnan(x)
    if isinstance(x, np.ndarray) and x.dtype.kind in "fc":
        return bool(np.isnan(x).any())
    if isinstance(x, np.floating):
        return bool(np.isnan(x))
    return False


# ------------------------------------------------------------------ functions outside arrays


@FUZZ
@given(st.lists(st.text(min_size=1, max_size=6), min_size=1, max_size=5),
       st.integers(0, 3))
def test_semantic_arguments(words, cut):
    if cut and cut < len(words):
        with pytest.raises(ValueError, match="truth"):
            se.correct(words, words[:-cut])
    assert se.correct(words, words).all()
    with pytest.raises(ValueError, match="strings"):
        se.hash_embed(words[0])
    e = se.hash_embed(words)
    assert e.shape == (len(words), 256) and np.isfinite(e).all()


@FUZZ
@given(st.lists(st.integers(-5, 100), min_size=1, max_size=8))
def test_decode_accepts_exactly_the_vocabulary(ids):
    chars = list("abcdefgh")
    if all(0 <= i < len(chars) for i in ids):
        assert tiny.decode(ids, chars) == "".join(chars[i] for i in ids)
    else:
        with pytest.raises(ValueError, match="ids"):
            tiny.decode(ids, chars)


# ------------------------------------------------------------------ float16, tiny T

#: scores that take probabilities; each must refuse a row that is not a probability vector
PROBABILITY_SCORES = {
    "cb.nll": lambda p, y: cb.nll(p, y),
    "cb.brier": lambda p, y: cb.brier(p, y),
    "cv.label_scores(aps)": lambda p, y: cv.label_scores(p, score="aps"),
    "cv.conformal_sets": lambda p, y: cv.conformal_sets(p, y, p, alpha=0.2),
}


@pytest.mark.parametrize("name", sorted(PROBABILITY_SCORES))
@FUZZ
@given(st.integers(0, 10 ** 6), st.sampled_from([2, 3, 6, 4096, 32_000]),
       st.one_of(st.just(0.0), st.floats(0.0, 0.97), st.floats(1.03, 3.0)))
def test_float16_rows_are_probabilities_or_refused(name, seed, k, factor):
    """A float16 softmax gives finite scores; the same rows with one row scaled by a factor
    at least 3% away from one (or zeroed) are refused, whatever the number of classes (the
    old tolerance was 1.0 at 4,096 float16 classes: a zero row passed and gave NaN)."""
    rng = np.random.default_rng(seed)
    z = rng.normal(0, 3, (8, k))
    p = np.exp(z - np.logaddexp.reduce(z, axis=1, keepdims=True))
    y = rng.integers(0, k, 8)
    score = PROBABILITY_SCORES[name]
    out = score(p.astype(np.float16), y)
    assert not _has_nan(out)
    bad = p.copy()
    bad[int(rng.integers(8))] *= factor
    with pytest.raises(ValueError, match=r"\bp(_cal)?\b"):
        score(bad.astype(np.float16), y)


@FUZZ
@given(st.floats(1 / np.finfo(float).max * 1.0001, 1e-300, allow_subnormal=True), SIZES)
def test_softmax_at_temperatures_whose_ratios_overflow(t, sizes):
    """1/T is finite, z/T is not: the probabilities are the T -> 0 limit, not NaN."""
    d = make(*sizes)
    z = np.round(d["z"] * 100)                           # |z| > 1: z/T overflows; ties occur
    p = cv.softmax_logits(z, t)
    assert np.isfinite(p).all()
    top = z == z.max(axis=1, keepdims=True)
    np.testing.assert_array_equal(p, top / top.sum(axis=1, keepdims=True))
