"""Write a small Llama-style model made here as a float32 GGUF file, for llama.cpp's server.

    .venv/bin/python scripts/make_gguf.py OUT_DIR [--vocab 384] [--window 128] [--seed 0]

The model is :func:`standarderror.llm.export.random_llama` (a randomly initialised
``LlamaForCausalLM`` with a byte-level BPE tokenizer trained on our validation plays, saved as
a ``transformers`` directory in ``OUT_DIR/hf``); :func:`write_gguf` converts that directory
to ``OUT_DIR/model.gguf`` with the ``gguf`` package (``pip install standarderror[serve]``).
The same weights then run in-process (``interface.HFModel(OUT_DIR/hf)``) and behind
``python -m llama_cpp.server --model OUT_DIR/model.gguf``, and the two paths can be compared.

What the file must hold for llama.cpp to compute what transformers computes:

* every tensor in float32 (file type ``ALL_F32``), named as llama.cpp's own converter names
  them (``token_embd``, ``blk.N.attn_q``, ..., ``output``);
* the query and key projections permuted from transformers' rotary layout (halves) to
  llama.cpp's (interleaved pairs): ``w.reshape(heads, 2, dim // heads // 2, in)
  .swapaxes(1, 2)``, with the key-value heads for the keys;
* the tokenizer as ``tokenizer.ggml.model = "gpt2"`` (byte-level BPE: the tokens in id
  order, their types, the merges) with ``tokenizer.ggml.pre = "gpt-2"`` (GPT-2's
  pre-tokenizer, which ``export.byte_bpe`` uses), and ``add_bos_token`` true when the
  config names a BOS token.

llama-cpp-python's echoed log-probabilities are aligned only when the server puts a BOS
token before the prompt: without one, each prompt token is scored by the distribution that
predicts the next one. :func:`make` therefore gives the random Llama's tokenizer a BOS
token (its ``<|endoftext|>``, put before every text it encodes with special tokens, as the
server does), and ``HFModel`` puts the same token before every window.

Only this architecture and this tokenizer family are written; anything else is refused.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from pathlib import Path

import numpy as np


def _permute(w: np.ndarray, heads: int) -> np.ndarray:
    """transformers' rotary layout (two halves per head) to llama.cpp's (interleaved pairs)."""
    return (w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:])
            .swapaxes(1, 2).reshape(w.shape))


def write_gguf(hf_dir, path) -> Path:
    """Convert a ``LlamaForCausalLM`` directory with a byte-level BPE ``tokenizer.json`` into
    a float32 GGUF file at ``path``; returns the path."""
    import gguf
    from safetensors.numpy import load_file

    hf_dir, path = Path(hf_dir), Path(path)
    cfg = json.loads((hf_dir / "config.json").read_text(encoding="utf-8"))
    if cfg.get("model_type") != "llama":
        raise ValueError(f"{hf_dir}: model_type {cfg.get('model_type')!r}; only 'llama' is written")
    tj = json.loads((hf_dir / "tokenizer.json").read_text(encoding="utf-8"))
    if tj["model"]["type"] != "BPE" or tj.get("decoder", {}).get("type") != "ByteLevel":
        raise ValueError(f"{hf_dir}: only a byte-level BPE tokenizer is written")
    vocab = tj["model"]["vocab"]
    added = {t["id"]: t for t in tj.get("added_tokens", [])}
    n_vocab = int(cfg["vocab_size"])
    ids = {**vocab, **{t["content"]: i for i, t in added.items()}}
    by_id = {i: s for s, i in ids.items()}
    if sorted(by_id) != list(range(n_vocab)):
        raise ValueError(f"{hf_dir}: the tokenizer's ids are not 0..{n_vocab - 1}")
    tokens = [by_id[i] for i in range(n_vocab)]
    types = [gguf.TokenType.CONTROL if i in added and added[i].get("special")
             else gguf.TokenType.NORMAL for i in range(n_vocab)]
    merges = [m if isinstance(m, str) else " ".join(m) for m in tj["model"]["merges"]]

    heads, hidden = int(cfg["num_attention_heads"]), int(cfg["hidden_size"])
    kv_heads = int(cfg.get("num_key_value_heads") or heads)
    layers = int(cfg["num_hidden_layers"])
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_name(hf_dir.name)
    w.add_context_length(int(cfg["max_position_embeddings"]))
    w.add_embedding_length(hidden)
    w.add_block_count(layers)
    w.add_feed_forward_length(int(cfg["intermediate_size"]))
    w.add_rope_dimension_count(hidden // heads)
    w.add_head_count(heads)
    w.add_head_count_kv(kv_heads)
    w.add_layer_norm_rms_eps(float(cfg["rms_norm_eps"]))
    w.add_rope_freq_base(float((cfg.get("rope_parameters") or {}).get("rope_theta")
                               or cfg.get("rope_theta") or 10000.0))
    w.add_vocab_size(n_vocab)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("gpt-2")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    eos = cfg.get("eos_token_id")
    bos = cfg.get("bos_token_id")
    if eos is not None:
        w.add_eos_token_id(int(eos))
    w.add_bos_token_id(int(bos if bos is not None else eos))
    w.add_add_bos_token(bos is not None)

    st = {}
    for f in sorted(hf_dir.glob("*.safetensors")):
        st.update(load_file(str(f)))
    names = {"model.embed_tokens.weight": "token_embd.weight",
             "model.norm.weight": "output_norm.weight", "lm_head.weight": "output.weight"}
    per_layer = {"input_layernorm": "attn_norm", "self_attn.q_proj": "attn_q",
                 "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
                 "self_attn.o_proj": "attn_output", "post_attention_layernorm": "ffn_norm",
                 "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
                 "mlp.down_proj": "ffn_down"}
    for i in range(layers):
        for a, b in per_layer.items():
            names[f"model.layers.{i}.{a}.weight"] = f"blk.{i}.{b}.weight"
    if "lm_head.weight" not in st:  # tied embeddings
        st["lm_head.weight"] = st["model.embed_tokens.weight"]
    unknown = sorted(set(st) - set(names))
    if unknown:
        raise ValueError(f"{hf_dir}: tensors this writer does not know: {unknown[:3]}")
    for src, dst in names.items():
        t = np.ascontiguousarray(st[src], dtype=np.float32)
        if src.endswith("q_proj.weight"):
            t = _permute(t, heads)
        elif src.endswith("k_proj.weight"):
            t = _permute(t, kv_heads)
        w.add_tensor(dst, np.ascontiguousarray(t))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def make(out, *, vocab: int = 384, window: int = 128, seed: int = 0) -> tuple[Path, Path]:
    """The tests' random Llama in ``out/hf`` and its GGUF in ``out/model.gguf``."""
    from standarderror.llm import export, tiny

    out = Path(out)
    hf = export.random_llama(out / "hf", vocab_size=vocab, text=tiny.split("val"),
                             window=window, seed=seed)
    with_bos(hf)
    return hf, write_gguf(hf, out / "model.gguf")


def with_bos(hf_dir, token: str = "<|endoftext|>") -> None:
    """Make ``token`` the BOS token of a saved model: the tokenizer puts it before every
    text encoded with special tokens, and the config names it."""
    from tokenizers import Tokenizer, processors

    hf_dir = Path(hf_dir)
    tok = Tokenizer.from_file(str(hf_dir / "tokenizer.json"))
    bos = tok.token_to_id(token)
    if bos is None:
        raise ValueError(f"{hf_dir}: the tokenizer has no token {token!r}")
    tok.post_processor = processors.TemplateProcessing(
        single=f"{token} $A", pair=f"{token} $A {token} $B", special_tokens=[(token, bos)])
    tok.save(str(hf_dir / "tokenizer.json"))
    for name, key, value in (("tokenizer_config.json", "bos_token", token),
                             ("config.json", "bos_token_id", bos)):
        d = json.loads((hf_dir / name).read_text(encoding="utf-8"))
        d[key] = value
        (hf_dir / name).write_text(json.dumps(d, indent=2), encoding="utf-8")


def free_port() -> int:
    """A TCP port free on localhost now."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serve(gguf_path, *, n_ctx: int, threads: int = 2, wait: float = 120.0):
    """Start ``python -m llama_cpp.server`` on ``gguf_path`` at a free localhost port with a
    float32 key-value cache (``--type_k 0 --type_v 0``: the default float16 cache moves
    log-probabilities by up to 0.0134 nats), yield ``(base_url, model_name)`` once
    ``/v1/models`` answers, and stop the server after."""
    import subprocess
    import time
    import urllib.request

    gguf_path = Path(gguf_path)
    port = free_port()
    log_path = gguf_path.with_suffix(".server.log")
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf_path), "--host",
             "127.0.0.1", "--port", str(port), "--n_ctx", str(n_ctx), "--type_k", "0",
             "--type_v", "0", "--n_threads", str(threads)],
            stdout=log, stderr=subprocess.STDOUT)
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + wait
            while True:
                try:
                    with urllib.request.urlopen(url + "/v1/models", timeout=2) as r:
                        name = json.loads(r.read())["data"][0]["id"]
                    break
                except OSError:
                    if proc.poll() is not None or time.monotonic() > deadline:
                        log.flush()
                        raise RuntimeError("llama_cpp.server did not start: "
                                           + log_path.read_text(errors="replace")[-2000:]
                                           ) from None
                    time.sleep(0.5)
            yield url, name
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", help="directory for hf/ and model.gguf")
    ap.add_argument("--vocab", type=int, default=384, help="BPE vocabulary (default 384)")
    ap.add_argument("--window", type=int, default=128, help="context window (default 128)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    hf, path = make(args.out, vocab=args.vocab, window=args.window, seed=args.seed)
    print(f"wrote {hf} and {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
