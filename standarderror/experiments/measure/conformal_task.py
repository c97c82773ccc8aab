r"""Split-conformal sets on the review's six-option next-word task, and the calibration of
the whole-word choice (comparable across tokenizers)."""

from __future__ import annotations

import time

import numpy as np

from standarderror import _checks
from standarderror.llm.interface import LanguageModel

from ._common import DRAWS, _header, _interval
from .calibration_task import ece_floor


def conformal(lm: LanguageModel, *, count: int = 720, seed: int = 0, split_seed: int = 1,
              alpha: float = 0.1, draws: int = DRAWS, progress: bool = True) -> dict:
    r"""Split-conformal sets on the review's six-option next-word task.

    The questions are :func:`standarderror.experiments.multiple_choice.questions` (``count``, ``seed``:
    48-character held-out contexts, the true next word and five frequent distractors of its
    length). Each option is scored as :math:`\log p(\text{option} \mid \text{context})`, the
    sum of its tokens' log-probabilities (:meth:`~.interface.LanguageModel.
    option_logprobs`: :class:`~.interface.TinyLM` shares each context's pass across its
    options, any other backend scores the pairs whole; a subword tokenizer may give options
    different numbers of tokens). A random half (``split_seed``) calibrates; LAC and APS
    sets at ``alpha`` are measured on the other half.

    Returns
    -------
    dict
        ``accuracy``, ``lac`` and ``aps`` (``qhat``, ``coverage``, ``mean_size``,
        ``median_size``, ``singleton``, ``empty``), ``sizes`` (per score, the test half's set
        sizes), ``option_tokens`` (mean, min, max tokens per option, and the share of
        options longer than one token), ``word_calibration`` (:func:`word_calibration`:
        calibration of the whole-word choice, comparable across tokenizers),
        ``truncated``, ``merged``, ``questions``, ``seconds`` and the header.
    """
    from standarderror.experiments import multiple_choice as mc
    from standarderror.uncertainty import coverage as cv

    _checks.positive_int(count, "count")
    _checks.draws(draws)
    if count < 2:
        raise ValueError(f"count must be at least 2 (a calibration and a test half), got {count}")
    if not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    t0 = time.perf_counter()
    qs = mc.questions(count, seed)
    n, k = qs["options"].shape
    r = lm.option_logprobs(qs["context"], qs["options"],
                           progress=progress and f"conformal ({lm.info()['label']})")
    z, truncated, merged = r["logprob"], r["truncated"], r["merged"]
    tok = r["tokens"].ravel()
    cal = np.zeros(n, dtype=bool)
    cal[np.random.default_rng(split_seed).permutation(n)[: n // 2]] = True
    e = cv.evaluate(cv.softmax_logits(z), qs["y"], cal, alpha=alpha)
    out = {**_header("conformal", lm, {"count": count, "seed": seed, "split_seed": split_seed,
                                        "alpha": alpha, "options": k}),
           "accuracy": e["accuracy"], "questions": int(n), "calibration": int(cal.sum())}
    out["sizes"] = {}
    for s in cv.SCORES:
        sets = e[s].pop("sets")
        out[s] = e[s]
        out["sizes"][s] = sets.sum(axis=1).tolist()
    out["word_calibration"] = word_calibration(z, qs["y"], seed=seed, draws=draws)
    out["option_tokens"] = {"mean": float(tok.mean()), "min": int(tok.min()),
                            "max": int(tok.max()), "multi_token_share": float((tok > 1).mean())}
    out["truncated"], out["merged"] = int(truncated), int(merged)
    out["logits"] = z
    out["seconds"] = time.perf_counter() - t0
    return out


def word_calibration(option_logits, y, *, bins: int = 10, seed: int = 0,
                     draws: int = DRAWS) -> dict:
    r"""Calibration of a whole-word prediction: on each question the model's choice among the
    options (whole words, each scored as the sum of its tokens' log-probabilities), with
    confidence the softmax over the options of those scores.

    Unlike next-token accuracy and ECE, the event ("the next word is this one") is the same
    whatever the tokenizer, so the numbers compare across models. Questions are
    independent, so the 95% intervals resample questions (``draws``); the ECE floor is
    :func:`~standarderror.uncertainty.binning.ece_floor` at this number of questions.

    Returns
    -------
    dict
        ``accuracy``, ``confidence`` (mean), ``ece``, ``ece_floor`` (``mean``, ``sd``),
        ``intervals`` (``accuracy``, ``ece``: ``[low, high]``), ``questions``, ``bins``.
    """
    from standarderror.uncertainty import binning
    from standarderror.uncertainty import calibration as cb
    from standarderror.uncertainty import coverage as cv

    bins = _checks.bins(bins)
    draws = _checks.draws(draws)
    p = cv.softmax_logits(np.asarray(option_logits, dtype=float))
    y = np.asarray(y)
    conf = p.max(axis=1)
    ok = p.argmax(axis=1) == y
    n = y.size
    idx = np.random.default_rng(seed + 1).integers(0, n, size=(draws, n))
    boot_acc = ok[idx].mean(axis=1)
    boot_ece = binning.ece_batch(conf[idx], ok[idx], bins)
    floor = ece_floor(conf, bins, draws=max(20, draws // 2), seed=seed)
    return {"accuracy": float(ok.mean()), "confidence": float(conf.mean()),
            "ece": float(cb.ece(conf, ok, bins=bins)),
            "ece_floor": {"mean": floor["mean"], "sd": floor["sd"]},
            "intervals": {"accuracy": _interval(boot_acc), "ece": _interval(boot_ece)},
            "questions": int(n), "bins": int(bins)}
