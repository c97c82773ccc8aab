r"""The prefix-tree sampler, written once: ``m`` answers per context, each cut by a stop rule.

Both samplers of the package run here: :func:`standarderror.llm.semantic.sample` (the tiny
model with its key/value cache) and
:meth:`standarderror.llm.interface.base.LanguageModel.sample` (any model behind the
interface, re-running each prefix). :func:`sample` grows, for each context, a tree of the
``m`` samples: the samples that share a prefix share one next-token distribution, and the
``c`` samples on a prefix draw their next tokens jointly from
:math:`\mathrm{Multinomial}(c, \mathrm{softmax}(s / T))`, which is the law of ``m``
independent runs. A child whose text the stop rule ends gives its answer to its ``c``
samples; the others go on, until ``steps`` tokens, where a sample still running is cut
(:func:`first_word`) and counted (``unterminated``).

The two callers differ only in the *prefixes* they hand over: an object holding the live
prefixes of one tree, one row each, with

* ``scores``: a float64 array (rows x vocabulary) whose softmax at ``T`` is the next-token
  law: the tiny model's logits in :mod:`~standarderror.llm.semantic`, the interface's
  log-probabilities in :mod:`~standarderror.llm.interface.base` (each side's arithmetic, on
  which its pinned numbers depend);
* ``texts(parent, tokens, question)``: the text of each child (row ``parent`` followed by
  ``tokens``; ``question`` is the context it belongs to, an index into the block);
* ``extend(parent, tokens, question)``: those children as the new live prefixes, with their
  scores (one model evaluation: the key/value cache gathered by parent, or each prefix run
  again).

Beside the driver, the stop rule of one-word answers (:func:`one_word`, :func:`first_word`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Protocol

import numpy as np
import torch

from standarderror import _progress

#: Characters that continue a word; anything else ends it.
WORD = re.compile(r"[A-Za-z']+")
#: Contexts x answers (answers counted up to 16) in one block of the tree: bounds the live
#: prefixes evaluated together (and, for the tiny model, its key/value cache).
ROWS = 1024
#: Samples of several runs (temperatures) grown together from one block (see
#: :func:`sample_runs`): bounds the live prefixes of one evaluation when runs share it.
TOGETHER = 4 * ROWS


def one_word(text: str) -> str | None:
    """The stop rule "one word": the answer once it is known, else ``None``.

    A continuation that starts with a word (letters and apostrophes) ends when a character
    that cannot continue the word follows it; the answer is the word. A continuation that
    starts with anything else ends at once, and its answer is that character stripped of
    whitespace (possibly ``""``).
    """
    if not text:
        return None
    m = WORD.match(text)
    if m is None:
        return text[:1].strip()
    return m.group() if m.end() < len(text) else None


def first_word(text: str) -> str:
    """The answer in a continuation, also one cut before it ended (see :func:`one_word`): the
    leading run of letters and apostrophes, or, if the continuation does not start with one,
    its first character (stripped of whitespace; possibly the empty string)."""
    m = WORD.match(text)
    return m.group() if m else text[:1].strip()


class Prefixes(Protocol):
    """The live prefixes of one tree, one row each (see the module's docstring)."""

    #: float64, rows x vocabulary: ``softmax(scores / T)`` is each row's next-token law.
    scores: np.ndarray
    #: Optional (False when absent): True when a row's scores never depend on the rows
    #: evaluated beside it, so that trees may share evaluations bit for bit (the greedy
    #: tree beside the sampled ones in :func:`sample_runs`).
    independent: bool

    def texts(self, parent: np.ndarray, tokens: np.ndarray,
              question: np.ndarray) -> Sequence[str]:
        """The text of each child: row ``parent[j]`` followed by ``tokens[j]`` (``question[j]``:
        the index, within the block, of the context it continues)."""

    def extend(self, parent: np.ndarray, tokens: np.ndarray,
               question: np.ndarray) -> Prefixes:
        """Those children as the new live prefixes, one row each, with their ``scores``."""


def draw(scores: np.ndarray, count: np.ndarray, temperature: float, rng,
         rows: int | None = None):
    """The children of each live prefix: ``(parent, token, count)``, positive counts only,
    in row-major order.

    Row ``r`` sends its ``count[r]`` samples to tokens drawn from
    ``softmax(scores[r] / temperature)`` (renormalised in float64), or all to the argmax when
    ``temperature == 0``. ``rows`` bounds the rows of one probability block (memory); the
    draws do not depend on it, since a two-dimensional ``rng.multinomial`` draws row by row.
    """
    step = len(scores) if rows is None else max(1, rows)
    parents, toks, cs = [], [], []
    for lo in range(0, len(scores), step):
        s, n = scores[lo:lo + step], count[lo:lo + step]
        if temperature == 0:
            counts = np.zeros(s.shape, dtype=np.int64)
            counts[np.arange(len(n)), s.argmax(-1)] = n
        else:
            p = torch.softmax(torch.from_numpy(s) / temperature, dim=-1).numpy()
            p /= p.sum(1, keepdims=True)
            counts = rng.multinomial(n, p)
        parent, tok = np.nonzero(counts)
        parents.append(parent + lo)
        toks.append(tok)
        cs.append(counts[parent, tok])
    return np.concatenate(parents), np.concatenate(toks), np.concatenate(cs)


def tree(root: Prefixes, m: int, temperature: float, rng, steps: int,
         stop: Callable[[str], str | None] = one_word, rows: int | None = None):
    """Grow one tree of ``m`` samples per row of ``root``.

    Returns ``(answers, unterminated)``: per row, its ``m`` answers in the order they ended
    (depth by depth, children in :func:`draw`'s order), and the number of samples cut at
    ``steps`` before ``stop`` ended them.
    """
    return trees(root, m, [(temperature, rng)], steps, stop, rows)[0]


def trees(root: Prefixes, m: int | Sequence[int], runs: Sequence[tuple[float, object]],
          steps: int, stop: Callable[[str], str | None] = one_word, rows: int | None = None):
    """:func:`tree` for each ``(temperature, rng)`` of ``runs``, all grown from ``root`` at
    once: at each depth the live prefixes of every run are extended together, in one model
    evaluation (``root.extend`` of their concatenation, run after run). Each run draws from
    its own ``rng`` in :func:`tree`'s order, on its own rows' scores, so its result is the
    one :func:`tree` returns alone, as long as a row's scores do not depend on the other rows
    evaluated with it. ``m``: the samples per row, one number for every run or one per run
    (greedy decoding is a run of one sample at temperature 0, which draws nothing).

    Returns a list of :func:`tree`'s ``(answers, unterminated)``, one per run.
    """
    ms = [m] * len(runs) if np.ndim(m) == 0 else list(m)
    if len(ms) != len(runs):
        raise ValueError(f"give one m per run: {len(ms)} for {len(runs)} runs")
    n = len(root.scores)
    node = root
    done: list[list[list[str]]] = [[[] for _ in range(n)] for _ in runs]
    unterminated = [0] * len(runs)
    # Per run still growing: its contexts, its counts and its rows [lo, hi) in ``node``
    # (at the root, every run starts from all of root's rows).
    live = {r: (np.arange(n), np.full(n, ms[r]), 0, n) for r in range(len(runs))}
    for i in range(steps):
        last = i + 1 == steps
        parents, toks, qs, grown = [], [], [], {}
        at = 0
        for r, (node_q, node_count, lo, hi) in live.items():
            temperature, rng = runs[r]
            local, tok, c = draw(node.scores[lo:hi], node_count, temperature, rng, rows)
            parent, q = local + lo, node_q[local]
            going = []
            for text, qj, k in zip(node.texts(parent, tok, q), q.tolist(), c.tolist()):
                answer = stop(text)
                if answer is None and last:
                    answer = first_word(text)
                    unterminated[r] += k
                going.append(answer is None)
                if answer is not None:
                    done[r][qj].extend([answer] * k)
            go = np.array(going, dtype=bool)
            if go.any():
                parents.append(parent[go])
                toks.append(tok[go])
                qs.append(q[go])
                grown[r] = (q[go], c[go], at, at + int(go.sum()))
                at += int(go.sum())
        if not grown:
            break
        node = node.extend(np.concatenate(parents), np.concatenate(toks), np.concatenate(qs))
        live = grown
    return list(zip(done, unterminated))


def sample(roots: Callable[[int, int], Prefixes], n: int, m: int, *, temperature: float,
           steps: int, seed: int, greedy: bool = False,
           stop: Callable[[str], str | None] = one_word, rows: int | None = None,
           progress=False) -> dict:
    """``m`` answers for each of ``n`` contexts, on prefix trees (see the module's docstring).

    ``roots(lo, hi)`` returns the prefixes of contexts ``lo:hi`` (one model evaluation of
    those contexts); contexts go in blocks of ``ROWS // min(m, 16)``. Each block grows one
    tree of ``m`` samples and (``greedy``) one tree of one sample at temperature 0 from the
    same root, which draws nothing: in the same evaluations as the sampled tree when the
    prefixes are ``independent`` (see :class:`Prefixes`), else after it. Draws come from
    ``numpy.random.default_rng(seed)``, in this order: each block's tree, then the
    permutation of each context's answers. ``progress``: a label for a tqdm bar over the
    blocks (it does not change the random stream).

    Returns
    -------
    dict
        ``answers`` (``n`` lists of ``m`` strings, each in a seeded random order, so any
        first ``k`` are a uniformly random subset), ``unterminated`` (samples cut at
        ``steps``; the greedy trees are not counted) and, with ``greedy``, ``greedy`` (the
        argmax-decoded answer of each context).
    """
    return sample_runs(roots, n, m, [(temperature, seed)], steps=steps, greedy=greedy,
                       stop=stop, rows=rows, progress=progress)[0]


def sample_runs(roots: Callable[[int, int], Prefixes], n: int, m: int,
                runs: Sequence[tuple[float, int]], *, steps: int, greedy: bool = False,
                stop: Callable[[str], str | None] = one_word, rows: int | None = None,
                progress=False) -> list[dict]:
    """:func:`sample` once for each ``(temperature, seed)`` of ``runs``, from one evaluation of
    each block of contexts: every run grows its own trees from the same roots, with its own
    ``numpy.random.default_rng(seed)`` drawing in :func:`sample`'s order, so each result is
    the one ``sample(temperature=t, seed=s)`` returns, bit for bit; the greedy answers (the
    same in every run) are decoded once per block, beside the first group of runs for
    ``independent`` prefixes. A search over sampling temperatures pays
    for the contexts once instead of once per temperature, and its runs' trees grow together
    (:func:`trees`, up to :data:`TOGETHER` samples per evaluation): one model evaluation per
    depth for several temperatures. (Bit for bit as long as a row's scores do not depend on
    the rows evaluated beside it: tested for the tiny model in ``tests/test_semantic.py``; a
    model whose batches are padded may round a row differently in another batch.)"""
    runs = [(float(t), s) for t, s in runs]
    if not runs:
        raise ValueError("runs must hold at least one (temperature, seed) pair")
    rngs = [np.random.default_rng(s) for _, s in runs]
    per = max(1, ROWS // min(m, 16))
    out: list[list[list[str]]] = [[] for _ in runs]
    best: list[str] = []
    unterminated = [0] * len(runs)
    plan = [(t, rng) for (t, _), rng in zip(runs, rngs)]
    for q0 in _progress.bar(range(0, n, per), progress):
        root = roots(q0, min(q0 + per, n))
        beside = getattr(root, "independent", False)
        together = max(1, TOGETHER // (len(root.scores) * min(m, 16)))
        grown = []
        for k in range(0, len(plan), together):
            group = plan[k:k + together]
            # the greedy tree (one sample at temperature 0, which draws nothing: no run's
            # generator moves) grows beside the first group's trees where rows do not depend
            # on each other: one row per context more in their evaluations, instead of
            # evaluations of its own
            extra = [(0.0, None)] if greedy and k == 0 and beside else []
            done = trees(root, [m] * len(group) + [1] * len(extra), group + extra, steps,
                         stop, rows)
            grown.extend(done[:len(group)])
            if extra:
                best.extend(w[0] for w in done[-1][0])
        for r, ((words, cut), rng) in enumerate(zip(grown, rngs)):
            unterminated[r] += cut
            for w in words:
                out[r].append([w[j] for j in rng.permutation(m)])
        if greedy and not beside:  # its own evaluations, after the runs' trees
            best.extend(w[0] for w in tree(root, 1, 0.0, None, steps, stop, rows)[0])
    res = [{"answers": a, "unterminated": u} for a, u in zip(out, unterminated)]
    if greedy:
        for r in res:
            r["greedy"] = list(best)
    return res
