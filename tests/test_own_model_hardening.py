"""Measure your own model, tried as an attacker and as a careless user would (issue 22).

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
from standarderror.llm import export, interface, measure  # noqa: E402


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
def test_broken_model_directories_are_one_line(breakage, words, gpt2_dir, tmp_path, capsys,
                                               monkeypatch):
    d = _copy(gpt2_dir, tmp_path)
    breakage(d)
    monkeypatch.setattr(measure, "run", lambda *a, **k: pytest.fail("measured a bad model"))
    t0 = time.perf_counter()
    assert _measure(d, tmp_path) == 2
    assert time.perf_counter() - t0 < 30          # fails fast: nothing absurd is allocated
    _one_line_error(capsys, *words)


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
    monkey = measure.figures
    try:
        measure.figures = lambda result: {}
        p = measure.write(r, tmp_path)["json"]
    finally:
        measure.figures = monkey
    text = p.read_text()
    assert "NaN" not in text and "Infinity" not in text
    assert json.loads(text)["nested"]["a"] == [1.0, None, None]


# ---- item 9: bounded memory for --text ---------------------------------------------------


def test_text_is_tokenised_in_bounded_blocks(tmp_path, monkeypatch):
    lm = interface.TinyLM()
    seen = []
    real = lm.encode
    monkeypatch.setattr(lm, "encode", lambda t: seen.append(len(t)) or real(t))
    monkeypatch.setattr(measure, "CHUNK_BYTES", 4096)
    text = tmp_path / "one-line.txt"
    text.write_text("the king and the crown " * 20_000)        # 460 kB, no line end
    ids = measure.encode_file(lm, text)
    assert max(seen) <= 2 * 4096 and len(seen) > 100
    assert np.array_equal(ids, real(text.read_text()))       # character model: exact
    monkeypatch.setattr(measure, "MAX_TEXT_BYTES", 100_000)
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
    _one_line_error(capsys, "/dev/zero", "NUL byte")
