"""What the three measurements share: the interval resamples, the versions
of the software behind a result and the header every result opens with."""

from __future__ import annotations

import platform

import numpy as np

from standarderror.llm.interface import LanguageModel

#: Resamples behind every interval (whole windows, or whole questions).
DRAWS = 200


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


def _interval(values) -> list:
    lo, hi = np.percentile(np.asarray(values, dtype=float), [2.5, 97.5])
    return [float(lo), float(hi)]
