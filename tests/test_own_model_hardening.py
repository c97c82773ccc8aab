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
