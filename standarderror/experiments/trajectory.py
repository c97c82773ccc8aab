r"""Calibration along a training run, measured checkpoint by checkpoint (an experiment).

:func:`trajectory` loads every checkpoint of one run directory written by
``scripts/train_tiny.py`` and applies
:func:`standarderror.uncertainty.training.checkpoint_metrics` to each one's held-out
predictions; :func:`shift_control` measures an excerpt run on unseen text of its own play and
on the test plays. The metrics are the array functions of :mod:`standarderror.uncertainty`;
this module loads the checkpoints (:mod:`standarderror.llm.tiny`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from standarderror.uncertainty import calibration as cb
from standarderror.uncertainty.training import checkpoint_metrics


def trajectory(directory: Path | str | None = None, steps=None, *, count: int = 10,
               size: int = 16, seed: int = 1, split: str = "test", bins: int = 15,
               halves: int = 20, trust_card: bool = False) -> dict:
    """Measure every checkpoint of one training run on the same held-out predictions.

    Each checkpoint is loaded (hash-verified) with :func:`standarderror.llm.weights.load` from
    ``directory`` and run on the same held-out windows, the ones
    ``llm.predictions.predictions(count, size, seed, split=split)`` uses; then
    :func:`checkpoint_metrics` is applied. The windows are drawn once and reused for every
    checkpoint (building a split's text is the slow part); the predictions are identical to
    ``predictions(..., model=tiny.load(step, directory=directory))``, which a test
    checks.

    Parameters
    ----------
    directory : path, optional
        A run directory with ``card.json`` and its checkpoints (default: the committed model's).
    steps : sequence of int, optional
        Which checkpoints (default: every one in the card, in training order).
    count, size, seed, split
        The held-out windows (see :func:`standarderror.llm.windows.batches`).
    bins, halves
        Passed to :func:`checkpoint_metrics`.
    trust_card : bool
        Needed for a directory that is not one of the committed (anchored) runs, as in
        :func:`standarderror.llm.weights.load`.

    Returns
    -------
    dict
        ``rows``: one dict per checkpoint with ``step``, the card's ``card_val_loss`` and
        ``card_train_loss`` (validation plays and training text, measured by the training
        script) and every key of :func:`checkpoint_metrics`; ``minimum``: the step whose
        measured held-out ``loss`` is lowest; ``card``: the run's card; ``directory``.
    """
    from standarderror.llm import tiny

    held = held_out(directory, steps, count=count, size=size, seed=seed, split=split,
                    trust_card=trust_card)
    by_step = {c["step"]: c for c in held["card"]["checkpoints"]}
    out = []
    for step, logp in held["logp"].items():
        row = {"step": step, "card_val_loss": by_step[step]["val_loss"],
               "card_train_loss": by_step[step]["train_loss"]}
        row.update(checkpoint_metrics(logp, held["y"], held["sequence"], bins=bins,
                                      halves=halves))
        out.append(row)
    best = min(out, key=lambda r: r["loss"])["step"]
    return {"rows": out, "minimum": best, "card": held["card"],
            "directory": str(directory) if directory is not None else str(tiny.CHECKPOINT_DIR)}


def held_out(directory: Path | str | None = None, steps=None, *, count: int = 10,
             size: int = 16, seed: int = 1, split: str = "test",
             trust_card: bool = False) -> dict:
    """The held-out next-token predictions of some checkpoints of one run, on one set of
    windows: what :func:`trajectory` measures, for a page that measures something else on them.

    The windows are ``tiny.batches(split, count, size, seed)`` at the run's context length,
    drawn once for every checkpoint; each checkpoint is loaded (hash-verified) with
    :func:`standarderror.llm.weights.load` and run on them by
    :func:`standarderror.llm.predictions.on_windows`, the arithmetic of
    :func:`standarderror.llm.predictions.predictions`. Arguments as for :func:`trajectory`.

    Returns
    -------
    dict
        ``logp``: ``{step: log-probabilities, shape (count * size * block, vocabulary)}`` in
        the order of ``steps``; ``y``: the next characters' ids, shape (rows,); ``sequence``:
        each row's window, ``0 .. count * size - 1``; ``block``: the run's context length;
        ``card``: the run's verified card.
    """
    from standarderror.llm import tiny
    from standarderror.llm.interface import TinyLM
    from standarderror.llm.predictions import on_windows

    info = tiny.verified_card(Path(directory or tiny.CHECKPOINT_DIR), trust_card)
    saved = [c["step"] for c in info["checkpoints"]]
    if steps is None:
        steps = saved
    else:
        try:
            steps = [int(s) for s in steps]
        except (TypeError, ValueError):
            raise ValueError(f"steps must be a sequence of integer steps, got {steps!r}") from None
        unknown = sorted(set(steps) - set(saved))
        if not steps or unknown:
            raise ValueError(f"steps must be a non-empty selection of the saved steps {saved}; "
                             f"not saved: {unknown}")
    block = info["config"]["block"]
    stoi = {c: i for i, c in enumerate(info["vocabulary"])}
    windows = list(tiny.batches(split, count, size, seed, block=block, stoi=stoi))
    logp = {}
    for step in steps:
        lm = TinyLM(tiny.load(step, directory=directory, trust_card=trust_card))
        held = on_windows(lm, windows)
        logp[step] = held["logp"]
    return {"logp": logp, "y": held["y"], "sequence": held["sequence"], "block": block,
            "card": info}


# --------------------------------------------------------------------------------------
# The control for an excerpt run: unseen text of the training play itself
# --------------------------------------------------------------------------------------


def training_remainder(directory: Path | str, *, trust_card: bool = False) -> str:
    """The text of an excerpt run's training plays that the run never trained on.

    ``scripts/train_tiny.py --train-plays ... --train-chars N`` trains on the first ``N``
    characters of its plays (one token per character); this returns the characters after
    them: the same play (or plays), unseen. Measured there, an excerpt run's calibration
    changes by memorisation alone, without the shift to other plays that the test split
    adds. Raises ``ValueError`` for a run that is not an excerpt run.
    """
    from standarderror.llm import tiny

    info = tiny.verified_card(Path(directory), trust_card)
    corpus = info.get("corpus", {})
    names, limit = corpus.get("train_plays"), corpus.get("train_chars_limit")
    if not names or limit is None:
        raise ValueError(f"{directory} is not an excerpt run: its card names no train_plays "
                         "and train_chars_limit; the remainder exists only for excerpt runs")
    text = "".join(tiny.plays()[p] for p in names)
    if corpus.get("train_chars") != min(int(limit), len(text)):
        raise ValueError(f"{directory}: the card's train_chars {corpus.get('train_chars')} "
                         f"does not match its plays' first {limit} characters")
    rest = text[int(limit):]
    if not rest:
        raise ValueError(f"{directory}: the run trained on all of its plays; nothing is unseen")
    return rest


def _stacked(text: str, count: int, size: int, seed: int, *, block: int, stoi: dict):
    """The windows of :func:`standarderror.llm.windows.windows` (the one window rule) on the
    encoded ``text``, their batches stacked into one (x, y) pair of arrays."""
    from standarderror.llm import tiny

    pairs = list(tiny.windows(tiny.encode(text, stoi), count, size, seed, block=block))
    return np.concatenate([x for x, _ in pairs]), np.concatenate([y for _, y in pairs])


def shift_control(directory: Path | str, steps, *, seeds=(0, 1), count: int = 10,
                  size: int = 16, trust_card: bool = False) -> dict:
    """An excerpt run's calibration on unseen text of its own play and on the test plays.

    For each checkpoint in ``steps`` and each window seed in ``seeds``, the same number of
    windows (``count * size``, 64 characters) is drawn from :func:`training_remainder`
    (``"same play"``: memorisation, no shift of play) and from the test split (``"test
    plays"``: memorisation and the shift to other plays), and the fitted temperature
    (:func:`standarderror.uncertainty.calibration.fit_temperature`, one fit on every
    prediction), the confidence gap and the loss are measured.

    Returns
    -------
    dict
        ``steps``, ``seeds``, and for ``"same play"`` and ``"test plays"``: ``temperature``,
        ``gap``, ``loss``, each an array (seeds x steps); ``rows`` per draw.
    """
    import torch

    from standarderror.llm import tiny

    steps = [int(s) for s in steps]
    seeds = [int(s) for s in seeds]
    if not steps or not seeds:
        raise ValueError("steps and seeds must be non-empty")
    info = tiny.verified_card(Path(directory), trust_card)
    stoi = {c: i for i, c in enumerate(info["vocabulary"])}
    block = info["config"]["block"]
    texts = {"same play": training_remainder(directory, trust_card=trust_card),
             "test plays": tiny.split("test")}
    draws = {(name, s): _stacked(t, count, size, s, block=block, stoi=stoi)
             for name, t in texts.items() for s in seeds}
    out = {name: {k: np.empty((len(seeds), len(steps))) for k in ("temperature", "gap", "loss")}
           for name in texts}
    for j, step in enumerate(steps):
        net = tiny.load(step, directory=directory, trust_card=trust_card)["model"]
        for (name, s), (x, y) in draws.items():
            logp = tiny.log_probabilities(net, torch.from_numpy(x)).reshape(-1, len(stoi))
            y_flat = y.reshape(-1)
            rows = np.arange(y_flat.size)
            pred = logp.argmax(axis=1)
            i = seeds.index(s)
            out[name]["temperature"][i, j] = cb.fit_temperature(logp, y_flat)
            out[name]["gap"][i, j] = float(np.exp(logp[rows, pred]).mean()
                                           - (pred == y_flat).mean())
            out[name]["loss"][i, j] = float(-logp[rows, y_flat].mean())
    return {"steps": steps, "seeds": seeds, **out}
