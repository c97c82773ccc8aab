"""Hardening: import side effects, silent wrong answers, one name one meaning."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest


def test_unknown_codec_raises_lookup_error_in_a_pages_kernel():
    """``future-typing``'s .pth hook makes every codec name resolve; the book's kernel set-up
    (importing standarderror_book.page) undoes it, in a fresh interpreter of this environment."""
    code = (
        "import codecs\n"
        "import standarderror_book.page\n"
        "try:\n"
        "    codecs.lookup('no-such-codec-xyz')\n"
        "except LookupError:\n"
        "    print('LookupError')\n"
        "else:\n"
        "    print('resolved')\n"
        "print(codecs.lookup('utf-8').name)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, check=True).stdout.split()
    assert out == ["LookupError", "utf-8"]


# --- no silent wrong answers ----------------------------------------------------------------

from standarderror import _checks  # noqa: E402
from standarderror.uncertainty import binning as bn  # noqa: E402
from standarderror.uncertainty import calibration as cb  # noqa: E402
from standarderror.uncertainty import coverage as cv  # noqa: E402
from standarderror.uncertainty import exchangeability as ex  # noqa: E402


def _probs(rows=50, k=4, seed=0):
    rng = np.random.default_rng(seed)
    z = rng.normal(0, 2, (rows, k))
    p = np.exp(z - np.logaddexp.reduce(z, axis=1, keepdims=True))
    return z, p, rng.integers(0, k, rows)


def test_complex_input_is_refused_not_truncated():
    _, p, y = _probs()
    with pytest.raises(ValueError, match="p must be real"):
        cb.nll(p + 0.3j, y)
    with pytest.raises(ValueError, match="confidence must be real"):
        cb.ece(p.max(1) + 0j, p.argmax(1) == y)
    with pytest.raises(ValueError, match="logits must be real"):
        cv.softmax_logits(p.astype(complex))
    with pytest.raises(ValueError, match="temperature must be a real number"):
        cb.scale(np.log(p), 1 + 1j)


def test_string_and_object_labels_name_the_argument():
    _, p, y = _probs()
    with pytest.raises(ValueError, match="y must be numeric"):
        cb.nll(p, y.astype(str))
    with pytest.raises(ValueError, match="y must be numeric"):
        cb.brier(p, np.array([object()] * len(y)))
    with pytest.raises(ValueError, match="y_cal must be numeric"):
        cv.conformal_sets(p, y.astype(str), p)
    with pytest.raises(ValueError, match="confidence must be numeric"):
        cb.ece(["high"] * 3, [True, False, True])


def test_float32_softmax_over_a_large_vocabulary_is_accepted():
    import torch

    torch.manual_seed(0)
    logits = torch.randn(64, 32_000) * 3
    p32 = torch.softmax(logits, dim=-1).numpy()          # float32, as a model returns it
    assert np.abs(p32.astype(np.float64).sum(1) - 1).max() > 1e-6   # accepted: float32 round-off
    y = p32.argmax(1)
    assert np.isfinite(cb.nll(p32, y))
    cv.conformal_sets(p32[:32], y[:32], p32[32:], alpha=0.2)
    logp32 = torch.log_softmax(logits, dim=-1).numpy()
    cb.confidence_scores(logp32)
    # float64 input keeps the strict tolerance, and logits are still refused
    with pytest.raises(ValueError, match="sum to one"):
        cb.nll(p32.astype(np.float64) * 1.001, y)
    assert _checks.sum_tolerance(np.float64, 32_000) == 1e-6


def test_temperature_fit_from_logits_survives_an_underflowing_label():
    rng = np.random.default_rng(0)
    n = 20_000
    z = rng.normal(0, 1, (n, 5))
    y = rng.integers(0, 5, n)
    z[np.arange(n), y] += 1.5
    z[0] = [750.0, 0, 0, 0, 0]
    y[0] = 1                                   # softmax(z[0])[1] underflows to exactly 0
    t = cb.fit_temperature(z, y)
    # the optimum by brute force, in log space: a grid of step 0.05 on [0.5, 5], then one of
    # step 0.0025 (the old single grid's) over the two coarse steps around its best point. The
    # NLL is convex in 1/T, so it has one minimum in T and the coarse best point's neighbours
    # bracket it; 132 evaluations instead of 1,801, the same answer.
    from scipy.special import log_softmax

    def nll(g):
        return -log_softmax(z / g, axis=1)[np.arange(n), y].mean()

    coarse = np.linspace(0.5, 5, 91)
    best = coarse[int(np.argmin([nll(g) for g in coarse]))]
    grid = np.linspace(best - 0.05, best + 0.05, 41)
    assert t == pytest.approx(grid[int(np.argmin([nll(g) for g in grid]))], abs=0.005)
    assert t < 5.0                             # the old route returned the bound, 20.0
    # probabilities that underflowed cannot be fitted: an error, not the bound
    p = np.exp(log_softmax(z, axis=1))
    with pytest.raises(ValueError, match="probability zero"):
        cb.fitted_temperature(p, y, np.arange(n), halves=1)


def test_temperature_fit_at_a_bound_warns():
    z = np.array([[5.0, 0.0], [0.0, 5.0], [4.0, 1.0], [1.0, 4.0]])
    y = np.array([0, 1, 0, 1])                 # separable: NLL falls as T -> 0
    with pytest.warns(cb.TemperatureAtBoundWarning, match="edge of bounds"):
        t = cb.fit_temperature(z, y)
    assert t == pytest.approx(0.05, abs=1e-3)


def test_one_row_fit_names_no_missing_argument():
    z, _, y = _probs(1)
    with pytest.warns(cb.TemperatureAtBoundWarning):
        t = cb.fit_temperature(z, y)          # its message names only its own arguments
    assert np.isfinite(t)


def test_tiny_temperatures_whose_reciprocal_overflows_are_refused():
    _, p, _ = _probs()
    with pytest.raises(ValueError, match="temperature"):
        cb.scale(np.log(p), 1e-320)
    with pytest.raises(ValueError, match="temperature"):
        cv.softmax_logits(p, 1e-320)


def test_reordering_refuses_probabilities_in_place_of_log_probabilities():
    _, p, y = _probs(200)
    table = cb.temperature_table((0.5, 2.0), data={"p": p, "y": y})
    cb.reordering(table)
    with pytest.raises(ValueError, match="log-probabilities"):
        cb.reordering({**table, "logp": p})


def test_semantic_validation():
    from standarderror.llm import semantic as se

    with pytest.raises(ValueError, match="truth has 2"):
        se.correct(["a", "b", "c"], ["a", "b"])
    assert se.correct(["Lord", "x"], ["lord", "y"]).tolist() == [True, False]
    with pytest.raises(ValueError, match="single string"):
        se.hash_embed("lord")
    assert se.hash_embed(["lord"]).shape == (1, 256)


def test_empty_selections_are_refused():
    from standarderror.experiments import multiple_choice as mc

    with pytest.raises(ValueError, match="pool"):
        mc.distractor_pool(pool=0)
    with pytest.raises(ValueError, match="splits"):
        mc.split_control({"logits": np.zeros((2, 4, 6)), "y": np.zeros(4, int)}, splits=0)


def test_inversions_scale_and_agree_with_the_pairwise_definition():
    rng = np.random.default_rng(3)
    acc, size = rng.integers(0, 8, 120) / 8, rng.integers(0, 8, 120) / 4
    better = acc[:, None] > acc[None, :]
    hits = np.argwhere(better & (size[:, None] > size[None, :]))
    r = cv.inversions(acc, size)
    assert r["count"] == len(hits) and r["pairs"] == better.sum()
    assert r["which"] == [tuple(int(v) for v in h) for h in hits]
    big = cv.inversions(rng.random(100_000), rng.random(100_000))   # O(n^2) would need 80 GB
    assert big["which"] is None and 0 < big["count"] < big["pairs"]


def test_memory_bounded_functions_match_their_old_results():
    """Chunked draws give the same subsets and masks as one big draw did."""
    keys = np.random.default_rng(5).random((30, 1000))
    assert np.array_equal(bn.subsample(1000, 40, 30, seed=5),
                          np.argpartition(keys, 40, axis=1)[:, :40])
    seq = np.repeat(np.arange(40), 8)
    rng = np.random.default_rng(2)
    order = rng.permuted(np.tile(np.arange(320), (12, 1)), axis=1)
    old = np.zeros((12, 320), bool)
    np.put_along_axis(old, order[:, :160], True, axis=1)
    assert np.array_equal(ex.calibration_masks(seq, splits=12, seed=2), old)


def test_conformal_rank_is_exact_where_n_plus_one_times_the_level_is_whole():
    # ceil((n + 1)(1 - alpha)) with (n + 1)(1 - alpha) = 9 and 90: no tolerance lifts it by one
    assert cv.conformal_rank(9, 0.1) == 9 and cv.conformal_rank(99, 0.1) == 90


@pytest.mark.slow  # runs benchmarks/bench_memory.py: every case, under tracemalloc
def test_memory_benchmark_runs_on_a_small_input(capsys):
    """benchmarks/bench_memory.py covers every case at 10^6 rows when run by hand; here it runs
    on 1,280 rows so that a changed signature breaks the tests, not the benchmark."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_memory.py"
    spec = importlib.util.spec_from_file_location("bench_memory", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.main(["--rows", "1280"]) == 0
    out = capsys.readouterr().out
    assert "coverage.inversions" in out and "largest:" in out


# --- no silent NaN from float16, a tolerance that stays a check ----------------------------


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
@pytest.mark.parametrize("k", [6, 4096, 32_000, 1_000_000])
def test_sum_tolerance_stays_below_any_real_error(dtype, k):
    """A tolerance that grew with the class count would reach 1.0 at 4,096 float16 classes and
    2.8 at 32,000, and a zero row would pass. It is capped at 2**-7 whatever the size, and at
    the sizes of real vocabularies it stays within a few epsilons of the dtype."""
    tol = _checks.sum_tolerance(dtype, k)
    assert tol <= 2.0 ** -7
    eps = np.finfo(dtype).eps
    if k <= 32_000:
        assert tol <= (5 * eps if dtype == np.float16 else 16 * eps * np.sqrt(k) + 4 * eps)


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
@pytest.mark.parametrize("k", [6, 4096, 32_000])
def test_rows_that_are_not_probabilities_are_refused_not_renormalised(dtype, k):
    rng = np.random.default_rng(k)
    z = rng.normal(0, 3, (8, k))
    good = np.exp(z - np.logaddexp.reduce(z, axis=1, keepdims=True))
    y = rng.integers(0, k, 8)
    for factor in (0.0, 1.5, 0.2):
        p = good.copy()
        p[3] *= factor
        p = p.astype(dtype)
        for call in (lambda p=p: cb.nll(p, y), lambda p=p: cb.brier(p, y),
                     lambda p=p: cv.label_scores(p, score="aps"),
                     lambda p=p: cv.conformal_sets(p, y, p)):
            with pytest.raises(ValueError, match=r"rows of p\w* must sum to one|p\w* must lie in"):
                call()


def test_float16_softmax_is_accepted_and_scores_are_finite():
    import torch

    torch.manual_seed(23)
    for k in (6, 4096, 32_000):
        logits = torch.randn(16, k) * 4
        y = logits.argmax(1).numpy()
        for p16 in (torch.softmax(logits.half(), -1).numpy(),        # computed in float16
                    torch.softmax(logits, -1).half().numpy()):         # rounded once to it
            assert p16.dtype == np.float16
            assert np.isfinite(cb.nll(p16, y)) and np.isfinite(cb.brier(p16, y))
            s = cv.label_scores(p16, score="aps")
            assert np.isfinite(s).all() and (s <= 1).all()
    # float32 over a 150,000-token vocabulary (torch's sum drifts by ~0.5 eps*sqrt(k) there)
    logits = torch.randn(8, 150_000) * 3
    p32 = torch.softmax(logits, -1).numpy()
    assert np.isfinite(cb.nll(p32, logits.argmax(1).numpy()))


def test_softmax_at_a_temperature_whose_logit_ratios_overflow():
    """At T = 1e-308, 1/T is finite but z/T overflows: computed naively, the rows come back NaN. The
    limit as T -> 0 is one-hot at the maximum, shared among exact ties, and a row with no
    overflow is computed as before."""
    z = np.array([[1.0, 2.0, 3.0],
                  [3.0, 3.0, 0.0],
                  [-5.0, 4.0, 4.0],
                  [1e308, -1e308, 0.0],
                  [0.0, -2e-308, -1e-307]])     # no overflow: exponents 0, -2, -10
    p = cv.softmax_logits(z, 1e-308)
    assert np.isfinite(p).all()
    np.testing.assert_array_equal(p[:4], [[0, 0, 1], [0.5, 0.5, 0], [0, 0.5, 0.5], [1, 0, 0]])
    e = np.exp([0.0, -2.0, -10.0])
    np.testing.assert_allclose(p[4], e / e.sum(), rtol=1e-14)
    rng = np.random.default_rng(1)
    w = rng.normal(0, 3, (50, 6))
    q = cv.softmax_logits(w, 0.7)
    e = np.exp((w - w.max(1, keepdims=True)) / 0.7)
    np.testing.assert_allclose(q, e / e.sum(1, keepdims=True), rtol=1e-13)


# --- the trust_card=True path refuses before it allocates ----------------------------------


def _own_model(tmp_path):
    """A copy of the committed checkpoints outside the package: only trust_card=True loads it."""
    import json
    import shutil

    from standarderror.llm import tiny

    d = tmp_path / "own"
    shutil.copytree(tiny.CHECKPOINT_DIR, d, ignore=shutil.ignore_patterns("overfit*"))
    return d, json.loads((d / "card.json").read_text())


def _write_card(d, card):
    import json

    (d / "card.json").write_text(json.dumps(card))


def _rewrite_final(d, card, change):
    """Apply ``change`` to the final checkpoint's tensors, save them, rehash the card."""
    from safetensors.torch import load_file, save_file

    from standarderror.llm import tiny

    entry = next(c for c in card["checkpoints"] if c["step"] == card["final_step"])
    f = d / entry["file"]
    state = load_file(str(f))
    change(state)
    save_file(state, str(f))
    entry["sha256"] = tiny._sha256(f)
    _write_card(d, card)


def test_a_step_listed_twice_is_refused(tmp_path):
    from standarderror.llm import tiny

    d, card = _own_model(tmp_path)
    first = dict(card["checkpoints"][0])
    first["step"] = card["final_step"]          # a second entry for the final step
    card["checkpoints"].append(first)
    _write_card(d, card)
    with pytest.raises(ValueError, match=f"step {card['final_step']} twice"):
        tiny.load(directory=d, trust_card=True)


@pytest.mark.parametrize("kind", ["int8", "bool", "complex64", "nan", "inf"])
def test_weights_that_are_not_finite_floats_are_refused(tmp_path, kind):
    import torch

    from standarderror.llm import tiny

    d, card = _own_model(tmp_path)

    def change(state):
        w = state["ln.weight"]
        if kind in ("nan", "inf"):
            w = w.clone()
            w[3] = float(kind)
            state["ln.weight"] = w
        else:
            state["ln.weight"] = w.to(getattr(torch, kind))

    _rewrite_final(d, card, change)
    with pytest.raises(ValueError, match="ln.weight"):
        tiny.load(directory=d, trust_card=True)


def test_shapes_are_compared_with_the_config_before_a_model_is_built(tmp_path, monkeypatch):
    from standarderror.llm import tiny

    d, card = _own_model(tmp_path)
    card["config"]["width"] = 256               # the file holds width-128 tensors
    _write_card(d, card)
    built = []
    real = tiny.GPT.__init__

    def counting(self, cfg, **kw):
        if "meta" not in str(__import__("torch").get_default_device()):
            built.append(cfg)
        real(self, cfg, **kw)

    monkeypatch.setattr(tiny.GPT, "__init__", counting)
    with pytest.raises(ValueError, match="shape .* config implies"):
        tiny.load(directory=d, trust_card=True)
    assert built == []


_WIDE = """
import json, resource, sys
resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))  # a regression fails, not the host
from standarderror.llm import tiny
d, width = sys.argv[1], int(sys.argv[2])
card = json.loads(open(d + "/card.json").read())
card["config"]["width"] = width
open(d + "/card.json", "w").write(json.dumps(card))
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
try:
    tiny.load(directory=d, trust_card=True)
except ValueError as exc:
    print("ValueError:", exc)
except Exception as exc:
    print(type(exc).__name__, str(exc)[:200])
grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
print(f"grown_kib={grown}")
"""


@pytest.mark.slow  # a fresh interpreter per width that imports torch and loads a model (2-3 s each)
@pytest.mark.parametrize("width", [2048, 8192])
def test_a_wide_config_allocates_nothing_before_it_is_refused(tmp_path, width):
    """Width 2048 builds 0.8 GB of float32 weights, width 8192 about 13 GB: the old loader
    built the model from the card before comparing any shape."""
    import subprocess
    import sys

    d, _ = _own_model(tmp_path)
    r = subprocess.run([sys.executable, "-c", _WIDE, str(d), str(width)], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "ValueError:" in r.stdout, r.stdout
    assert int(r.stdout.split("grown_kib=")[1]) < 200_000, r.stdout


def test_card_and_checkpoint_sizes_are_capped(tmp_path, monkeypatch):
    from standarderror.llm import tiny, weights

    d, card = _own_model(tmp_path)
    (d / "card.json").write_text(" " * (tiny.MAX_CARD_BYTES + 1) + "{}")
    with pytest.raises(ValueError, match="card .* bytes"):
        tiny.load(directory=d, trust_card=True)
    _write_card(d, card)
    assert tiny.load(directory=d, trust_card=True)["step"] == card["final_step"]
    entry = next(c for c in card["checkpoints"] if c["step"] == card["final_step"])
    f = d / entry["file"]
    size = f.stat().st_size
    monkeypatch.setattr(weights, "MAX_CHECKPOINT_BYTES", 1 << 20)   # the config needs 1.6 MB
    with pytest.raises(ValueError, match="MAX_CHECKPOINT_BYTES"):
        tiny.load(directory=d, trust_card=True)
    monkeypatch.setattr(weights, "MAX_CHECKPOINT_BYTES", size - 1)  # the file is one byte over
    with pytest.raises(ValueError, match=f"{size:,} bytes, more than the {size - 1:,} allowed"):
        tiny.load(directory=d, trust_card=True)
    monkeypatch.undo()
    # bytes after the tensors the header describes are refused, even with the hash updated
    f.write_bytes(f.read_bytes() + b"\0" * 64)
    entry["sha256"] = tiny._sha256(f)
    _write_card(d, card)
    with pytest.raises(ValueError, match="header describes"):
        tiny.load(directory=d, trust_card=True)


# --- counts that size an allocation are bounded, the bound in the message --------------------


def _bounded_calls():
    from standarderror import spectral as sp
    from standarderror.experiments import measure
    from standarderror.uncertainty import scaling, selective, training

    rng = np.random.default_rng(0)
    c = rng.random(200)
    ok = rng.random(200) < c
    z, p, y = _probs(200)
    seq = np.repeat(np.arange(20), 10)
    a, t = rng.normal(size=(10, 4, 6)), rng.normal(size=(10, 6))
    big = 10 ** 12
    return [
        ("bins", _checks.MAX_BINS, lambda: cb.ece(c, ok, bins=big)),
        ("bins", _checks.MAX_BINS, lambda: cb.ece(c, ok, bins=big, adaptive=True)),
        ("bins", _checks.MAX_BINS, lambda: bn.bin_index(c, bins=big)),
        ("bins", _checks.MAX_BINS, lambda: bn.ece_batch(c[None], ok[None], bins=big)),
        ("bins", _checks.MAX_BINS, lambda: bn.l2_batch(c[None], ok[None], bins=big)),
        ("bins", _checks.MAX_BINS, lambda: bn.ece_floor(c, [100], bins=(big,))),
        ("bins", _checks.MAX_BINS, lambda: bn.predicted_constant(c, bins=big)),
        ("bins", _checks.MAX_BINS, lambda: bn.consistency_test(c, ok, bins=big)),
        ("bins", _checks.MAX_BINS, lambda: training.checkpoint_metrics(np.log(p), y, seq,
                                                                        bins=big)),
        ("bins", _checks.MAX_BINS, lambda: measure.word_calibration(z, y, bins=big)),
        ("draws", _checks.MAX_DRAWS, lambda: bn.calibrated_labels(c, draws=big)),
        ("draws", _checks.MAX_DRAWS, lambda: bn.subsample(200, 10, draws=big)),
        ("draws", _checks.MAX_DRAWS, lambda: bn.ece_floor(c, [100], draws=big)),
        ("draws", _checks.MAX_DRAWS, lambda: selective.abstention(p, y, seq, draws=big)),
        ("draws", _checks.MAX_DRAWS, lambda: measure.ece_floor(c, 15, draws=big)),
        ("draws", _checks.MAX_DRAWS, lambda: measure.word_calibration(z, y, draws=big)),
        ("halves", _checks.MAX_DRAWS, lambda: scaling.fitted_temperature(p, y, seq,
                                                                         halves=big)),
        ("halves", _checks.MAX_DRAWS, lambda: training.checkpoint_metrics(np.log(p), y, seq,
                                                                          halves=big)),
        ("splits", _checks.MAX_DRAWS, lambda: ex.calibration_masks(seq, splits=big)),
        ("bootstrap", _checks.MAX_DRAWS, lambda: sp.auroc(c, ok, bootstrap=big)),
        ("bootstrap", _checks.MAX_DRAWS, lambda: sp.auroc_difference(c, c ** 2, ok,
                                                                     bootstrap=big)),
        ("bootstrap", _checks.MAX_DRAWS, lambda: sp.temperature_interval(a, t, bootstrap=big)),
        ("draws", _checks.MAX_DRAWS, lambda: sp.max_eigenvalue_subsample(a, [2], draws=big)),
        ("m", ex.MAX_TEST_POINTS, lambda: ex.coverage_distribution(100, big, 0.1)),
    ]


@pytest.mark.parametrize("case", range(len(_bounded_calls())))
def test_counts_beyond_their_bound_are_refused_naming_it(case):
    name, bound, call = _bounded_calls()[case]
    with pytest.raises(ValueError, match=f"^{name} must be at most {bound:,}, got "
                                         "1,000,000,000,000"):
        call()


def test_counts_at_their_bound_are_accepted():
    rng = np.random.default_rng(0)
    c = rng.random(50)
    assert np.isfinite(cb.ece(c, rng.random(50) < c, bins=_checks.MAX_BINS))
    assert bn.subsample(50, 5, draws=_checks.MAX_DRAWS).shape == (_checks.MAX_DRAWS, 5)


def test_kernel_language_entropy_refuses_a_time_that_overflows():
    from standarderror import spectral as sp
    from standarderror.spectral import baselines

    same = np.ones((2, 5, 8))            # one repeated answer: Laplacian eigenvalues 0 and 5
    for variant in ("ours", "authors"):
        with pytest.raises(ValueError, match="^time must be at most 1e\\+06, got 1e\\+308"):
            sp.kernel_language_entropy(same, 1e308, variant=variant)
        at_bound = sp.kernel_language_entropy(same, baselines.MAX_KLE_TIME, variant=variant)
        assert np.all(np.isfinite(at_bound)) and np.allclose(at_bound, 0, atol=1e-12)
