"""Our committed character model behind the interface (:class:`TinyLM`).

:mod:`standarderror.llm.tiny` is imported inside each method, as it was in the single module
this one came from.
"""

from __future__ import annotations

import numpy as np
import torch

from standarderror import _checks

from .base import LanguageModel


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

    @torch.inference_mode()
    def option_logprobs(self, contexts, options, *, ends=None, chunk: int = 360,
                        progress=False) -> dict:
        r"""The options' log-probabilities from one shared-context pass (the results of
        :meth:`.LanguageModel.option_logprobs`, the generic path, up to rounding; a test
        checks them to 1e-4).

        The contexts must have one length and the ``k`` options of a question one length
        (the layout of :func:`standarderror.experiments.multiple_choice.questions`), and a
        context with an option must fit the window; otherwise ``ValueError`` (nothing is
        cut: ``truncated`` and ``merged`` are 0). Questions are grouped by option width
        and run ``chunk`` at a time: the context is run once (causal attention, its keys
        and values kept), then the ``k`` options, laid end to end, attend to those keys and
        values and causally to their own characters (a block-diagonal mask;
        :meth:`~standarderror.llm.gpt.GPT.hidden` with ``prefixes``). This is the
        computation of running each context + option string through the model, with the
        context's work done once instead of ``k`` times.

        ``ends``: token ids that end a word; then ``ends`` (n x k) is also returned, the
        log-probability that the token after the option is one of them. ``progress`` is
        accepted for the interface and shows nothing (one block per option width).
        """
        from standarderror.llm import tiny

        net, stoi = self.model, self.loaded["stoi"]
        _checks.positive_int(chunk, "chunk")
        lengths = {len(c) for c in contexts}
        if len(lengths) > 1:
            raise ValueError(f"contexts must have one length, got lengths {sorted(lengths)}")
        ctx = np.stack([tiny.encode(c, stoi) for c in contexts])
        opts = np.asarray(options)
        if opts.ndim != 2 or opts.shape[0] != len(contexts):
            raise ValueError(f"options must be (len(contexts), k) = ({len(contexts)}, k), "
                             f"got shape {opts.shape}")
        n, k = opts.shape
        lens = np.vectorize(len)(opts)
        if np.any(lens != lens[:, :1]):
            raise ValueError("the options of a question must have equal lengths (see questions())")
        s = ctx.shape[1]
        if s + lens.max() > net.cfg.block:
            raise ValueError(f"context ({s}) + option ({lens.max()}) exceeds the model's "
                             f"{net.cfg.block} characters")
        out = np.empty((n, k))
        out_end = np.empty((n, k))
        end_ids = None if ends is None else torch.as_tensor(np.asarray(ends), dtype=torch.long)
        for width in np.unique(lens[:, 0]):
            group = np.flatnonzero(lens[:, 0] == width)
            ids = np.stack([tiny.encode("".join(opts[i]), stoi) for i in group]).reshape(-1, k, width)
            pos_o = torch.arange(s, s + width).repeat(k)                     # positions, per option
            same = torch.arange(k).repeat_interleave(width)
            mask = (same[:, None] == same[None, :]) & (pos_o[None, :] <= pos_o[:, None])
            for lo in range(0, len(group), chunk):
                rows = group[lo:lo + chunk]
                m = len(rows)
                o_ids = torch.from_numpy(ids[lo:lo + chunk])                   # (m, 6, w)
                caches = [{} for _ in net.blocks]
                x = net.hidden(torch.from_numpy(ctx[rows]), caches)           # the context, once
                xo = net.hidden(o_ids.reshape(m, k * width), positions=pos_o, mask=mask,
                                prefixes=[(c["k"], c["v"]) for c in caches])  # six options
                first = torch.log_softmax(net.head(x[:, -1]).double(), -1)
                lp = first.gather(1, o_ids[:, :, 0])                           # (m, 6)
                rest = torch.log_softmax(net.head(xo.view(m, k, width, -1)).double(), -1)
                if width > 1:
                    nxt = o_ids[:, :, 1:].unsqueeze(-1)
                    lp = lp + rest[:, :, :-1].gather(-1, nxt).squeeze(-1).sum(-1)
                out[rows] = lp.numpy()
                if end_ids is not None:
                    out_end[rows] = torch.logsumexp(rest[:, :, -1][..., end_ids], dim=-1).numpy()
        res = {"logprob": out, "tokens": lens, "truncated": 0, "merged": 0}
        if end_ids is not None:
            res["ends"] = out_end
        return res
