"""Our committed character model behind the interface (:class:`TinyLM`).

:mod:`standarderror.llm.tiny` is imported inside each method, as it was in the single module
this one came from.
"""

from __future__ import annotations

import numpy as np
import torch

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
