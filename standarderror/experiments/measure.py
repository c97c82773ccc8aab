r"""The book's three measurements on any model of the interface (:mod:`standarderror.llm.interface`).

* :func:`calibration` -- next-token predictions on held-out text: accuracy, NLL and ECE at
  Episode 3's temperatures, the fitted temperature, and the AURC of the three confidence
  scores at a few temperatures.
* :func:`conformal` -- the review's six-option next-word task: LAC and APS sets at
  :math:`\alpha = 0.1`, their coverage and mean size.
* :func:`spectral` -- Episode 5's pipeline: sampled one-word answers, embedded, density
  matrices, the matrix temperature, risk, entropy, reliability and AUROC.

Each returns a plain dict (JSON-ready after :func:`to_json`); :func:`write` saves it with its
figures, :func:`summary` prints a short table. ``python -m standarderror measure`` runs them.

**Bounded memory (calibration).** The held-out windows are run in blocks of at most
:data:`~standarderror.llm.interface.MAX_ELEMENTS` float64 log-probabilities (32 MiB: for a
32,000-token vocabulary, two 64-token windows at a time; working copies bring the peak to a
few times that). From each block only what the metrics
need is kept, per prediction: the label, the argmax and the top probability and true-label
log-probability at each table temperature, the three confidence scores at each abstention
temperature, and its contribution to the NLL at each of :data:`FIT_GRID`'s temperatures.
That is about fifty numbers per prediction whatever the vocabulary; no predictions x
vocabulary array is ever held. Every statistic is computed row by row exactly as
:func:`~standarderror.uncertainty.calibration.temperature_table` computes it, so on our tiny
model the table is the same to the bit. The one approximation is the fitted temperature:
NLL is known on the grid only, and the minimum is refined by a parabola in :math:`\log T`
through the three lowest grid points (tested against the exact bounded fit to 1e-3).
"""

from __future__ import annotations

import codecs
import json
import math
import os
import platform
import tempfile
import time
from pathlib import Path

import numpy as np

from standarderror import _checks
from standarderror.llm import interface
from standarderror.llm.interface import LanguageModel
from standarderror.llm.tiny import windows

TASKS = ("calibration", "conformal", "spectral")
#: Temperatures at which NLL is accumulated for the fitted temperature (log-spaced 0.25..4).
FIT_GRID = np.exp(np.linspace(np.log(0.25), np.log(4.0), 25))
#: Resamples behind every interval (whole windows, or whole questions).
DRAWS = 200


def _progress(iterable, total, desc, on):
    if not on:
        return iterable
    from tqdm.auto import tqdm

    return tqdm(iterable, total=total, desc=desc, leave=False)


def versions() -> dict:
    """Versions of the software a result depends on."""
    import importlib.metadata as md

    out = {"python": platform.python_version(), "platform": platform.platform()}
    for name in ("standarderror", "numpy", "scipy", "torch", "transformers", "tokenizers",
                 "sentence-transformers"):
        try:
            out[name] = md.version(name)
        except md.PackageNotFoundError:
            out[name] = None
    return out


def _header(task: str, lm: LanguageModel, settings: dict) -> dict:
    return {"task": task, "model": lm.info(), "settings": settings, "versions": versions()}


# --------------------------------------------------------------------------------------
# Calibration
# --------------------------------------------------------------------------------------


def _fit_from_grid(nll: np.ndarray) -> dict:
    """Minimum of NLL over :data:`FIT_GRID`, refined by a parabola in log T."""
    i = int(np.argmin(nll))
    x = np.log(FIT_GRID)
    if 0 < i < len(x) - 1:
        a, b, c = np.polyfit(x[i - 1:i + 2], nll[i - 1:i + 2], 2)
        t = float(np.exp(-b / (2 * a))) if a > 0 else float(FIT_GRID[i])
        return {"temperature": t, "nll": float(np.polyval([a, b, c], np.log(t))),
                "at_bound": False}
    return {"temperature": float(FIT_GRID[i]), "nll": float(nll[i]), "at_bound": True}


def calibration(lm: LanguageModel, *, text=None, count: int = 10, size: int = 16,
                seed: int = 0, block: int | None = None, temperatures=None,
                abstention_temperatures=None, bins: int = 15, draws: int = DRAWS,
                progress: bool = True) -> dict:
    r"""Calibration of next-token predictions on held-out text (Episode 3's measurements).

    ``count * size`` non-overlapping windows of ``block`` tokens (default: 64, or the model's
    window if smaller) are drawn from ``text`` (default: our test plays; a ``pathlib.Path``
    is read as UTF-8 and tokenised in blocks, :func:`encode_file`) by
    :func:`~standarderror.llm.tiny.windows`; every position is one prediction, after
    the model's BOS token where its tokenizer adds one. With our tiny model and the
    defaults these are Episode 3's 10,240 predictions.

    Token-level numbers (accuracy, NLL, ECE) live in the tokenizer's event space: they
    cannot be compared across tokenizers. ``per_byte`` is: the log-loss of the windows'
    text in bits per UTF-8 byte (and per character). Every headline number comes with a
    95% interval from ``draws`` resamples of whole windows (predictions in a window share
    context), and the ECE with its floor: the mean ECE of a model calibrated by
    construction with these confidences at this sample size
    (:func:`~standarderror.uncertainty.binning.ece_floor`, Episode 2). ``positions``
    repeats them by position band in the window (positions 0-7 have little context).

    Returns
    -------
    dict
        ``table`` (one row per temperature: ``temperature``, ``accuracy``, ``nll``, ``ece``,
        ``confidence``, ``gap``, as :func:`~standarderror.uncertainty.calibration.
        temperature_table`), ``accuracy_identical`` (argmax equal at every temperature),
        ``fitted`` (``temperature``, ``nll``, ``at_bound``; see the module notes),
        ``nll_grid``, ``abstention`` (rows of ``score``, ``temperature``, ``aurc``),
        ``oracle``, ``intervals`` (at T = 1: ``accuracy``, ``nll``, ``ece``,
        ``bits_per_byte``, each ``[low, high]``), ``ece_floor`` (``mean``, ``sd``,
        ``draws``), ``per_byte`` (``bits_per_byte``, ``bits_per_char``, ``bytes``,
        ``chars``, ``interval``), ``positions`` (per band: ``band``, ``rows``, ``accuracy``,
        ``nll``, ``ece``, ``ece_floor`` and their ``intervals``), ``held_out`` (True, False
        or None: unknown) with ``text_note``, ``caveats``, ``rows``, ``sequences``,
        ``tokens_in_text``, ``memory`` (the largest block of log-probabilities held, in
        rows and bytes), ``seconds``, and the header (``task``, ``model``, ``settings``,
        ``versions``).
    """
    from standarderror.uncertainty import calibration as cb
    from standarderror.uncertainty import selective

    t0 = time.perf_counter()
    ts = tuple(float(t) for t in (temperatures or cb.TEMPERATURES))
    ts_ab = tuple(float(t) for t in (abstention_temperatures or cb.ABSTENTION_TEMPERATURES))
    if 1.0 not in ts:
        ts = tuple(sorted(ts + (1.0,)))
    for name, v in (("count", count), ("size", size), ("bins", bins), ("draws", draws)):
        _checks.positive_int(v, name)
    if not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    room = lm.window - len(lm.prefix)
    if block is None:
        block = min(64, room)
    _checks.positive_int(block, "block")
    block = int(block)
    if block > room:
        raise ValueError(f"block of {block} tokens exceeds the model's window of {lm.window}"
                         + (f" (less {len(lm.prefix)} for the BOS token)" if lm.prefix else ""))
    ours = is_ours(lm)
    if text is None:
        from standarderror.llm import tiny

        source = "our test plays (standarderror.llm.tiny.split('test'))"
        held_out = ours
        note = ("held out: our tiny model never trained on these plays" if ours else
                "NOT held out for a pretrained model: these are Shakespeare's plays, in the "
                "pretraining data of any modern LLM; measure with text written after the "
                "model's training cutoff (--text)")
        ids = lm.encode(tiny.split("test"))
        lm.check_text(tiny.split("test"), ids)
    elif isinstance(text, Path):
        source, held_out = f"user text ({text.name})", None
        note = ("your text: held out only if the model cannot have seen it (written after "
                "its training cutoff)")
        ids = encode_file(lm, text)
    else:
        source, held_out = "user text", None
        note = ("your text: held out only if the model cannot have seen it (written after "
                "its training cutoff)")
        if not str(text).strip():
            raise ValueError("text is empty: pass text to measure on")
        ids = lm.encode(text)
        lm.check_text(text, ids)
    slots = max(0, (len(ids) - 1) // (block + 1))
    if count * size > slots:
        raise ValueError(f"the text holds {len(ids):,} tokens, room for {slots:,} windows of "
                         f"{block + 1} tokens, fewer than count * size = {count * size:,}; "
                         "lower count, size or block, or pass a longer text")
    per = max(1, min(size, interface.MAX_ELEMENTS // (block * lm.vocab_size)))
    keep = {t: {"pred": [], "conf": [], "nll": []} for t in ts}
    scores = {(s, t): [] for s in cb.SCORES for t in ts_ab}
    grid_nll = np.zeros(len(FIT_GRID))
    ys, text_bytes, text_chars = [], [], []
    it = windows(ids, count, size, seed, block=block)
    for x, y in _progress(it, count, f"calibration ({lm.info()['label']})", progress):
        for first, rest in zip(x[:, :1], y):  # the text each window's predictions score
            whole, head = lm.decode(np.r_[first, rest]), lm.decode(first)
            text_bytes.append(len(whole.encode("utf-8")) - len(head.encode("utf-8")))
            text_chars.append(len(whole) - len(head))
        for lo in range(0, size, per):
            logp = lm.window_logprobs(x[lo:lo + per]).reshape(-1, lm.vocab_size)
            yy = y[lo:lo + per].reshape(-1)
            rows = np.arange(yy.size)
            ys.append(yy)
            for t in ts:
                lt = cb.scale(logp, t)
                keep[t]["pred"].append(lt.argmax(axis=1))
                keep[t]["conf"].append(np.exp(lt.max(axis=1)))
                keep[t]["nll"].append(-lt[rows, yy])
            for t in ts_ab:
                for s, v in cb.confidence_scores(logp, t).items():
                    scores[(s, t)].append(v)
            d = logp - logp.max(axis=1, keepdims=True)
            dy = d[rows, yy]
            for g, t in enumerate(FIT_GRID):
                grid_nll[g] += float((np.log(np.exp(d / t).sum(axis=1)) - dy / t).sum())
            del logp, d
    y = np.concatenate(ys)
    n = y.size
    reference = np.concatenate(keep[1.0]["pred"])
    ok = reference == y
    table, identical = [], True
    for t in ts:
        pred = np.concatenate(keep[t]["pred"])
        identical &= bool(np.array_equal(pred, reference))
        table.append(cb.temperature_row(t, pred, np.concatenate(keep[t]["conf"]),
                                        np.concatenate(keep[t]["nll"]), y, bins=bins))
    abst = [{"score": s, "temperature": t,
             "aurc": cb.aurc(np.concatenate(scores[(s, t)]), ok)} for (s, t) in scores]
    grid_nll /= n
    conf1 = np.concatenate(keep[1.0]["conf"])
    nll1 = np.concatenate(keep[1.0]["nll"])
    nb, nc = np.asarray(text_bytes, dtype=float), np.asarray(text_chars, dtype=float)
    counts = selective._draw_counts(count * size, draws, seed + 1)   # windows resampled
    position = np.tile(np.arange(block), count * size)
    everything = _window_stats(conf1, ok, nll1, position >= 0, counts, block, bins, seed,
                               draws)
    bpb = nll1.sum() / math.log(2) / nb.sum()
    per_window_nll = nll1.reshape(-1, block).sum(axis=1)
    boot_bpb = counts @ per_window_nll / (counts @ nb) / math.log(2)
    bands = []
    edges = [e for e in (0, 8, 32) if e < block] + [block]
    for lo, hi in zip(edges[:-1], edges[1:]):
        band = _window_stats(conf1, ok, nll1, (position >= lo) & (position < hi), counts,
                             block, bins, seed, draws)
        bands.append({"band": [int(lo), int(hi - 1)], **band})
    caveats = [note,
               "accuracy, NLL and ECE are per token of this tokenizer: a different event "
               "space for every tokenizer, not comparable across models with different "
               "tokenizers; bits per byte is comparable",
               f"intervals: 95% percentile intervals over {draws} resamples of whole windows; "
               "the ECE floor is the mean ECE of a calibrated-by-construction model at this "
               "sample size (it treats predictions as independent)"]
    return {**_header("calibration", lm, {
                "count": count, "size": size, "seed": seed, "block": block, "bins": bins,
                "temperatures": list(ts), "abstention_temperatures": list(ts_ab),
                "text": source, "fit_grid": FIT_GRID.tolist(), "draws": draws,
                "interval_level": 0.95,
                "bos": bool(lm.prefix)}),
            "table": table, "accuracy_identical": identical,
            "fitted": _fit_from_grid(grid_nll), "nll_grid": grid_nll.tolist(),
            "abstention": abst, "oracle": cb.aurc(ok.astype(float), ok),
            "intervals": {**everything["intervals"],
                          "bits_per_byte": _interval(boot_bpb)},
            "ece_floor": everything["ece_floor"],
            "per_byte": {"bits_per_byte": float(bpb),
                         "bits_per_char": float(nll1.sum() / math.log(2) / nc.sum()),
                         "bytes": int(nb.sum()), "chars": int(nc.sum()),
                         "interval": _interval(boot_bpb)},
            "positions": bands,
            "held_out": held_out, "text_note": note, "caveats": caveats,
            "rows": int(n), "sequences": int(count * size), "tokens_in_text": int(len(ids)),
            "memory": {"block_rows": int(per * block),
                       "block_bytes": int(per * block * lm.vocab_size * 8)},
            "seconds": time.perf_counter() - t0}


def _interval(values) -> list:
    lo, hi = np.percentile(np.asarray(values, dtype=float), [2.5, 97.5])
    return [float(lo), float(hi)]


def _window_stats(conf, ok, nll, rows, counts, block, bins, seed, draws) -> dict:
    """Accuracy, NLL and ECE of the predictions ``rows`` (a mask), each with a 95% interval
    over the window resamples ``counts`` (draws x windows: how often each window is drawn),
    and the ECE floor at their number. Per window and bin, the sums the statistics need
    are formed once; a resample is then a matrix product (exact weighted statistics: with
    unit weights they are :func:`~standarderror.uncertainty.calibration.ece` and the means).
    """
    from standarderror.uncertainty import calibration as cb

    windows_ = np.arange(conf.size) // block
    w, c, hit, loss = windows_[rows], conf[rows], ok[rows], nll[rows]
    n_win = counts.shape[1]
    b = cb.bin_index(c, bins)
    gap = np.zeros((n_win, bins))
    np.add.at(gap, (w, b), c - hit)
    per = np.bincount(w, minlength=n_win).astype(float)
    hits = np.bincount(w, weights=hit.astype(float), minlength=n_win)
    losses = np.bincount(w, weights=loss, minlength=n_win)
    total = counts @ per
    boot = {"accuracy": counts @ hits / total, "nll": counts @ losses / total,
            "ece": np.abs(counts @ gap).sum(axis=1) / total}
    return {"rows": int(c.size), "accuracy": float(hit.mean()), "nll": float(loss.mean()),
            "ece": float(cb.ece(c, hit, bins=bins)),
            "ece_floor": ece_floor(c, bins, draws=max(20, draws // 2), seed=seed),
            "intervals": {k: _interval(v) for k, v in boot.items()}}


def ece_floor(confidence, bins: int = 15, *, draws: int = 100, seed: int = 0) -> dict:
    """The ECE floor of Episode 2 at this sample: the mean (and sd) of the ECE of labels
    drawn from the confidences themselves (a model calibrated by construction,
    :func:`~standarderror.uncertainty.binning.calibrated_labels`). It equals
    :func:`~standarderror.uncertainty.binning.ece_floor` at ``sizes=[len(confidence)]``,
    whose subset of every row is only a reordering, without that function's sort."""
    from standarderror.uncertainty import binning

    c = np.asarray(confidence, dtype=float)
    e = binning.ece_batch(c, binning.calibrated_labels(c, draws, seed=seed + 1), bins)
    return {"mean": float(e.mean()), "sd": float(e.std(ddof=1)), "draws": int(draws)}


def is_ours(lm: LanguageModel) -> bool:
    """The book's tiny model, natively or as its export (whose directory says so): the one
    model for which our test plays are held out."""
    return isinstance(lm, interface.TinyLM) or bool(getattr(lm, "export_of_tiny", False))


#: Bounds of :func:`encode_file`: bytes read and tokenised at once, and in all.
CHUNK_BYTES = 1 << 20
MAX_TEXT_BYTES = 64 << 20


def encode_file(lm: LanguageModel, path, *, chunk_bytes: int | None = None,
                max_bytes: int | None = None) -> np.ndarray:
    """Token ids of a UTF-8 text file, read and tokenised in blocks of about
    ``chunk_bytes`` (cut after a line end where there is one), so memory stays bounded
    whatever the file: at most ``max_bytes`` are read (a larger file, or an endless one such
    as ``/dev/zero``, is refused). Each block is checked as :meth:`~.interface.
    LanguageModel.check_text` checks text. Raises ``ValueError`` naming the file for bytes
    that are not UTF-8, NUL bytes (not a text file), an empty file or one past the limit.

    A token cannot straddle a block boundary; a large file therefore tokenises as the
    concatenation of its blocks (which differs from one call on the whole text only at the
    boundaries, one per ``chunk_bytes``)."""
    chunk_bytes = int(chunk_bytes or CHUNK_BYTES)
    max_bytes = int(max_bytes or MAX_TEXT_BYTES)
    path = Path(path)
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise ValueError(f"{path}: {exc.strerror or exc}") from None
    if size > max_bytes:
        raise ValueError(f"{path} holds {size:,} bytes, more than the {max_bytes:,} this "
                         "measurement reads; pass a part of it (the windows need only count "
                         "* size * (block + 1) tokens)")
    decoder = codecs.getincrementaldecoder("utf-8")("strict")
    parts, carry, read = [], "", 0

    def emit(piece: str) -> None:
        ids = lm.encode(piece)
        lm.check_text(piece, ids)
        parts.append(ids)

    with open(path, "rb") as f:
        while True:
            raw = f.read(chunk_bytes)
            if raw and b"\0" in raw:
                raise ValueError(f"{path} holds a NUL byte at offset {read + raw.index(0):,}: "
                                 "not a text file")
            try:
                carry += decoder.decode(raw, final=not raw)
            except UnicodeDecodeError as exc:
                raise ValueError(f"{path} is not UTF-8 text: byte offset "
                                 f"{read + max(0, exc.start):,} cannot be decoded "
                                 f"({exc.reason})") from None
            read += len(raw)
            if read > max_bytes:
                raise ValueError(f"{path} holds more than the {max_bytes:,} bytes this "
                                 "measurement reads; pass a part of it")
            if not raw:
                break
            if len(carry) >= chunk_bytes:
                cut = carry.rfind("\n") + 1 or len(carry)
                emit(carry[:cut])
                carry = carry[cut:]
    if carry:
        emit(carry)
    if read == 0 or not any(len(p) for p in parts):
        raise ValueError(f"{path} is empty: pass a text to measure on")
    return np.concatenate(parts)


# --------------------------------------------------------------------------------------
# Conformal
# --------------------------------------------------------------------------------------


def conformal(lm: LanguageModel, *, count: int = 720, seed: int = 0, split_seed: int = 1,
              alpha: float = 0.1, draws: int = DRAWS, progress: bool = True) -> dict:
    r"""Split-conformal sets on the review's six-option next-word task.

    The questions are :func:`standarderror.experiments.multiple_choice.questions` (``count``, ``seed``:
    48-character held-out contexts, the true next word and five frequent distractors of its
    length). Each option is scored as :math:`\log p(\text{option} \mid \text{context})`, the
    sum of its tokens' log-probabilities (:meth:`~.interface.LanguageModel.
    continuation_logprob`; a subword tokenizer may give options different numbers of
    tokens). A random half (``split_seed``) calibrates; LAC and APS sets at ``alpha`` are
    measured on the other half.

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
    _checks.positive_int(draws, "draws")
    if count < 2:
        raise ValueError(f"count must be at least 2 (a calibration and a test half), got {count}")
    if not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    t0 = time.perf_counter()
    qs = mc.questions(count, seed)
    n, k = qs["options"].shape
    ctx = [c for c in qs["context"] for _ in range(k)]
    opts = [str(o) for o in qs["options"].ravel()]
    lp, tokens, truncated, merged = [], [], 0, 0
    step = 240
    for lo in _progress(range(0, len(ctx), step), -(-len(ctx) // step),
                        f"conformal ({lm.info()['label']})", progress):
        r = lm.continuation_logprob(ctx[lo:lo + step], opts[lo:lo + step])
        lp.append(r["logprob"])
        tokens.append(r["tokens"])
        truncated += r["truncated"]
        merged += r["merged"]
    z = np.concatenate(lp).reshape(n, k)
    tok = np.concatenate(tokens)
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


# --------------------------------------------------------------------------------------
# Spectral
# --------------------------------------------------------------------------------------


def spectral(lm: LanguageModel, *, dev: int = 300, test: int = 1700, answers: int = 20,
             temperature: float = 0.5, seed: int = 0, max_tokens: int = 16, bins: int = 8,
             clusters: int = 5, fit_draws: int = 20, progress: bool = True) -> dict:
    r"""Episode 5's pipeline on any model: sampled one-word answers as density matrices.

    Questions are :func:`standarderror.llm.semantic.questions` (48-character held-out
    contexts ending before a word; ``dev`` for fitting, ``test`` disjoint). Each gets
    ``answers`` answers sampled at ``temperature`` and cut after one word
    (:meth:`~.interface.LanguageModel.sample`, at most ``max_tokens`` tokens; answers cut
    there are counted in ``unterminated``), plus the greedy answer, right when it equals
    the true word. Answers are embedded by the packaged all-MiniLM-L6-v2; the matrix
    temperature is fitted on the development questions *at the same number of answers as it
    is applied at* (the fitted temperature depends on it), and its 95% interval comes from
    refitting on ``fit_draws`` resamples of the development questions.

    Returns
    -------
    dict
        ``temperature`` (fitted) and ``temperature_interval`` (``[low, high]``), ``risk``
        and ``entropy`` (test means at T = 1 and at the fit), ``reliability`` (per T:
        ``predicted``, ``target``, ``count``, ``ece``), ``accuracy`` (greedy, test),
        ``auroc`` (of the top eigenvalue for greedy correctness, or ``None`` with
        ``auroc_note`` when the test half has one class), ``distinct`` (mean distinct
        answers per test question), ``unterminated``, ``truncated``, ``seconds`` and the
        header.
    """
    for name, v in (("dev", dev), ("test", test), ("answers", answers),
                    ("max_tokens", max_tokens), ("fit_draws", fit_draws)):
        _checks.positive_int(v, name)
    if min(dev, test, answers) < 2:
        raise ValueError(f"dev, test and answers must each be at least 2, got {dev}, {test}, "
                         f"{answers}")
    if not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    m_dev = m_test = answers
    from standarderror import spectral as sp
    from standarderror.llm import semantic as se

    t0 = time.perf_counter()
    qd = se.questions(dev, seed=seed)
    qt = se.questions(test, seed=seed, skip=dev)
    data: dict = {}
    counts = {"unterminated": 0, "truncated": 0}
    blocks = {}
    for name, q, m, s in (("dev", qd, m_dev, seed + 1), ("test", qt, m_test, seed + 2)):
        r = lm.sample(q["context"], m, temperature=temperature, max_tokens=max_tokens, seed=s,
                      greedy=True, progress=f"spectral {name} ({lm.info()['label']})" if progress else False)
        said, greedy = r["answers"], r["greedy"]
        counts["unterminated"] += r["unterminated"]
        counts["truncated"] += r["truncated"]
        blocks[name] = se.attach(data, {"truth": q["truth"], "greedy": greedy,
                                        "answers": said,
                                        "correct": se.correct(greedy, q["truth"])})
    t1 = time.perf_counter()
    a_dev, y_dev = se.arrays(data, blocks["dev"])
    a, y = se.arrays(data, blocks["test"])
    fit = sp.fit_temperature(a_dev, y_dev)
    tf = fit["temperature"]
    correct = blocks["test"]["correct"]
    rng = np.random.default_rng(seed + 3)
    refits = []
    for _ in range(fit_draws):  # whole development questions resampled, refitted
        pick = rng.integers(0, len(a_dev), size=len(a_dev))
        refits.append(sp.fit_temperature(a_dev[pick], y_dev[pick])["temperature"])
    out = {**_header("spectral", lm, {"dev": dev, "test": test, "answers": answers,
                                       "fit_draws": fit_draws,
                                       "sampling_temperature": temperature,
                                       "seed": seed, "max_tokens": max_tokens, "bins": bins,
                                       "clusters": clusters, "embedder": "all-MiniLM-L6-v2"}),
           "temperature": tf, "at_bound": bool(fit["at_bound"]),
           "temperature_interval": _interval(refits),
           "risk": {"1": sp.risk(a, y, 1.0), "fitted": sp.risk(a, y, tf)},
           "entropy": {"1": float(sp.entropy(a).mean()),
                       "fitted": float(sp.entropy(a, tf).mean())},
           "accuracy": float(correct.mean()),
           "distinct": float(np.mean([len(set(x)) for x in blocks["test"]["answers"]])),
           **counts}
    out["reliability"] = {}
    nb = min(bins, test)
    nc = max(1, min(clusters, test // nb))  # Algorithm 1 needs clusters <= questions per bin
    out["settings"]["bins"], out["settings"]["clusters"] = nb, nc
    for key, t in (("1", 1.0), ("fitted", tf)):
        r = sp.reliability(a, y, t, bins=nb, clusters=nc)
        out["reliability"][key] = {"predicted": np.asarray(r["predicted"]).tolist(),
                                   "target": np.asarray(r["target"]).tolist(),
                                   "count": np.asarray(r["count"]).tolist(),
                                   "ece": float(r["ece"])}
    if correct.min() == correct.max():
        out["auroc"] = None
        out["auroc_note"] = (f"every greedy test answer is {'right' if correct[0] else 'wrong'}"
                             ": AUROC is undefined")
    else:
        out["auroc"] = sp.auroc(sp.eigenvalues(a)[:, 0], correct, bootstrap=20, seed=seed)
        out["auroc"].pop("draws")
    out["seconds"] = {"generate_and_embed": t1 - t0, "total": time.perf_counter() - t0}
    return out


# --------------------------------------------------------------------------------------
# Output
# --------------------------------------------------------------------------------------


def run(task: str, lm: LanguageModel, **kwargs) -> dict:
    """Run one of :data:`TASKS` on ``lm``."""
    if task not in TASKS:
        raise ValueError(f"task must be one of {TASKS}, got {task!r}")
    return {"calibration": calibration, "conformal": conformal, "spectral": spectral}[task](
        lm, **kwargs)


def _plain(v):
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, np.ndarray):
        return _plain(v.tolist())
    if isinstance(v, (np.bool_,)):
        return bool(v)
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, (float, np.floating)):
        return float(v) if math.isfinite(v) else None  # JSON has no NaN or infinity
    return v


def to_json(result: dict) -> dict:
    """The result as JSON-ready Python (numpy values converted; large arrays dropped)."""
    return _plain({k: v for k, v in result.items() if k not in ("logits",)})


def figures(result: dict) -> dict:
    """The result's figures in the book's style: ``{file stem: matplotlib figure}``."""
    import matplotlib

    matplotlib.use("Agg") if matplotlib.get_backend() == "" else None
    import matplotlib.pyplot as plt

    from standarderror import plots

    plots.style()
    task = result["task"]
    name = result["model"].get("label", result["model"]["name"])
    figs = {}
    if task == "calibration":
        fig, ax = plt.subplots(figsize=(6.4, 3.6))
        ts = [r["temperature"] for r in result["table"]]
        ax.axhline(0, color=plots.GREY, lw=1)
        ax.plot(ts, [r["ece"] for r in result["table"]], "o-", color=plots.BLUE, label="ECE")
        ax.plot(ts, [r["gap"] for r in result["table"]], "s--", color=plots.ORANGE,
                label="mean confidence − accuracy")
        ax.set_xlabel("temperature T")
        ax.set_ylabel("probability")
        ax.set_title(f"{name}: accuracy {result['table'][0]['accuracy']:.4f} at every T")
        ax.legend(loc="upper right")
        figs["calibration_temperature"] = fig
        fig, ax = plt.subplots(figsize=(6.4, 3.6))
        for s, colour in plots.SCORE_COLOURS.items():
            rows = [r for r in result["abstention"] if r["score"] == s]
            ax.plot([r["temperature"] for r in rows], [r["aurc"] for r in rows], "o-",
                    color=colour, label=s)
        ax.axhline(result["oracle"], color=plots.GREY, ls=":", lw=1, label="oracle")
        ax.set_xlabel("temperature T")
        ax.set_ylabel("AURC (lower is better)")
        ax.legend()
        figs["calibration_aurc"] = fig
    elif task == "conformal":
        fig, ax = plt.subplots(figsize=(6.4, 3.4))
        k = result["settings"]["options"]
        edges = np.arange(k + 2) - 0.5
        for s, colour, off in (("lac", plots.BLUE, -0.2), ("aps", plots.ORANGE, 0.2)):
            h = np.histogram(result["sizes"][s], bins=edges)[0]
            ax.bar(np.arange(k + 1) + off, h, width=0.4, color=colour,
                   label=f"{s.upper()}: coverage {result[s]['coverage']:.3f}, "
                         f"mean size {result[s]['mean_size']:.2f}")
        ax.set_xlabel("set size (options)")
        ax.set_ylabel("test questions")
        ax.set_title(f"{name}: alpha = {result['settings']['alpha']}")
        ax.legend()
        figs["conformal_sizes"] = fig
    elif task == "spectral":
        fig, ax = plt.subplots(figsize=(4.8, 4.2))
        ax.plot([0, 1], [0, 1], color=plots.GREY, lw=1, ls="--")
        for key, colour, label in (("1", plots.BLUE, "T = 1"),
                                   ("fitted", plots.VERMILLION,
                                    f"fitted T = {result['temperature']:.2f}")):
            r = result["reliability"][key]
            ax.plot(r["predicted"], r["target"], "o-", color=colour,
                    label=f"{label} (ECE {r['ece']:.3f})")
        ax.set_xlabel("predicted top eigenvalue (bin mean)")
        ax.set_ylabel("target mass (bin mean)")
        ax.set_title(f"{name}: reliability")
        ax.legend()
        figs["spectral_reliability"] = fig
    return figs


def write(result: dict, out) -> dict:
    """Write ``<task>.json`` and the PNG figures into ``out``; returns ``{kind: path}``.

    Every file is written under a temporary name in ``out`` and renamed once all of them
    are complete (the JSON last), so a failure part-way leaves no result behind, never a
    complete-looking JSON beside a truncated figure. The JSON holds no NaN or infinity
    (``null`` instead)."""
    import matplotlib.pyplot as plt

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    text = json.dumps(to_json(result), indent=1, allow_nan=False)
    final, temps = {}, []
    try:
        for stem, fig in figures(result).items():
            fd, tmp = tempfile.mkstemp(prefix=f".{stem}.", suffix=".png.part", dir=out)
            os.close(fd)
            temps.append(tmp)
            try:
                fig.savefig(tmp, format="png")
            finally:
                plt.close(fig)
            final[stem] = (tmp, out / f"{stem}.png")
        fd, tmp = tempfile.mkstemp(prefix=f".{result['task']}.", suffix=".json.part", dir=out)
        temps.append(tmp)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        final = {"json": (tmp, out / f"{result['task']}.json"), **final}
        for key in list(final)[1:] + ["json"]:  # figures first, the JSON last
            os.replace(*final[key])
    except BaseException:
        for tmp in temps:
            if os.path.exists(tmp):
                os.unlink(tmp)
        raise
    return {k: v[1] for k, v in final.items()}


def summary(result: dict, width: int | None = None) -> str:
    """A short plain-text table of the result; with ``width``, lines longer than ``width``
    characters are wrapped at spaces, continuations indented (a page's column).
    """
    if width is not None:
        _checks.positive_int(width, "width")
        import textwrap

        return "\n".join(
            "\n".join(textwrap.wrap(line, width, subsequent_indent="    ",
                                    break_long_words=False, break_on_hyphens=False))
            or line for line in summary(result).split("\n"))
    m = result["model"]
    lines = [f"{result['task']} -- {m.get('label', m['name'])}: {m['parameters']:,} parameters, "
             f"vocabulary {m['vocab']:,}", f"tokenizer {m['tokenizer']}"]
    if result["task"] == "calibration":
        lines.append(f"{result['rows']:,} predictions from {result['sequences']} windows; "
                     f"accuracy identical at every T: {result['accuracy_identical']}")
        lines.append(f"{'T':>6} {'accuracy':>9} {'NLL':>8} {'ECE':>7} {'conf-acc':>9}")
        for r in result["table"]:
            lines.append(f"{r['temperature']:6.2f} {r['accuracy']:9.4f} {r['nll']:8.4f} "
                         f"{r['ece']:7.4f} {r['gap']:+9.4f}")
        f = result["fitted"]
        lines.append(f"fitted temperature {f['temperature']:.3f} (NLL {f['nll']:.4f})")
        iv, fl = result["intervals"], result["ece_floor"]
        t1 = next(r for r in result["table"] if r["temperature"] == 1.0)
        lines.append(f"at T=1, 95% intervals over resampled windows: accuracy "
                     f"{t1['accuracy']:.4f} [{iv['accuracy'][0]:.4f}, {iv['accuracy'][1]:.4f}]"
                     f", ECE {t1['ece']:.4f} [{iv['ece'][0]:.4f}, {iv['ece'][1]:.4f}] "
                     f"(floor at this size {fl['mean']:.4f})")
        pb = result["per_byte"]
        lines.append(f"log-loss {pb['bits_per_byte']:.4f} bits per byte "
                     f"[{pb['interval'][0]:.4f}, {pb['interval'][1]:.4f}], "
                     f"{pb['bits_per_char']:.4f} per character (comparable across "
                     "tokenizers)")
        for b in result["positions"]:
            lines.append(f"positions {b['band'][0]:>2}-{b['band'][1]:<2} {b['rows']:>6,} "
                         f"predictions: accuracy {b['accuracy']:.4f}, NLL {b['nll']:.4f}, "
                         f"ECE {b['ece']:.4f} (floor {b['ece_floor']['mean']:.4f})")
        for score in dict.fromkeys(r["score"] for r in result["abstention"]):
            lines.append(f"AURC, {score:15s} " + "  ".join(
                f"T={r['temperature']:g}: {r['aurc']:.4f}" for r in result["abstention"]
                if r["score"] == score and r["temperature"] in (1.0, 2.0)))
        lines.extend(f"note: {c}" for c in result["caveats"])
    elif result["task"] == "conformal":
        lines.append(f"{result['questions']} questions ({result['calibration']} calibrate); "
                     f"accuracy {result['accuracy']:.3f}; options take "
                     f"{result['option_tokens']['mean']:.2f} tokens on average")
        for s in ("lac", "aps"):
            r = result[s]
            lines.append(f"{s.upper()}: coverage {r['coverage']:.3f}  mean size "
                         f"{r['mean_size']:.3f}  singletons {r['singleton']:.3f}")
        w = result["word_calibration"]
        lines.append(f"whole-word choice (comparable across tokenizers): accuracy "
                     f"{w['accuracy']:.3f} [{w['intervals']['accuracy'][0]:.3f}, "
                     f"{w['intervals']['accuracy'][1]:.3f}], ECE {w['ece']:.3f} "
                     f"[{w['intervals']['ece'][0]:.3f}, {w['intervals']['ece'][1]:.3f}] "
                     f"(floor at {w['questions']} questions {w['ece_floor']['mean']:.3f})")
        lines.append(f"contexts truncated {result['truncated']}, boundary merges "
                     f"{result['merged']}")
    else:
        au = result["auroc"]
        ti = result["temperature_interval"]
        lines.append(f"fitted matrix T {result['temperature']:.3f} [{ti[0]:.3f}, {ti[1]:.3f}]"
                     f" at {result['settings']['answers']} answers; greedy accuracy "
                     f"{result['accuracy']:.3f}; {result['distinct']:.1f} distinct answers "
                     "per question")
        lines.append(f"risk {result['risk']['1']:.3f} -> {result['risk']['fitted']:.3f}, "
                     f"entropy {result['entropy']['1']:.3f} -> "
                     f"{result['entropy']['fitted']:.3f}, eigenvalue ECE "
                     f"{result['reliability']['1']['ece']:.3f} -> "
                     f"{result['reliability']['fitted']['ece']:.3f}")
        lines.append("AUROC of the top eigenvalue: " + (f"{au['auroc']:.3f} ± {au['se']:.3f}"
                                                       if au else result["auroc_note"]))
        lines.append(f"answers cut at max_tokens {result['unterminated']}, contexts "
                     f"truncated {result['truncated']}")
    return "\n".join(lines)
