"""The named results of the page that measures any model
(``standarderror.experiments.own_model_results``), on the two models the page builds, at
small sizes: our tiny model exported to the GPT-2 format, and a random Llama-style model with
a byte-level BPE tokenizer. Each invariant the page once asserted holds here."""

import os

import pytest

pytest.importorskip("transformers")

from standarderror.experiments import measure  # noqa: E402
from standarderror.experiments import own_model_results as omr  # noqa: E402
from standarderror.llm import export, interface, tiny  # noqa: E402
from standarderror.llm.predictions import predictions  # noqa: E402
from standarderror.uncertainty import calibration as cb  # noqa: E402

pytestmark = pytest.mark.slow  # every test loads a model with transformers


@pytest.fixture(scope="module")
def native():
    return interface.TinyLM()


@pytest.fixture(scope="module")
def gpt2_dir(tmp_path_factory, native):
    return export.to_gpt2(tmp_path_factory.mktemp("own") / "tiny-gpt2", loaded=native.loaded)


@pytest.fixture(scope="module")
def gpt2(gpt2_dir):
    return interface.HFModel(gpt2_dir, device="cpu")


@pytest.fixture(scope="module")
def x(native):
    return next(tiny.batches("test", 1, 4, 0, stoi=native.loaded["stoi"]))[0].numpy()


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    d = export.random_llama(tmp_path_factory.mktemp("llama"), vocab_size=1024,
                            text=tiny.split("val"), window=128)
    return interface.HFModel(d, device="cpu")


@pytest.fixture(scope="module")
def cal(gpt2):
    return measure.calibration(gpt2, count=1, size=4, progress=False)


def test_export_agrees_and_the_near_miss_does_not(native, gpt2, gpt2_dir, x):
    assert omr.largest_gap(native, gpt2, x) < 1e-5
    near = omr.near_miss(native, gpt2_dir, x)
    assert near.wrong_gap > 1000 * omr.largest_gap(native, gpt2, x)   # the prose: far above it
    assert (gpt2_dir.parent / "wrong-gelu" / "config.json").exists()


def test_calibration_table_equals_the_native_one(cal):
    reference = cb.temperature_table(data=predictions(count=1, size=4, seed=0))
    assert omr.table_matches(cal, reference)
    rows = [dict(r) for r in reference["rows"]]
    rows[0]["accuracy"] += 1 / 256                  # one prediction more right: refused
    assert not omr.table_matches(cal, dict(reference, rows=rows))


def test_calibration_run_and_intervals(cal):
    r = omr.calibration_run(cal, vocab_tokens=32_000, window_tokens=64)
    t1 = [row for row in cal["table"] if row["temperature"] == 1.0][0]
    assert r.acc == t1["accuracy"] and r.ece_t1 == t1["ece"] and r.n_pred == 256
    assert r.ece_bins == 15 and r.t_fit == cal["fitted"]["temperature"]
    assert r.big_windows == interface.MAX_ELEMENTS // (32_000 * 64)
    assert omr.calibration_run(cal, vocab_tokens=77, window_tokens=1).big_windows \
        == interface.MAX_ELEMENTS // 77
    iv = omr.intervals(cal)
    assert iv.acc_lo <= r.acc <= iv.acc_hi and iv.ece_lo <= r.ece_t1 <= iv.ece_hi
    assert (iv.last_from, iv.last_to) == tuple(cal["positions"][-1]["band"])
    assert iv.first_acc <= iv.first_hi and iv.last_lo <= iv.last_acc
    assert omr.validation_accuracy(cal).val_acc == r.acc
    assert cal["held_out"] is True                 # our test plays, for our model


def test_bfloat16_moves_log_probabilities(gpt2_dir, native, x):
    half = interface.HFModel(gpt2_dir, device="cpu", dtype="bfloat16")
    r = omr.bfloat16_gap(half, native, x)
    assert r.n_x == x.size == r.moved["predictions"]
    assert 1e-5 < r.gap16 < 5
    assert 0 <= r.moved["argmax"] <= x.size


def test_conformal_and_spectral_runs(gpt2):
    conf = measure.conformal(gpt2, count=24, progress=False)
    r = omr.conformal_run(conf)
    assert r.mc_test == 12 and r.mc_n == 24 and r.mc_context == 48
    assert 0 <= r.lac_cov <= 1 and 0 <= r.aps_size <= 6
    assert r.w_lo <= r.w_hi
    s = omr.spectral_run({"temperature": 0.9, "accuracy": 0.25, "unterminated": 3,
                          "temperature_interval": (0.7, 1.3)})
    assert (s.sp_t, s.sp_acc, s.sp_cut, s.sp_lo, s.sp_hi) == (0.9, 0.25, 3, 0.7, 1.3)


def test_subword_model(llama, gpt2):
    cal_l = measure.calibration(llama, count=1, size=4, progress=False)
    conf_l = measure.conformal(llama, count=24, progress=False)
    # temperature changes no argmax: one accuracy at every temperature
    assert cal_l["accuracy_identical"] and len({r["accuracy"] for r in cal_l["table"]}) == 1
    assert cal_l["held_out"] is False              # not our model: our plays are not held out
    c = omr.subword_run(llama, gpt2, conf_l, cal_l)
    assert c.llama_vocab == 1024 and c.tiny_vocab == gpt2.vocab_size < c.llama_vocab
    assert 0 <= c.multi <= 1 and c.merged == conf_l["merged"]
    assert c.l_rows == cal_l["rows"] and c.l_bytes == cal_l["per_byte"]["bytes"] / c.l_rows
    assert c.l_bpb_lo <= c.l_bpb <= c.l_bpb_hi


def test_cost_estimate(llama):
    r = omr.cost_estimate(llama, params=7e9, speed=200e12)
    assert (r.est_params, r.est_gb, r.est_tflops) == (7.0, 14.0, 200.0)
    assert r.est_cal == 10_240 * 2 * 7e9 / 200e12
    assert r.tokens["conformal"] > 0 and r.tokens["spectral"] > 0
    assert r.est_conf == r.tokens["conformal"] * 2 * 7e9 / 200e12


def test_the_loader_refuses(tmp_path, native, monkeypatch):
    monkeypatch.chdir(tmp_path)
    d = export.to_gpt2(tmp_path / "models" / "tiny-gpt2", loaded=native.loaded)
    messages = omr.refusals(d)
    assert len(messages) == 3 and all(m.startswith("refused: ") for m in messages)
    assert not any(str(tmp_path / "models") in m for m in messages)
    assert not os.path.exists("RAN")               # the remote code never ran
