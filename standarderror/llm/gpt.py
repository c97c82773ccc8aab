"""The tiny character-level transformer, in the spirit of nanoGPT's ``model.py``: the model alone.

* :class:`GPT` is a four-block, four-head, width-128, context-64 decoder-only transformer
  (:class:`Config`), its output head tied to the token embedding.
* :func:`log_probabilities` runs the model over a batch of ids; :func:`generate` samples
  continuations with a key/value cache.
* :meth:`GPT.hidden` with ``prefixes`` runs tokens after a prefix's cached keys and values,
  under a mask, so that several continuations of one prefix run in one pass (the
  multiple-choice scorer's six options).

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

    def forward(self, x, cache=None, *, prefix=None, mask=None):
        """Multi-head self-attention over ``x`` (batch x time x width).

        Without ``prefix``: causal attention within ``x``, after the keys and values in
        ``cache`` (a dict, filled with this call's keys and values) when one is given.

        With ``prefix = (k, v)``, keys and values of shape (batch, heads, s, width / heads)
        computed by an earlier pass (a ``cache`` after it): every position of ``x`` attends
        to all ``s`` prefix positions and to the positions of ``x`` that ``mask`` permits
        (a boolean time x time tensor, ``mask[i, j]`` True when position ``i`` may attend
        to position ``j``). Several continuations of one prefix laid end to end in ``x``,
        with a block-diagonal causal ``mask``, are then each computed as if run after the
        prefix alone.
        """
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        if prefix is not None:
            kc, vc = self._checked_prefix(prefix, mask, cache, q)
            scale = 1.0 / np.sqrt(q.shape[-1])
            scores = torch.cat([q @ kc.transpose(-1, -2),
                                (q @ k.transpose(-1, -2)).masked_fill(~mask, float("-inf"))],
                               dim=-1)
            w = torch.softmax(scores * scale, dim=-1)
            s = kc.shape[2]
            y = w[..., :s] @ vc + w[..., s:] @ v
            return self.proj(y.transpose(1, 2).contiguous().view(b, t, c))
        if mask is not None:
            raise ValueError("mask is used only with a prefix; pass prefix=(k, v) as well")
        if cache is not None:  # generation: prepend the keys and values seen so far
            k, v = _extended(cache, k, v)
            if "context" in cache:  # a tree cache (tree_cache): the context apart, ungathered
                y = _tree_attention(q, k, v, cache["context"], cache["layout"])
                return self.proj(y.transpose(1, 2).contiguous().view(b, t, c))
        causal = k.shape[2] == t  # a single new query attends to every cached key
        y = F.scaled_dot_product_attention(q, k, v, is_causal=causal and t > 1)
        return self.proj(y.transpose(1, 2).contiguous().view(b, t, c))

    @staticmethod
    def _checked_prefix(prefix, mask, cache, q):
        """``prefix``'s keys and values, after checking them and ``mask`` against ``q``."""
        if cache is not None:
            raise ValueError("prefix and cache cannot be combined: a prefix pass keeps no cache")
        b, h, t, d = q.shape
        if not (isinstance(prefix, (tuple, list)) and len(prefix) == 2
                and all(isinstance(z, torch.Tensor) for z in prefix)):
            raise ValueError("prefix must be a pair (k, v) of tensors")
        kc, vc = prefix
        if kc.dim() != 4 or kc.shape[:2] != (b, h) or kc.shape[3] != d or kc.shape[2] < 1:
            raise ValueError(f"prefix keys must have shape ({b}, {h}, s, {d}) with s >= 1, "
                             f"got {tuple(kc.shape)}")
        if vc.shape != kc.shape:
            raise ValueError(f"prefix values must have the keys' shape {tuple(kc.shape)}, "
                             f"got {tuple(vc.shape)}")
        if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool \
                or mask.shape != (t, t):
            got = (f"{mask.dtype} {tuple(mask.shape)}" if isinstance(mask, torch.Tensor)
                   else type(mask).__name__)
            raise ValueError(f"mask must be a boolean tensor of shape ({t}, {t}) with a "
                             f"prefix, got {got}")
        return kc, vc


def _extended(cache: dict, k, v):
    """``cache``'s keys and values followed by ``k`` and ``v`` (time is axis 2), stored back in
    ``cache``: concatenated, or, in a cache from :func:`tree_cache` (``"filled"``), written
    into the positions it left free."""
    if "filled" in cache:
        n, t = cache["filled"], k.shape[2]
        if cache["k"].shape[2] != n + t:
            raise ValueError(f"the gathered cache has room for {cache['k'].shape[2] - n} "
                             f"position(s), not {t}")
        cache["k"][:, :, n:], cache["v"][:, :, n:] = k, v
        del cache["filled"]
    elif "k" in cache:
        cache["k"], cache["v"] = torch.cat([cache["k"], k], dim=2), torch.cat([cache["v"], v], dim=2)
    else:
        cache["k"], cache["v"] = k, v
    return cache["k"], cache["v"]


def tree_layout(group: torch.Tensor, contexts: int, heads: int):
    """Where each row of a tree cache sits, head by head, in a padded grid of ``contexts`` x
    ``heads`` x ``width`` slots (``group[r]``: the context row ``r`` continues; ``width``:
    the most rows of one context): a rows x heads tensor of flat grid indices, and ``width``.
    Computed once per step, shared by the layers."""
    if group.dim() != 1 or (len(group) and (group.min() < 0 or group.max() >= contexts)):
        raise ValueError(f"group must be a 1-D tensor of context indices in [0, {contexts})")
    order = torch.argsort(group, stable=True)
    counts = torch.bincount(group, minlength=contexts)
    starts = torch.cumsum(counts, 0) - counts
    slot = torch.empty_like(group)
    slot[order] = torch.arange(len(group)) - starts[group[order]]
    width = max(int(counts.max()), 1) if len(group) else 1
    where = (group * heads)[:, None] * width + torch.arange(heads) * width + slot[:, None]
    return where.reshape(-1), width


def tree_cache(cache: dict, parent: torch.Tensor, group: torch.Tensor, layout) -> dict:
    """A cache for rows that continue contexts, without copying the contexts' keys and values.

    ``cache`` is either the cache of a pass over the contexts (one row per context) or a tree
    cache returned here; ``parent`` gives each new row's row in it (rows may repeat),
    ``group`` the context each new row continues, and ``layout`` :func:`tree_layout` of
    ``group``. The contexts' keys and values are kept as they are; only the positions after
    the context are gathered, into a buffer with one free position that the next pass (one
    token) fills. :meth:`SelfAttention.forward` then attends to the context and to the row's
    own positions (:func:`_tree_attention`): the attention of the concatenated cache, in
    another order of summation.
    """
    if "context" in cache:
        context, k_rows, v_rows = cache["context"], cache["k"], cache["v"]
    else:  # stored once per tree as the batched products read them: the keys transposed
        # (contexts x heads x d x s), the values contiguous (a pass leaves them a view of its
        # qkv product; a product with a view copies it at every step and layer)
        context = (cache["k"].transpose(-1, -2).contiguous(), cache["v"].contiguous())
        k_rows = v_rows = cache["k"][:, :, :0]
    n = k_rows.shape[2]
    out = {"context": context, "layout": layout, "filled": n}
    for name, rows in (("k", k_rows), ("v", v_rows)):
        _, h, _, d = rows.shape
        buf = rows.new_empty(len(parent), h, n + 1, d)
        torch.index_select(rows, 0, parent, out=buf[:, :, :n])
        out[name] = buf
    return out


def _tree_attention(q, k, v, context, layout):
    """One query per row (``q``: rows x heads x 1 x d) attending to its context's keys and
    values (``context``: the keys transposed, contexts x heads x d x s, and the values,
    contexts x heads x s x d; the row's context given by ``layout``)
    and to its own keys and values ``k``, ``v`` (rows x heads x n x d): one softmax over the
    s + n scores. The context's keys meet the queries in a padded grid (:func:`tree_layout`),
    so they are never copied row by row."""
    kc, vc = context
    where, width = layout
    r, h, t, d = q.shape
    if t != 1:
        raise ValueError(f"a tree cache takes one token per row, got {t}")
    g, s = kc.shape[0], kc.shape[3]

    def grid(rows):  # rows x h x f -> contexts x h x width x f, zeros in the empty slots
        out = rows.new_zeros(g * h * width, rows.shape[-1])
        out[where] = rows.reshape(r * h, -1)
        return out.view(g, h, width, -1)

    def ungrid(cells):  # contexts x h x width x f -> rows x h x f
        return cells.reshape(g * h * width, -1)[where].view(r, h, -1)

    q = q[:, :, 0] / math.sqrt(d)
    scores = torch.cat([ungrid(grid(q) @ kc),
                        (q[:, :, None] * k).sum(-1)], dim=-1)
    w = torch.softmax(scores, dim=-1)
    y = ungrid(grid(w[..., :s]) @ vc) + (w[..., s:, None] * v).sum(2)
    return y[:, :, None]


class Block(nn.Module):
    def __init__(self, cfg: Config):
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.width)
        self.attn = SelfAttention(cfg)
        self.ln2 = nn.LayerNorm(cfg.width)
        self.mlp = nn.Sequential(
            nn.Linear(cfg.width, 4 * cfg.width), nn.GELU(), nn.Linear(4 * cfg.width, cfg.width)
        )

    def forward(self, x, cache=None, *, prefix=None, mask=None):
        """The pre-norm residual block; ``cache``, ``prefix`` and ``mask`` go to the
        attention (:meth:`SelfAttention.forward`)."""
        x = x + self.attn(self.ln1(x), cache, prefix=prefix, mask=mask)
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
        return self.head(self.hidden(idx, caches, start))

    def hidden(self, idx, caches=None, start=0, *, prefixes=None, positions=None, mask=None):
        """The last block's output (batch x time x width, before the final layer norm) for
        every position of ``idx``; :meth:`head` turns it into logits.

        ``caches`` and ``start`` are :meth:`forward`'s. A pass after a prefix: ``prefixes``
        holds one ``(k, v)`` pair per block (``(c["k"], c["v"])`` of each cache a pass over
        the prefix filled), ``positions`` the position of each token of ``idx`` (a 1-D
        integer tensor, in place of ``start``), and ``mask`` which tokens of ``idx`` each
        token attends to besides the prefix (see :meth:`SelfAttention.forward`).
        """
        t = idx.shape[1]
        if prefixes is None:
            if positions is not None or mask is not None:
                raise ValueError("positions and mask are used only with prefixes")
            if start + t > self.cfg.block:
                raise ValueError(f"sequence of {start + t} exceeds the context of "
                                 f"{self.cfg.block}")
            positions = torch.arange(start, start + t, device=idx.device)
            prefixes = [None] * len(self.blocks)
        else:
            if caches is not None or start != 0:
                raise ValueError("prefixes cannot be combined with caches or start; give "
                                 "positions instead")
            if len(prefixes) != len(self.blocks) or any(p is None for p in prefixes):
                raise ValueError(f"prefixes must hold one (k, v) pair per block "
                                 f"({len(self.blocks)}), got {len(prefixes)}")
            if not isinstance(positions, torch.Tensor) or positions.shape != (t,) \
                    or positions.dtype not in (torch.int64, torch.int32):
                raise ValueError(f"positions must be a 1-D integer tensor of length {t} "
                                 "with prefixes")
            if positions.min() < 0 or positions.max() >= self.cfg.block:
                raise ValueError(f"positions must lie in [0, {self.cfg.block}), got "
                                 f"{int(positions.min())} to {int(positions.max())}")
        x = self.tok(idx) + self.pos(positions)
        for i, block in enumerate(self.blocks):
            x = block(x, None if caches is None else caches[i], prefix=prefixes[i], mask=mask)
        return x

    def head(self, h):
        """Logits from :meth:`hidden`'s output: the final layer norm, then the output head
        (tied to the token embedding)."""
        return self.ln(h) @ self.tok.weight.T


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
