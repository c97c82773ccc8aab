"""The tiny character-level transformer, in the spirit of nanoGPT's ``model.py``: the model alone.

* :class:`GPT` is a four-block, four-head, width-128, context-64 decoder-only transformer
  (:class:`Config`), its output head tied to the token embedding.
* :func:`log_probabilities` runs the model over a batch of ids; :func:`generate` samples
  continuations with a key/value cache.

The committed weights are loaded, hash-verified, by :func:`standarderror.llm.weights.load`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

# --------------------------------------------------------------------------------------
# The model
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Config:
    vocab: int
    block: int = 64
    layers: int = 4
    heads: int = 4
    width: int = 128


class SelfAttention(nn.Module):
    def __init__(self, cfg: Config):
        super().__init__()
        self.heads = cfg.heads
        self.qkv = nn.Linear(cfg.width, 3 * cfg.width)
        self.proj = nn.Linear(cfg.width, cfg.width)

    def forward(self, x, cache=None):
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        if cache is not None:  # generation: prepend the keys and values seen so far
            if "k" in cache:
                k = torch.cat([cache["k"], k], dim=2)
                v = torch.cat([cache["v"], v], dim=2)
            cache["k"], cache["v"] = k, v
        causal = k.shape[2] == t  # a single new query attends to every cached key
        y = F.scaled_dot_product_attention(q, k, v, is_causal=causal and t > 1)
        return self.proj(y.transpose(1, 2).contiguous().view(b, t, c))


class Block(nn.Module):
    def __init__(self, cfg: Config):
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.width)
        self.attn = SelfAttention(cfg)
        self.ln2 = nn.LayerNorm(cfg.width)
        self.mlp = nn.Sequential(
            nn.Linear(cfg.width, 4 * cfg.width), nn.GELU(), nn.Linear(4 * cfg.width, cfg.width)
        )

    def forward(self, x, cache=None):
        x = x + self.attn(self.ln1(x), cache)
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    """A character-level decoder-only transformer (token + position embedding, pre-norm blocks,
    output head tied to the token embedding)."""

    def __init__(self, cfg: Config, *, init: bool = True):
        """``init=False`` leaves the weights as allocated (no random draw): for a model whose
        weights are loaded next, or one built on the meta device for its shapes."""
        super().__init__()
        self.cfg = cfg

        def embedding(rows):  # given a weight, nn.Embedding does not initialise one
            return nn.Embedding(rows, cfg.width, _weight=None if init else
                                torch.empty(rows, cfg.width))

        self.tok = embedding(cfg.vocab)
        self.pos = embedding(cfg.block)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.layers))
        self.ln = nn.LayerNorm(cfg.width)
        if init:
            self.apply(self._init)

    @staticmethod
    def _init(m):
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, mean=0.0, std=0.02)
        if isinstance(m, nn.Linear) and m.bias is not None:
            nn.init.zeros_(m.bias)

    def forward(self, idx, caches=None, start=0):
        """Logits for every position of ``idx`` (batch x time); ``caches`` is used by
        :func:`generate`, with ``start`` the position of ``idx[:, 0]``."""
        t = idx.shape[1]
        if start + t > self.cfg.block:
            raise ValueError(f"sequence of {start + t} exceeds the context of {self.cfg.block}")
        x = self.tok(idx) + self.pos(torch.arange(start, start + t, device=idx.device))
        for i, block in enumerate(self.blocks):
            x = block(x, None if caches is None else caches[i])
        return self.ln(x) @ self.tok.weight.T


def parameter_count(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


# --------------------------------------------------------------------------------------
# Inference
# --------------------------------------------------------------------------------------


@torch.inference_mode()
def log_probabilities(model: GPT, x: torch.Tensor) -> np.ndarray:
    """Float64 log-probabilities (batch x time x vocab) for every position of ``x``."""
    logits = model(x).double()
    return torch.log_softmax(logits, dim=-1).numpy()


@torch.inference_mode()
def generate(model: GPT, context: torch.Tensor, steps: int, *, temperature: float = 1.0,
             generator: torch.Generator | None = None) -> torch.Tensor:
    """Sample ``steps`` characters after ``context`` (batch x time), with a key/value cache.

    ``temperature`` divides the logits; ``temperature=0`` takes the argmax. The context plus
    the continuation must fit in the model's 64-character window.
    """
    if temperature < 0 or not math.isfinite(temperature):
        raise ValueError(f"temperature must be >= 0 and finite, got {temperature}")
    caches = [dict() for _ in model.blocks]
    logits = model(context, caches, 0)[:, -1]
    pos = context.shape[1]
    out = []
    for i in range(steps):
        if temperature == 0:
            nxt = logits.argmax(-1, keepdim=True)
        else:
            probs = torch.softmax(logits.double() / temperature, dim=-1)
            nxt = torch.multinomial(probs, 1, generator=generator)
        out.append(nxt)
        if i + 1 < steps:
            logits = model(nxt, caches, pos)[:, -1]
            pos += 1
    return torch.cat(out, dim=1)
