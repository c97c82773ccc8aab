"""Held-out next-token predictions: the arrays every calibration and coverage lecture measures.

:func:`predictions` is the committed model's log-probabilities on held-out windows, run
through :class:`~standarderror.llm.interface.tiny_lm.TinyLM`; the lectures pass them to the
metrics over arrays (``uncertainty``), which never import this layer.

The windows are :func:`standarderror.llm.windows.windows`, which draws them from any token
sequence, so the same held-out text can be put to any model of the interface
(:func:`standarderror.experiments.measure.calibration` streams them in blocks and never holds
a predictions x vocabulary array).
"""

from __future__ import annotations

import dataclasses

import numpy as np


def predictions(count: int = 24, size: int = 16, seed: int = 1, *, split: str = "test",
                step: int | None = None, model: dict | None = None) -> dict:
    """Next-character predictions of the committed model on held-out windows.

    ``count`` batches of ``size`` non-overlapping 64-character windows are drawn from the
    held-out ``split`` (see :func:`standarderror.llm.windows.batches`); every position of every
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
    held = on_windows(lm, tiny.batches(split, count, size, seed, block=lm.window,
                                       stoi=m["stoi"]))
    n_seq, block = count * size, lm.window
    return {
        "p": np.exp(held["logp"]),
        "logp": held["logp"],
        "y": held["y"],
        "sequence": held["sequence"],
        "position": np.tile(np.arange(block), n_seq),
        "chars": m["chars"],
        "step": m["step"],
        "sha256": m["sha256"],
    }


def on_windows(lm, windows) -> dict:
    """One model's next-token log-probabilities on windows already drawn: the arithmetic of
    :func:`predictions`, for a caller that puts several checkpoints to the same windows
    (:func:`standarderror.experiments.trajectory.held_out` draws them once).

    ``lm`` is a :class:`~standarderror.llm.interface.LanguageModel` (a ``TinyLM``);
    ``windows`` yields ``(x, y)`` batches of :func:`standarderror.llm.windows.batches`.

    Returns
    -------
    dict
        ``logp`` (rows x vocabulary), ``y`` (rows), ``sequence`` (rows: each prediction's
        window, counted over all batches).
    """
    logps, ys, n_seq = [], [], 0
    for x, y in windows:
        logps.append(lm.window_logprobs(x))
        ys.append(y.numpy())
        n_seq += x.shape[0]
    if not logps:
        raise ValueError("windows is empty: pass at least one (x, y) batch")
    return {"logp": np.concatenate(logps).reshape(-1, lm.vocab_size),
            "y": np.concatenate(ys).reshape(-1),
            "sequence": np.repeat(np.arange(n_seq), lm.window)}


@dataclasses.dataclass(frozen=True)
class StandardDraws:
    """The two held-out draws the lectures measure, and each one's headline values at T = 1.

    ``seed0_*``: :func:`predictions` with ``count=10, size=16, seed=0`` (the draw of
    :func:`standarderror.uncertainty.calibration.temperature_table`). ``seed1_*``: with
    ``count=24, size=16, seed=1`` (the default of :func:`predictions`). For each: the number of
    windows and predictions, top-1 accuracy, ECE with 15 equal-width bins at T = 1, and the
    temperature that minimises the NLL of all its predictions
    (:func:`standarderror.uncertainty.scaling.fit_temperature`). ``ece_bins``: the ECE's bin
    count, the default of :func:`standarderror.uncertainty.metrics.ece`.
    """

    ece_bins: int
    seed0_windows: int
    seed0_rows: int
    seed0_acc: float
    seed0_ece: float
    seed0_t: float
    seed1_windows: int
    seed1_rows: int
    seed1_acc: float
    seed1_ece: float
    seed1_t: float


def _headline(pred: dict) -> tuple:
    from standarderror.uncertainty import metrics, scaling

    p, y, logp = pred["p"], pred["y"], pred["logp"]
    correct = p.argmax(axis=1) == y
    return (int(np.unique(pred["sequence"]).size), int(y.size), float(correct.mean()),
            float(metrics.ece(p.max(axis=1), correct)), float(scaling.fit_temperature(logp, y)))


def standard_draws() -> StandardDraws:
    """Measure the lectures' two standard draws of held-out predictions (:class:`StandardDraws`)."""
    import inspect

    from standarderror.uncertainty import metrics

    bins = inspect.signature(metrics.ece).parameters["bins"].default
    return StandardDraws(bins, *_headline(predictions(count=10, size=16, seed=0)),
                         *_headline(predictions(count=24, size=16, seed=1)))
