"""A six-option next-word task built from held-out text, scored by the model's checkpoints.

This is the book's stand-in for the benchmarks of Ye et al. (2024): a family of models (the
committed transformer's eight training checkpoints) answering the same multiple-choice
questions, so that set-size rankings can be measured on models we hold.

The task (:func:`questions`)
    Each question is a 48-character window of a held-out play (the ``"test"`` split) that
    ends just before a word, and six options: the word that actually comes next and five
    distractors. The true word is one of the frequent training words described next (rare
    true words against frequent distractors made the task close to impossible for our
    model: the prior on frequent words wins). Distractors are frequent words of the training split (the
    ``pool`` most
    frequent lower-case words of at least three letters, speaker names excluded) **of the
    same length** as the true word, drawn uniformly without replacement and capitalised
    like it. Option positions are shuffled with the seed.

    Equal lengths do three jobs: no option is a prefix of another, the options cost the same
    number of predictions, and the sum of log-probabilities (below) needs no length
    normalisation. Frequent distractors are plausible on their own, so the task cannot be
    solved by ignoring the context; the true word is whatever the play says next, which the
    distractors do not fit, so it can be solved by reading it.

The score (:func:`option_logits`)
    :func:`family` scores an option as the log-probability of the whole word given the
    context (:func:`option_logits` with ``whole_words=True``): the sum
    of the log-probabilities of its characters, :math:`\\sum_{j} \\log p(o_j \\mid
    \\text{context}, o_{<j})`, plus the log-probability that the word ends there (that the
    next character is not a letter, an apostrophe or a hyphen, the event the true word is
    drawn on; :func:`boundary_ids`). Without that last term the score is the probability of
    the option as a *prefix*, which also counts every longer word that starts with it
    (``whole_words=False``, :func:`option_logits`' default, the score a model interface's
    ``continuation_logprob`` gives; :func:`family` keeps those as ``prefix_logits``). Softmax
    over the six scores gives the model's probability of each option given that the answer
    is one of them. We do not divide by the length: within a question all options have the
    same length, so dividing would only apply a per-question temperature equal to the word
    length, not remove a bias.

    The task is a six-word cloze: six words of one length, no letters, no "I don't know" or
    "none of the above" option, so it is not the format of Ye et al.'s benchmarks (lettered
    options A-F, two of them those catch-alls); it shares their number of options and their
    split-conformal protocol.

Everything is computed fresh (nothing is cached on disk). The context is run once per
question with a key/value cache, and the six continuations are scored together from that
cache (:meth:`TinyLM.option_logprobs
<standarderror.llm.interface.tiny_lm.TinyLM.option_logprobs>`, the model interface's one
entry point for option scores).
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch

from standarderror import _checks
from standarderror._parallel import WORKERS
from standarderror.llm import tiny
from standarderror.llm.interface import TinyLM
from standarderror.llm.semantic import CONTEXT  # one context length: every question task
from standarderror.uncertainty import coverage as cv
from standarderror.uncertainty.ranks import kendall_tau
from standarderror.uncertainty.scaling import fit_temperature

OPTIONS = 6
#: Checkpoints that :func:`family` scores side by side (one Python thread each; the results do
#: not depend on this number).
_WORKERS = WORKERS
LENGTHS = (3, 8)
_WORD = re.compile(r"[A-Za-z]+")


@functools.cache
def _text(name: str) -> str:
    """A split's text, parsed once per process (held in memory only)."""
    return tiny.split(name)


def _case_ok(word: str) -> bool:
    """Lower-case or Capitalised (speaker names are in capitals and are excluded)."""
    return word == word.lower() or word == word.capitalize()


@functools.lru_cache(maxsize=8)
def _pool(pool: int, lengths: tuple[int, int]) -> tuple:
    # count each spelling once, then filter and merge the distinct spellings (a few thousand
    # instead of every word of the plays): the same integer counts
    counts: Counter = Counter()
    for w, k in Counter(_WORD.findall(_text("train"))).items():
        if lengths[0] <= len(w) <= lengths[1] and _case_ok(w):
            counts[w.lower()] += k
    return tuple(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:pool])


@functools.lru_cache(maxsize=8)
def _candidates(pool: int, lengths: tuple[int, int], context: int) -> tuple:
    """The candidate places of :func:`questions` (offset, word), in text order: they do not
    depend on ``count`` or ``seed``, so each page's many calls scan the plays once."""
    text = _text("test")
    frequent = {w for w, _ in _pool(pool, lengths)}
    pattern = re.compile(rf"(?<=[ \n])([A-Za-z]{{{lengths[0]},{lengths[1]}}})(?=[^A-Za-z'\-])")
    return tuple((m.start(), m.group(1)) for m in pattern.finditer(text)
                 if m.start() >= context and _case_ok(m.group(1))
                 and m.group(1).lower() in frequent)


def distractor_pool(pool: int = 500, lengths: tuple[int, int] = LENGTHS) -> dict[int, list[str]]:
    """The ``pool`` most frequent lower-cased training words with lengths in ``lengths``
    (inclusive), grouped by length; ties in frequency are broken alphabetically."""
    pool = _checks.positive_int(pool, "pool")
    try:
        lo, hi = (_checks.positive_int(v, "lengths") for v in lengths)
    except (TypeError, ValueError):
        raise ValueError(f"lengths must be a pair of positive integers, got {lengths!r}") from None
    if lo > hi:
        raise ValueError(f"lengths must be (shortest, longest), got {lengths!r}")
    out: dict[int, list[str]] = {}
    for w, _ in _pool(pool, (lo, hi)):
        out.setdefault(len(w), []).append(w)
    return out


def questions(count: int = 720, seed: int = 0, *, pool: int = 500,
              lengths: tuple[int, int] = LENGTHS, context: int = CONTEXT) -> dict:
    """Draw ``count`` six-option questions from the held-out ``"test"`` split.

    A candidate is a word of ``lengths`` letters, lower-case or Capitalised, that is itself
    in the distractor pool (so the true word and its distractors are all frequent words and
    word frequency alone cannot tell them apart), preceded by a space or a newline and
    followed by a character that is neither a letter nor an apostrophe nor a hyphen, with at
    least ``context`` characters before it. Candidates are
    drawn without replacement with ``seed``.

    Returns
    -------
    dict
        ``context`` (list of str), ``options`` (count x 6 array of str), ``y`` (index of the
        true option), ``word`` (the true word), ``start`` (its offset in the split), ``seed``.
    """
    if not isinstance(count, (int, np.integer)) or count < 1:
        raise ValueError(f"count must be a positive integer, got {count!r}")
    if context + lengths[1] > 64:
        raise ValueError(f"context + longest option must fit the model's 64 characters, got "
                         f"{context} + {lengths[1]}; shorten context or lengths")
    text = _text("test")
    by_length = distractor_pool(pool, lengths)
    for n in range(lengths[0], lengths[1] + 1):
        if len(by_length.get(n, [])) < OPTIONS:
            raise ValueError(f"the pool has {len(by_length.get(n, []))} words of length {n}; "
                             "raise pool or narrow lengths")
    cands = _candidates(_checks.positive_int(pool, "pool"), tuple(lengths), context)
    if count > len(cands):
        raise ValueError(f"count={count} exceeds the {len(cands)} candidate words")
    rng = np.random.default_rng(seed)
    pick = rng.choice(len(cands), size=count, replace=False)
    contexts, options, ys, words, starts = [], [], [], [], []
    for i in pick:
        start, word = cands[i]
        pool_n = [w for w in by_length[len(word)] if w != word.lower()]
        chosen = [pool_n[j] for j in rng.choice(len(pool_n), OPTIONS - 1, replace=False)]
        if word[0].isupper():
            chosen = [w.capitalize() for w in chosen]
        opts = [word] + chosen
        order = rng.permutation(OPTIONS)
        options.append([opts[j] for j in order])
        ys.append(int(np.flatnonzero(order == 0)[0]))
        contexts.append(text[start - context:start])
        words.append(word)
        starts.append(start)
    return {"context": contexts, "options": np.array(options), "y": np.array(ys),
            "word": words, "start": np.array(starts), "seed": seed}


def boundary_ids(stoi: dict) -> np.ndarray:
    """Token ids of the characters that end a word in :func:`questions`: every character of
    the vocabulary that is neither a letter nor an apostrophe nor a hyphen."""
    return np.array(sorted(i for c, i in stoi.items() if not re.fullmatch(r"[A-Za-z'\-]", c)))


def option_logits(model: dict, qs: dict, *, chunk: int = 360,
                  whole_words: bool = False) -> np.ndarray:
    """Sum of the log-probabilities of each option's characters given its context.

    ``whole_words=True`` adds the log-probability that the word ends there, that the next
    character is one of :func:`boundary_ids` (the event :func:`questions` conditions the
    true word on): the option is then scored as the whole word ``o`` followed by a
    non-letter, :math:`\\log p(o \\mid c) + \\log \\sum_{b} p(b \\mid c, o)`, rather than
    as the prefix ``o``, which also counts every longer word that begins with it.

    ``model`` is :func:`standarderror.llm.weights.load`'s dict, wrapped (not reloaded) as a
    :class:`~standarderror.llm.interface.tiny_lm.TinyLM`, whose
    :meth:`~standarderror.llm.interface.tiny_lm.TinyLM.option_logprobs` computes the scores
    (``chunk`` questions at a time). Questions are grouped by option
    length. The context of each question is run once (causal attention); the six options
    then run together, each attending to the shared context keys and values and causally to
    its own characters. This is the computation of running each context + option string
    through the model (a test checks it against
    :func:`standarderror.llm.gpt.log_probabilities`), with the context's work done once
    instead of six times. Returns a float64 array (questions x 6).
    """
    return _scores(model, qs, chunk, whole_words)[0]


def _scores(model: dict, qs: dict, chunk: int, whole_words: bool):
    """(scores as :func:`option_logits` returns them, prefix scores), from one pass of
    :meth:`~standarderror.llm.interface.tiny_lm.TinyLM.option_logprobs`."""
    r = TinyLM(model).option_logprobs(qs["context"], qs["options"], chunk=chunk,
                                      ends=boundary_ids(model["stoi"]) if whole_words else None)
    prefix = r["logprob"]
    return (prefix + r["ends"] if whole_words else prefix), prefix


def family(count: int = 720, seed: int = 0, *, split_seed: int = 1, steps=None,
           threads: int | None = 1, whole_words: bool = True) -> dict:
    """The checkpoints' option scores on one fixed set of questions.

    Options are scored as whole words (``whole_words``, see :func:`option_logits`), the
    event the questions are built on; ``whole_words=False`` scores them as prefixes.

    Scoring runs with ``threads`` torch threads (restored afterwards; ``None`` leaves the
    setting alone). One thread by default: the matrices are small, so a second thread buys
    little, and a fixed count makes the float32 sums identical on every machine.

    Returns
    -------
    dict
        ``steps`` (training steps), ``logits`` (checkpoints x questions x 6, float64),
        ``prefix_logits`` (the same options scored as prefixes, whatever ``whole_words``),
        ``y``, ``calibration`` (boolean mask: a random half of the questions, fixed by
        ``split_seed``), ``questions`` (see :func:`questions`), ``sha256`` per checkpoint.
    """
    qs = questions(count, seed)
    steps = list(steps) if steps is not None else [c["step"] for c in tiny.card()["checkpoints"]]
    logits, prefixes, shas = [], [], []
    before = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(int(threads))
    def scored(step):
        m = tiny.load(step)
        return (*_scores(m, qs, 360, whole_words), m["sha256"])

    try:
        # checkpoints side by side, one Python thread each: every torch operation still runs
        # on the thread count set above, so no sum changes (torch releases the GIL in them)
        with ThreadPoolExecutor(max(1, min(len(steps), _WORKERS))) as pool:
            for z, prefix, sha in pool.map(scored, steps):
                logits.append(z)
                prefixes.append(prefix)
                shas.append(sha)
    finally:
        torch.set_num_threads(before)
    cal = np.zeros(count, dtype=bool)
    cal[np.random.default_rng(split_seed).permutation(count)[: count // 2]] = True
    return {"steps": steps, "logits": np.stack(logits), "y": qs["y"], "calibration": cal,
            "questions": qs, "sha256": shas, "whole_words": bool(whole_words),
            "prefix_logits": np.stack(prefixes)}


RULES = ("ye", "textbook")


def _probabilities(z, t, rule: str) -> np.ndarray:
    """One checkpoint's option probabilities at temperature ``t`` under ``rule``: Ye et al.'s
    float32 softmax of the scores rounded to float32 (their logits are float32), or the
    float64 softmax of the textbook rule."""
    if rule == "ye":
        return cv.ye_softmax(np.asarray(z, dtype=np.float32), t)
    return cv.softmax_logits(z, t)


def _size_table(logits, y, cal, temperature, alpha, rule="ye") -> dict:
    """Per checkpoint: accuracy, coverage and mean size per score, at one temperature each."""
    ts = np.broadcast_to(np.asarray(temperature, dtype=float), (logits.shape[0],))
    rows = [cv.evaluate(_probabilities(z, t, rule), y, cal, alpha=alpha, rule=rule,
                        answers=np.argmax(z, axis=1)) for z, t in zip(logits, ts)]
    out = {"accuracy": np.array([r["accuracy"] for r in rows]), "temperature": np.array(ts)}
    for s in cv.SCORES:
        out[f"{s}_coverage"] = np.array([r[s]["coverage"] for r in rows])
        out[f"{s}_size"] = np.array([r[s]["mean_size"] for r in rows])
    out["average_size"] = (out["lac_size"] + out["aps_size"]) / 2
    return out


#: The steps from the textbook sets to Ye et al.'s, one change at a time (see :func:`overshoot`).
VARIANTS = ("textbook", "ye_quantile", "ye_no_fallback", "ye")


def overshoot(fam: dict, *, splits: int = 100, seed: int = 3, alpha: float = 0.1) -> dict:
    """Where Ye et al.'s coverage above :math:`1-\\alpha` comes from, one change at a time.

    For the family's own split and for ``splits`` fresh random halvings (seeded), every
    checkpoint's sets are built four ways (:data:`VARIANTS`), each adding one fact of Ye et
    al.'s computation to the previous one:

    ``"textbook"``
        float64 softmax, the textbook threshold (the :math:`k`-th smallest score), the APS
        running sum capped at one with the last option's score exactly one; no fallback.
    ``"ye_quantile"``
        the same scores with Ye et al.'s ``np.quantile(..., method="higher")`` threshold.
    ``"ye_no_fallback"``
        Ye et al.'s float32 softmax and uncapped float32 running sums (``rule="ye"``,
        ``nonempty=False``).
    ``"ye"``
        Ye et al.'s computation: the same, and an empty set receives the top option.

    Returns
    -------
    dict
        ``variants``; ``coverage`` and ``empty``: ``{score: {variant: array}}`` of shape
        (splits + 1, checkpoints), row 0 the family's own split; ``empty_top_right``
        ``{score: array}`` (same shape): the share of test questions whose ``"ye_no_fallback"``
        set is empty *and* whose top option is the true one (the fallback's gain in coverage,
        exactly); ``tied_at_one`` (same shape): the share of textbook APS calibration scores
        equal to exactly one (the true option ranked last), and ``qhat_at_one`` whether the
        textbook APS threshold is one; ``saturated`` (checkpoints): the share of questions
        whose float32 top probability is exactly 1.0; ``steps``.
    """
    splits = _checks.draws(splits, "splits")
    z, y = fam["logits"], fam["y"]
    n, c = len(y), z.shape[0]
    rng = np.random.default_rng(seed)
    masks = [fam["calibration"]]
    for _ in range(splits):
        m = np.zeros(n, dtype=bool)
        m[rng.permutation(n)[: n // 2]] = True
        masks.append(m)
    shape = (len(masks), c)
    cov = {s: {v: np.empty(shape) for v in VARIANTS} for s in cv.SCORES}
    emp = {s: {v: np.empty(shape) for v in VARIANTS} for s in cv.SCORES}
    top_right = {s: np.empty(shape) for s in cv.SCORES}
    tied, at_one = np.empty(shape), np.zeros(shape, dtype=bool)
    p64 = [cv.softmax_logits(zi) for zi in z]
    p32 = [_probabilities(zi, 1.0, "ye") for zi in z]
    for i, cal in enumerate(masks):
        t = ~cal
        for j in range(c):
            right = np.argmax(z[j][t], axis=1) == y[t]
            for s in cv.SCORES:
                runs = {
                    "textbook": cv.conformal_sets(p64[j][cal], y[cal], p64[j][t], alpha=alpha,
                                                  score=s),
                    "ye_quantile": cv.conformal_sets(p64[j][cal], y[cal], p64[j][t],
                                                     alpha=alpha, score=s, quantile="ye"),
                    "ye_no_fallback": cv.conformal_sets(p32[j][cal], y[cal], p32[j][t],
                                                        alpha=alpha, score=s, rule="ye",
                                                        nonempty=False),
                    "ye": cv.conformal_sets(p32[j][cal], y[cal], p32[j][t], alpha=alpha,
                                            score=s, rule="ye"),
                }
                for v, r in runs.items():
                    summ = cv.set_summary(r["sets"], y[t])
                    cov[s][v][i, j] = summ["coverage"]
                    emp[s][v][i, j] = summ["empty"]
                empty = ~runs["ye_no_fallback"]["sets"].any(axis=1)
                top_right[s][i, j] = float((empty & right).mean())
                if s == "aps":
                    tied[i, j] = float((runs["textbook"]["scores_cal"] == 1.0).mean())
                    at_one[i, j] = runs["textbook"]["qhat"] == 1.0
    saturated = np.array([float((p.max(axis=1) == 1).mean()) for p in p32])
    return {"variants": VARIANTS, "coverage": cov, "empty": emp, "empty_top_right": top_right,
            "tied_at_one": tied, "qhat_at_one": at_one, "saturated": saturated,
            "steps": list(fam["steps"])}


def analysis(fam: dict, *, alpha: float = 0.1, temperatures=(0.5, 1.0, 2.0),
             rule: str = "ye") -> dict:
    """The review's measurements on the checkpoint family.

    The sets are Ye et al.'s (``rule="ye"``: float32 softmax of the scores, their quantile,
    the fallback for empty sets; see :func:`~standarderror.uncertainty.conformal.conformal_sets`)
    unless ``rule="textbook"``; answers are the argmax of the scores.

    Returns
    -------
    dict
        ``at``: ``{T: table}`` with, per checkpoint, ``accuracy``, ``lac_coverage``,
        ``lac_size``, ``aps_coverage``, ``aps_size``, ``average_size`` (all checkpoints share
        the temperature ``T``); ``fitted``: the same table with each checkpoint's
        maximum-likelihood temperature (fitted on the calibration half; ``temperature``
        holds them); ``tau_lac_aps``: :func:`~standarderror.uncertainty.ranks.kendall_tau`
        of LAC and APS sizes at T = 1; ``inversions``: for ``lac``, ``aps``, ``average``, the
        pairs of checkpoints in which the more accurate one has the larger mean size;
        ``spearman``: Spearman's correlation of accuracy and size per score;
        ``temperature``: tau and rank changes between T = 0.5 and T = 2, and between T = 1
        and the fitted temperatures, per score.
    """
    _checks.choice(rule, "rule", RULES)
    z, y, cal = fam["logits"], fam["y"], fam["calibration"]
    at = {t: _size_table(z, y, cal, t, alpha, rule) for t in temperatures}
    fitted_t = np.array([fit_temperature(zi[cal], y[cal]) for zi in z])
    fit = _size_table(z, y, cal, fitted_t, alpha, rule)
    base = at[1.0]
    keys = {"lac": "lac_size", "aps": "aps_size", "average": "average_size"}
    out = {"at": at, "fitted": fit, "steps": list(fam["steps"]),
           "tau_lac_aps": kendall_tau(base["lac_size"], base["aps_size"]),
           "inversions": {n: cv.inversions(base["accuracy"], base[k]) for n, k in keys.items()},
           "spearman": {n: cv.spearman(base["accuracy"], base[k]) for n, k in keys.items()}}
    temp = {}
    lo, hi = min(temperatures), max(temperatures)
    for n, k in keys.items():
        temp[n] = {
            "tau_extremes": kendall_tau(at[lo][k], at[hi][k])["tau"],
            "changed_extremes": int((cv.ranking(at[lo][k]) != cv.ranking(at[hi][k])).sum()),
            "tau_fitted": kendall_tau(base[k], fit[k])["tau"],
            "changed_fitted": int((cv.ranking(base[k]) != cv.ranking(fit[k])).sum()),
        }
    out["temperature"] = temp
    return out


def split_control(fam: dict, *, splits: int = 20, seed: int = 2, alpha: float = 0.1,
                  rule: str = "ye") -> dict:
    """Control: how much do size rankings move when only the calibration/test split changes?

    For each of ``splits`` random halvings (seeded), compute every checkpoint's LAC and APS
    mean size. ``within`` holds Kendall's tau between the LAC and the APS ranking on the same
    split (the score function changes, the data do not); ``across_lac`` and ``across_aps``
    hold tau between consecutive splits under one score (the data change, the score does
    not). If the scores' disagreement were only split noise, the two would look alike.

    Averaging each checkpoint's size over the splits shrinks the split noise: ``averaged``
    compares the rankings of the split-averaged sizes, and ``halves`` compares one score's
    average over the first ``splits // 2`` splits with its average over the rest (how far an
    average of that many splits still moves).

    Returns
    -------
    dict
        ``within``, ``across_lac``, ``across_aps`` (arrays of tau), ``discordant_within``
        (discordant pairs per split), ``pairs``; ``sizes``: ``{score: array}`` of mean sizes,
        splits x checkpoints; ``averaged``: :func:`~standarderror.uncertainty.ranks.kendall_tau`
        of the LAC and the APS sizes averaged over all splits; ``halves``: ``{score:
        kendall_tau}`` of that score's average over the first half of the splits against its
        average over the second half.
    """
    splits = _checks.draws(splits, "splits")
    _checks.choice(rule, "rule", RULES)
    if splits < 2:
        raise ValueError(f"splits must be at least 2 (consecutive splits are compared), got {splits}")
    z, y = fam["logits"], fam["y"]
    n = len(y)
    rng = np.random.default_rng(seed)
    sizes = {"lac": [], "aps": []}
    within, disc = [], []
    for _ in range(splits):
        cal = np.zeros(n, dtype=bool)
        cal[rng.permutation(n)[: n // 2]] = True
        t = _size_table(z, y, cal, 1.0, alpha, rule)
        for s in sizes:
            sizes[s].append(t[f"{s}_size"])
        k = kendall_tau(t["lac_size"], t["aps_size"])
        within.append(k["tau"])
        disc.append(k["discordant"])
    across = {s: np.array([kendall_tau(a, b)["tau"] for a, b in zip(v[:-1], v[1:])])
              for s, v in sizes.items()}
    sizes = {s: np.array(v) for s, v in sizes.items()}
    h = splits // 2
    return {"within": np.array(within), "across_lac": across["lac"], "across_aps": across["aps"],
            "discordant_within": np.array(disc), "pairs": z.shape[0] * (z.shape[0] - 1) // 2,
            "sizes": sizes,
            "averaged": kendall_tau(sizes["lac"].mean(axis=0), sizes["aps"].mean(axis=0)),
            "halves": {s: kendall_tau(v[:h].mean(axis=0), v[h:].mean(axis=0))
                       for s, v in sizes.items()}}
