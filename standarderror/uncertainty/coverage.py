"""Held-out predictions of the committed model, and coverage (split conformal) utilities."""

from __future__ import annotations

import numpy as np

from standarderror.llm import tiny


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
    m = model if model is not None else tiny.load(step)
    net = m["model"]
    logps, ys = [], []
    for x, y in tiny.batches(split, count, size, seed, block=net.cfg.block, stoi=m["stoi"]):
        logps.append(tiny.log_probabilities(net, x))
        ys.append(y.numpy())
    logp = np.concatenate(logps).reshape(-1, m["vocab"])
    y = np.concatenate(ys).reshape(-1)
    n_seq, block = count * size, net.cfg.block
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
