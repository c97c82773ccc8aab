"""A model run by vLLM's offline engine (``vllm.LLM``) in this process, on a GPU, measured
through its log-probabilities (imported on use: ``pip install vllm``).

:class:`VLLMModel` asks the engine for what the three measurements need:

* **window rows** (calibration): each window and its last label as one prompt of token ids,
  ``SamplingParams(max_tokens=1, prompt_logprobs=k)``. The engine returns, for every prompt
  token after the first, its log-probability and the ``k`` most likely tokens at that
  position, *by token id*, so nothing is lost to a text key. With ``k`` equal to the
  vocabulary (the default: the engine is started with ``max_logprobs`` at the vocabulary
  size) the rows are whole; with a smaller ``k`` they are completed by
  :func:`.served.topk_rows` and what that approximates is counted in :meth:`info`.
* **option scores** (conformal): each (context, option) pair is one prompt of ids with
  ``prompt_logprobs=0`` (the prompt token's own log-probability); the score sums the
  option's tokens.
* **samples** (spectral): one request per context with ``n`` answers, the temperature, the
  seed, ``max_tokens`` and the stop strings of :data:`.served.STOP`; each answer is cut by
  the same stop rule as the in-process sampler. The draws are vLLM's, not ours.

The tokenizer is the engine's own (``LLM.get_tokenizer()``). ``engine`` passes a ready
``vllm.LLM`` (or an object with its ``generate`` and ``get_tokenizer``) instead of starting one.
"""

from __future__ import annotations

import math

import numpy as np

from standarderror import _checks
from standarderror.llm.prefix_tree import first_word, one_word

from .base import LanguageModel
from .hf import HFModel
from .served import STOP, topk_rows


def _vllm():
    try:
        import vllm
    except ImportError as exc:
        raise RuntimeError("--backend vllm needs vLLM and a GPU: pip install vllm") from exc
    return vllm


class VLLMModel(LanguageModel):
    """A model run by ``vllm.LLM``.

    Parameters
    ----------
    path : str
        A local model directory (read with ``trust_remote_code=False``).
    dtype : str
        The engine's dtype (``float32`` to compare with the in-process path).
    top_logprobs : int, optional
        ``k`` for the window rows; by default the whole vocabulary.
    window : int, optional
        The engine's context length; by default the model's.
    seed : int
        The engine's seed.
    engine : object, optional
        A ready engine (see the module's docstring).
    """

    def __init__(self, path: str, *, dtype: str = "float32", top_logprobs: int | None = None,
                 window: int | None = None, seed: int = 0, engine=None, **engine_args):
        vllm = _vllm()
        self._params = vllm.SamplingParams
        if engine is None:
            from .directory import check_directory

            check_directory(path)
            probe = _vocab_of(path)
            engine = vllm.LLM(model=str(path), tokenizer=str(path), dtype=dtype, seed=seed,
                              trust_remote_code=False, max_logprobs=probe,
                              **({"max_model_len": window} if window else {}), **engine_args)
        self.engine = engine
        self.tokenizer = engine.get_tokenizer()
        vocab = len(self.tokenizer)
        self.top_k = vocab if top_logprobs is None else _checks.positive_int(
            top_logprobs, "top_logprobs")
        self.top_k = min(self.top_k, vocab)
        if window is None:
            window = getattr(self.tokenizer, "model_max_length", None)
            if not window or window > 10 ** 7:
                raise ValueError(f"the tokenizer of {path} names no context length; pass "
                                 "window (the engine's max_model_len)")
        window = _checks.positive_int(window, "window")
        super().__init__(name=str(path), tokenizer_name=type(self.tokenizer).__name__,
                         vocab_size=vocab, window=window - 1, character_level=False,
                         prefix=[])
        self.label = str(path)
        self.stats = {"rows": 0, "rest_mass_sum": 0.0, "rest_mass_max": 0.0}

    # ---- tokenizer (the engine's) ---------------------------------------------------------
    # the engine's tokenizer, read as HFModel reads its own (the same checks)
    encode = HFModel.encode
    encode_many = HFModel.encode_many
    decode = HFModel.decode
    check_text = HFModel.check_text

    def logits(self, ids, last=None):
        raise NotImplementedError("vLLM gives log-probabilities, not logits")

    def window_logprobs(self, ids) -> np.ndarray:
        raise NotImplementedError("vLLM scores windows with their labels: "
                                  "labelled_window_logprobs(ids, labels)")

    # ---- the engine -----------------------------------------------------------------------
    def _prompt_logprobs(self, seqs, k: int) -> list[list[dict]]:
        """Per sequence, per token after the first: ``{token id: log-probability}``."""
        params = self._params(max_tokens=1, temperature=0.0, prompt_logprobs=int(k))
        outs = self.engine.generate([{"prompt_token_ids": [int(i) for i in s]} for s in seqs],
                                    params, use_tqdm=False)
        rows = []
        for seq, out in zip(seqs, outs):
            got = list(out.prompt_logprobs or [])
            if len(got) != len(seq):
                raise ValueError(f"vLLM returned {len(got)} prompt log-probabilities for a "
                                 f"prompt of {len(seq)} tokens")
            per = []
            for tok, entry in zip(seq[1:], got[1:]):
                if not entry or int(tok) not in entry:
                    raise ValueError("vLLM returned no log-probability for a prompt token")
                d = {int(i): float(getattr(v, "logprob", v)) for i, v in entry.items()}
                if not all(math.isfinite(x) or x == -math.inf for x in d.values()) or \
                        not math.isfinite(d[int(tok)]):
                    raise ValueError("vLLM returned a non-finite log-probability")
                per.append(d)
            rows.append(per)
        return rows

    def info(self) -> dict:
        s, rows = self.stats, max(1, self.stats["rows"])
        return {**super().info(), "vllm": {
            "top_logprobs": self.top_k, "whole_rows": self.top_k >= self.vocab_size,
            "rest_mass_mean": s["rest_mass_sum"] / rows, "rest_mass_max": s["rest_mass_max"]}}

    def labelled_window_logprobs(self, ids, labels) -> np.ndarray:
        x = self._windows(ids).numpy()
        y = np.asarray(labels, dtype=np.int64)
        b, t = x.shape
        if y.shape != (b, t) or (t > 1 and not np.array_equal(y[:, :-1], x[:, 1:])):
            raise ValueError("labels must be the windows shifted by one token")
        seqs = [np.r_[x[i], y[i, -1]] for i in range(b)]
        out = np.empty((b, t, self.vocab_size))
        for i, per in enumerate(self._prompt_logprobs(seqs, self.top_k)):
            top_ids = [list(d) for d in per]
            top_lp = [list(d.values()) for d in per]
            label_lp = [d[int(lab)] for d, lab in zip(per, y[i])]
            out[i], rest = topk_rows(top_ids, top_lp, y[i], label_lp, self.vocab_size)
            self.stats["rows"] += t
            self.stats["rest_mass_sum"] += float(rest.sum())
            self.stats["rest_mass_max"] = max(self.stats["rest_mass_max"], float(rest.max()))
        return out

    def continuation_logprob(self, contexts, continuations) -> dict:
        seqs, starts, conts, truncated, merged = self.scored_pairs(contexts, continuations)
        per = self._prompt_logprobs(seqs, 0)
        out = np.array([math.fsum(d[int(tok)] for d, tok in zip(p[s - 1:], seq[s:]))
                        for p, s, seq in zip(per, starts, seqs)], dtype=float)
        return {"logprob": out, "tokens": np.array([len(o) for o in conts]),
                "truncated": int(truncated), "merged": int(merged)}

    def sample(self, contexts, m: int, *, temperature: float = 0.5, max_tokens: int = 16,
               seed: int = 0, greedy: bool = False, stop=one_word, progress=False) -> dict:
        """``m`` answers per context drawn by vLLM (one request of ``n = m`` per context,
        seeded from ``numpy.random.default_rng(seed)``), cut by ``stop``; ``greedy``: one
        more answer per context at temperature 0."""
        fitted = self._sample_prompts(contexts, m, temperature, max_tokens)
        prompts = [[int(i) for i in ids] for _, ids, _, _ in fitted]
        moved = [mv for _, _, _, mv in fitted]
        truncated = sum(cut for _, _, cut, _ in fitted)
        seeds = np.random.default_rng(seed).integers(0, 2 ** 31 - 1, size=len(prompts))
        stops = list(STOP) if stop is one_word else None

        def draw(n, t, seeded):
            params = [self._params(n=n, temperature=float(t), max_tokens=int(max_tokens),
                                   seed=int(s) if seeded else None,
                                   **({"stop": stops} if stops else {})) for s in seeds]
            outs = self.engine.generate([{"prompt_token_ids": p} for p in prompts], params,
                                        use_tqdm=False)
            return [[_answer(o, moved[q], stop) for o in out.outputs]
                    for q, out in enumerate(outs)]

        done = draw(m, temperature, True)
        out = {"answers": [[a for a, _ in row] for row in done],
               "unterminated": int(sum(u for row in done for _, u in row)),
               "truncated": truncated}
        if greedy:
            g = draw(1, 0.0, False)
            out["greedy"] = [row[0][0] for row in g]
            out["unterminated"] += int(sum(row[0][1] for row in g))
        return out


def _answer(output, moved: str, stop) -> tuple[str, bool]:
    """(answer, unterminated) of one vLLM completion: the stop string vLLM cut off
    (``stop_reason``) is put back, so the stop rule sees the text the model wrote."""
    text = output.text + (output.stop_reason if isinstance(
        getattr(output, "stop_reason", None), str) else "")
    if moved and text.startswith(moved):
        text = text[len(moved):]
    answer = stop(text)
    if answer is None:
        return first_word(text), True
    return answer, False


def _vocab_of(path) -> int:
    """The vocabulary of the model directory's tokenizer (the engine's ``max_logprobs``)."""
    from transformers import AutoTokenizer

    from .directory import hub_offline

    with hub_offline(True):
        tok = AutoTokenizer.from_pretrained(str(path), local_files_only=True,
                                            trust_remote_code=False)
    return len(tok)
