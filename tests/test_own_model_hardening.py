"""Measure your own model, tried as an attacker and as a careless user would.

Every model directory here is built in the test: our tiny model exported to the GPT-2
format, then broken or made malicious on purpose (code in the directory, pickled weights,
a truncated safetensors file, absurd sizes, a quantization config, no tokenizer), and
small randomly initialised Llama-, Granite- and Cohere-style models. No test may reach the
network: the socket layer is replaced by one that records any attempt and refuses it."""

import json
import shutil
import socket
import time

import numpy as np
import pytest
import torch

pytest.importorskip("transformers")

from standarderror import cli  # noqa: E402
from standarderror.experiments import measure
from standarderror.llm import export, interface, tiny  # noqa: E402


@pytest.fixture(autouse=True)
def no_network(monkeypatch):
    """Fail any attempt to resolve a host or open a connection, and check none was made."""
    attempts = []

    def refuse(name):
        def f(*args, **kwargs):
            attempts.append((name, args[:2]))
            raise OSError(f"test: network access ({name}) is forbidden")
        return f

    monkeypatch.setattr(socket, "getaddrinfo", refuse("getaddrinfo"))
    monkeypatch.setattr(socket, "create_connection", refuse("create_connection"))
    monkeypatch.setattr(socket.socket, "connect", refuse("connect"))
    monkeypatch.setattr(socket.socket, "connect_ex", refuse("connect_ex"))
    yield attempts
    assert attempts == [], f"the code tried to reach the network: {attempts}"


@pytest.fixture(scope="module")
def gpt2_dir(tmp_path_factory):
    return export.to_gpt2(tmp_path_factory.mktemp("tiny-gpt2"))


def _copy(src, tmp_path, name="model"):
    return shutil.copytree(src, tmp_path / name)


def _edit_config(d, **changes):
    cfg = json.loads((d / "config.json").read_text())
    cfg.update(changes)
    (d / "config.json").write_text(json.dumps(cfg))


def _measure(d, tmp_path, *extra):
    return cli.main(["measure", "--model", str(d), "--task", "calibration", "--count", "1",
                     "--size", "1", "--out", str(tmp_path / "out"), "--no-progress", *extra])


def _one_line_error(capsys, *words):
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err and "Traceback" not in err, err
    for w in words:
        assert w in err, (w, err)
    return err


# ---- item 7: no code from a model directory runs, no pickle is opened ------------------


EVIL = """import pathlib
pathlib.Path(__file__).with_name("RAN").write_text("the directory's code ran")
from transformers import PretrainedConfig, PreTrainedModel
class EvilConfig(PretrainedConfig):
    model_type = "evilnet"
class EvilModel(PreTrainedModel):
    config_class = EvilConfig
"""


@pytest.mark.slow  # the `gpt2_dir` fixture: an export with transformers (2-3 s with its imports)
def test_code_in_a_model_directory_never_runs(gpt2_dir, tmp_path, capsys, monkeypatch):
    d = _copy(gpt2_dir, tmp_path)
    (d / "evil.py").write_text(EVIL)
    _edit_config(d, model_type="evilnet",
                 auto_map={"AutoConfig": "evil.EvilConfig",
                           "AutoModelForCausalLM": "evil.EvilModel"})
    import io

    monkeypatch.setattr("sys.stdin", io.StringIO("y\n" * 10))   # `echo y |` once ran it
    assert _measure(d, tmp_path) == 2
    _one_line_error(capsys, "evilnet", "never runs")
    assert not (d / "RAN").exists()


@pytest.mark.slow  # transformers looks the unknown tokenizer class up across its registry (2-4 s)
def test_tokenizer_auto_map_never_runs(gpt2_dir, tmp_path, capsys):
    d = _copy(gpt2_dir, tmp_path)
    (d / "evil.py").write_text(EVIL)
    tc = json.loads((d / "tokenizer_config.json").read_text())
    tc["auto_map"] = {"AutoTokenizer": ["evil.EvilTokenizer", None]}
    tc["tokenizer_class"] = "EvilTokenizer"
    (d / "tokenizer_config.json").write_text(json.dumps(tc))
    (d / "tokenizer.json").unlink()                               # force the custom class
    (d / "vocab.txt").write_text("a\nb\n")
    rc = _measure(d, tmp_path)
    assert not (d / "RAN").exists()
    assert rc == 2
    _one_line_error(capsys)


@pytest.mark.slow  # the `gpt2_dir` fixture: an export with transformers (2-3 s with its imports)
def test_every_load_passes_trust_remote_code_false_and_safetensors(gpt2_dir, monkeypatch):
    import transformers

    seen = []
    for cls in (transformers.AutoTokenizer, transformers.AutoModelForCausalLM,
                transformers.AutoConfig):
        original = cls.from_pretrained.__func__

        def spy(klass, *args, _original=original, _name=cls.__name__, **kwargs):
            seen.append((_name, kwargs))
            return _original(klass, *args, **kwargs)

        monkeypatch.setattr(cls, "from_pretrained", classmethod(spy))
    interface.HFModel(gpt2_dir, device="cpu")
    assert {name for name, _ in seen} == {"AutoTokenizer", "AutoModelForCausalLM",
                                          "AutoConfig"}
    for name, kwargs in seen:
        assert kwargs.get("trust_remote_code") is False, name
        assert kwargs.get("local_files_only") is True, name
        if name == "AutoModelForCausalLM":
            assert kwargs.get("use_safetensors") is True


@pytest.mark.slow  # the `gpt2_dir` fixture: an export with transformers (2-3 s with its imports)
def test_pickled_weights_are_refused_with_how_to_convert(gpt2_dir, tmp_path, capsys):
    from safetensors.torch import load_file

    d = _copy(gpt2_dir, tmp_path)
    torch.save(load_file(d / "model.safetensors"), d / "pytorch_model.bin")
    (d / "model.safetensors").unlink()
    opened = []
    real_load = torch.load
    try:
        torch.load = lambda *a, **k: opened.append(a) or real_load(*a, **k)
        assert _measure(d, tmp_path) == 2
    finally:
        torch.load = real_load
    _one_line_error(capsys, "pytorch_model.bin", "never", "save_pretrained")
    assert opened == []


# ---- item 8: no network unless asked ---------------------------------------------------


@pytest.mark.parametrize("name", ["gpt2", "models/typo", "EleutherAI/pythia-70m"])
def test_hub_names_and_typos_fail_before_the_network(name, tmp_path, capsys, monkeypatch,
                                                     no_network):
    monkeypatch.chdir(tmp_path)
    t0 = time.perf_counter()
    assert cli.main(["measure", "--model", name, "--task", "calibration",
                     "--out", str(tmp_path / "out")]) == 2
    assert time.perf_counter() - t0 < 30
    err = _one_line_error(capsys, name, "--allow-download")
    assert "connect" not in err and "internet" not in err
    assert no_network == []


def test_offline_mode_is_restored_after_the_call(tmp_path):
    from huggingface_hub import constants

    before = constants.HF_HUB_OFFLINE
    with pytest.raises(FileNotFoundError):
        interface.HFModel("gpt2", device="cpu")
    assert constants.HF_HUB_OFFLINE == before


# ---- item 11: every bad input is one line with exit 2, before the expensive work --------


@pytest.fixture
def nothing_expensive(monkeypatch):
    """Fail the test if a model is loaded or a measurement starts."""
    def boom(*a, **k):
        raise AssertionError("the expensive work started before the input was checked")

    monkeypatch.setattr(interface, "TinyLM", boom)
    monkeypatch.setattr(interface, "load_model", boom)
    monkeypatch.setattr(measure, "run", boom)


@pytest.mark.parametrize("argv, words", [
    (["--task", "conformal", "--questions", "0"], ["--questions", "at least 2"]),
    (["--task", "conformal", "--questions", "1"], ["--questions", "at least 2"]),
    (["--task", "conformal", "--alpha", "1.5"], ["--alpha"]),
    (["--task", "calibration", "--seed", "-1"], ["--seed"]),
    (["--task", "calibration", "--block", "0"], ["--block", "at least 1"]),
    (["--task", "calibration", "--count", "0"], ["--count"]),
    (["--task", "conformal", "--text", "x.txt"], ["--text", "calibration only"]),
    (["--task", "spectral", "--text", "x.txt"], ["--text", "calibration only"]),
    (["--task", "calibration", "--questions", "9"], ["--questions", "conformal only"]),
    (["--task", "calibration", "--answers", "9"], ["--answers", "spectral only"]),
    (["--task", "calibration", "--dtype", "bfloat16"], ["--dtype", "tiny"]),
    (["--task", "calibration", "--device", "cpu"], ["--device", "tiny"]),
    (["--task", "spectral", "--answers", "1"], ["--answers"]),
    (["--task", "nonsense"], ["--task"]),
    (["--task", "calibration", "--text", "missing.txt"], ["missing.txt", "no such file"]),
])
def test_bad_arguments_are_one_line_before_any_work(argv, words, tmp_path, capsys,
                                                    monkeypatch, nothing_expensive):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["measure", "--model", "tiny", "--out", str(tmp_path / "o"), *argv]) == 2
    _one_line_error(capsys, *words)


@pytest.mark.slow  # the `gpt2_dir` fixture: an export with transformers (2-3 s with its imports)
def test_device_cuda_on_a_cpu_build_is_refused(gpt2_dir, tmp_path, capsys):
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    assert _measure(gpt2_dir, tmp_path, "--device", "cuda") == 2
    _one_line_error(capsys, "cuda", "--device cpu")
    assert _measure(gpt2_dir, tmp_path, "--device", "warp-drive") == 2
    _one_line_error(capsys, "warp-drive")


def _corrupt(d):
    b = (d / "model.safetensors").read_bytes()
    (d / "model.safetensors").write_bytes(b[: len(b) // 2])


def _no_tokenizer(d):
    for f in list(d.iterdir()):
        if "token" in f.name or f.name.startswith(("special", "vocab", "merges")):
            f.unlink()


@pytest.mark.parametrize("breakage, words", [
    (_corrupt, ["model.safetensors", "not a valid safetensors"]),
    (_no_tokenizer, ["no tokenizer"]),
    (lambda d: _edit_config(d, quantization_config={"quant_method": "bitsandbytes",
                                                   "load_in_4bit": True}),
     ["quantized", "bitsandbytes"]),
    (lambda d: _edit_config(d, _attn_implementation="flash_attention_2"),
     ["flash_attention_2"]),
    (lambda d: _edit_config(d, attn_implementation="flash_attention_3"),
     ["flash_attention_3"]),
    (lambda d: (d / "config.json").write_text("{not json"), ["config.json", "JSON"]),
    (lambda d: _edit_config(d, n_layer=10 ** 6), ["1,000,000 layers"]),
    (lambda d: _edit_config(d, n_positions=10 ** 9), ["parameters", "random"]),
    (lambda d: _edit_config(d, n_embd=4096), ["parameters"]),
])
@pytest.mark.slow  # the `gpt2_dir` fixture: an export with transformers (2-3 s with its imports)
def test_broken_model_directories_are_one_line(breakage, words, gpt2_dir, tmp_path, capsys,
                                               monkeypatch):
    d = _copy(gpt2_dir, tmp_path)
    breakage(d)
    monkeypatch.setattr(measure, "run", lambda *a, **k: pytest.fail("measured a bad model"))
    t0 = time.perf_counter()
    assert _measure(d, tmp_path) == 2
    assert time.perf_counter() - t0 < 30          # fails fast: nothing absurd is allocated
    _one_line_error(capsys, *words)


@pytest.mark.slow  # the `gpt2_dir` fixture: an export with transformers (2-3 s with its imports)
def test_tokenizer_ids_beyond_the_vocabulary_are_refused(gpt2_dir, tmp_path, capsys):
    from transformers import PreTrainedTokenizerFast

    d = _copy(gpt2_dir, tmp_path)
    chars = list(json.loads((d / "tokenizer.json").read_text())["model"]["vocab"])
    chars = [c for c in chars if c != "<unk>"] + ["\u00e9"]      # id 77: the model has 77 rows
    fast = PreTrainedTokenizerFast(tokenizer_object=export.character_tokenizer(chars),
                                   unk_token="<unk>")
    fast.save_pretrained(d)
    text = tmp_path / "t.txt"
    text.write_text("caf\u00e9 au lait, " * 400, encoding="utf-8")
    assert _measure(d, tmp_path, "--text", str(text)) == 2
    _one_line_error(capsys, "beyond the model's vocabulary of 77")


@pytest.mark.parametrize("content, words", [
    (b"", ["is empty"]),
    (b"KING: my lord \xff\xfe the crown\n" * 50, ["t.txt", "not UTF-8", "offset 14"]),
    (b"KING: a\x00b\n" * 50, ["t.txt", "NUL byte"]),
    (b"KING: my lord\n", ["room for 0 windows"]),
])
def test_bad_text_files_are_one_line(content, words, tmp_path, capsys):
    text = tmp_path / "t.txt"
    text.write_bytes(content)
    assert cli.main(["measure", "--model", "tiny", "--task", "calibration", "--text",
                     str(text), "--out", str(tmp_path / "o")]) == 2
    _one_line_error(capsys, *words)


# ---- item 10: --out is checked first and written atomically ------------------------------


@pytest.mark.parametrize("make", ["file", "under-a-file"])
def test_unusable_out_fails_first(make, tmp_path, capsys, nothing_expensive):
    f = tmp_path / "taken"
    f.write_text("x")
    out = f if make == "file" else f / "sub"
    t0 = time.perf_counter()
    assert cli.main(["measure", "--model", "tiny", "--task", "calibration",
                     "--out", str(out)]) == 2
    assert time.perf_counter() - t0 < 1.0
    _one_line_error(capsys, "--out", str(out))


def test_a_failed_write_leaves_nothing_behind(tmp_path, monkeypatch):
    import matplotlib.figure

    r = {"task": "conformal", "model": {"name": "m", "parameters": 1, "vocab": 6,
                                        "tokenizer": "t"},
         "settings": {"options": 6, "alpha": 0.1}, "sizes": {"lac": [1, 2], "aps": [2, 3]},
         "lac": {"coverage": 0.9, "mean_size": 1.5}, "aps": {"coverage": 0.9,
                                                            "mean_size": 2.5}}

    def half_then_fail(self, fname, **kw):
        open(fname, "wb").write(b"\x89PNG half")
        raise OSError("disk full")

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", half_then_fail)
    with pytest.raises(OSError, match="disk full"):
        measure.write(r, tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_json_never_holds_nan(tmp_path):
    r = {"task": "spectral", "model": {"name": "m"}, "value": float("nan"),
         "nested": {"a": [1.0, float("inf"), np.float64("nan")]}}
    monkey = measure.report.figures
    try:
        measure.report.figures = lambda result: {}
        p = measure.write(r, tmp_path)["json"]
    finally:
        measure.report.figures = monkey
    text = p.read_text()
    assert "NaN" not in text and "Infinity" not in text
    assert json.loads(text)["nested"]["a"] == [1.0, None, None]


# ---- item 9: bounded memory for --text ---------------------------------------------------


def test_text_is_tokenised_in_bounded_blocks(tmp_path, monkeypatch):
    lm = interface.TinyLM()
    seen = []
    real = lm.encode
    monkeypatch.setattr(lm, "encode", lambda t: seen.append(len(t)) or real(t))
    monkeypatch.setattr(measure.calibration_task, "CHUNK_BYTES", 4096)
    text = tmp_path / "one-line.txt"
    text.write_text("the king and the crown " * 20_000)        # 460 kB, no line end
    ids = measure.encode_file(lm, text)
    assert max(seen) <= 2 * 4096 and len(seen) > 100
    assert np.array_equal(ids, real(text.read_text()))       # character model: exact
    monkeypatch.setattr(measure.calibration_task, "MAX_TEXT_BYTES", 100_000)
    with pytest.raises(ValueError, match="more than the 100,000"):
        measure.encode_file(lm, text)


def test_an_endless_file_is_refused_fast(tmp_path, capsys):
    import os

    if not os.path.exists("/dev/zero"):
        pytest.skip("no /dev/zero")
    t0 = time.perf_counter()
    assert cli.main(["measure", "--model", "tiny", "--task", "calibration", "--text",
                     "/dev/zero", "--out", str(tmp_path)]) == 2
    assert time.perf_counter() - t0 < 30
    _one_line_error(capsys, "/dev/zero", "not a regular file", "character device")


# ---- item 4: one forward, one set of logits; item 5: the head in float32 ----------------

CHARS = sorted(set(tiny.split("test")))           # every character of the default text


def _random_model(directory, kind, *, bos=False, **extra):
    """A tiny randomly initialised causal LM of ``kind`` with a character tokenizer (and,
    with ``bos``, a ``<s>`` token the tokenizer puts before every text), saved as a
    transformers directory."""
    import transformers
    from tokenizers import processors
    from transformers import PreTrainedTokenizerFast

    chars = CHARS + (["<s>"] if bos else [])
    tok = export.character_tokenizer(chars)
    kw = {}
    if bos:
        tok.post_processor = processors.TemplateProcessing(
            single="<s> $A", special_tokens=[("<s>", chars.index("<s>"))])
        kw["bos_token"] = "<s>"
    PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", **kw).save_pretrained(
        directory)
    config_cls, model_cls = {
        "llama": (transformers.LlamaConfig, transformers.LlamaForCausalLM),
        "granite": (transformers.GraniteConfig, transformers.GraniteForCausalLM),
        "cohere": (transformers.CohereConfig, transformers.CohereForCausalLM),
    }[kind]
    cfg = config_cls(vocab_size=len(chars) + 1, hidden_size=32, intermediate_size=64,
                     num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4,
                     max_position_embeddings=64, bos_token_id=None, eos_token_id=None,
                     pad_token_id=None, **extra)
    torch.manual_seed(0)
    model_cls(cfg).eval().save_pretrained(directory)
    return directory


def _reference(directory, dtype=torch.float32):
    """The same directory loaded by plain transformers, untouched by our interface."""
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(str(directory), dtype=dtype).eval()


@pytest.mark.parametrize("kind, extra", [("granite", {"logits_scaling": 4.0}),
                                         ("cohere", {"logit_scale": 0.25}),
                                         ("llama", {})])
@pytest.mark.slow  # builds and loads a random transformers model (2-3 s with the imports)
def test_every_path_uses_the_models_own_forward(kind, extra, tmp_path):
    d = _random_model(tmp_path / kind, kind, **extra)
    lm = interface.HFModel(d, device="cpu")
    ref = _reference(d)
    x = torch.as_tensor(lm.encode("the king and the crown of all the land, my lord.")[None])
    with torch.no_grad():
        want = torch.log_softmax(ref(input_ids=x).logits.double(), -1)[0].numpy()
    np.testing.assert_allclose(lm.window_logprobs(x.numpy())[0], want, atol=1e-6)
    ctx = [x[0, :k].numpy() for k in (3, 17, x.shape[1])]
    nt = lm.next_token_logprobs(ctx)            # the bounded path (one row per context)
    for row, k in zip(nt, (3, 17, x.shape[1])):
        np.testing.assert_allclose(row, want[k - 1], atol=1e-6)
    if extra:  # the post-processing matters: without it the rows would differ
        with torch.no_grad():
            h = ref.model(input_ids=x).last_hidden_state
            raw = torch.log_softmax(ref.lm_head(h).double(), -1)[0].numpy()
        assert np.abs(raw - want).max() > 1e-2


@pytest.mark.slow  # the `gpt2_dir` fixture: an export with transformers (2-3 s with its imports)
def test_bf16_head_and_softmax_run_in_float32(gpt2_dir):
    lm = interface.HFModel(gpt2_dir, device="cpu", dtype="bfloat16")
    assert lm.info()["dtype"] == "bfloat16" and lm.info()["head"] == "float32"
    ref = _reference(gpt2_dir, torch.bfloat16)
    x = torch.as_tensor(lm.encode("KING: my lord, the crown is yours.\n")[None])
    with torch.no_grad():
        h = ref.transformer(input_ids=x).last_hidden_state        # bf16 hidden states
        want = h.float() @ ref.lm_head.weight.float().T             # projected in float32
        bf16 = ref(input_ids=x).logits
        z = lm.logits(x)
        zl = lm.logits(x, torch.tensor([5]))
    assert z.dtype == torch.float32 and bf16.dtype == torch.bfloat16
    torch.testing.assert_close(z, want, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(zl[0], want[0, 5], atol=1e-5, rtol=1e-5)
    assert (z.to(torch.bfloat16).float() != z).any()               # not bf16-rounded logits


# ---- item 1: BOS before every window; calibration by position ---------------------------


@pytest.mark.slow  # builds and loads a random transformers model (2-3 s with the imports)
def test_windows_get_the_bos_token_the_tokenizer_adds(tmp_path):
    d = _random_model(tmp_path / "bos", "llama", bos=True)
    lm = interface.HFModel(d, device="cpu")
    bos = CHARS.__len__()                                   # "<s>" comes after the chars
    assert lm.prefix == [bos]
    ref = _reference(d)
    x = lm.encode("the king and the crown of all the land")[None]
    with torch.no_grad():
        full = ref(input_ids=torch.as_tensor(np.c_[[[bos]], x])).logits.double()
    want = torch.log_softmax(full, -1)[0, 1:].numpy()     # after BOS + the first t+1 tokens
    np.testing.assert_allclose(lm.window_logprobs(x)[0], want, atol=1e-6)
    r = measure.calibration(lm, text="the king and the crown. " * 200, count=2, size=2,
                            progress=False)
    assert r["settings"]["bos"] and r["settings"]["block"] == 63  # 64 - 1 for BOS
    with pytest.raises(ValueError, match="BOS"):
        measure.calibration(lm, text="ab " * 400, count=1, size=1, block=64, progress=False)


def test_position_bands_partition_the_predictions():
    lm = interface.TinyLM()
    r = measure.calibration(lm, count=2, size=8, progress=False)
    bands = r["positions"]
    assert [b["band"] for b in bands] == [[0, 7], [8, 31], [32, 63]]
    assert sum(b["rows"] for b in bands) == r["rows"]
    t1 = next(row for row in r["table"] if row["temperature"] == 1.0)
    acc = sum(b["accuracy"] * b["rows"] for b in bands) / r["rows"]
    assert acc == pytest.approx(t1["accuracy"], abs=1e-12)
    for b in bands:
        for key in ("accuracy", "nll", "ece"):
            lo, hi = b["intervals"][key]
            assert lo <= hi and np.isfinite(lo)


# ---- items 2, 3: what is held out; per-byte log-loss, intervals and the ECE floor -------


@pytest.mark.slow  # three measurements through transformers, one on a random Llama-style model built here
def test_held_out_is_said_only_where_it_is_true(gpt2_dir, tmp_path):
    lm = interface.HFModel(gpt2_dir, device="cpu")
    r = measure.calibration(lm, count=1, size=2, progress=False)
    assert r["held_out"] is True
    d = _random_model(tmp_path / "other", "llama")
    r = measure.calibration(interface.HFModel(d, device="cpu"), count=1, size=2,
                            progress=False)
    assert r["held_out"] is False and "NOT held out" in r["text_note"]
    assert "NOT held out for a pretrained model" in measure.summary(r)
    assert "--text" in measure.summary(r)
    r = measure.calibration(lm, text="the king and the crown. " * 200, count=1, size=2,
                            progress=False)
    assert r["held_out"] is None
    assert "tokenizer" in measure.summary(r) and "bits per byte" in measure.summary(r)


def test_per_byte_loss_and_intervals():
    import math

    from standarderror.uncertainty import calibration as cb

    lm = interface.TinyLM()
    r = measure.calibration(lm, count=2, size=8, progress=False)
    t1 = next(row for row in r["table"] if row["temperature"] == 1.0)
    pb = r["per_byte"]
    # the test plays are ASCII and the model reads characters: one byte per prediction
    assert pb["bytes"] == pb["chars"] == r["rows"]
    assert pb["bits_per_byte"] == pytest.approx(t1["nll"] / math.log(2), rel=1e-12)
    lo, hi = pb["interval"]
    assert lo < pb["bits_per_byte"] < hi
    for key in ("accuracy", "nll", "ece"):
        lo, hi = r["intervals"][key]
        assert lo < hi
    assert 0 < r["ece_floor"]["mean"] < 0.2
    # unit weights give back the point estimates exactly (the resampled sums are exact)
    conf = np.random.default_rng(0).random(640)
    ok = np.random.default_rng(1).random(640) < conf
    nll = np.random.default_rng(2).random(640)
    s = measure._window_stats(conf, ok, nll, np.ones(640, bool), np.ones((3, 10)), 64, 15,
                              0, 20)
    assert s["intervals"]["ece"][0] == pytest.approx(cb.ece(conf, ok, bins=15), abs=1e-12)
    assert s["intervals"]["accuracy"] == [pytest.approx(ok.mean(), abs=1e-12)] * 2


@pytest.mark.slow  # builds and loads a random transformers model (2-3 s with the imports)
def test_per_byte_counts_the_bytes_of_a_subword_tokenizer(tmp_path):
    d = export.random_llama(tmp_path / "llama", vocab_size=512, hidden=32, layers=1,
                            window=128, text="the king and the crown of all the land. " * 50)
    lm = interface.HFModel(d, device="cpu")
    text = "the king and the crown of all the land. " * 200
    r = measure.calibration(lm, text=text, count=1, size=4, block=32, progress=False)
    assert r["per_byte"]["bytes"] > 2 * r["rows"]          # a BPE token holds many bytes
    assert r["per_byte"]["bytes"] == r["per_byte"]["chars"]   # ASCII text


def test_whole_word_calibration_against_a_hand_case():
    z = np.log(np.array([[0.7, 0.2, 0.1], [0.5, 0.25, 0.25], [0.1, 0.8, 0.1],
                         [0.6, 0.3, 0.1]]))
    y = np.array([0, 1, 1, 2])
    w = measure.word_calibration(z, y, bins=10, draws=50)
    assert w["accuracy"] == 0.5 and w["confidence"] == pytest.approx(0.65)
    # bins of width 0.1: {0.7} right, {0.5} wrong, {0.8} right, {0.6} wrong
    assert w["ece"] == pytest.approx((0.3 + 0.5 + 0.2 + 0.6) / 4)
    assert w["questions"] == 4 and w["ece_floor"]["mean"] > 0


# ---- item 6: the matrix temperature is fitted at the number of answers it is applied at --


@pytest.mark.slow  # a whole spectral measurement on the tiny model, with five refits (1.5 s)
def test_spectral_fits_at_the_same_number_of_answers(monkeypatch):
    from standarderror import spectral as sp
    from standarderror.llm import semantic as se

    # What is tested is the number of answers the fit sees, not the embedder: the package's
    # own character n-gram embedder stands in for all-MiniLM-L6-v2, whose load is most of
    # this test's time (the slow tier runs the pipeline with it: test_measure.py's
    # test_llama_spectral_end_to_end).
    monkeypatch.setattr(se, "embed", lambda strings, **k: se.hash_embed(strings))
    shapes = []
    real = sp.fit_spectral_temperature
    monkeypatch.setattr(sp, "fit_spectral_temperature",
                        lambda a, y, **k: shapes.append(np.shape(a)) or real(a, y, **k))
    real_rel = sp.reliability
    applied = []
    monkeypatch.setattr(sp, "reliability",
                        lambda a, y, *args, **k: applied.append(np.shape(a)) or
                        real_rel(a, y, *args, **k))
    r = measure.spectral(interface.TinyLM(), dev=12, test=16, answers=6, fit_draws=5,
                         progress=False)
    assert {s[1] for s in shapes} == {6} and {s[1] for s in applied} == {6}
    assert len(shapes) == 1 + 5
    lo, hi = r["temperature_interval"]
    assert lo <= hi and r["settings"]["answers"] == 6


def test_ece_floor_is_episode_2s_floor_at_the_sample_size():
    from standarderror.uncertainty import binning

    c = np.random.default_rng(3).beta(5, 2, size=3000)
    ours = measure.ece_floor(c, 15, draws=200, seed=0)
    theirs = binning.ece_floor(c, [3000], bins=(15,), draws=200, seed=0)["rows"][0]
    assert (ours["mean"], ours["sd"]) == (theirs["mean"], theirs["sd"])  # one code path
    # ... which is the floor: labels drawn from the confidences, so the truth is zero and the
    # mean ECE is the bias: at most about sqrt(2 / pi) sqrt(c (1 - c)) sqrt(bins / n) <=
    # 0.4 sqrt(B / n) (equal bins; uneven bins give less), and of that order
    assert 0.1 * np.sqrt(15 / 3000) < ours["mean"] < 0.45 * np.sqrt(15 / 3000)


# ---- the files of a model directory: only regular files, capped, headers checked --------

import os  # noqa: E402
import struct  # noqa: E402
import threading  # noqa: E402
from pathlib import Path  # noqa: E402

from standarderror.llm.interface import directory  # noqa: E402


def _st(tensors, data=b"", *, raw=None):
    """The bytes of a safetensors file: an 8-byte length, the JSON header, the data."""
    head = raw if raw is not None else json.dumps(tensors).encode()
    return struct.pack("<Q", len(head)) + head + data


def _plain_dir(tmp_path, name="plain"):
    """A directory the checks pass up to loading: a known model_type, one valid safetensors
    file, tokenizer files (nothing in it is ever loaded by these tests)."""
    d = tmp_path / name
    d.mkdir()
    (d / "config.json").write_text(json.dumps({"model_type": "gpt2", "n_layer": 1}))
    (d / "model.safetensors").write_bytes(
        _st({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}, b"\0" * 8))
    (d / "tokenizer.json").write_text("{}")
    (d / "tokenizer_config.json").write_text("{}")
    return d


def _warm():
    """Import what :class:`~standarderror.llm.interface.HFModel` imports first, so that a
    timing measures the checks, not the first import of transformers in this process."""
    import transformers

    return transformers.AutoModelForCausalLM, transformers.AutoTokenizer


def _fifo(path):
    """A FIFO at ``path``. Reading it would block until a writer comes: a helper thread
    opens it for writing a few seconds later if a reader is waiting, so a regression makes
    the test fail on its timing instead of hanging."""
    os.mkfifo(path)

    def unblock():
        time.sleep(3)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
            except OSError:  # no reader waits (ENXIO) or the FIFO is gone
                time.sleep(0.2)
                continue
            os.close(fd)
            return

    threading.Thread(target=unblock, daemon=True).start()
    return path


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this system")
@pytest.mark.parametrize("name", ["config.json", "model.safetensors", "tokenizer.json",
                                  "tokenizer_config.json"])
def test_a_fifo_in_place_of_a_model_file_is_refused_without_waiting(name, tmp_path, capsys):
    d = _plain_dir(tmp_path)
    (d / name).unlink()
    _fifo(d / name)
    _warm()
    t0 = time.perf_counter()
    assert _measure(d, tmp_path) == 2
    assert time.perf_counter() - t0 < 2.5
    _one_line_error(capsys, name, "not a regular file (a FIFO)")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this system")
def test_a_fifo_as_text_is_refused_without_waiting(tmp_path, capsys, nothing_expensive):
    fifo = _fifo(tmp_path / "text.txt")
    t0 = time.perf_counter()
    assert cli.main(["measure", "--model", "tiny", "--task", "calibration", "--text",
                     str(fifo), "--out", str(tmp_path / "o")]) == 2
    assert time.perf_counter() - t0 < 2.5
    _one_line_error(capsys, "--text", "text.txt", "not a regular file (a FIFO)")


def _sparse(path, size):
    path.unlink(missing_ok=True)
    with open(path, "wb") as f:
        f.truncate(size)


@pytest.mark.parametrize("make, words", [
    (lambda d: ((d / "config.json").unlink(), (d / "config.json").symlink_to("/dev/zero")),
     ["config.json", "not a regular file (a character device)"]),
    (lambda d: _sparse(d / "tokenizer.json", 1 << 30),
     ["tokenizer.json", "1,073,741,824 bytes", "MAX_FILE_BYTES"]),
    (lambda d: _sparse(d / "config.json", directory.MAX_CONFIG_BYTES + 1),
     ["config.json", "MAX_CONFIG_BYTES"]),
    (lambda d: _sparse(d / "model.safetensors.index.json", 1 << 30), ["MAX_FILE_BYTES"]),
    (lambda d: (d / "config.json").write_text('{"a": ' + "[" * 100_000 + "]" * 100_000 + "}"),
     ["config.json", "not valid JSON"]),
    (lambda d: (d / "config.json").write_text('{"model_type": "gpt2", "eps": NaN}'),
     ["config.json", "NaN is not finite"]),
    (lambda d: (d / "config.json").write_text('{"model_type": "gpt2", "n_layer": 1e400}'),
     ["config.json", "1e400 is not finite"]),
    (lambda d: ((d / "config.json").unlink(), (d / "config.json").mkdir()),
     ["config.json", "not a regular file (a directory)"]),
    (lambda d: ((d / "tokenizer.json").unlink(), (d / "tokenizer.json").symlink_to("tokenizer.json")),
     ["tokenizer.json", "cannot be opened"]),
])
def test_config_and_tokenizer_files_are_capped_and_regular(make, words, tmp_path, capsys):
    if not os.path.exists("/dev/zero"):
        pytest.skip("no /dev/zero")
    d = _plain_dir(tmp_path)
    make(d)
    _warm()
    t0 = time.perf_counter()
    assert _measure(d, tmp_path) == 2
    assert time.perf_counter() - t0 < 5          # nothing is read whole: no 1 GiB in memory
    _one_line_error(capsys, *words)


def test_the_caps_admit_the_largest_real_tokenizers(tmp_path):
    d = _plain_dir(tmp_path)
    _sparse(d / "tokenizer.json", 34_000_000)    # a 262,000-token vocabulary's tokenizer.json
    _sparse(d / "merges.txt", 20_000_000)
    directory._check_read_files(d)               # no refusal


_F32_1 = {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}


@pytest.mark.parametrize("tensors, data, raw, words", [
    ({"x": {**_F32_1, "shape": [10 ** 30]}}, 4, None, ["tensor 'x'", "need"]),
    ({"pad": {**_F32_1, "shape": [10 ** 12]}}, 4, None, ["4 bytes", "4,000,000,000,000"]),
    (None, 4, b'{"x": {"dtype": "F32", "shape": [1], "data_offsets": [0, 1e400]}}',
     ["data_offsets", "inf"]),
    (None, 4, b'{"x": {"dtype": "F32", "shape": [1e400], "data_offsets": [0, 4]}}', ["shape"]),
    ({"x": {**_F32_1, "data_offsets": [0, 4.0]}}, 4, None, ["data_offsets"]),
    ({"x": {**_F32_1, "shape": [True]}}, 4, None, ["shape"]),
    ({"x": {**_F32_1, "shape": [-1]}}, 4, None, ["shape"]),
    ({"x": {**_F32_1, "data_offsets": [4, 0]}}, 4, None, ["begin <= end"]),
    ({"x": {**_F32_1, "dtype": "F128"}}, 4, None, ["dtype 'F128'"]),
    ({"x": {**_F32_1, "shape": [2], "data_offsets": [0, 8]}}, 4, None, ["header describes"]),
    ({"a": _F32_1, "b": {**_F32_1, "data_offsets": [8, 12]}}, 12, None, ["starts at byte 8"]),
    ({"a": _F32_1, "b": _F32_1}, 4, None, ["starts at byte 0"]),
    ({"x": _F32_1}, 8, None, ["the file holds"]),
    ({"x": _F32_1, "__metadata__": {"format": 1}}, 4, None, ["__metadata__"]),
    (None, 4, b"[]", ["not a JSON object"]),
    (None, 4, b"{" + b'"a":' * 1 + b"[" * 50_000 + b"]" * 50_000 + b"}", ["unreadable header"]),
    (None, 4, b"\xff\xfe", ["unreadable header"]),
])
def test_safetensors_headers_are_checked_tensor_by_tensor(tensors, data, raw, words, tmp_path):
    f = tmp_path / "model.safetensors"
    f.write_bytes(_st(tensors, b"\0" * data, raw=raw))
    with pytest.raises(ValueError, match="not a valid safetensors file") as info:
        interface.safetensors_header(f)
    message = str(info.value)
    assert "\n" not in message
    for w in words:
        assert w in message, (w, message)


def test_a_header_longer_than_its_file_is_refused(tmp_path):
    f = tmp_path / "model.safetensors"
    f.write_bytes(struct.pack("<Q", 1000) + b"{}")
    with pytest.raises(ValueError, match="claims 1,000 bytes, the file holds 10"):
        interface.safetensors_header(f)


@pytest.mark.parametrize("breakage, words", [
    (lambda d: (d / "model.safetensors").write_bytes(
        _st({"x": {**_F32_1, "shape": [10 ** 30]}}, b"\0" * 4)), ["model.safetensors", "need"]),
    (lambda d: (d / "model.safetensors").write_bytes(_st(None, b"\0" * 4, raw=(
        b'{"x": {"dtype": "F32", "shape": [1], "data_offsets": [0, 1e400]}}'))),
     ["model.safetensors", "data_offsets"]),
])
def test_absurd_shapes_and_offsets_are_one_line_at_the_command_line(breakage, words,
                                                                    tmp_path, capsys):
    d = _plain_dir(tmp_path)
    breakage(d)
    assert _measure(d, tmp_path) == 2
    _one_line_error(capsys, *words)


def test_huge_headers_are_refused_before_they_are_parsed(tmp_path, capsys, monkeypatch):
    d = _plain_dir(tmp_path)
    f = d / "model.safetensors"
    with open(f, "wb") as fh:                    # an 80 MB header, sparse on disk
        fh.write(struct.pack("<Q", 80_000_000))
        fh.truncate(8 + 80_000_000)
    _warm()
    t0 = time.perf_counter()
    assert _measure(d, tmp_path) == 2
    assert time.perf_counter() - t0 < 2
    _one_line_error(capsys, "80,000,000 bytes", "MAX_HEADER_BYTES")
    # within the byte cap, a header of too many (empty) tensors (the cap lowered to keep
    # this test fast: a header of MAX_HEADER_BYTES takes about two seconds to parse)
    monkeypatch.setattr(directory, "MAX_TENSORS", 1000)
    empty = {"dtype": "F32", "shape": [0], "data_offsets": [0, 0]}
    f.write_bytes(_st({f"t{i}": empty for i in range(1001)}))
    with pytest.raises(ValueError, match="1,001 tensors, more than the 1,000"):
        interface.safetensors_header(f)
    f.write_bytes(_st({f"t{i}": empty for i in range(1000)}))
    assert interface.safetensors_parameters(f) == 0         # at the cap: accepted


def test_only_the_weights_transformers_loads_are_read(tmp_path):
    pad = _st({"pad": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}, b"\0" * 4)
    d = _plain_dir(tmp_path)
    (d / "pad.safetensors").write_bytes(pad)
    assert interface.weight_files(d) == [d / "model.safetensors"]
    (d / "model.safetensors").unlink()               # only a file transformers never opens
    with pytest.raises(FileNotFoundError, match="pad.safetensors would not be read"):
        interface.weight_files(d)
    shards = {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}
    (d / "model.safetensors.index.json").write_text(json.dumps({"weight_map": shards}))
    assert interface.weight_files(d) == [d / s for s in sorted(shards.values())]
    for bad in ("../other/model.safetensors", "/etc/passwd.safetensors", "w.bin", ".hidden.safetensors"):
        (d / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"a": bad}}))
        with pytest.raises(ValueError, match="shards must be .safetensors files in the"):
            interface.weight_files(d)
    _edit_config(d, transformers_weights="pad.safetensors")   # config.json names the file
    assert interface.weight_files(d) == [d / "pad.safetensors"]
    _edit_config(d, transformers_weights="../pad.safetensors")
    with pytest.raises(ValueError, match="transformers_weights"):
        interface.weight_files(d)


@pytest.mark.slow  # the `gpt2_dir` fixture, and a 24-layer GPT-2 built on the meta device
def test_a_padding_file_cannot_stand_in_for_missing_weights(gpt2_dir, tmp_path, capsys,
                                                           monkeypatch):
    d = _copy(gpt2_dir, tmp_path)
    _edit_config(d, n_layer=24, n_embd=1024, n_head=16, n_inner=4096)
    (d / "model.safetensors").write_bytes(_st({"unused": _F32_1}, b"\0" * 4))
    with open(d / "pad.safetensors", "wb") as f:     # claims 10**12 elements, holds 4 bytes
        f.write(_st({"pad": {**_F32_1, "shape": [10 ** 12]}}, b"\0" * 4))
    monkeypatch.setattr(measure, "run", lambda *a, **k: pytest.fail("measured a bad model"))
    assert _measure(d, tmp_path) == 2
    _one_line_error(capsys, "parameters", "its weights hold 1:", "random")


@pytest.mark.slow  # the `gpt2_dir` fixture and a load with transformers (2-3 s)
def test_a_missing_weight_is_refused_not_initialised_at_random(gpt2_dir, tmp_path, capfd,
                                                               monkeypatch):
    from safetensors.torch import load_file, save_file

    d = _copy(gpt2_dir, tmp_path)
    state = load_file(d / "model.safetensors")
    gone = state.pop("transformer.h.0.mlp.c_fc.weight")
    state["junk"] = torch.zeros_like(gone)            # the same count: only the names tell
    save_file(state, str(d / "model.safetensors"), metadata={"format": "pt"})
    monkeypatch.setattr(measure, "run", lambda *a, **k: pytest.fail("measured a bad model"))
    assert _measure(d, tmp_path) == 2
    err = capfd.readouterr().err.strip()              # file descriptor 2: no load report
    assert err.startswith("error: ") and "\n" not in err, err
    assert "lack 1 tensor" in err and "transformer.h.0.mlp.c_fc.weight" in err, err


@pytest.mark.slow  # the `gpt2_dir` fixture and a load with transformers (2-3 s)
def test_a_tokenizer_regex_that_backtracks_is_one_line(gpt2_dir, tmp_path, capsys):
    d = _copy(gpt2_dir, tmp_path)
    tj = json.loads((d / "tokenizer.json").read_text())
    tj["pre_tokenizer"] = {"type": "Split", "pattern": {"Regex": "(a|a)+b"},
                           "behavior": "Isolated", "invert": False}
    (d / "tokenizer.json").write_text(json.dumps(tj))
    text = tmp_path / "t.txt"
    text.write_text(("a" * 40 + "c ") * 100)
    assert _measure(d, tmp_path, "--text", str(text)) == 2
    # (the tokenizers library's own panic hook writes its message to file descriptor 2)
    _one_line_error(capsys, "tokenizers library", "retry-limit")


# ---- writing results: all or nothing, with the user's umask ---------------------------------


def _conformal_result(alpha):
    return {"task": "conformal", "model": {"name": "m", "parameters": 1, "vocab": 6,
                                           "tokenizer": "t"},
            "settings": {"options": 6, "alpha": alpha}, "sizes": {"lac": [1, 2], "aps": [2, 3]},
            "lac": {"coverage": 0.9, "mean_size": 1.5}, "aps": {"coverage": 0.9,
                                                               "mean_size": 2.5}}


@pytest.mark.parametrize("failing", ["conformal.json", "conformal_sizes.png"])
def test_a_failed_rename_keeps_the_previous_results(failing, tmp_path, monkeypatch):
    out = tmp_path / "out"
    paths = measure.write(_conformal_result(0.1), out)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    assert set(before) == {p.name for p in paths.values()}
    real = os.replace

    def replace(src, dst):   # the new file's rename into out fails
        if Path(src).name == failing and Path(dst).parent == out:
            raise OSError("disk full")
        return real(src, dst)

    monkeypatch.setattr(measure.report.os, "replace", replace)
    with pytest.raises(OSError, match="disk full"):
        measure.write(_conformal_result(0.2), out)    # another title: other bytes
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    monkeypatch.undo()
    measure.write(_conformal_result(0.2), out)
    assert json.loads((out / "conformal.json").read_text())["settings"]["alpha"] == 0.2


def test_results_follow_the_umask_and_an_empty_out_is_refused(tmp_path, capsys,
                                                              nothing_expensive):
    old = os.umask(0o027)
    try:
        paths = measure.write(_conformal_result(0.1), tmp_path / "out")
    finally:
        os.umask(old)
    assert {p.stat().st_mode & 0o777 for p in paths.values()} == {0o640}
    with pytest.raises(ValueError, match="out must name a directory"):
        measure.write(_conformal_result(0.1), "")
    assert cli.main(["measure", "--model", "tiny", "--task", "calibration", "--out", ""]) == 2
    _one_line_error(capsys, "--out must name a directory")


@pytest.mark.slow  # an export with transformers (2-3 s with its imports)
def test_exported_weights_follow_the_umask(tmp_path):
    old = os.umask(0o027)
    try:
        d = export.to_gpt2(tmp_path / "tiny-gpt2")
    finally:
        os.umask(old)
    assert (d / "model.safetensors").stat().st_mode & 0o777 == 0o640
    assert (d / "config.json").stat().st_mode & 0o777 == 0o640


# ---- bounds on counts; the offline switches restored --------------------------------------


def test_answers_beyond_the_bound_are_one_line_before_any_work(tmp_path, capsys,
                                                               nothing_expensive):
    assert cli.main(["measure", "--model", "tiny", "--task", "spectral", "--answers",
                     str(10 ** 9), "--out", str(tmp_path / "o")]) == 2
    _one_line_error(capsys, "--answers", "at most 10,000", "1,000,000,000")
    lm = interface.tiny_lm.TinyLM()              # (the fixture replaced interface.TinyLM)
    with pytest.raises(ValueError, match="m must be at most 10,000"):
        lm.sample(["the king"], 10 ** 9)
    with pytest.raises(ValueError, match="answers must be at most 10,000"):
        measure.spectral_task.spectral(lm, answers=10 ** 9, progress=False)


def test_offline_switches_are_restored_after_nested_and_threaded_use(monkeypatch):
    from huggingface_hub import constants

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_HUB_DISABLE_PROGRESS_BARS", raising=False)
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "0")
    before = constants.HF_HUB_OFFLINE
    entered, leave = threading.Event(), threading.Event()

    def other_thread():
        with interface.hub_offline():
            entered.set()
            leave.wait(30)

    t = threading.Thread(target=other_thread)
    with interface.hub_offline():
        with interface.hub_offline(quiet=True):
            assert os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] == "1"
        assert (os.environ["HF_HUB_OFFLINE"], constants.HF_HUB_OFFLINE) == ("1", True)
        t.start()
        assert entered.wait(30)
    assert os.environ["HF_HUB_OFFLINE"] == "1"     # the other thread is still inside
    leave.set()
    t.join(30)
    assert "HF_HUB_OFFLINE" not in os.environ       # the last one out restores
    assert "HF_HUB_DISABLE_PROGRESS_BARS" not in os.environ
    assert os.environ["TRANSFORMERS_OFFLINE"] == "0" and constants.HF_HUB_OFFLINE == before


@pytest.mark.slow  # imports transformers for its logging switches (2-3 s)
def test_the_embedder_restores_the_offline_switches(monkeypatch):
    import sys
    import types

    from standarderror.llm import semantic

    seen = []

    class FakeSentenceTransformer:   # stands in for the load: what does it see?
        def __init__(self, *a, **k):
            seen.append(os.environ.get("HF_HUB_OFFLINE"))

    monkeypatch.setitem(sys.modules, "sentence_transformers",
                        types.SimpleNamespace(SentenceTransformer=FakeSentenceTransformer))
    monkeypatch.setattr(semantic, "_EMBEDDER", {})
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    semantic.embedder()
    assert seen == ["1"]
    assert "HF_HUB_OFFLINE" not in os.environ and "TRANSFORMERS_OFFLINE" not in os.environ
