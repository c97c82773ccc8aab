"""The served backend (standarderror.llm.interface.served): a model behind an OpenAI-compatible
/v1/completions server.

Two servers: llama-cpp-python's own (``python -m llama_cpp.server``) serving a random Llama
written as a float32 GGUF by scripts/make_gguf.py, measured against the same weights in this
process (HFModel); and a small fake server (http.server, in a thread) for what a real one
cannot be made to do on demand: answer without log-probabilities, with a non-finite one,
with 503 before it answers, or list another model.

The real-server tests need ``pip install standarderror[serve]``; without it they skip with
the reason, except under ``SERVER_REQUIRED=1`` (CI), where they fail.
"""

import importlib.util
import json
import math
import os
import re
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("transformers")

from standarderror import cli  # noqa: E402
from standarderror.experiments import measure  # noqa: E402
from standarderror.llm import export, interface, tiny  # noqa: E402
from standarderror.llm.interface import served  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
VOCAB, WINDOW = 384, 128
#: The served model's vocabulary: the 256 bytes, one special token and one merge.
#: llama-cpp-python's server takes text prompts only and tokenises them itself; at a
#: vocabulary of 384 its byte-level BPE splits some option prompts of the conformal task
#: into other tokens than the tokenizers library does (refused by the check of every prompt);
#: with a single merge the two agree on every prompt the tests send.
SERVED_VOCAB = 258


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _make_gguf():
    spec = importlib.util.spec_from_file_location("make_gguf", ROOT / "scripts" / "make_gguf.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# ---- a fake server: a uniform model, and the misbehaviours asked of it ----------------------


class Fake:
    """A uniform model over the tokenizer's vocabulary behind /v1/models and /v1/completions;
    ``mode`` picks a misbehaviour."""

    def __init__(self, tokenizer_dir, mode="ok", name="fake"):
        from transformers import AutoTokenizer

        self.tok = AutoTokenizer.from_pretrained(str(tokenizer_dir))
        self.mode, self.name, self.seen, self.failures = mode, name, [], 0
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _send(self, code, obj):
                body = json.dumps(obj).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):
                fake.seen.append(("GET", self.path, self.headers.get("Authorization")))
                if self.path == "/v1/models":
                    listed = "other" if fake.mode == "wrong_name" else fake.name
                    return self._send(200, {"object": "list", "data": [{"id": listed}]})
                self._send(404, {"detail": "Not Found"})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                fake.seen.append(("POST", self.path, self.headers.get("Authorization")))
                posts = sum(1 for m, *_ in fake.seen if m == "POST")
                if fake.mode == "busy" and posts > 1 and fake.failures < 2:  # after the probe
                    fake.failures += 1
                    return self._send(503, {"error": "busy"})
                self._send(200, fake.complete(body))

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def complete(self, body):
        ids = self.tok(body["prompt"], add_special_tokens=False)["input_ids"]
        if self.mode == "other_tokenizer":
            ids = ids[:-1]
        if not body.get("echo"):
            return {"choices": [{"text": " word and", "finish_reason": "length"}]}
        if self.mode == "no_logprobs":
            return {"choices": [{"text": body["prompt"] + " x", "logprobs": None}]}
        v = -math.log(len(self.tok))
        values = [None] + [v] * (len(ids) - 1) + [v]
        if self.mode == "non_finite":
            values[2] = float("-inf")
        if self.mode == "missing":
            values[2] = None
        pieces = [self.tok.decode([i]) for i in ids] + [" x"]
        top = [None] + [{p: v for p in pieces[:1]} for _ in range(len(ids))]
        return {"choices": [{"text": body["prompt"] + " x", "finish_reason": "length",
                             "logprobs": {"tokens": pieces, "token_logprobs": values,
                                          "top_logprobs": top,
                                          "text_offset": list(range(len(pieces)))}}]}

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory):
    return export.random_llama(tmp_path_factory.mktemp("tok"), vocab_size=VOCAB,
                               text=tiny.split("val"), window=WINDOW, hidden=16, layers=1)


def _cli(tmp_path, url, tokenizer_dir, *extra, task="conformal"):
    return cli.main(["measure", "--backend", "openai", "--base-url", url, "--model", "fake",
                     "--tokenizer", str(tokenizer_dir), "--task", task, "--out",
                     str(tmp_path / "out"), "--no-progress", *extra])


def _one_line(capsys, *words):
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: "), err
    for w in words:
        assert w in err, err
    return err


@pytest.mark.slow  # builds a tokenizer and starts a fake server in a thread, through the CLI
@pytest.mark.parametrize("mode, words", [
    ("wrong_name", ["does not serve 'fake'", "'other'"]),
    ("no_logprobs", ["without log-probabilities"]),
    ("non_finite", ["non-finite"]),
    ("missing", ["missing"]),
])
def test_bad_servers_end_in_one_line(tokenizer_dir, tmp_path, capsys, mode, words):
    fake = Fake(tokenizer_dir, mode)
    try:
        assert _cli(tmp_path, fake.url, tokenizer_dir, "--questions", "4") == 2
    finally:
        fake.close()
    _one_line(capsys, *words)
    # nothing but the checks ran: one listing, at most the probe
    assert sum(1 for m, *_ in fake.seen if m == "POST") <= 1


@pytest.mark.slow  # builds a tokenizer; the CLI end to end
def test_bad_urls_and_a_server_that_is_down(tokenizer_dir, tmp_path, capsys):
    for url, words in (("ftp://127.0.0.1:1", ["http:// or https://"]),
                       ("file:///etc/passwd", ["http:// or https://"]),
                       ("http://user:pw@127.0.0.1:1", ["credentials"]),
                       (f"http://127.0.0.1:{_free_port()}", ["did not answer"])):
        t0 = time.perf_counter()
        assert _cli(tmp_path, url, tokenizer_dir) == 2
        assert time.perf_counter() - t0 < 10
        _one_line(capsys, *words)
    assert cli.main(["measure", "--model", "x", "--task", "conformal", "--base-url",
                     "http://a"]) == 2
    _one_line(capsys, "--base-url applies to --backend openai only")
    assert cli.main(["measure", "--backend", "openai", "--model", "x", "--task",
                     "conformal", "--base-url", "http://a"]) == 2
    _one_line(capsys, "needs --tokenizer")


@pytest.mark.slow  # builds a tokenizer, a fake server, the CLI end to end
def test_key_is_sent_never_written_and_busy_is_retried(tokenizer_dir, tmp_path, capsys,
                                                       monkeypatch):
    key = "sk-test-a1b2c3d4e5f6"
    monkeypatch.setenv("SE_TEST_KEY", key)
    fake = Fake(tokenizer_dir, "busy")
    try:
        assert _cli(tmp_path, fake.url, tokenizer_dir, "--questions", "20", "--api-key-env",
                    "SE_TEST_KEY", "--concurrency", "2") == 0
    finally:
        fake.close()
    out = capsys.readouterr()
    assert key not in out.out + out.err
    assert all(auth == f"Bearer {key}" for *_, auth in fake.seen)
    for f in (tmp_path / "out").rglob("*"):
        assert key.encode() not in f.read_bytes()
    result = json.loads((tmp_path / "out" / "conformal.json").read_text())
    assert result["model"]["served"]["retries"] == 2
    assert result["model"]["backend"] == "ServedModel"
    monkeypatch.delenv("SE_TEST_KEY")
    assert _cli(tmp_path, fake.url, tokenizer_dir, "--api-key-env", "SE_TEST_KEY") == 2
    _one_line(capsys, "SE_TEST_KEY", "not set")


@pytest.mark.slow  # builds a tokenizer and starts a fake server in a thread, through the CLI
def test_a_killed_run_resumes_from_its_log_and_a_rerun_sends_nothing(tokenizer_dir, tmp_path,
                                                                     capsys):
    fake = Fake(tokenizer_dir)
    log = tmp_path / "out" / "conformal.requests.jsonl"

    def run():
        before = sum(1 for m, *_ in fake.seen if m == "POST")
        assert _cli(tmp_path, fake.url, tokenizer_dir, "--questions", "20") == 0
        sent = sum(1 for m, *_ in fake.seen if m == "POST") - before
        return sent, json.loads((tmp_path / "out" / "conformal.json").read_text())

    try:
        sent, first = run()
        lines = log.read_bytes().split(b"\n")
        assert lines[-1] == b"" and len(lines) - 1 == sent - 1  # every request but the probe
        again, second = run()  # a finished run: only the probe is sent
        assert again == 1 and second["model"]["served"]["requests_from_log"] == sent - 1
        def measured(r):
            return {k: v for k, v in r.items() if k not in ("model", "seconds")}

        assert measured(second) == measured(first)
        # killed while writing its fifth line: four entries and a cut one are left
        log.write_bytes(b"\n".join(lines[:4]) + b"\n" + lines[4][:17])
        resumed, third = run()
        assert resumed == 1 + (sent - 1 - 4)  # the probe and what the log did not hold
        assert measured(third) == measured(first)
        assert len(log.read_bytes().split(b"\n")) - 1 == sent - 1
        # a malformed line anywhere else is an error, before any request but the checks
        log.write_bytes(lines[0] + b"\nnot json\n" + b"\n".join(lines[1:]))
        capsys.readouterr()
        assert _cli(tmp_path, fake.url, tokenizer_dir, "--questions", "20") == 2
        _one_line(capsys, "malformed line 2")
    finally:
        fake.close()


def test_topk_rows_are_exact_with_every_entry_and_name_the_rest():
    rng = np.random.default_rng(0)
    z = rng.normal(size=(5, 12))
    lp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    labels = rng.integers(0, 12, size=5)
    every = [list(range(12))] * 5
    rows, left = served.topk_rows(every, list(lp), labels, lp[np.arange(5), labels], 12)
    assert np.abs(rows - lp).max() < 1e-12 and np.all(left < 1e-12)
    top = np.argsort(-lp, axis=1)[:, :3]
    rows, left = served.topk_rows(list(top), [lp[r, top[r]] for r in range(5)], labels,
                                  lp[np.arange(5), labels], 12)
    assert np.allclose(np.exp(rows).sum(axis=1), 1)
    assert np.array_equal(rows.argmax(axis=1), lp.argmax(axis=1))
    assert np.allclose(rows[np.arange(5), labels], lp[np.arange(5), labels])
    assert np.allclose(rows.max(axis=1), lp.max(axis=1))
    assert np.all(left > 0)


# ---- llama-cpp-python's server, on the same weights as the in-process model ------------------


REQUIRED = os.environ.get("SERVER_REQUIRED") == "1"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """(base URL, served model name, the HF directory of the same weights); the server is
    stopped after the module."""
    missing = [m for m in ("llama_cpp", "gguf") if importlib.util.find_spec(m) is None]
    if missing:
        reason = (f"{', '.join(missing)} not installed (pip install standarderror[serve])")
        if REQUIRED:
            pytest.fail(f"SERVER_REQUIRED=1 but {reason}")
        pytest.skip(reason)
    script = _make_gguf()
    hf, gguf_path = script.make(tmp_path_factory.mktemp("served"), vocab=SERVED_VOCAB,
                                window=WINDOW)
    with script.serve(gguf_path, n_ctx=WINDOW) as (url, name):
        yield url, name, hf


@pytest.fixture(scope="module")
def pair(server):
    url, name, hf = server
    remote = served.ServedModel(url, name, tokenizer=hf, top_logprobs=SERVED_VOCAB,
                                window=WINDOW)
    yield interface.HFModel(hf, device="cpu"), remote
    remote.close()


@pytest.mark.slow  # starts llama-cpp-python's server on a GGUF written here
def test_served_window_rows_agree_with_in_process(pair):
    local, remote = pair
    ids = local.encode(tiny.split("test")[:20_000])
    x, y = next(tiny.windows(ids, 1, 4, 0, block=32))
    a = local.labelled_window_logprobs(x, y)
    b = remote.labelled_window_logprobs(x, y)
    rows = np.arange(y.size)
    la = a.reshape(-1, SERVED_VOCAB)[rows, y.reshape(-1)]
    lb = b.reshape(-1, SERVED_VOCAB)[rows, y.reshape(-1)]
    assert np.abs(la - lb).max() < 1e-4                     # every label's log-probability
    attributed = np.array(sorted(remote._id_of.values()))
    assert np.abs(a[..., attributed] - b[..., attributed]).max() < 1e-4


def _printed(result):
    return [(f"{r['accuracy']:.4f}", f"{r['nll']:.4f}", f"{r['ece']:.4f}")
            for r in result["table"]]


@pytest.mark.slow  # starts llama-cpp-python's server on a GGUF written here
def test_served_calibration_equals_in_process_at_printed_precision(pair):
    local, remote = pair
    kw = dict(count=2, size=4, block=32, draws=20, progress=False)
    a, b = measure.calibration(local, **kw), measure.calibration(remote, **kw)
    # the label's log-probability is exact: the NLL at T = 1 and bits per byte
    t1a = next(r for r in a["table"] if r["temperature"] == 1.0)
    t1b = next(r for r in b["table"] if r["temperature"] == 1.0)
    assert f"{t1a['nll']:.4f}" == f"{t1b['nll']:.4f}"
    assert f"{a['per_byte']['bits_per_byte']:.4f}" == f"{b['per_byte']['bits_per_byte']:.4f}"
    # the server names tokens by their text: the bytes that are not text alone share one
    # key, so their mass joins the rest of the row; the same view of the in-process rows
    # gives the whole table at printed precision
    eot = local.tokenizer.convert_tokens_to_ids("<|endoftext|>")
    assert eot in remote.unnamed and len(remote.unnamed) >= 129  # and the 128 bytes >= 0x80
    c = measure.calibration(served.TopK(local, SERVED_VOCAB, drop=remote.unnamed), **kw)
    assert _printed(c) == _printed(b)
    assert f"{c['fitted']['temperature']:.3f}" == f"{b['fitted']['temperature']:.3f}"
    s = b["model"]["served"]
    assert s["top_logprobs"] == SERVED_VOCAB and s["approximations"]["rows"] >= b["rows"]


@pytest.mark.slow  # starts llama-cpp-python's server on a GGUF written here
def test_served_conformal_sets_equal_in_process(pair):
    local, remote = pair
    a = measure.conformal(local, count=60, draws=20, progress=False)
    b = measure.conformal(remote, count=60, draws=20, progress=False)
    assert np.abs(a["logits"] - b["logits"]).max() < 1e-4
    assert a["sizes"] == b["sizes"]
    assert a["accuracy"] == b["accuracy"]
    for s in ("lac", "aps"):
        assert f"{a[s]['coverage']:.3f}" == f"{b[s]['coverage']:.3f}"


@pytest.mark.slow  # starts llama-cpp-python's server on a GGUF written here
def test_served_samples_are_seeded_and_cut_by_the_stop_rule(pair):
    _, remote = pair
    qs = ["To be, or not to be, that is the", "My lord, I"]
    r1 = remote.sample(qs, 4, temperature=1.0, max_tokens=8, seed=3, greedy=True)
    r2 = remote.sample(qs, 4, temperature=1.0, max_tokens=8, seed=3, greedy=True)
    assert r1 == r2 and len(r1["answers"]) == 2 and all(len(a) == 4 for a in r1["answers"])
    for a in sum(r1["answers"], []) + r1["greedy"]:
        assert re.fullmatch(r"[A-Za-z']*", a) or len(a) == 1, a


@pytest.mark.slow  # starts llama-cpp-python's server; Episode 5's pipeline at a small size
def test_served_spectral_and_cli_end_to_end(server, tmp_path, capsys):
    url, name, hf = server
    assert cli.main(["measure", "--backend", "openai", "--base-url", url, "--model", name,
                     "--tokenizer", str(hf), "--task", "spectral", "--dev", "6", "--test",
                     "8", "--answers", "3", "--max-tokens", "6", "--out",
                     str(tmp_path / "out"), "--no-progress"]) == 0
    r = json.loads((tmp_path / "out" / "spectral.json").read_text())
    assert r["model"]["served"]["base_url"].endswith("/v1")
    assert r["settings"]["answers"] == 3
    assert cli.main(["measure", "--backend", "openai", "--base-url", url, "--model",
                     name + "-not", "--tokenizer", str(hf), "--task", "conformal", "--out",
                     str(tmp_path / "out")]) == 2
    _one_line(capsys, "does not serve")


@pytest.mark.slow  # builds a tokenizer and starts a fake server in a thread
def test_a_server_that_tokenises_otherwise_is_refused(tokenizer_dir):
    fake = Fake(tokenizer_dir, "other_tokenizer")
    try:
        with pytest.raises(served.ServerError, match="tokenises a prompt into"):
            served.ServedModel(fake.url, "fake", tokenizer=tokenizer_dir, window=WINDOW)
    finally:
        fake.close()
