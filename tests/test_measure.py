"""The transformers backend and the three measurements (standarderror.experiments.measure, the CLI).

Offline, on two models built here: our tiny model exported to the GPT-2 format with a
character tokenizer (it must reproduce the native path), and a randomly initialised
Llama-style model with a byte-level BPE tokenizer trained on our corpus (every code path of a
subword model, end to end)."""

import json
import tracemalloc

import numpy as np
import pytest
import torch

pytest.importorskip("transformers")

from standarderror import cli  # noqa: E402
from standarderror.experiments import measure
from standarderror.llm import export, interface, tiny  # noqa: E402
from standarderror.uncertainty import calibration as cb  # noqa: E402


@pytest.fixture(scope="module")
def native():
    return interface.TinyLM()


@pytest.fixture(scope="module")
def gpt2_dir(tmp_path_factory, native):
    return export.to_gpt2(tmp_path_factory.mktemp("tiny-gpt2"), loaded=native.loaded)


@pytest.fixture(scope="module")
def gpt2(gpt2_dir):
    return interface.HFModel(gpt2_dir, device="cpu")


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    # a small BPE vocabulary trained on the validation plays keeps the fixture fast
    d = export.random_llama(tmp_path_factory.mktemp("llama"), vocab_size=1024,
                            text=tiny.split("val"), window=128)
    return interface.HFModel(d, device="cpu")


# ---- the exported tiny model reproduces the native path -------------------------------


@pytest.mark.slow  # the `gpt2` fixture: an export and a load with transformers (2-3 s with its imports)
def test_export_reproduces_native_log_probabilities(native, gpt2):
    x = next(tiny.batches("test", 1, 16, 0, stoi=native.loaded["stoi"]))[0].numpy()
    a, b = native.window_logprobs(x), gpt2.window_logprobs(x)
    assert a.shape == b.shape
    assert np.abs(a - b).max() < 1e-5
    assert gpt2.character_level and gpt2.vocab_size == native.vocab_size
    text = tiny.split("test")[:500]
    assert np.array_equal(gpt2.encode(text), native.encode(text))
    assert gpt2.decode(gpt2.encode(text)) == text


@pytest.mark.slow
def test_export_same_table_on_a_subset(native, gpt2):
    a = measure.calibration(native, count=2, size=16, progress=False)
    b = measure.calibration(gpt2, count=2, size=16, progress=False)
    for ra, rb in zip(a["table"], b["table"]):
        assert ra["accuracy"] == rb["accuracy"]
        assert abs(ra["ece"] - rb["ece"]) < 1e-5 and abs(ra["nll"] - rb["nll"]) < 1e-5


def test_streamed_table_is_temperature_table_to_the_bit(native):
    from standarderror.llm.predictions import predictions

    r = measure.calibration(native, count=3, size=16, seed=4, progress=False)
    p = predictions(3, 16, 4)
    ref = cb.temperature_table(data={"logp": p["logp"], "y": p["y"]})
    assert r["table"] == ref["rows"] and r["accuracy_identical"]
    exact = cb.fitted_temperature(p["p"], p["y"], p["sequence"], halves=1)["all"]
    assert abs(r["fitted"]["temperature"] - exact) < 1e-3
    ab = cb.abstention(p["p"], p["y"], p["sequence"], draws=2)
    for row in r["abstention"]:
        assert ab["table"][(row["score"], row["temperature"])]["aurc"] == row["aurc"]


@pytest.mark.slow  # the `gpt2` fixture: an export and a load with transformers (2-3 s with its imports)
def test_unknown_characters_and_missing_models_are_refused(gpt2, tmp_path):
    with pytest.raises(ValueError, match="unknown token.*\u00e9"):
        measure.calibration(gpt2, text="caf\u00e9 " * 400, count=1, size=1, progress=False)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        interface.HFModel(tmp_path / "nope")
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(FileNotFoundError, match="no weights"):
        interface.HFModel(tmp_path)
    with pytest.raises(ValueError, match="exceeds the model's window"):
        measure.calibration(gpt2, count=1, size=1, block=65, progress=False)


# ---- a random Llama-style model with a byte-level BPE tokenizer --------------------------


@pytest.mark.slow  # the `llama` fixture trains a BPE tokenizer and builds a model; measured via transformers
def test_llama_calibration_runs_and_is_consistent(llama):
    r = measure.calibration(llama, count=2, size=4, progress=False)
    assert not llama.character_level and llama.vocab_size == 1024
    assert r["accuracy_identical"]
    assert len({row["accuracy"] for row in r["table"]}) == 1
    assert r["rows"] == 2 * 4 * 64
    margin = {row["aurc"] for row in r["abstention"] if row["score"] == "margin"}
    assert len(margin) == 1                      # the margin's order cannot move with T
    # summary(width=...) wraps at spaces only: every line fits, and the words are the same
    plain, wrapped = measure.summary(r), measure.summary(r, width=60)
    assert max(len(line) for line in plain.split("\n")) > 60
    assert all(len(line) <= 60 for line in wrapped.split("\n")
               if " " in line.strip())          # a single long word cannot be wrapped
    assert wrapped.split() == plain.split()
    with pytest.raises(ValueError, match="width"):
        measure.summary(r, width=0)


@pytest.mark.slow  # the `llama` fixture trains a BPE tokenizer and builds a model; measured via transformers
def test_llama_conformal_handles_multi_token_options(llama):
    r = measure.conformal(llama, count=40, progress=False)
    assert r["option_tokens"]["multi_token_share"] > 0 and r["option_tokens"]["max"] > 1
    assert r["merged"] == 0 and r["truncated"] == 0
    for s in ("lac", "aps"):
        assert 0 <= r[s]["coverage"] <= 1 and 0 <= r[s]["mean_size"] <= 6
    # the option score is the sum over its tokens: check one against a direct forward pass
    ctx, opt = "the", " kingdom"
    ids_c, ids_o, _ = llama.pair(ctx, opt)
    full = llama.window_logprobs(np.concatenate([ids_c, ids_o])[None])[0]
    want = sum(full[len(ids_c) - 1 + j, t] for j, t in enumerate(ids_o))
    got = llama.continuation_logprob([ctx], [opt])["logprob"][0]
    assert len(ids_o) >= 1 and abs(got - want) < 1e-9


@pytest.mark.slow  # the `llama` and `gpt2` fixtures: a BPE tokenizer trained, two models built
def test_batched_encoding_gives_the_ids_of_one_call_per_text(llama, gpt2, native):
    """encode_many (one tokenizer call for a batch, as continuation_logprob encodes its pairs)
    must give each text the ids encode gives it alone, for a subword and a character
    tokenizer and for the interface's default."""
    texts = ["KING: the kingdom's crown\n", "", "  two  spaces ", "JULIET: my lord, the",
             "ROMEO:\nI will go", "the", " kingdom", tiny.split("val")[:2000]]
    for lm in (llama, gpt2, native):
        got = lm.encode_many(texts)
        assert len(got) == len(texts)
        for t, ids in zip(texts, got):
            assert ids.dtype == np.int64 and np.array_equal(ids, lm.encode(t)), (lm.name, t)
    assert llama.encode_many([]) == []


@pytest.mark.slow  # the `llama` fixture trains a BPE tokenizer and builds a model; measured via transformers
def test_llama_sampling_multi_token_answers_and_limits(llama):
    ctx = ["ROMEO: I will go to the ", "JULIET: my lord, the "]
    r = llama.sample(ctx, 6, temperature=1.0, max_tokens=8, seed=0, greedy=True)
    assert len(r["answers"]) == 2 and all(len(a) == 6 for a in r["answers"])
    assert all(isinstance(w, str) for a in r["answers"] for w in a)
    assert r["unterminated"] <= 12
    cut = llama.sample(ctx, 6, temperature=1.0, max_tokens=1, seed=0)
    # with one token allowed, a word can end only if the token itself holds its end
    assert cut["unterminated"] > 0
    long = llama.sample(["word " * 400], 2, max_tokens=4, seed=0)
    assert long["truncated"] == 1


@pytest.mark.slow
def test_llama_spectral_end_to_end(llama, tmp_path):
    r = measure.spectral(llama, dev=24, test=24, answers=4, progress=False)
    assert np.isfinite(r["temperature"]) and np.isfinite(r["risk"]["1"])
    assert r["auroc"] is None or 0 <= r["auroc"]["auroc"] <= 1
    paths = measure.write(r, tmp_path)
    assert json.loads(paths["json"].read_text())["model"]["model_type"] == "llama"
    assert paths["spectral_reliability"].stat().st_size > 0


@pytest.mark.slow  # a measurement over 20 million logits under tracemalloc
def test_bounded_memory_for_a_large_vocabulary(monkeypatch):
    """The calibration streams: with blocks capped, numpy's peak stays a small multiple of
    one block, far below the predictions x vocabulary float64 array (164 MB here)."""

    class Wide(interface.LanguageModel):
        def __init__(self):
            super().__init__(name="wide", tokenizer_name="ids", vocab_size=20_000, window=64,
                             character_level=False)
            self.g = torch.Generator().manual_seed(0)

        def logits(self, ids, last=None):
            z = torch.randn(ids.shape[0], ids.shape[1], self.vocab_size, generator=self.g)
            return z if last is None else z[:, -1]

        def encode(self, text):
            return np.frombuffer(text.encode("utf-8"), dtype=np.uint8).astype(np.int64)

        def decode(self, ids):
            return bytes(int(i) for i in ids).decode("utf-8", "replace")

    monkeypatch.setattr(interface.base, "MAX_ELEMENTS", 1 << 18)   # 2 MiB blocks: one window
    # Three temperatures for the fit instead of 25: each is one pass over the block, with the
    # same temporaries, so the peak is the same and the test takes a third of the time.
    monkeypatch.setattr(measure.calibration_task, "FIT_GRID", np.exp(np.linspace(np.log(0.5), np.log(2), 3)))
    lm = Wide()
    tracemalloc.start()
    r = measure.calibration(lm, text="abcdefgh" * 1000, count=4, size=4,
                            temperatures=(1.0, 2.0), abstention_temperatures=(1.0,),
                            progress=False)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    full = r["rows"] * lm.vocab_size * 8
    assert r["rows"] == 1024 and r["memory"]["block_rows"] == 64
    assert peak < full / 3      # measured: about five blocks of working copies


# ---- the command line ----------------------------------------------------------------


def test_cli_errors_are_one_line(tmp_path, capsys):
    assert cli.main(["measure", "--model", str(tmp_path / "missing"), "--task",
                     "calibration", "--out", str(tmp_path)]) == 2
    assert "does not exist" in capsys.readouterr().err


@pytest.mark.slow  # the command line end to end: 40 questions through transformers, JSON and a figure
def test_cli_conformal_writes_json_and_figure(gpt2_dir, tmp_path, capsys):
    rc = cli.main(["measure", "--model", str(gpt2_dir), "--task", "conformal", "--questions",
                   "40", "--out", str(tmp_path), "--no-progress"])
    assert rc == 0
    out = json.loads((tmp_path / "conformal.json").read_text())
    assert out["settings"]["alpha"] == 0.1 and out["model"]["model_type"] == "gpt2"
    assert out["versions"]["transformers"] and (tmp_path / "conformal_sizes.png").exists()
    assert "LAC: coverage" in capsys.readouterr().out


@pytest.mark.slow
def test_cli_reproduces_episode_3_through_the_hf_path(gpt2_dir, tmp_path):
    """The exported model, through transformers and the command line,
    gives Episode 3's pinned accuracy and ECE at T = 1."""
    assert cli.main(["measure", "--model", str(gpt2_dir), "--task", "calibration", "--out",
                     str(tmp_path), "--no-progress"]) == 0
    out = json.loads((tmp_path / "calibration.json").read_text())
    t1 = next(r for r in out["table"] if r["temperature"] == 1.0)
    assert out["rows"] == 10_240 and out["accuracy_identical"]
    assert round(t1["accuracy"], 4) == 0.5412 and round(t1["ece"], 3) == 0.027
    from standarderror.llm.predictions import predictions

    ref = cb.temperature_table(data=predictions(count=10, size=16, seed=0))
    for a, b in zip(out["table"], ref["rows"]):
        assert a["accuracy"] == b["accuracy"] and abs(a["ece"] - b["ece"]) < 1e-5
