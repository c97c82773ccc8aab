"""vLLM's offline engine as a backend (standarderror.llm.interface.vllm_offline).

vLLM needs a GPU, so most of this file runs the backend against a stand-in engine that
restates vLLM's documented offline API over a model in this process: ``generate(prompts,
params)`` with prompts of token ids, ``SamplingParams(n, temperature, max_tokens, seed, stop,
prompt_logprobs)``, outputs whose ``prompt_logprobs`` is a list (``None`` first) of
``{token id: Logprob}`` holding the top ``k`` and the prompt token, and completions with
``text`` (the stop string cut off), ``finish_reason`` and ``stop_reason``. That checks what
the backend does with what vLLM returns; the last test runs vLLM itself where it and a GPU
are present (``scripts/gpu_check.sh``; ``VLLM_REQUIRED=1`` makes its absence a failure).
"""

import importlib.machinery
import importlib.util
import os
import sys
import types
from dataclasses import dataclass

import numpy as np
import pytest
import torch

pytest.importorskip("transformers")

from standarderror import cli  # noqa: E402
from standarderror.experiments import measure  # noqa: E402
from standarderror.llm import export, interface, tiny  # noqa: E402

VOCAB, WINDOW = 384, 128


@dataclass
class Logprob:
    logprob: float
    rank: int | None = None
    decoded_token: str | None = None


@dataclass
class SamplingParams:
    n: int = 1
    temperature: float = 1.0
    max_tokens: int = 16
    seed: int | None = None
    stop: list | None = None
    prompt_logprobs: int | None = None


class Engine:
    """vLLM's offline ``LLM``, restated over an in-process model (see the module docstring)."""

    def __init__(self, lm):
        self.lm, self.requests = lm, 0

    def get_tokenizer(self):
        return self.lm.tokenizer

    def _rows(self, seq):
        with torch.no_grad():
            z = self.lm.logits(torch.tensor([seq]))[0].double()
        return torch.log_softmax(z, dim=-1).numpy()

    def generate(self, prompts, params, use_tqdm=True):
        params = params if isinstance(params, list) else [params] * len(prompts)
        return [self._one(p["prompt_token_ids"], q) for p, q in zip(prompts, params)]

    def _one(self, seq, q):
        self.requests += 1
        out = types.SimpleNamespace(prompt_logprobs=None, outputs=[])
        if q.prompt_logprobs is not None:
            rows = self._rows(seq)
            plp = [None]
            for pos in range(1, len(seq)):
                row = rows[pos - 1]
                order = np.argsort(-row, kind="stable")
                keep = list(order[:q.prompt_logprobs]) + [seq[pos]]
                plp.append({int(i): Logprob(float(row[i]), int(np.where(order == i)[0][0]) + 1)
                            for i in keep})
            out.prompt_logprobs = plp
        rng = np.random.default_rng(q.seed)
        for _ in range(q.n):
            ids, text, reason, stop_reason = list(seq), "", "length", None
            for _ in range(q.max_tokens):
                row = self._rows(ids)[-1]
                if q.temperature == 0:
                    tok = int(row.argmax())
                else:
                    p = np.exp(row / q.temperature - (row / q.temperature).max())
                    tok = int(rng.choice(p.size, p=p / p.sum()))
                ids.append(tok)
                text = self.lm.decode(ids[len(seq):])
                hit = [s for s in (q.stop or []) if s in text]
                if hit:
                    first = min(hit, key=text.index)
                    text, reason, stop_reason = text[:text.index(first)], "stop", first
                    break
            out.outputs.append(types.SimpleNamespace(text=text, finish_reason=reason,
                                                     stop_reason=stop_reason))
        return out


@pytest.fixture(scope="module")
def fake_vllm():
    """A module named ``vllm`` holding the stand-in's SamplingParams and LLM."""
    mod = types.ModuleType("vllm")
    mod.SamplingParams = SamplingParams
    mod.LLM = None  # the tests pass the engine
    saved = sys.modules.get("vllm")
    sys.modules["vllm"] = mod
    yield mod
    if saved is None:
        del sys.modules["vllm"]
    else:
        sys.modules["vllm"] = saved


@pytest.fixture(scope="module")
def pair(tmp_path_factory, fake_vllm):
    from standarderror.llm.interface.vllm_offline import VLLMModel

    d = export.random_llama(tmp_path_factory.mktemp("llama"), vocab_size=VOCAB,
                            text=tiny.split("val"), window=WINDOW, hidden=16, layers=1)
    local = interface.HFModel(d, device="cpu")
    return local, VLLMModel(d, engine=Engine(local), window=WINDOW)


@pytest.mark.slow  # builds a tokenizer and a random Llama
def test_whole_rows_equal_the_in_process_rows(pair):
    local, remote = pair
    ids = local.encode(tiny.split("test")[:20_000])
    x, y = next(tiny.windows(ids, 1, 3, 0, block=32))
    a, b = local.labelled_window_logprobs(x, y), remote.labelled_window_logprobs(x, y)
    assert np.abs(a - b).max() < 1e-5
    assert remote.info()["vllm"]["whole_rows"] and remote.info()["vllm"]["rest_mass_max"] < 1e-9


@pytest.mark.slow  # builds a tokenizer and a random Llama
def test_calibration_and_conformal_equal_in_process(pair):
    local, remote = pair
    kw = dict(count=2, size=4, block=32, draws=20, progress=False)
    a, b = measure.calibration(local, **kw), measure.calibration(remote, **kw)
    assert [(f"{r['accuracy']:.4f}", f"{r['nll']:.4f}", f"{r['ece']:.4f}") for r in a["table"]] \
        == [(f"{r['accuracy']:.4f}", f"{r['nll']:.4f}", f"{r['ece']:.4f}") for r in b["table"]]
    a, b = measure.conformal(local, count=20, progress=False), \
        measure.conformal(remote, count=20, progress=False)
    assert np.abs(np.asarray(a["logits"]) - np.asarray(b["logits"])).max() < 1e-4
    assert a["sizes"] == b["sizes"] and a["accuracy"] == b["accuracy"]


@pytest.mark.slow  # builds a tokenizer and a random Llama
def test_top_k_rows_are_counted_as_approximate(pair):
    local, _ = pair
    from standarderror.llm.interface.vllm_offline import VLLMModel

    remote = VLLMModel(local.name, engine=Engine(local), window=WINDOW, top_logprobs=5)
    ids = local.encode(tiny.split("test")[:5_000])
    x, y = next(tiny.windows(ids, 1, 2, 0, block=16))
    a, b = local.labelled_window_logprobs(x, y), remote.labelled_window_logprobs(x, y)
    rows = np.arange(y.size)
    assert np.abs(a.reshape(-1, VOCAB)[rows, y.reshape(-1)]
                  - b.reshape(-1, VOCAB)[rows, y.reshape(-1)]).max() < 1e-5  # labels exact
    assert np.array_equal(a.argmax(-1), b.argmax(-1))                      # argmax exact
    info = remote.info()["vllm"]
    assert not info["whole_rows"] and info["rest_mass_mean"] > 0


@pytest.mark.slow  # builds a tokenizer and a random Llama
def test_samples_are_seeded_and_cut_by_the_stop_rule(pair):
    _, remote = pair
    ctx = ["The king said", "A rose by any other"]
    r1 = remote.sample(ctx, 4, temperature=1.0, seed=3, max_tokens=6, greedy=True)
    r2 = remote.sample(ctx, 4, temperature=1.0, seed=3, max_tokens=6, greedy=True)
    assert r1 == r2 and len(r1["answers"]) == 2 and all(len(a) == 4 for a in r1["answers"])
    assert len(r1["greedy"]) == 2


def test_the_stop_string_is_put_back_before_the_stop_rule():
    from standarderror.llm.interface.vllm_offline import _answer
    from standarderror.llm.prefix_tree import one_word

    def out(text, stop_reason=None):
        return types.SimpleNamespace(text=text, stop_reason=stop_reason)

    assert _answer(out(" word", ","), " ", one_word) == ("word", False)
    assert _answer(out("", "."), "", one_word) == (".", False)  # "." alone is the answer
    assert _answer(out("unfinish"), "", one_word) == ("unfinish", True)  # cut by max_tokens


def test_without_vllm_the_command_ends_in_one_line(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "vllm", None)  # import vllm raises ImportError
    assert cli.main(["measure", "--backend", "vllm", "--model", str(tmp_path), "--task",
                     "conformal", "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pip install vllm" in err
    assert cli.main(["measure", "--backend", "vllm", "--model", "tiny", "--task",
                     "conformal"]) == 2
    assert "export-tiny" in capsys.readouterr().err
    assert cli.main(["measure", "--backend", "vllm", "--model", str(tmp_path), "--task",
                     "conformal", "--base-url", "http://a"]) == 2
    assert "does not apply to --backend vllm" in capsys.readouterr().err


REQUIRED = os.environ.get("VLLM_REQUIRED") == "1"


def _real_vllm():
    """Skip (or, with VLLM_REQUIRED=1, fail) unless the real vLLM and a GPU are here. The
    stand-in module above is out of ``sys.modules`` for the caller (monkeypatch)."""
    if importlib.machinery.PathFinder.find_spec("vllm") is None or not torch.cuda.is_available():
        reason = "vLLM or a CUDA GPU is missing (scripts/gpu_check.sh runs this on a GPU)"
        if REQUIRED:
            pytest.fail(f"VLLM_REQUIRED=1 but {reason}")
        pytest.skip(reason)


@pytest.mark.slow  # vLLM on a GPU
@pytest.mark.parametrize("which", ["tiny", "llama"])
def test_real_vllm_agrees_with_in_process(which, tmp_path, monkeypatch):
    monkeypatch.delitem(sys.modules, "vllm", raising=False)  # not the stand-in
    _real_vllm()
    from standarderror.llm.interface.vllm_offline import VLLMModel

    if which == "tiny":
        d = export.to_gpt2(tmp_path / "tiny")
    else:
        d = export.random_llama(tmp_path / "llama", vocab_size=VOCAB, text=tiny.split("val"),
                                window=WINDOW, hidden=16, layers=1)
    local = interface.HFModel(d, device="cpu")
    remote = VLLMModel(str(d), window=min(WINDOW, local.window + 1), enforce_eager=True,
                       gpu_memory_utilization=0.3)
    kw = dict(count=2, size=4, block=32, draws=20, progress=False)
    a, b = measure.calibration(local, **kw), measure.calibration(remote, **kw)
    for ra, rb in zip(a["table"], b["table"]):
        assert f"{ra['nll']:.3f}" == f"{rb['nll']:.3f}", (ra, rb)
        assert f"{ra['accuracy']:.3f}" == f"{rb['accuracy']:.3f}", (ra, rb)
    a, b = measure.conformal(local, count=20, progress=False), \
        measure.conformal(remote, count=20, progress=False)
    assert np.abs(np.asarray(a["logits"]) - np.asarray(b["logits"])).max() < 1e-3
    s = measure.spectral(remote, dev=4, test=4, answers=3, progress=False)
    assert s["settings"]["answers"] == 3
