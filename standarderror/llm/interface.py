r"""One model interface: what a measurement needs from a language model.

Every measurement of the book talks to a language model through :class:`LanguageModel`:

* ``encode`` / ``decode`` -- text to token ids and back (no special tokens added);
* :meth:`~LanguageModel.window_logprobs` -- log-probabilities of the next token at every
  position of a batch of equal-length windows (held-out text);
* :meth:`~LanguageModel.next_token_logprobs` -- the next-token distribution after each of a
  batch of contexts of any lengths;
* :meth:`~LanguageModel.continuation_logprob` -- :math:`\log p(\text{continuation} \mid
  \text{context})`, the sum of the continuation's token log-probabilities;
* :meth:`~LanguageModel.sample` -- ``m`` continuations per context at a temperature, cut by a
  stop rule (by default: one word, :func:`one_word`).

A backend implements only :meth:`~LanguageModel.logits` (a forward pass) and the
tokenizer; everything else is written once here, so the two backends measure the same way:

* :class:`TinyLM` -- the committed character model (:mod:`standarderror.llm.tiny`), whose
  log-probabilities are exactly those the lectures measure;
* :class:`HFModel` -- any ``transformers`` causal LM with its tokenizer
  (``AutoModelForCausalLM`` / ``AutoTokenizer``, from a local directory or a hub name;
  ``pip install standarderror[hf]``).

A serving engine (vLLM's offline ``LLM`` with ``prompt_logprobs`` / ``logprobs``, or an
OpenAI-compatible endpoint returning log-probabilities) fits behind the same methods: it
returns top-k log-probabilities rather than whole rows, which is what the streamed
measurements of :mod:`standarderror.experiments.measure` keep anyway. No such backend ships: it could
not be tested here (see the page "Measure your own model").

**Bad input is never silently measured.** A context longer than the model's window is cut
from the left and *counted* (``truncated`` in every result); a continuation that alone does
not fit raises; a tokenizer that maps characters of the text to its unknown token raises and
names them; an answer that has not ended within ``max_tokens`` is cut there and counted
(``unterminated``).
"""

from __future__ import annotations

import json
import os
import re
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from standarderror import _checks

#: Characters that continue a word (as in :mod:`standarderror.llm.semantic`).
WORD = re.compile(r"[A-Za-z']+")
#: Upper bound on the float64 elements of one block of log-probabilities (32 MiB).
MAX_ELEMENTS = 1 << 22


def one_word(text: str) -> str | None:
    """The stop rule "one word": the answer once it is known, else ``None``.

    A continuation that starts with a word (letters and apostrophes) ends when a character
    that cannot continue the word follows it; the answer is the word. A continuation that
    starts with anything else ends at once, and its answer is that character stripped of
    whitespace (possibly ``""``). This is :mod:`standarderror.llm.semantic`'s rule.
    """
    if not text:
        return None
    m = WORD.match(text)
    if m is None:
        return text[:1].strip()
    return m.group() if m.end() < len(text) else None


def first_word(text: str) -> str:
    """The answer of a continuation that was cut before it ended (see :func:`one_word`)."""
    m = WORD.match(text)
    return m.group() if m else text[:1].strip()


def _rows_per_block(width: int, vocab: int) -> int:
    return max(1, MAX_ELEMENTS // max(1, width * vocab))  # read at call time (tests patch it)


@dataclass
class LanguageModel:
    """Base class of the backends. Subclasses set the fields and implement :meth:`logits`,
    :meth:`encode` and :meth:`decode`.

    Attributes
    ----------
    name, tokenizer_name : str
        What the results record.
    vocab_size : int
        Columns of every log-probability row.
    window : int
        The most tokens one forward pass may hold.
    character_level : bool
        One token per character. Otherwise words carry their leading space (BPE,
        SentencePiece), and the tasks move a context's trailing whitespace into the
        continuation, so that ``"... the"`` + ``" king"`` is scored as the model saw it in
        training rather than as a lone space followed by ``"king"``.
    prefix : list of int
        Token ids put before every context (a BOS token where the tokenizer adds one).
    """

    name: str
    tokenizer_name: str
    vocab_size: int
    window: int
    character_level: bool
    prefix: list = field(default_factory=list)
    parameters: int = 0

    # ---- to implement ------------------------------------------------------------------
    def logits(self, ids: torch.Tensor, last: torch.Tensor | None = None) -> torch.Tensor:
        """Float logits for ``ids`` (batch x time): every position, or with ``last`` (one
        index per row) only those positions (batch x vocab)."""
        raise NotImplementedError

    def encode(self, text: str) -> np.ndarray:
        raise NotImplementedError

    def decode(self, ids) -> str:
        raise NotImplementedError

    def info(self) -> dict:
        """What a results file records about the model."""
        return {"name": self.name, "label": getattr(self, "label", self.name),
                "tokenizer": self.tokenizer_name, "vocab": self.vocab_size,
                "window": self.window, "parameters": self.parameters,
                "character_level": self.character_level, "backend": type(self).__name__}

    # ---- written once ------------------------------------------------------------------
    @torch.inference_mode()
    def window_logprobs(self, ids) -> np.ndarray:
        """Float64 log-probabilities (batch x time x vocab) of the next token at every
        position of equal-length windows (``log_softmax`` of the logits cast to float64).

        The :attr:`prefix` (the BOS token, where the tokenizer adds one) is put before every
        window, as the model saw text in training; row ``t`` is the distribution after the
        prefix and the window's first ``t + 1`` tokens."""
        x = self._windows(ids)
        if not self.prefix:
            return torch.log_softmax(self.logits(x).double().cpu(), dim=-1).numpy()
        p = torch.as_tensor(self.prefix, dtype=torch.long).expand(x.shape[0], -1)
        z = self.logits(torch.cat([p, x], dim=1))[:, len(self.prefix):]
        return torch.log_softmax(z.double().cpu(), dim=-1).numpy()

    def _windows(self, ids) -> torch.Tensor:
        x = torch.as_tensor(np.asarray(ids), dtype=torch.long)
        if x.ndim != 2:
            raise ValueError(f"ids must be (batch, time), got shape {tuple(x.shape)}")
        if x.shape[1] + len(self.prefix) > self.window:
            raise ValueError(f"windows of {x.shape[1]} tokens (and {len(self.prefix)} prefix) "
                             f"exceed {self.name}'s window of {self.window}; pass a shorter "
                             "block")
        return x

    @torch.inference_mode()
    def next_token_logprobs(self, contexts) -> np.ndarray:
        """Float64 log-probabilities (n x vocab) of the token after each context (token id
        sequences of any lengths, each at most ``window``). Contexts are right-padded: in a
        causal model padding after the last real token cannot change it."""
        lengths = np.array([len(c) for c in contexts])
        if lengths.size == 0:
            raise ValueError("contexts is empty")
        if lengths.min() < 1:
            raise ValueError("every context needs at least one token")
        if lengths.max() > self.window:
            raise ValueError(f"a context of {lengths.max()} tokens exceeds the window of "
                             f"{self.window}; truncate it first")
        out = np.empty((len(contexts), self.vocab_size))
        order = np.argsort(-lengths, kind="stable")  # similar lengths share a batch
        step = _rows_per_block(1, self.vocab_size) if self.vocab_size > 4096 else 1024
        step = max(1, min(step, 1024))
        for lo in range(0, len(order), step):
            rows = order[lo:lo + step]
            width = int(lengths[rows].max())
            x = torch.zeros((len(rows), width), dtype=torch.long)
            for r, i in enumerate(rows):
                x[r, :lengths[i]] = torch.as_tensor(np.asarray(contexts[i]), dtype=torch.long)
            last = torch.as_tensor(lengths[rows] - 1)
            z = self.logits(x, last)
            out[rows] = torch.log_softmax(z.double().cpu(), dim=-1).numpy()
        return out

    def check_text(self, text: str, ids=None) -> None:
        """Raise if the tokenizer cannot represent ``text`` (see the backends)."""

    def split_context(self, context: str) -> tuple[str, str]:
        """``(context, moved)``: for subword tokenizers the context's trailing whitespace is
        moved to the start of the continuation (see :attr:`character_level`)."""
        if self.character_level:
            return context, ""
        stripped = context.rstrip()
        return stripped, context[len(stripped):]

    def pair(self, context: str, continuation: str) -> tuple[np.ndarray, np.ndarray, bool]:
        """Token ids of a context and its continuation, tokenised together.

        ``encode(context + continuation)`` is split after the longest prefix it shares with
        ``encode(context)``. Returns ``(context_ids, continuation_ids, merged)``; ``merged``
        is True when a token straddles the boundary (it is then scored with the continuation).
        """
        c = self.encode(context)
        full = self.encode(context + continuation)
        k = min(len(c), len(full))
        same = c[:k] == full[:k]
        k = k if same.all() else int(np.argmin(same))
        return full[:k], full[k:], k < len(c)

    def _fit(self, ctx: np.ndarray, need: int) -> tuple[np.ndarray, bool]:
        """Prefix + context cut from the left so that ``need`` more tokens fit the window."""
        room = self.window - need - len(self.prefix)
        if room < 1:
            raise ValueError(f"{need} continuation tokens leave no room for a context in the "
                             f"{self.window}-token window of {self.name}")
        cut = len(ctx) > room
        return np.concatenate([np.asarray(self.prefix, dtype=np.int64), ctx[-room:]]), cut

    @torch.inference_mode()
    def continuation_logprob(self, contexts, continuations) -> dict:
        r""":math:`\log p(\text{continuation} \mid \text{context})` for each pair, summed over
        the continuation's tokens (float64).

        Subword tokenizers: the context's trailing whitespace is moved into the continuation
        (:meth:`split_context`), which scores the same string. Contexts too long for the
        window are cut from the left and counted.

        Returns
        -------
        dict
            ``logprob`` (n,), ``tokens`` (continuation tokens per pair), ``truncated``
            (contexts cut), ``merged`` (pairs whose boundary fell inside a token).
        """
        if len(contexts) != len(continuations):
            raise ValueError("contexts and continuations must have the same length")
        seqs, starts, conts = [], [], []
        truncated = merged = 0
        for ctx, cont in zip(contexts, continuations):
            c, moved = self.split_context(ctx)
            ci, oi, mg = self.pair(c, moved + cont)
            self.check_text(c + moved + cont, np.concatenate([ci, oi]))
            if len(oi) == 0:
                raise ValueError(f"continuation {cont!r} has no tokens")
            ci, cut = self._fit(ci, len(oi))
            if len(ci) == 0:
                raise ValueError("an empty context needs a prefix token (BOS) to be scored")
            truncated += cut
            merged += mg
            seqs.append(np.concatenate([ci, oi]))
            starts.append(len(ci))
            conts.append(oi)
        out = np.empty(len(seqs))
        lengths = np.array([len(s) for s in seqs])
        order = np.argsort(-lengths, kind="stable")
        step = max(1, min(256, _rows_per_block(int(lengths.max()), self.vocab_size)))
        for lo in range(0, len(order), step):
            rows = order[lo:lo + step]
            width = int(lengths[rows].max())
            x = torch.zeros((len(rows), width), dtype=torch.long)
            for r, i in enumerate(rows):
                x[r, :lengths[i]] = torch.as_tensor(seqs[i])
            z = self.logits(x)
            # every continuation token's row at once: (pairs' tokens) x vocab
            r_idx = np.concatenate([np.full(len(conts[i]), r) for r, i in enumerate(rows)])
            p_idx = np.concatenate([starts[i] - 1 + np.arange(len(conts[i])) for i in rows])
            tok = torch.as_tensor(np.concatenate([conts[i] for i in rows]))
            lp = torch.log_softmax(z[torch.as_tensor(r_idx), torch.as_tensor(p_idx)]
                                   .double().cpu(), dim=-1)
            per_tok = lp.gather(1, tok[:, None])[:, 0].numpy()
            bounds = np.r_[0, np.cumsum([len(conts[i]) for i in rows])[:-1]]
            out[rows] = np.add.reduceat(per_tok, bounds)
        return {"logprob": out, "tokens": np.array([len(o) for o in conts]),
                "truncated": int(truncated), "merged": int(merged)}

    @torch.inference_mode()
    def sample(self, contexts, m: int, *, temperature: float = 0.5, max_tokens: int = 16,
               seed: int = 0, greedy: bool = False, stop=one_word, progress=False) -> dict:
        r"""``m`` sampled answers per context, each continuation cut by ``stop``.

        The samples of one context grow on a prefix tree, as in
        :func:`standarderror.llm.semantic.sample`: at each depth every live prefix is run
        once, and the ``c`` samples on it draw their next tokens jointly from
        :math:`\mathrm{Multinomial}(c, \mathrm{softmax}(\log p / T))` with
        ``numpy.random.default_rng(seed)``; a prefix stops when ``stop`` returns its answer.
        The law is that of ``m`` independent samples; with a character tokenizer and the
        same seed the draws are those of ``semantic.sample``. ``temperature=0`` is greedy.
        (Each depth re-runs the whole prefix: simple, and fine for short answers; a serving
        engine with prefix caching would not redo that work.) ``progress``: a label for a
        tqdm bar over the blocks of contexts (the bar does not change the random stream).

        Returns
        -------
        dict
            ``answers`` (n lists of m strings, in a seeded random order), ``greedy`` (the
            argmax-decoded answer per context, when asked), ``unterminated`` (samples cut
            at ``max_tokens`` before ``stop`` ended them), ``truncated`` (contexts cut to
            fit the window).
        """
        _checks.positive_int(m, "m")
        if not np.isfinite(temperature) or temperature < 0:
            raise ValueError(f"temperature must be >= 0 and finite, got {temperature!r}")
        _checks.positive_int(max_tokens, "max_tokens")
        prompts, moved, truncated = [], [], 0
        for ctx in contexts:
            c, mv = self.split_context(ctx)
            ids = self.encode(c)
            self.check_text(c, ids)
            ids, cut = self._fit(ids, max_tokens)
            truncated += cut
            prompts.append(ids)
            moved.append(mv)
        rng = np.random.default_rng(seed)
        per = max(1, 1024 // min(m, 16))
        out, best, counts = [], [], {"unterminated": 0}
        starts = range(0, len(prompts), per)
        if progress:
            from tqdm.auto import tqdm

            starts = tqdm(starts, desc=str(progress), leave=False)
        for q0 in starts:
            ps, mv = prompts[q0:q0 + per], moved[q0:q0 + per]
            first = self.next_token_logprobs(ps)
            for words in self._tree(ps, mv, first, m, temperature, rng, max_tokens, stop,
                                    counts):
                out.append([words[j] for j in rng.permutation(m)])
            if greedy:
                best.extend(w[0] for w in self._tree(ps, mv, first, 1, 0.0, rng, max_tokens,
                                                     stop, {"unterminated": 0}))
        res = {"answers": out, "unterminated": counts["unterminated"], "truncated": truncated}
        if greedy:
            res["greedy"] = best
        return res

    def _tree(self, prompts, moved, logp, m, temperature, rng, steps, stop, counts):
        nq = len(prompts)
        node_q = np.arange(nq)
        node_tok: list[list[int]] = [[] for _ in range(nq)]
        node_count = np.full(nq, m)
        done: list[list[str]] = [[] for _ in range(nq)]
        for i in range(steps):
            parent, tok, c = self._draw(logp, node_count, temperature, rng)
            keep = []
            for pr, tk, k in zip(parent, tok, c):
                toks = node_tok[pr] + [int(tk)]
                text = self.decode(toks)
                q = node_q[pr]
                if moved[q] and text.startswith(moved[q]):
                    text = text[len(moved[q]):]
                answer = stop(text)
                if answer is None and i + 1 == steps:
                    answer = first_word(text)
                    counts["unterminated"] += int(k)
                if answer is None:
                    keep.append((pr, toks, k))
                else:
                    done[q].extend([answer] * int(k))
            if not keep:
                break
            node_q = np.array([node_q[pr] for pr, _, _ in keep])
            node_tok = [t for _, t, _ in keep]
            node_count = np.array([k for _, _, k in keep])
            logp = self.next_token_logprobs(
                [np.concatenate([prompts[q], np.asarray(t, dtype=np.int64)])
                 for q, t in zip(node_q, node_tok)])
        return done

    @staticmethod
    def _draw(logp, node_count, temperature, rng):
        """Children of each live prefix: (parent, token, count) with positive counts."""
        parents, toks, cs = [], [], []
        step = _rows_per_block(1, logp.shape[1])
        for lo in range(0, logp.shape[0], step):
            lp, nc = logp[lo:lo + step], node_count[lo:lo + step]
            if temperature == 0:
                counts = np.zeros(lp.shape, dtype=np.int64)
                counts[np.arange(len(nc)), lp.argmax(-1)] = nc
            else:
                p = torch.softmax(torch.from_numpy(lp) / temperature, dim=-1).numpy()
                p /= p.sum(1, keepdims=True)
                counts = rng.multinomial(nc, p)
            parent, tok = np.nonzero(counts)
            parents.append(parent + lo)
            toks.append(tok)
            cs.append(counts[parent, tok])
        return np.concatenate(parents), np.concatenate(toks), np.concatenate(cs)


# --------------------------------------------------------------------------------------
# Our tiny model
# --------------------------------------------------------------------------------------


class TinyLM(LanguageModel):
    """The committed character model behind the interface.

    ``TinyLM()`` loads the final checkpoint through :func:`standarderror.llm.tiny.load`
    (hash-verified); ``TinyLM(loaded)`` wraps a dict that function returned. Its window
    log-probabilities are :func:`standarderror.llm.tiny.log_probabilities`, bit for bit.
    """

    def __init__(self, loaded: dict | None = None, *, step: int | None = None):
        from standarderror.llm import tiny

        self.loaded = loaded if loaded is not None else tiny.load(step)
        net = self.loaded["model"]
        super().__init__(name=f"tiny (step {self.loaded['step']})", tokenizer_name="characters",
                         vocab_size=self.loaded["vocab"], window=net.cfg.block,
                         character_level=True, parameters=self.loaded["parameters"])
        self.model = net
        self.sha256 = self.loaded["sha256"]

    def info(self) -> dict:
        return {**super().info(), "step": self.loaded["step"], "sha256": self.sha256}

    def logits(self, ids, last=None):
        z = self.model(ids)
        return z if last is None else z[torch.arange(z.shape[0]), last]

    @torch.inference_mode()
    def window_logprobs(self, ids) -> np.ndarray:
        from standarderror.llm import tiny

        return tiny.log_probabilities(self.model, self._windows(ids))

    def encode(self, text: str) -> np.ndarray:
        from standarderror.llm import tiny

        return tiny.encode(text, self.loaded["stoi"])

    def decode(self, ids) -> str:
        from standarderror.llm import tiny

        return tiny.decode(ids, self.loaded["chars"])


# --------------------------------------------------------------------------------------
# Any transformers causal LM
# --------------------------------------------------------------------------------------


#: Weight files that are pickles: unpickling can run code, so they are never loaded.
PICKLED = ("*.bin", "*.pt", "*.pth", "*.ckpt", "*.pkl", "*.pickle")
#: Other weight formats this loader does not read.
OTHER_WEIGHTS = ("*.msgpack", "*.h5", "*.gguf", "*.onnx")
#: Files a tokenizer is saved in (``save_pretrained`` writes at least one of them).
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json", "vocab.txt",
                   "spiece.model", "sentencepiece.bpe.model", "tekken.json")
#: What a hub download fetches: configs, safetensors and tokenizer files; never code or pickles.
HUB_FILES = ["*.json", "*.safetensors", "*.model", "*.txt", "*.tiktoken"]
#: The most transformer layers a config may declare (a guard against absurd configs).
MAX_LAYERS = 1024
_LAYER_KEYS = ("num_hidden_layers", "n_layer", "num_layers", "n_layers")


def _one_line(exc: BaseException) -> str:
    """The first non-empty line of an exception's message."""
    lines = [s.strip() for s in str(exc).splitlines() if s.strip()]
    return lines[0] if lines else type(exc).__name__


@contextmanager
def hub_offline(on: bool = True):
    """Switch huggingface_hub's offline mode on for the duration (no request leaves the
    process: not even the host name is resolved). ``on=False`` changes nothing."""
    from huggingface_hub import constants

    old, env = constants.HF_HUB_OFFLINE, os.environ.get("HF_HUB_OFFLINE")
    if on:
        constants.HF_HUB_OFFLINE = True
        os.environ["HF_HUB_OFFLINE"] = "1"
    try:
        yield
    finally:
        constants.HF_HUB_OFFLINE = old
        if env is None:
            os.environ.pop("HF_HUB_OFFLINE", None)
        else:
            os.environ["HF_HUB_OFFLINE"] = env


def check_device(device: str) -> str:
    """The torch device to run on (``"auto"``: CUDA when available); raises ``ValueError``
    when this torch build cannot use it (``cuda`` on a CPU build, a misspelt name)."""
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    try:
        torch.empty(1, device=torch.device(device))
    except Exception as exc:  # RuntimeError, AssertionError ("not compiled with CUDA"), ...
        raise ValueError(f"device {device!r} is not usable with this torch build "
                         f"(torch {torch.__version__}): {_one_line(exc)}; use --device cpu"
                         ) from None
    return device


def safetensors_parameters(path) -> int:
    """Elements stored in one ``.safetensors`` file, read from its header (no tensor is
    loaded); raises ``ValueError`` when the file is truncated or its header is corrupt."""
    path = Path(path)
    size = path.stat().st_size
    bad = f"{path} is not a valid safetensors file"
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise ValueError(f"{bad}: {size} bytes, shorter than its header")
        n = int.from_bytes(head, "little")
        if n > min(size - 8, 100 << 20):
            raise ValueError(f"{bad}: its header claims {n:,} bytes, the file holds {size:,}")
        try:
            header = json.loads(f.read(n))
            total, end = 0, 0
            for key, v in header.items():
                if key == "__metadata__":
                    continue
                total += int(np.prod(v["shape"], dtype=np.int64))
                end = max(end, int(v["data_offsets"][1]))
        except (ValueError, TypeError, KeyError, IndexError, AttributeError) as exc:
            raise ValueError(f"{bad}: unreadable header ({_one_line(exc)})") from None
    if 8 + n + end != size:
        raise ValueError(f"{bad}: the header describes {8 + n + end:,} bytes, the file holds "
                         f"{size:,} (truncated or corrupt; save the model again)")
    return total


def _json(path: Path) -> dict:
    try:
        out = json.loads(path.read_text("utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path} is not valid JSON: {_one_line(exc)}") from None
    if not isinstance(out, dict):
        raise ValueError(f"{path} must hold a JSON object")
    return out


def _layers(cfg: dict) -> int:
    """The largest layer count anywhere in a config (nested text/vision configs included)."""
    best = 0
    for k, v in cfg.items():
        if k in _LAYER_KEYS and isinstance(v, int):
            best = max(best, v)
        elif isinstance(v, dict):
            best = max(best, _layers(v))
    return best


def resolve(source, *, local_only: bool = True) -> Path:
    """The local directory of a model: ``source`` itself, or a hub name's snapshot.

    A hub name is looked up in the local hub cache with huggingface_hub's offline mode on
    (nothing reaches the network); with ``local_only=False`` it is downloaded, fetching
    only :data:`HUB_FILES` (configs, safetensors, tokenizer files: never code, never pickles).
    """
    src = str(source)
    path = Path(src).expanduser()
    if path.exists():
        if not path.is_dir():
            raise FileNotFoundError(f"{src} is not a directory; pass the directory that "
                                    "holds config.json and the weights")
        return path
    if path.is_absolute() or src.startswith((".", "~")) or src.count("/") > 1 \
            or src.endswith(("/", "\\")) or "\\" in src:
        raise FileNotFoundError(f"model directory {src} does not exist")
    from huggingface_hub import snapshot_download

    try:
        with hub_offline(local_only):
            return Path(snapshot_download(src, allow_patterns=HUB_FILES,
                                          local_files_only=local_only))
    except Exception as exc:
        if local_only:
            raise FileNotFoundError(
                f"{src} is neither a model directory here nor a model in the local hub "
                "cache; check the path, or pass --allow-download (Python: local_only=False) "
                "to fetch it from the hub") from None
        raise ValueError(f"{src}: the hub download failed: {_one_line(exc)}") from None


def check_directory(path) -> dict:
    """Check a model directory before anything is loaded from it; returns its config.

    Refused, each with a one-line ``ValueError`` or ``FileNotFoundError``: no config.json
    or one that is not JSON; a ``model_type`` transformers does not know (its code would
    come from the directory, ``auto_map``: never run); no safetensors weights (pickled
    ``*.bin``/``*.pt`` are never unpickled: unpickling can run code); a truncated or
    corrupt safetensors file; a quantization config or a flash-attention implementation
    (this loader runs plain float weights with transformers' default attention); more than
    :data:`MAX_LAYERS` layers; no tokenizer files.
    """
    path = Path(path)
    if not (path / "config.json").exists():
        raise FileNotFoundError(f"{path} holds no config.json: not a transformers model "
                                "directory")
    cfg = _json(path / "config.json")
    weights = sorted(path.glob("*.safetensors"))
    if not weights:
        pickled = sorted(p.name for g in PICKLED for p in path.glob(g))
        if pickled:
            raise ValueError(
                f"{path} holds pickled weights only ({', '.join(pickled)}), which are never "
                "loaded (unpickling can run code); convert them once where you trust the "
                "file: AutoModelForCausalLM.from_pretrained(DIR, use_safetensors=False)"
                ".save_pretrained(NEW_DIR) writes model.safetensors")
        other = sorted(p.name for g in OTHER_WEIGHTS for p in path.glob(g))
        if other:
            raise ValueError(f"{path} holds weights only in formats this loader does not "
                             f"read ({', '.join(other)}); save them as safetensors")
        raise FileNotFoundError(f"{path} holds no weights (no *.safetensors); save the model "
                                "with save_pretrained() first")
    from transformers import CONFIG_MAPPING

    kind = cfg.get("model_type")
    if not isinstance(kind, str) or kind not in CONFIG_MAPPING:
        code = (" and asks to run code from the directory (auto_map)" if "auto_map" in cfg
                else "")
        raise ValueError(f"{path}/config.json names model_type {kind!r}, which transformers "
                         f"does not know{code}; this loader never runs a model directory's "
                         "code (trust_remote_code=False)")
    for w in weights:
        safetensors_parameters(w)
    if cfg.get("quantization_config"):
        method = cfg["quantization_config"]
        method = method.get("quant_method", "?") if isinstance(method, dict) else method
        raise ValueError(f"{path}/config.json asks for quantized weights ({method}); this "
                         "loader measures plain float weights: use an unquantized copy")
    for key in ("_attn_implementation", "attn_implementation"):
        impl = cfg.get(key)
        if impl not in (None, "eager", "sdpa"):
            raise ValueError(f"{path}/config.json asks for attention {impl!r} ({key}); this "
                             "loader uses transformers' default attention: remove the key")
    layers = _layers(cfg)
    if layers > MAX_LAYERS:
        raise ValueError(f"{path}/config.json declares {layers:,} layers, more than any "
                         f"model this loader accepts ({MAX_LAYERS:,}); is the config right?")
    if not any((path / f).exists() for f in TOKENIZER_FILES):
        raise FileNotFoundError(f"{path} holds no tokenizer (none of {', '.join(TOKENIZER_FILES)}"
                                "); save the model's tokenizer beside it with save_pretrained()")
    return cfg


def _declared_parameters(path: Path) -> int:
    """Parameters of the model config.json describes, built on the meta device (no memory)."""
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(str(path), local_files_only=True,
                                        trust_remote_code=False)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config, trust_remote_code=False)
    return int(sum(p.numel() for p in model.parameters()))


class _Head(torch.nn.Module):
    """The model's output head, run in float32 on only the positions asked for.

    It replaces the head inside the model, so the model's own forward runs unchanged around
    it (Granite's division by ``logits_scaling``, Cohere's ``logit_scale``, Gemma-2's
    soft-capping all apply), while the projection is computed in float32 from the final
    hidden states whatever the model's dtype, and with :attr:`rows` set only one position
    per sequence reaches it (never a batch x time x vocabulary tensor for ``last``).
    """

    def __init__(self, head: torch.nn.Module):
        super().__init__()
        self.head = head
        self.rows = None
        w = getattr(head, "weight", None)
        linear = isinstance(head, torch.nn.Linear)
        self.linear = linear
        if linear and w.dtype != torch.float32:
            self.register_buffer("w32", w.detach().float(), persistent=False)
            b = head.bias
            self.register_buffer("b32", None if b is None else b.detach().float(),
                                 persistent=False)
        else:
            self.w32 = self.b32 = None

    def forward(self, h):
        if self.rows is not None:
            h = h[torch.arange(h.shape[0], device=h.device), self.rows][:, None]
        if not self.linear:
            return self.head(h).float()
        if self.w32 is None:
            return torch.nn.functional.linear(h.float(), self.head.weight, self.head.bias)
        return torch.nn.functional.linear(h.float(), self.w32, self.b32)


class HFModel(LanguageModel):
    """A ``transformers`` causal LM and its tokenizer behind the interface.

    Parameters
    ----------
    source : str or path
        A local directory (``config.json``, safetensors weights, tokenizer files) or a hub
        name (from the local hub cache, or downloaded with ``local_only=False``). The
        directory is checked before anything loads (:func:`check_directory`).
    device : str
        ``"cpu"``, ``"cuda"``, ... (``"auto"``: CUDA when available); checked first.
    dtype : str
        ``"float32"`` (default), ``"bfloat16"`` or ``"float16"``: the dtype of the network.
        The output projection is computed in float32 whatever it is, and the
        log-probabilities in float64 from those logits.
    local_only : bool
        Never reach the network (default True: huggingface_hub's offline mode is on for the
        whole call). Set False to download a hub model.

    Safety: ``trust_remote_code=False`` and ``use_safetensors=True`` on every load, so no
    code from the directory runs and no pickle is opened.
    """

    def __init__(self, source, *, device: str = "auto", dtype: str = "float32",
                 local_only: bool = True):
        try:
            from transformers import AutoModelForCausalLM, AutoTokenizer
        except ImportError as exc:  # pragma: no cover - exercised only without the extra
            raise RuntimeError("the transformers backend needs `pip install "
                               "standarderror[hf]` (transformers and tokenizers)") from exc
        dtypes = {"float32": torch.float32, "bfloat16": torch.bfloat16,
                  "float16": torch.float16}
        if dtype not in dtypes:
            raise ValueError(f"dtype must be one of {sorted(dtypes)}, got {dtype!r}")
        device = check_device(device)
        path = resolve(source, local_only=local_only)
        cfg = check_directory(path)
        from transformers.utils import logging as hf_logging

        bars = hf_logging.is_progress_bar_enabled()
        hf_logging.disable_progress_bar()  # no loading bars in notebooks and logs
        try:
            with hub_offline(True):  # the files are local now: nothing needs the network
                stored = sum(safetensors_parameters(w) for w in path.glob("*.safetensors"))
                declared = _declared_parameters(path)
                if declared > stored:
                    raise ValueError(
                        f"{path}/config.json describes a model of {declared:,} parameters; "
                        f"its weights hold {stored:,}: the rest would be random (is the "
                        "config right?)")
                self.tokenizer = AutoTokenizer.from_pretrained(
                    str(path), local_files_only=True, trust_remote_code=False)
                model = AutoModelForCausalLM.from_pretrained(
                    str(path), dtype=dtypes[dtype], local_files_only=True,
                    trust_remote_code=False, use_safetensors=True)
        except ValueError as exc:
            if str(exc).startswith(str(path)):
                raise
            raise ValueError(f"{path}: transformers could not load it: {_one_line(exc)}"
                             ) from None
        except Exception as exc:  # untrusted files: any failure is a one-line refusal
            raise ValueError(f"{path}: transformers could not load it: "
                             f"{type(exc).__name__}: {_one_line(exc)}") from None
        finally:
            if bars:
                hf_logging.enable_progress_bar()
        self.model = model.to(device).eval()
        self.device = device
        config = model.config
        window = None
        for key in ("max_position_embeddings", "n_positions", "n_ctx", "seq_length"):
            window = window or getattr(config, key, None)
        if not window:
            raise ValueError(f"{path}: the config names no context window "
                             "(max_position_embeddings or n_positions)")
        tok = self.tokenizer
        if len(tok) < 2:
            raise ValueError(f"{path}: the tokenizer holds {len(tok)} token(s); save the "
                             "model's tokenizer beside it")
        head = model.get_output_embeddings()
        vocab = head.weight.shape[0]
        parameters = int(sum(p.numel() for p in model.parameters()))
        self._head = _Head(head).to(device)
        for name, child in model.named_children():
            if child is head:
                setattr(model, name, self._head)
                break
        else:  # the head is deeper inside: full logits, cast to float32 after
            self._head = None
        pieces = tok.convert_ids_to_tokens(list(range(min(len(tok), 4096))))
        character_level = all(len(tok.convert_tokens_to_string([p])) <= 1 for p in pieces
                              if p is not None and p not in tok.all_special_tokens)
        probe = tok("a")["input_ids"]
        prefix = [tok.bos_token_id] if (tok.bos_token_id is not None and probe
                                        and probe[0] == tok.bos_token_id) else []
        super().__init__(name=str(source), tokenizer_name=type(tok).__name__,
                         vocab_size=int(vocab), window=int(window),
                         character_level=character_level, prefix=prefix,
                         parameters=parameters)
        marker = path / "standarderror.json"
        self.export_of_tiny = False
        if marker.exists():
            try:
                self.export_of_tiny = _json(marker).get("source") == "standarderror.llm.tiny"
            except ValueError:
                pass
        #: how summaries and figures name the model: a local directory by its last component
        self.label = Path(str(source)).name if Path(str(source)).exists() else str(source)
        self.model_type = cfg.get("model_type")

    def info(self) -> dict:
        return {**super().info(), "model_type": self.model.config.model_type,
                "dtype": str(next(self.model.parameters()).dtype).replace("torch.", ""),
                "head": "float32", "device": self.device}

    def logits(self, ids, last=None):
        ids = ids.to(self.device)
        top = int(ids.max()) if ids.numel() else 0
        if top >= self.vocab_size or (ids.numel() and int(ids.min()) < 0):
            raise ValueError(f"token id {top} is outside the model's vocabulary of "
                             f"{self.vocab_size}")
        if last is None:
            return self.model(input_ids=ids, use_cache=False).logits.float()
        last = last.to(self.device)
        if self._head is None:
            z = self.model(input_ids=ids, use_cache=False).logits
            return z[torch.arange(z.shape[0], device=z.device), last].float()
        self._head.rows = last  # the model's own forward, one position per row at the head
        try:
            return self.model(input_ids=ids, use_cache=False).logits[:, 0].float()
        finally:
            self._head.rows = None

    def encode(self, text: str) -> np.ndarray:
        ids = self.tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"]
        return np.asarray(ids, dtype=np.int64)

    def decode(self, ids) -> str:
        return self.tokenizer.decode([int(i) for i in ids], skip_special_tokens=False,
                                     clean_up_tokenization_spaces=False)

    def check_text(self, text: str, ids=None) -> None:
        """Raise if the tokenizer maps characters of ``text`` to its unknown token (naming
        them) or gives ids the model has no row for (a tokenizer larger than the model)."""
        ids = self.encode(text) if ids is None else np.asarray(ids)
        unk = self.tokenizer.unk_token_id
        if unk is not None and np.any(ids == unk):
            vocab = self.tokenizer.get_vocab()
            missing = sorted({ch for ch in set(text) if ch not in vocab
                              and unk in self.encode(ch)})
            raise ValueError(f"the tokenizer of {self.name} maps characters of the text to its "
                             f"unknown token {self.tokenizer.unk_token!r}: {missing!r}; use "
                             "text it covers or a tokenizer with byte fallback")
        if ids.size and int(ids.max()) >= self.vocab_size:
            bad = ids[ids >= self.vocab_size]
            raise ValueError(f"the tokenizer of {self.name} gives token ids up to "
                             f"{int(bad.max())}, beyond the model's vocabulary of "
                             f"{self.vocab_size} ({bad.size} tokens of the text): the "
                             "tokenizer does not belong to this model")


def load_model(source=None, **kwargs) -> LanguageModel:
    """``None`` or ``"tiny"``: our committed model (:class:`TinyLM`); anything else: a
    ``transformers`` directory or hub name (:class:`HFModel`)."""
    if source is None or str(source) == "tiny":
        return TinyLM(step=kwargs.get("step"))
    kwargs.pop("step", None)
    return HFModel(source, **kwargs)
