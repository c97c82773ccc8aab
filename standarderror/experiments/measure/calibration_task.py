r"""Calibration of next-token predictions on held-out text (Episode 3's measurements), with
their window-resampled intervals and ECE floors, and the bounded tokenisation of a text file.
The streaming design is described in :mod:`standarderror.experiments.measure`."""

from __future__ import annotations

import codecs
import math
import os
import time
from pathlib import Path

import numpy as np

from standarderror import _checks, _progress
from standarderror.llm import interface
from standarderror.llm.interface import LanguageModel
from standarderror.llm.tiny import windows
from standarderror.uncertainty import scaling

from ._common import DRAWS, _header, _interval

#: Temperatures at which NLL is accumulated for the fitted temperature (log-spaced 0.25..4).
FIT_GRID = np.exp(np.linspace(np.log(0.25), np.log(4.0), 25))


def calibration(lm: LanguageModel, *, text=None, count: int = 10, size: int = 16,
                seed: int = 0, block: int | None = None, temperatures=None,
                abstention_temperatures=None, bins: int = 15, draws: int = DRAWS,
                progress: bool = True) -> dict:
    r"""Calibration of next-token predictions on held-out text (Episode 3's measurements).

    ``count * size`` non-overlapping windows of ``block`` tokens (default: 64, or the model's
    window if smaller) are drawn from ``text`` (default: our test plays; a ``pathlib.Path``
    is read as UTF-8 and tokenised in blocks, :func:`encode_file`) by
    :func:`~standarderror.llm.windows.windows`; every position is one prediction, after
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
    for name, v in (("count", count), ("size", size)):
        _checks.positive_int(v, name)
    _checks.bins(bins)
    _checks.draws(draws)
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
    per = max(1, min(size, interface.base.MAX_ELEMENTS // (block * lm.vocab_size)))
    keep = {t: {"pred": [], "conf": [], "nll": []} for t in ts}
    scores = {(s, t): [] for s in cb.CONFIDENCE_SCORES for t in ts_ab}
    grid_nll = np.zeros(len(FIT_GRID))
    ys, text_bytes, text_chars = [], [], []
    it = windows(ids, count, size, seed, block=block)
    for x, y in _progress.bar(it, progress and f"calibration ({lm.info()['label']})", count):
        for first, rest in zip(x[:, :1], y):  # the text each window's predictions score
            whole, head = lm.decode(np.r_[first, rest]), lm.decode(first)
            text_bytes.append(len(whole.encode("utf-8")) - len(head.encode("utf-8")))
            text_chars.append(len(whole) - len(head))
        for lo in range(0, size, per):
            logp = lm.labelled_window_logprobs(x[lo:lo + per], y[lo:lo + per]).reshape(
                -1, lm.vocab_size)
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
            grid_nll += scaling.grid_nll_sums(logp, yy, FIT_GRID)
            del logp
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
            "fitted": scaling.fit_temperature_on_grid(FIT_GRID, grid_nll), "nll_grid": grid_nll.tolist(),
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
    drawn from the confidences themselves (a model calibrated by construction). It is
    :func:`~standarderror.uncertainty.binning.ece_floor` at ``sizes=[len(confidence)]`` and
    the one bin count ``bins``: each draw is a reordering of every row, sorted, then
    labelled."""
    from standarderror.uncertainty import binning

    c = np.asarray(confidence, dtype=float)
    row = binning.ece_floor(c, [c.size], bins=(bins,), draws=draws, seed=seed)["rows"][0]
    return {"mean": row["mean"], "sd": row["sd"], "draws": int(draws)}


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
    whatever the file: at most ``max_bytes`` are read (a larger file is refused), and only
    from a regular file (:func:`standarderror._checks.open_regular`: a FIFO or a device
    such as ``/dev/zero`` is refused, never waited on). Each block is checked as
    :meth:`~standarderror.llm.interface.base.LanguageModel.check_text` checks text. Raises
    ``ValueError`` naming the file for bytes that are not UTF-8, NUL bytes (not a text
    file), an empty file, one past the limit or one that is not a regular file.

    A token cannot straddle a block boundary; a large file therefore tokenises as the
    concatenation of its blocks (which differs from one call on the whole text only at the
    boundaries, one per ``chunk_bytes``)."""
    chunk_bytes = int(chunk_bytes or CHUNK_BYTES)
    max_bytes = int(max_bytes or MAX_TEXT_BYTES)
    path = Path(path)
    decoder = codecs.getincrementaldecoder("utf-8")("strict")
    parts, carry, read = [], "", 0

    def emit(piece: str) -> None:
        ids = lm.encode(piece)
        lm.check_text(piece, ids)
        parts.append(ids)

    with _checks.open_regular(path) as f:
        size = os.fstat(f.fileno()).st_size
        if size > max_bytes:
            raise ValueError(f"{path} holds {size:,} bytes, more than the {max_bytes:,} this "
                             "measurement reads; pass a part of it (the windows need only "
                             "count * size * (block + 1) tokens)")
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
