"""Held-out next-token predictions: the arrays every calibration and coverage lecture measures.

:func:`predictions` is the seed's ``cv.predictions`` (re-exported by
:mod:`standarderror.uncertainty.coverage` under that name): the committed model's
log-probabilities on held-out windows, run through :class:`~standarderror.llm.interface.TinyLM`.

:func:`windows` draws the same windows from any token sequence, so the same held-out text can
be put to any model of the interface (:func:`standarderror.experiments.measure.calibration` streams
them in blocks and never holds a predictions x vocabulary array).
"""

from __future__ import annotations

import numpy as np


def windows(ids, count: int, size: int, seed: int, *, block: int):
    """Yield ``count`` batches of ``size`` non-overlapping windows of a token sequence.

    The rule of :func:`standarderror.llm.tiny.batches`, on token ids: the sequence is cut
    into ``block + 1``-token slots, ``count * size`` slots are drawn without replacement by
    ``numpy.random.default_rng(seed).permutation``, and each yields ``(x, y)``, int64 arrays
    of shape ``(size, block)`` with ``y`` the next token of ``x``. On a character tokenizer
    whose ids are the model's, the windows are exactly ``tiny.batches``'s.
    """
    for name, value in (("count", count), ("size", size), ("block", block)):
        if not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")
    data = np.asarray(ids, dtype=np.int64)
    slots = (len(data) - 1) // (block + 1)
    need = count * size
    if need > slots:
        raise ValueError(f"count * size = {need} windows of {block + 1} tokens exceed the "
                         f"{slots} the text holds; lower count, size or block")
    starts = np.random.default_rng(seed).permutation(slots)[:need] * (block + 1)
    offsets = np.arange(block + 1)
    for b in range(count):
        rows = data[starts[b * size:(b + 1) * size, None] + offsets]
        yield rows[:, :-1].copy(), rows[:, 1:].copy()


def predictions(count: int = 24, size: int = 16, seed: int = 1, *, split: str = "test",
                step: int | None = None, model: dict | None = None) -> dict:
    """Next-character predictions of the committed model on held-out windows.

    ``count`` batches of ``size`` non-overlapping 64-character windows are drawn from the
    held-out ``split`` (see :func:`standarderror.llm.tiny.batches`); every position of every
    window is one prediction.

    Returns
    -------
    dict
        ``p`` (rows x V float64 probabilities), ``logp`` (their logarithms, computed in log
        space), ``y`` (rows, the true next character), ``sequence`` (rows, the window each
        prediction belongs to: predictions in one window share context and are not
        independent), ``position`` (rows, 0..63), ``chars``, ``step`` and ``sha256`` of the
        checkpoint used.
    """
    from standarderror.llm import tiny  # here, so array-only users (scripts) never import torch
    from standarderror.llm.interface import TinyLM

    lm = TinyLM(model, step=step)
    m = lm.loaded
    logps, ys = [], []
    for x, y in tiny.batches(split, count, size, seed, block=lm.window, stoi=m["stoi"]):
        logps.append(lm.window_logprobs(x))
        ys.append(y.numpy())
    logp = np.concatenate(logps).reshape(-1, m["vocab"])
    y = np.concatenate(ys).reshape(-1)
    n_seq, block = count * size, lm.window
    return {
        "p": np.exp(logp),
        "logp": logp,
        "y": y,
        "sequence": np.repeat(np.arange(n_seq), block),
        "position": np.tile(np.arange(block), n_seq),
        "chars": m["chars"],
        "step": m["step"],
        "sha256": m["sha256"],
    }
