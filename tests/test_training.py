"""Calibration along a training run (standarderror.uncertainty.training) and the training
script's Episode 4 options."""

import hashlib
import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from sklearn.metrics import log_loss

from standarderror.experiments import trajectory as tj
from standarderror.llm import tiny
from standarderror.uncertainty import calibration as cb
from standarderror.uncertainty import training as tr

ROOT = Path(__file__).resolve().parents[1]


def softmax_sample(rows=6000, classes=8, temperature=1.0, seed=0, sequences=200):
    """Predictions whose labels are drawn from softmax(z): calibrated by construction. The
    returned log-probabilities are softmax(z / temperature): temperature < 1 makes them
    overconfident, and temperature scaling should fit T = 1 / temperature."""
    rng = np.random.default_rng(seed)
    z = rng.normal(scale=2.0, size=(rows, classes))
    true = cb.scale(z, 1.0)
    y = (np.exp(true).cumsum(axis=1) > rng.random(rows)[:, None]).argmax(axis=1)
    seq = np.repeat(np.arange(sequences), rows // sequences)
    return cb.scale(z, temperature), y, seq


def test_calibrated_predictions_fit_temperature_one():
    logp, y, seq = softmax_sample()
    m = tr.checkpoint_metrics(logp, y, seq, halves=8)
    assert m["temperature"] == pytest.approx(1.0, abs=0.05)
    assert m["temperature_low"] <= m["temperature"] <= m["temperature_high"]
    assert abs(m["gap"]) < 0.02 and m["ece"] < 0.03


def test_overconfident_predictions_are_detected_and_fixed_by_the_fitted_temperature():
    # sharpened by a factor 2: the true fix is T = 2
    logp, y, seq = softmax_sample(temperature=0.5)
    m = tr.checkpoint_metrics(logp, y, seq, halves=8)
    assert m["temperature"] == pytest.approx(2.0, rel=0.05)
    assert m["gap"] > 0.05 and m["ece"] > 0.05
    assert m["ece_scaled"] < 0.03
    assert m["loss_scaled"] < m["loss"]


def test_underconfident_predictions_fit_a_temperature_below_one():
    logp, y, seq = softmax_sample(temperature=2.0)
    m = tr.checkpoint_metrics(logp, y, seq, halves=8)
    assert m["temperature"] == pytest.approx(0.5, rel=0.05)
    assert m["gap"] < -0.05


def test_metrics_agree_with_independent_computations():
    logp, y, seq = softmax_sample(rows=2000, temperature=0.7, seed=3, sequences=100)
    m = tr.checkpoint_metrics(logp, y, seq, halves=4)
    p = np.exp(logp)
    assert m["loss"] == pytest.approx(log_loss(y, p, labels=np.arange(p.shape[1])), rel=1e-10)
    top = p.max(axis=1)
    ok = p.argmax(axis=1) == y
    assert m["accuracy"] == ok.mean()
    assert m["confidence"] == pytest.approx(top.mean(), rel=1e-12)
    assert m["gap"] == pytest.approx(top.mean() - ok.mean(), rel=1e-12)
    # ECE with 15 equal-width bins, written out as a loop over bins
    edges = np.linspace(0, 1, 16)
    total = 0.0
    for lo, hi in zip(edges[:-1], edges[1:]):
        inside = (top > lo) & (top <= hi) if lo > 0 else (top >= lo) & (top <= hi)
        if inside.any():
            total += inside.sum() / top.size * abs(ok[inside].mean() - top[inside].mean())
    assert m["ece"] == pytest.approx(total, rel=1e-9)
    # the fitted temperature is a minimum of the NLL: nudging it either way does not help
    t = m["temperature"]
    rows = np.arange(y.size)
    at = lambda s: -cb.scale(logp, s)[rows, y].mean()  # noqa: E731
    assert at(t) <= at(t * 1.01) and at(t) <= at(t / 1.01)
    assert m["loss_scaled"] == pytest.approx(at(t), rel=1e-12)


def test_scaling_the_logits_scales_the_fitted_temperature_and_keeps_accuracy():
    logp, y, seq = softmax_sample(rows=3000, seed=5, sequences=100)
    a = tr.checkpoint_metrics(logp, y, seq, halves=4)
    b = tr.checkpoint_metrics(cb.scale(logp, 1 / 3), y, seq, halves=4)  # logits x 3
    assert b["accuracy"] == a["accuracy"]
    assert b["temperature"] == pytest.approx(3 * a["temperature"], rel=1e-4)
    assert b["loss_scaled"] == pytest.approx(a["loss_scaled"], abs=1e-9)


def test_checkpoint_metrics_validates_its_inputs():
    logp, y, seq = softmax_sample(rows=400, sequences=20)
    with pytest.raises(ValueError, match="log-probabilities"):
        tr.checkpoint_metrics(logp + 1.0, y, seq)
    with pytest.raises(ValueError, match="y"):
        tr.checkpoint_metrics(logp, y[:-1], seq)
    with pytest.raises(ValueError, match="sequence"):
        tr.checkpoint_metrics(logp, y, seq[:-1])
    with pytest.raises(ValueError, match="NaN"):
        bad = logp.copy()
        bad[0, 0] = np.nan
        tr.checkpoint_metrics(bad, y, seq)


def test_turning_point():
    steps = [100, 200, 300, 400, 500]
    t = tr.turning_point(steps, [3.0, 2.0, 1.5, 1.7, 2.1])
    assert (t["step"], t["loss"], t["turned"], t["index"]) == (300, 1.5, True, 2)
    assert t["rise"] == pytest.approx(0.6)
    still_falling = tr.turning_point(steps, [3.0, 2.0, 1.5, 1.4, 1.3])
    assert still_falling["step"] == 500 and not still_falling["turned"] and still_falling["rise"] == 0
    with pytest.raises(ValueError, match="increasing"):
        tr.turning_point([1, 1, 2], [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="same length|entries|length"):
        tr.turning_point([1, 2, 3], [1.0, 2.0])
    with pytest.raises(ValueError, match="NaN"):
        tr.turning_point([1, 2], [1.0, np.nan])


# ------------------------------------------------------------------------------------------
# A checkpoint family on disk: two checkpoints whose logits differ by exactly a factor 2
# ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def family(tmp_path_factory):
    from safetensors.torch import save_file

    d = tmp_path_factory.mktemp("family")
    text = tiny.corpus()
    codes, counts = np.unique(np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32),
                              return_counts=True)
    chars = [chr(c) for c in codes]  # sorted by code point, as tiny.vocabulary() is
    counts = counts.astype(float)
    torch.manual_seed(0)
    cfg = tiny.Config(vocab=len(chars))
    model = tiny.GPT(cfg)
    # A random transformer has no skill, and temperature scaling would flatten it completely.
    # Give it the corpus's character frequencies instead: the final LayerNorm's bias b adds
    # b . e_k to the logit of character k (tied head), so solving E b = log(frequency) makes
    # the model predict the unigram distribution, plus a little context-dependent noise.
    with torch.no_grad():
        emb = model.tok.weight.double().numpy()
        b = np.linalg.lstsq(emb, np.log(counts / counts.sum()), rcond=None)[0]
        model.ln.bias.copy_(torch.from_numpy(b).float())
        model.ln.weight.mul_(4.0)
    entries = []
    for step, factor in ((10, 1.0), (20, 2.0)):
        state = {k: v.detach().clone() for k, v in model.state_dict().items()}
        state["ln.weight"] *= factor  # the final LayerNorm feeds the tied head: logits x factor
        state["ln.bias"] *= factor
        state = {k: v.to(torch.float16).contiguous() for k, v in state.items()}
        path = d / f"step-{step:05d}.safetensors"
        save_file(state, str(path))
        entries.append({"step": step, "file": path.name, "train_loss": 4.0 + step,
                        "val_loss": 5.0 + step,
                        "sha256": hashlib.sha256(path.read_bytes()).hexdigest()})
    card = {"vocabulary": chars, "final_step": 20, "checkpoints": entries,
            "config": {"block": cfg.block, "layers": cfg.layers, "heads": cfg.heads,
                       "width": cfg.width}}
    (d / "card.json").write_text(json.dumps(card))
    return d


def test_trajectory_over_a_family_of_checkpoints(family):
    run = tj.trajectory(family, steps=[10, 20], count=2, size=8, seed=1, halves=4,
                        trust_card=True)
    assert [r["step"] for r in run["rows"]] == [10, 20]
    a, b = run["rows"]
    assert (a["card_val_loss"], b["card_train_loss"]) == (15.0, 24.0)
    assert a["rows"] == b["rows"] == 2 * 8 * 64
    assert set(tr.METRICS) <= set(a)
    # the same predictions with logits doubled: same answers, twice the fitted temperature
    assert a["accuracy"] == b["accuracy"]
    assert b["temperature"] == pytest.approx(2 * a["temperature"], rel=1e-4)
    assert b["loss_scaled"] == pytest.approx(a["loss_scaled"], abs=1e-6)
    assert run["minimum"] == min(run["rows"], key=lambda r: r["loss"])["step"]
    assert 0.5 < a["temperature"] < 2.0  # a unigram model is roughly calibrated
    # the windows are drawn once; the predictions are those of llm.predictions
    from standarderror.llm.predictions import predictions

    pr = predictions(count=2, size=8, seed=1,
                              model=tiny.load(20, directory=family, trust_card=True))
    again = tr.checkpoint_metrics(pr["logp"], pr["y"], pr["sequence"], halves=4)
    assert again == {k: b[k] for k in again}


def test_held_out_predictions_are_those_of_llm_predictions(family):
    """The held-out predictions a page reads (Episode 4) are, bit for bit, the model's
    predictions on the same windows through the seeds' path, llm.predictions.predictions."""
    from standarderror.llm.predictions import predictions

    held = tj.held_out(family, (20, 10), count=2, size=8, seed=1, trust_card=True)
    assert list(held["logp"]) == [20, 10] and held["block"] == 64
    for step in (10, 20):
        pr = predictions(count=2, size=8, seed=1,
                         model=tiny.load(step, directory=family, trust_card=True))
        assert np.array_equal(held["logp"][step], pr["logp"])
        assert np.array_equal(held["y"], pr["y"])
        assert np.array_equal(held["sequence"], pr["sequence"])
    with pytest.raises(ValueError, match="saved steps"):
        tj.held_out(family, (15,), count=1, size=2, trust_card=True)
    from standarderror.llm.interface import TinyLM
    from standarderror.llm.predictions import on_windows

    with pytest.raises(ValueError, match="windows is empty"):
        on_windows(TinyLM(tiny.load(10, directory=family, trust_card=True)), [])


def test_trajectory_rejects_steps_that_were_not_saved(family):
    with pytest.raises(ValueError, match="saved steps"):
        tj.trajectory(family, steps=[15], count=1, size=2, trust_card=True)
    with pytest.raises(ValueError, match="saved steps"):
        tj.trajectory(family, steps=[], count=1, size=2, trust_card=True)


# ------------------------------------------------------------------------------------------
# The committed runs (skipped until their cards exist)
# ------------------------------------------------------------------------------------------

RUNS = {name: tiny.CHECKPOINT_DIR / name for name in ("overfit", "overfit-wd")}


@pytest.mark.parametrize("name", sorted(RUNS))
def test_committed_extra_runs_load_and_record_their_subset(name):
    d = RUNS[name]
    card = tiny.card(d)
    assert card["corpus"]["train_plays"]  # trained on a named subset of the training plays
    held = {p for v in tiny.HELD_OUT.values() for p in v}
    assert not set(card["corpus"]["train_plays"]) & held
    m = tiny.load(directory=d, trust_card=True)  # verifies the hash
    assert m["parameters"] == tiny.load()["parameters"]  # the same architecture


# ------------------------------------------------------------------------------------------
# The training script's options (a few steps; slow because it builds the corpus and saves)
# ------------------------------------------------------------------------------------------


def _script():
    spec = importlib.util.spec_from_file_location("train_tiny", ROOT / "scripts" / "train_tiny.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.slow
def test_script_subset_and_explicit_saves(tmp_path):
    script = _script()
    out = tmp_path / "run"
    assert script.main(["--train-plays", "1", "--train-chars", "5000", "--steps", "4",
                        "--save-at", "2,4", "--eval-every", "2",
                        "--eval-windows", "4", "--threads", "1", "--warmup", "2",
                        "--out", str(out)]) == 0
    card = tiny.card(out)
    assert [c["step"] for c in card["checkpoints"]] == [2, 4]
    assert card["corpus"]["train_plays"] == list(script.training_plays(1))
    assert card["corpus"]["train_chars"] == card["corpus"]["train_chars_limit"] == 5000
    assert [c["step"] for c in card["curve"]] == [2, 4]
    assert tiny.load(2, directory=out, trust_card=True)["step"] == 2


@pytest.mark.slow
def test_script_without_the_options_writes_no_extra_keys(tmp_path):
    script = _script()
    out = tmp_path / "run"
    assert script.main(["--steps", "2", "--saves", "1", "--eval-windows", "4", "--threads", "1",
                        "--warmup", "1", "--out", str(out)]) == 0
    card = tiny.card(out)
    assert "train_plays" not in card["corpus"] and "curve" not in card
    assert "train_chars_limit" not in card["corpus"]


def test_script_rejects_bad_options():
    script = _script()
    with pytest.raises(SystemExit):
        script.main(["--save-at", "1,2", "--steps", "3"])  # last save must be the last step
    with pytest.raises(SystemExit):
        script.main(["--train-plays", "0"])
    with pytest.raises(SystemExit):
        script.main(["--save-at", "a,b"])
    with pytest.raises(SystemExit):
        script.main(["--train-chars", "10"])  # shorter than one training window


# ------------------------------------------------------------ the shift control of Episode 4


def test_the_shift_controls_windows_are_the_windows_tiny_batches_draws():
    stoi = {c: i for i, c in enumerate(tiny.vocabulary())}
    x, y = tj._stacked(tiny.split("test"), 3, 4, 7, block=64, stoi=stoi)
    ref = list(tiny.batches("test", 3, 4, 7, stoi=stoi))
    np.testing.assert_array_equal(x, np.concatenate([a.numpy() for a, _ in ref]))
    np.testing.assert_array_equal(y, np.concatenate([b.numpy() for _, b in ref]))
    with pytest.raises(ValueError, match="exceed"):
        tj._stacked("short text", 1, 1, 0, block=64, stoi=stoi)


def test_training_remainder_is_the_unseen_rest_of_the_excerpt_play():
    d = tiny.CHECKPOINT_DIR / "overfit"
    info = tiny.card(d)
    play = "".join(tiny.plays()[p] for p in info["corpus"]["train_plays"])
    rest = tj.training_remainder(d)
    n = info["corpus"]["train_chars"]
    assert play == play[:n] + rest and len(rest) == len(play) - n > 0
    # the excerpt the script trains on is the first n characters (one token per character)
    stoi = {c: i for i, c in enumerate(info["vocabulary"])}
    assert len(tiny.encode(play[:n], stoi)) == n
    with pytest.raises(ValueError, match="not an excerpt run"):
        tj.training_remainder(tiny.CHECKPOINT_DIR)


def test_shift_control_measures_what_it_says():
    d = tiny.CHECKPOINT_DIR / "overfit"
    c = tj.shift_control(d, [400], seeds=[3], count=1, size=4)
    info = tiny.card(d)
    stoi = {ch: i for i, ch in enumerate(info["vocabulary"])}
    net = tiny.load(400, directory=d)["model"]
    for name, text in (("same play", tj.training_remainder(d)), ("test plays", tiny.split("test"))):
        x, y = tj._stacked(text, 1, 4, 3, block=64, stoi=stoi)
        logp = tiny.log_probabilities(net, torch.from_numpy(x)).reshape(-1, len(stoi))
        y = y.reshape(-1)
        assert c[name]["temperature"][0, 0] == cb.fit_temperature(logp, y)
        assert c[name]["loss"][0, 0] == pytest.approx(log_loss(y, np.exp(logp),
                                                               labels=range(len(stoi))))
        assert c[name]["temperature"].shape == (1, 1)


def test_window_difference_resamples_windows_as_a_plain_loop_does():
    from standarderror.uncertainty import training as tr

    rng = np.random.default_rng(4)
    window = np.repeat(np.arange(7), rng.integers(1, 5, 7))
    diff = rng.standard_normal(window.size)
    got = tr.window_difference(diff, window, draws=300, seed=2, level=0.9)
    # reference: the windows' means, resampled draw by draw with the same generator
    means = [diff[window == k].mean() for k in range(7)]
    pick = np.random.default_rng(2).integers(0, 7, (300, 7))
    boot = [np.mean([means[k] for k in row]) for row in pick]
    assert got["windows"] == 7 and got["mean"] == pytest.approx(diff.mean(), abs=1e-15)
    assert (got["low"], got["high"]) == pytest.approx(tuple(np.percentile(boot, [5, 95])),
                                                      abs=1e-12)


@pytest.mark.parametrize("bad, match", [
    (dict(window=np.array([0, 0, 2, 2])), "every window present"),
    (dict(window=np.array([0.0, 0, 1, 1])), "integer window index"),
    (dict(window=np.array([0, 1])), "integer window index"),
    (dict(level=95), "level"),
    (dict(level="high"), "level"),
    (dict(draws=0), "draws"),
])
def test_window_difference_refuses_bad_input(bad, match):
    from standarderror.uncertainty import training as tr

    kw = dict(window=np.array([0, 0, 1, 1])) | bad
    with pytest.raises(ValueError, match=match):
        tr.window_difference(np.array([0.1, 0.2, 0.3, 0.4]), **kw)
