r"""The book's three measurements on any model of the interface (:mod:`.interface`).

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
32,000-token vocabulary, one 64-token window at a time; working copies bring the peak to a
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

import json
import platform
import time
from pathlib import Path

import numpy as np

from standarderror.llm import interface
from standarderror.llm.interface import LanguageModel
from standarderror.llm.predictions import windows

TASKS = ("calibration", "conformal", "spectral")
#: Temperatures at which NLL is accumulated for the fitted temperature (log-spaced 0.25..4).
FIT_GRID = np.exp(np.linspace(np.log(0.25), np.log(4.0), 25))


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


def calibration(lm: LanguageModel, *, text: str | None = None, count: int = 10, size: int = 16,
                seed: int = 0, block: int | None = None, temperatures=None,
                abstention_temperatures=None, bins: int = 15, progress: bool = True) -> dict:
    r"""Calibration of next-token predictions on held-out text (Episode 3's measurements).

    ``count * size`` non-overlapping windows of ``block`` tokens (default: 64, or the model's
    window if smaller) are drawn from ``text`` (default: our held-out test plays) by
    :func:`~standarderror.llm.predictions.windows`; every position is one prediction. With
    our tiny model and the defaults these are Episode 3's 10,240 predictions.

    Returns
    -------
    dict
        ``table`` (one row per temperature: ``temperature``, ``accuracy``, ``nll``, ``ece``,
        ``confidence``, ``gap``, as :func:`~standarderror.uncertainty.calibration.
        temperature_table`), ``accuracy_identical`` (argmax equal at every temperature),
        ``fitted`` (``temperature``, ``nll``, ``at_bound``; see the module notes),
        ``nll_grid``, ``abstention`` (rows of ``score``, ``temperature``, ``aurc``),
        ``oracle``, ``rows``, ``sequences``, ``tokens_in_text``, ``memory`` (the largest
        block of log-probabilities held, in rows and bytes), ``seconds``, and the header
        (``task``, ``model``, ``settings``, ``versions``).
    """
    from standarderror.uncertainty import calibration as cb

    t0 = time.perf_counter()
    ts = tuple(float(t) for t in (temperatures or cb.TEMPERATURES))
    ts_ab = tuple(float(t) for t in (abstention_temperatures or cb.ABSTENTION_TEMPERATURES))
    if 1.0 not in ts:
        ts = tuple(sorted(ts + (1.0,)))
    block = int(block or min(64, lm.window))
    if block > lm.window:
        raise ValueError(f"block of {block} tokens exceeds the model's window of {lm.window}")
    source = "held-out test plays (standarderror.llm.tiny.split('test'))"
    if text is None:
        from standarderror.llm import tiny

        text = tiny.split("test")
    else:
        source = "user text"
    ids = lm.encode(text)
    lm.check_text(text, ids)
    per = max(1, min(size, interface.MAX_ELEMENTS // (block * lm.vocab_size)))
    keep = {t: {"pred": [], "conf": [], "nll": []} for t in ts}
    scores = {(s, t): [] for s in cb.SCORES for t in ts_ab}
    grid_nll = np.zeros(len(FIT_GRID))
    ys = []
    it = windows(ids, count, size, seed, block=block)
    for x, y in _progress(it, count, f"calibration ({lm.info()['label']})", progress):
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
        hit = pred == y
        conf = np.concatenate(keep[t]["conf"])
        acc = float(hit.mean())
        table.append({"temperature": t, "accuracy": acc,
                      "nll": float(np.concatenate(keep[t]["nll"]).mean()),
                      "ece": cb.ece(conf, hit, bins=bins), "confidence": float(conf.mean()),
                      "gap": float(conf.mean()) - acc})
    abst = [{"score": s, "temperature": t,
             "aurc": cb.aurc(np.concatenate(scores[(s, t)]), ok)} for (s, t) in scores]
    grid_nll /= n
    return {**_header("calibration", lm, {
                "count": count, "size": size, "seed": seed, "block": block, "bins": bins,
                "temperatures": list(ts), "abstention_temperatures": list(ts_ab),
                "text": source, "fit_grid": FIT_GRID.tolist()}),
            "table": table, "accuracy_identical": identical,
            "fitted": _fit_from_grid(grid_nll), "nll_grid": grid_nll.tolist(),
            "abstention": abst, "oracle": cb.aurc(ok.astype(float), ok),
            "rows": int(n), "sequences": int(count * size), "tokens_in_text": int(len(ids)),
            "memory": {"block_rows": int(per * block),
                       "block_bytes": int(per * block * lm.vocab_size * 8)},
            "seconds": time.perf_counter() - t0}


# --------------------------------------------------------------------------------------
# Conformal
# --------------------------------------------------------------------------------------


def conformal(lm: LanguageModel, *, count: int = 720, seed: int = 0, split_seed: int = 1,
              alpha: float = 0.1, progress: bool = True) -> dict:
    r"""Split-conformal sets on the review's six-option next-word task.

    The questions are :func:`standarderror.multiple_choice.questions` (``count``, ``seed``:
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
        options longer than one token), ``truncated``, ``merged``, ``questions``,
        ``seconds`` and the header.
    """
    from standarderror import multiple_choice as mc
    from standarderror.uncertainty import coverage as cv

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
    out["option_tokens"] = {"mean": float(tok.mean()), "min": int(tok.min()),
                            "max": int(tok.max()), "multi_token_share": float((tok > 1).mean())}
    out["truncated"], out["merged"] = int(truncated), int(merged)
    out["logits"] = z
    out["seconds"] = time.perf_counter() - t0
    return out


# --------------------------------------------------------------------------------------
# Spectral
# --------------------------------------------------------------------------------------


def spectral(lm: LanguageModel, *, dev: int = 300, test: int = 1700, m_dev: int = 100,
             m_test: int = 20, temperature: float = 0.5, seed: int = 0, max_tokens: int = 16,
             bins: int = 8, clusters: int = 5, progress: bool = True) -> dict:
    r"""Episode 5's pipeline on any model: sampled one-word answers as density matrices.

    Questions are :func:`standarderror.llm.semantic.questions` (48-character held-out
    contexts ending before a word; ``dev`` for fitting, ``test`` disjoint). Each gets
    ``m_dev`` / ``m_test`` answers sampled at ``temperature`` and cut after one word
    (:meth:`~.interface.LanguageModel.sample`, at most ``max_tokens`` tokens; answers cut
    there are counted in ``unterminated``), plus the greedy answer, right when it equals
    the true word. Answers are embedded by the packaged all-MiniLM-L6-v2; the matrix
    temperature is fitted on the development questions.

    Returns
    -------
    dict
        ``temperature`` (fitted), ``risk`` and ``entropy`` (test means at T = 1 and at the
        fit), ``reliability`` (per T: ``predicted``, ``target``, ``count``, ``ece``),
        ``accuracy`` (greedy, test), ``auroc`` (of the top eigenvalue for greedy
        correctness, or ``None`` with ``auroc_note`` when the test half has one class),
        ``distinct`` (mean distinct answers per test question), ``unterminated``,
        ``truncated``, ``seconds`` and the header.
    """
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
        answers, greedy = r["answers"], r["greedy"]
        counts["unterminated"] += r["unterminated"]
        counts["truncated"] += r["truncated"]
        blocks[name] = se.attach(data, {"truth": q["truth"], "greedy": greedy,
                                        "answers": answers,
                                        "correct": se.correct(greedy, q["truth"])})
    t1 = time.perf_counter()
    a_dev, y_dev = se.arrays(data, blocks["dev"])
    a, y = se.arrays(data, blocks["test"])
    fit = sp.fit_temperature(a_dev, y_dev)
    tf = fit["temperature"]
    correct = blocks["test"]["correct"]
    out = {**_header("spectral", lm, {"dev": dev, "test": test, "m_dev": m_dev,
                                       "m_test": m_test, "sampling_temperature": temperature,
                                       "seed": seed, "max_tokens": max_tokens, "bins": bins,
                                       "clusters": clusters, "embedder": "all-MiniLM-L6-v2"}),
           "temperature": tf, "at_bound": bool(fit["at_bound"]),
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
    if isinstance(v, np.floating):
        return float(v)
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
    """Write ``<task>.json`` and the PNG figures into ``out``; returns ``{kind: path}``."""
    import matplotlib.pyplot as plt

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"json": out / f"{result['task']}.json"}
    paths["json"].write_text(json.dumps(to_json(result), indent=1))
    for stem, fig in figures(result).items():
        paths[stem] = out / f"{stem}.png"
        fig.savefig(paths[stem])
        plt.close(fig)
    return paths


def summary(result: dict) -> str:
    """A short plain-text table of the result."""
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
        for score in dict.fromkeys(r["score"] for r in result["abstention"]):
            lines.append(f"AURC, {score:15s} " + "  ".join(
                f"T={r['temperature']:g}: {r['aurc']:.4f}" for r in result["abstention"]
                if r["score"] == score and r["temperature"] in (1.0, 2.0)))
    elif result["task"] == "conformal":
        lines.append(f"{result['questions']} questions ({result['calibration']} calibrate); "
                     f"accuracy {result['accuracy']:.3f}; options take "
                     f"{result['option_tokens']['mean']:.2f} tokens on average")
        for s in ("lac", "aps"):
            r = result[s]
            lines.append(f"{s.upper()}: coverage {r['coverage']:.3f}  mean size "
                         f"{r['mean_size']:.3f}  singletons {r['singleton']:.3f}")
        lines.append(f"contexts truncated {result['truncated']}, boundary merges "
                     f"{result['merged']}")
    else:
        au = result["auroc"]
        lines.append(f"fitted matrix T {result['temperature']:.3f}; greedy accuracy "
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
