"""Export the committed tiny model to the ``transformers`` GPT-2 format.

Our model is a GPT-2 in all but names: pre-LayerNorm blocks, learned positions, biases
everywhere, exact (erf) GELU, a four-times-wide MLP and an output head tied to the token
embedding. :func:`to_gpt2` writes it as a ``GPT2LMHeadModel`` directory (``config.json``,
``model.safetensors``) with a character-level tokenizer (``tokenizer.json``: every character
of the vocabulary is one token, with the model's ids; no merges, no special tokens), so that
``AutoModelForCausalLM.from_pretrained(directory)`` and ``AutoTokenizer.from_pretrained
(directory)`` load it offline. The tests check that it reproduces the native log-probabilities.

The only change of layout is that GPT-2's ``Conv1D`` stores its weights as (in, out): our
``nn.Linear`` weights are transposed.
"""

from __future__ import annotations

import json
from pathlib import Path


def _state(net) -> dict:
    sd = {k: v.detach().float().contiguous() for k, v in net.state_dict().items()}
    out = {"transformer.wte.weight": sd["tok.weight"], "transformer.wpe.weight": sd["pos.weight"],
           "transformer.ln_f.weight": sd["ln.weight"], "transformer.ln_f.bias": sd["ln.bias"]}
    for i in range(len(net.blocks)):
        a, b = f"blocks.{i}.", f"transformer.h.{i}."
        out.update({
            b + "ln_1.weight": sd[a + "ln1.weight"], b + "ln_1.bias": sd[a + "ln1.bias"],
            b + "ln_2.weight": sd[a + "ln2.weight"], b + "ln_2.bias": sd[a + "ln2.bias"],
            b + "attn.c_attn.weight": sd[a + "attn.qkv.weight"].T.contiguous(),
            b + "attn.c_attn.bias": sd[a + "attn.qkv.bias"],
            b + "attn.c_proj.weight": sd[a + "attn.proj.weight"].T.contiguous(),
            b + "attn.c_proj.bias": sd[a + "attn.proj.bias"],
            b + "mlp.c_fc.weight": sd[a + "mlp.0.weight"].T.contiguous(),
            b + "mlp.c_fc.bias": sd[a + "mlp.0.bias"],
            b + "mlp.c_proj.weight": sd[a + "mlp.2.weight"].T.contiguous(),
            b + "mlp.c_proj.bias": sd[a + "mlp.2.bias"],
        })
    return out


def character_tokenizer(chars: list[str]):
    """A ``tokenizers.Tokenizer`` with one token per character of ``chars`` (ids in order):
    every character is split off by the pre-tokenizer and looked up; characters outside
    ``chars`` become ``<unk>`` (id ``len(chars)``, outside the model's vocabulary: the model
    never predicts it), so that :meth:`standarderror.llm.interface.hf.HFModel.check_text` refuses
    such text and names the characters before the model sees it."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers

    vocab = {c: i for i, c in enumerate(chars)}
    vocab["<unk>"] = len(chars)
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    tok.decoder = decoders.Fuse()
    return tok


def to_gpt2(directory, *, step: int | None = None, loaded: dict | None = None) -> Path:
    """Write the tiny model (final checkpoint, or ``step``) as a GPT-2 directory.

    Returns the directory. The model card's checkpoint hash and step go into
    ``standarderror.json`` beside the weights.
    """
    from safetensors.torch import save
    from transformers import GPT2Config, PreTrainedTokenizerFast

    from standarderror.llm import tiny

    m = loaded if loaded is not None else tiny.load(step)
    net, chars = m["model"], m["chars"]
    cfg = net.cfg
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    config = GPT2Config(
        vocab_size=len(chars), n_positions=cfg.block, n_embd=cfg.width, n_layer=cfg.layers,
        n_head=cfg.heads, n_inner=4 * cfg.width, activation_function="gelu",
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, layer_norm_epsilon=1e-5,
        tie_word_embeddings=True, bos_token_id=None, eos_token_id=None, pad_token_id=None,
        architectures=["GPT2LMHeadModel"])
    config.save_pretrained(out)
    state = _state(net)
    # written by Python's open(), so the file gets the user's umask as the configs do
    (out / "model.safetensors").write_bytes(save(state, metadata={"format": "pt"}))
    fast = PreTrainedTokenizerFast(tokenizer_object=character_tokenizer(chars),
                                   unk_token="<unk>", model_max_length=cfg.block)
    fast.save_pretrained(out)
    (out / "standarderror.json").write_text(json.dumps(
        {"source": "standarderror.llm.tiny", "step": m["step"], "sha256": m["sha256"],
         "vocabulary": len(chars)}, indent=1))
    return out


def byte_bpe(text: str, vocab_size: int = 4096):
    """A byte-level BPE tokenizer (GPT-2's pre-tokenizer and byte alphabet, so any text is
    covered) trained here on ``text`` with the ``tokenizers`` library."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(text.splitlines(keepends=True), trainer=trainer)
    return tok


def random_llama(directory, *, vocab_size: int = 4096, hidden: int = 64, layers: int = 2,
                 heads: int = 4, window: int = 256, seed: int = 0, text: str | None = None) -> Path:
    """A randomly initialised Llama-style model (from a config; nothing downloaded) with a
    byte-level BPE tokenizer trained on ``text`` (default: our training plays), saved as a
    ``transformers`` directory. A stand-in for "your model" in tests and cost measurements:
    its answers are noise, but every code path (subword tokens, multi-token options and
    answers, a BOS-free byte-level tokenizer, RMSNorm, rotary positions) is a real one."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    from standarderror.llm import tiny

    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    tok = byte_bpe(text if text is not None else tiny.split("train"), vocab_size)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>",
                                   model_max_length=window)
    fast.save_pretrained(out)
    cfg = LlamaConfig(vocab_size=tok.get_vocab_size(), hidden_size=hidden,
                      intermediate_size=4 * hidden, num_hidden_layers=layers,
                      num_attention_heads=heads, num_key_value_heads=heads,
                      max_position_embeddings=window, tie_word_embeddings=False,
                      bos_token_id=None, eos_token_id=tok.token_to_id("<|endoftext|>"))
    torch.manual_seed(seed)
    model = LlamaForCausalLM(cfg).eval()
    model.save_pretrained(out)
    return out
