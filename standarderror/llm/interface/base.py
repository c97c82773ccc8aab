"""The base interface: what every backend shares, written once.

:class:`LanguageModel` holds the methods a measurement calls (window and next-token
log-probabilities, continuation scores, option scores, the prefix-tree sampler) over the two things a
backend supplies, a forward pass (:meth:`~LanguageModel.logits`) and a tokenizer. Beside it,
the cap on one block of log-probabilities (:data:`MAX_ELEMENTS`). The stop rule of one-word
answers (``one_word``, ``first_word``, ``WORD``) is
:mod:`standarderror.llm.prefix_tree`'s, re-exported here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from standarderror import _checks, _progress
from standarderror.llm import prefix_tree
from standarderror.llm.prefix_tree import WORD, first_word, one_word  # noqa: F401

#: Upper bound on the float64 elements of one block of log-probabilities (32 MiB).
MAX_ELEMENTS = 1 << 22
#: Pairs per call of :meth:`~LanguageModel.continuation_logprob` in
#: :meth:`~LanguageModel.option_logprobs` (results do not depend on it up to rounding;
#: the HF-model pins were measured at 240).
OPTION_BLOCK = 240


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

    def encode_many(self, texts) -> list[np.ndarray]:
        """:meth:`encode` of each text; a backend whose tokenizer encodes a batch in one call
        (:class:`.HFModel`) overrides it, with the same ids."""
        return [self.encode(t) for t in texts]

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

    def labelled_window_logprobs(self, ids, labels) -> np.ndarray:
        """:meth:`window_logprobs` of windows whose next tokens are ``labels`` (same shape:
        ``labels[:, t]`` follows position ``t``). A forward-pass backend computes every row
        whole and ignores the labels; a backend that returns only some of each row (a
        served model's top-k log-probabilities) scores the labels exactly and says what
        the rest of the row approximates."""
        return self.window_logprobs(ids)

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
        c, full = self.encode_many([context, context + continuation])
        return self._split(c, full)

    @staticmethod
    def _split(c: np.ndarray, full: np.ndarray) -> tuple[np.ndarray, np.ndarray, bool]:
        """:meth:`pair` from the two encodings."""
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

    def _sample_prompts(self, contexts, m: int, temperature: float, max_tokens: int) -> list:
        """:meth:`sample`'s arguments checked, and per context ``(text, ids, cut, moved)``: the
        context without the whitespace it hands to its answer (``moved``), its ids with the
        prefix, cut from the left so that ``max_tokens`` more fit the window, and whether
        they were cut. Every backend's sampler starts here."""
        _checks.answers(m)
        if not np.isfinite(temperature) or temperature < 0:
            raise ValueError(f"temperature must be >= 0 and finite, got {temperature!r}")
        _checks.positive_int(max_tokens, "max_tokens")
        out = []
        for ctx in contexts:
            c, mv = self.split_context(ctx)
            ids = self.encode(c)
            self.check_text(c, ids)
            ids, cut = self._fit(ids, max_tokens)
            out.append((c, ids, bool(cut), mv))
        return out

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
        seqs, starts, conts, truncated, merged = self.scored_pairs(contexts, continuations)
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

    def scored_pairs(self, contexts, continuations):
        """The token ids :meth:`continuation_logprob` scores, for each (context,
        continuation) pair: ``(seqs, starts, conts, truncated, merged)``, where ``seqs[i]``
        is the prefix, the context (cut from the left to fit the window) and the
        continuation, ``starts[i]`` the index of the continuation's first token in it,
        ``conts[i]`` the continuation's ids, and the counts of cut contexts and of pairs
        whose boundary fell inside a token. Every backend scores these same tokens."""
        if len(contexts) != len(continuations):
            raise ValueError("contexts and continuations must have the same length")
        seqs, starts, conts = [], [], []
        truncated = merged = 0
        split = [self.split_context(ctx) for ctx in contexts]
        # each context once (it repeats for each of its options), every pair's whole text,
        # in two batches (pair's encodings, computed together)
        distinct = list(dict.fromkeys(c for c, _ in split))
        encoded = dict(zip(distinct, self.encode_many(distinct)))
        whole = self.encode_many([c + moved + cont
                                  for (c, moved), cont in zip(split, continuations)])
        for (c, moved), cont, full in zip(split, continuations, whole):
            ci, oi, mg = self._split(encoded[c], full)
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
        return seqs, starts, conts, int(truncated), int(merged)

    def option_logprobs(self, contexts, options, *, ends=None, progress=False) -> dict:
        r"""The one entry point for scoring ``k`` options after each of ``n`` contexts:
        :math:`\log p(\text{option} \mid \text{context})`, summed over the option's
        tokens (float64, n x k).

        ``options`` is an n x k array of strings (row ``i`` holds the options of
        ``contexts[i]``). Here, for any backend, the pairs are flattened row by row and
        scored by :meth:`continuation_logprob` in blocks of :data:`OPTION_BLOCK` pairs
        (padded batches, each pair run whole); a backend that can share the context's work
        across its options overrides this method with the same results up to rounding
        (:class:`.TinyLM`). ``ends``: token ids that end a word, to also score that the
        option is followed by one of them; defined only where one token is one character
        (:class:`.TinyLM`), so here it raises ``ValueError``. ``progress``: a label for a
        tqdm bar over the blocks (it changes no number).

        Returns
        -------
        dict
            ``logprob`` (n x k), ``tokens`` (n x k: tokens per option), ``truncated``
            (contexts cut to fit the window), ``merged`` (pairs whose boundary fell inside
            a token), and with ``ends`` also ``ends`` (n x k).
        """
        if ends is not None:
            raise ValueError(f"ends (word-end token ids) needs one token per character; "
                             f"{type(self).__name__} ({self.tokenizer_name}) does not "
                             "define it")
        options = np.asarray(options)
        if options.ndim != 2 or options.shape[0] != len(contexts):
            raise ValueError(f"options must be (len(contexts), k) = ({len(contexts)}, k), "
                             f"got shape {options.shape}")
        n, k = options.shape
        ctx = [c for c in contexts for _ in range(k)]
        opts = [str(o) for o in options.ravel()]
        lp, tokens, truncated, merged = [], [], 0, 0
        for lo in _progress.bar(range(0, len(ctx), OPTION_BLOCK), progress):
            r = self.continuation_logprob(ctx[lo:lo + OPTION_BLOCK], opts[lo:lo + OPTION_BLOCK])
            lp.append(r["logprob"])
            tokens.append(r["tokens"])
            truncated += r["truncated"]
            merged += r["merged"]
        return {"logprob": np.concatenate(lp).reshape(n, k),
                "tokens": np.concatenate(tokens).reshape(n, k),
                "truncated": int(truncated), "merged": int(merged)}

    @torch.inference_mode()
    def sample(self, contexts, m: int, *, temperature: float = 0.5, max_tokens: int = 16,
               seed: int = 0, greedy: bool = False, stop=one_word, progress=False) -> dict:
        r"""``m`` sampled answers per context, each continuation cut by ``stop``.

        The samples of one context grow on a prefix tree, by
        :func:`standarderror.llm.prefix_tree.sample` (the one sampler of the package, which
        :func:`standarderror.llm.semantic.sample` also runs): at each depth every live
        prefix is run once, and the ``c`` samples on it draw their next tokens jointly from
        :math:`\mathrm{Multinomial}(c, \mathrm{softmax}(\log p / T))` with
        ``numpy.random.default_rng(seed)``; a prefix stops when ``stop`` returns its answer
        (on the decoded continuation, after the moved whitespace of :meth:`split_context`).
        The law is that of ``m`` independent samples; with a character tokenizer and the
        same seed the draws are, up to the rounding of the probabilities, those of
        ``semantic.sample`` (identical on the tiny model's tested questions).
        ``temperature=0`` is greedy. (Each depth re-runs the whole prefix through
        :meth:`next_token_logprobs`: simple, and fine for short answers; a serving engine
        with prefix caching would not redo that work.) ``progress``: a label for a tqdm bar
        over the blocks of contexts (the bar does not change the random stream).

        Returns
        -------
        dict
            ``answers`` (n lists of m strings, in a seeded random order), ``greedy`` (the
            argmax-decoded answer per context, when asked), ``unterminated`` (samples cut
            at ``max_tokens`` before ``stop`` ended them), ``truncated`` (contexts cut to
            fit the window).
        """
        fitted = self._sample_prompts(contexts, m, temperature, max_tokens)
        prompts = [ids for _, ids, _, _ in fitted]
        moved = [mv for _, _, _, mv in fitted]
        truncated = sum(cut for _, _, cut, _ in fitted)

        def roots(lo, hi):
            ps = prompts[lo:hi]
            return _Rerun(self, ps, moved[lo:hi], [[] for _ in ps],
                          self.next_token_logprobs(ps))

        res = prefix_tree.sample(roots, len(prompts), m, temperature=temperature,
                                 steps=max_tokens, seed=seed, greedy=greedy, stop=stop,
                                 rows=_rows_per_block(1, self.vocab_size), progress=progress)
        out = {"answers": res["answers"], "unterminated": res["unterminated"],
               "truncated": truncated}
        if greedy:
            out["greedy"] = res["greedy"]
        return out


class _Rerun:
    """The live prefixes of a tree on any :class:`LanguageModel` (a
    :class:`.prefix_tree.Prefixes`): each row's sampled tokens, its log-probabilities as
    ``scores``, computed by running the prompt and those tokens again."""

    def __init__(self, lm, prompts, moved, tokens, scores):
        self.lm, self.prompts, self.moved, self.tokens = lm, prompts, moved, tokens
        self.scores = scores

    def texts(self, parent, tokens, question):
        out = []
        for pr, tk, q in zip(parent, tokens, question):
            text = self.lm.decode(self.tokens[pr] + [int(tk)])
            if self.moved[q] and text.startswith(self.moved[q]):
                text = text[len(self.moved[q]):]
            out.append(text)
        return out

    def extend(self, parent, tokens, question):
        toks = [self.tokens[pr] + [int(tk)] for pr, tk in zip(parent, tokens)]
        scores = self.lm.next_token_logprobs(
            [np.concatenate([self.prompts[q], np.asarray(t, dtype=np.int64)])
             for q, t in zip(question, toks)])
        return _Rerun(self.lm, self.prompts, self.moved, toks, scores)
