r"""Episode 5's spectral pipeline on any model: sampled one-word answers as density
matrices, the matrix temperature fitted at the number of answers it is applied at."""

from __future__ import annotations

import time

import numpy as np

from standarderror import _checks
from standarderror.llm.interface import LanguageModel

from ._common import _header, _interval


def spectral(lm: LanguageModel, *, dev: int = 300, test: int = 1700, answers: int = 20,
             temperature: float = 0.5, seed: int = 0, max_tokens: int = 16, bins: int = 8,
             clusters: int = 5, fit_draws: int = 20, progress: bool = True) -> dict:
    r"""Episode 5's pipeline on any model: sampled one-word answers as density matrices.

    Questions are :func:`standarderror.llm.semantic.questions` (48-character held-out
    contexts ending before a word; ``dev`` for fitting, ``test`` disjoint). Each gets
    ``answers`` answers sampled at ``temperature`` and cut after one word
    (:meth:`~.interface.base.LanguageModel.sample`, at most ``max_tokens`` tokens; answers cut
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
    for name, v in (("dev", dev), ("test", test), ("max_tokens", max_tokens),
                    ("clusters", clusters)):
        _checks.positive_int(v, name)
    _checks.answers(answers, "answers")
    _checks.draws(fit_draws, "fit_draws")
    _checks.bins(bins)
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
    fit = sp.fit_spectral_temperature(a_dev, y_dev)
    tf = fit["temperature"]
    correct = blocks["test"]["correct"]
    rng = np.random.default_rng(seed + 3)
    refits = []
    for _ in range(fit_draws):  # whole development questions resampled, refitted
        pick = rng.integers(0, len(a_dev), size=len(a_dev))
        refits.append(sp.fit_spectral_temperature(a_dev[pick], y_dev[pick])["temperature"])
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
