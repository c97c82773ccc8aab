"""Coverage: split conformal prediction sets and the analyses of their size.

A facade: every name below is ``coverage.<name>`` (the lectures and the seed's code call
``cv.conformal_sets(...)``, ``cv.set_summary(...)`` ...), gathered from three modules of one
idea each:

* :mod:`~standarderror.uncertainty.conformal` -- the sets: LAC and APS scores, the conformal
  threshold, the sets of test rows, the textbook rule and Ye et al.'s released computation
  (``rule="ye"``), and the softmaxes of logits that feed them.
* :mod:`~standarderror.uncertainty.set_size` -- what the sets measure (coverage and size,
  by confidence band, one model on one task) and models compared by it (ranks, Spearman,
  inversions, paired accuracy).
* :mod:`~standarderror.uncertainty.set_size_demo` -- three synthetic classifiers, each
  isolating one effect on set size.

Pure functions over arrays; importing this module loads neither torch nor the model. One name
is the seed's and reaches the model: ``coverage.predictions(...)``, the committed model's
held-out predictions, is :func:`standarderror.llm.predictions.predictions`, resolved on first
use by the module's ``__getattr__`` (so ``cv.predictions(...)`` keeps working and only a
caller who uses it imports the model layer).
"""

from __future__ import annotations

from standarderror.uncertainty.conformal import (
    QUANTILES,
    RULES,
    SCORES,
    conformal_quantile,
    conformal_rank,
    conformal_sets,
    label_scores,
    minimum_calibration,
    softmax_logits,
    ye_softmax,
)
from standarderror.uncertainty.set_size import (
    by_confidence,
    evaluate,
    inversions,
    paired_accuracy,
    ranking,
    set_summary,
    spearman,
)
from standarderror.uncertainty.set_size_demo import demonstration


def __getattr__(name: str):
    """``predictions``, the seed's name for the held-out predictions of the model layer,
    imported on first use (PEP 562), so that importing coverage never loads the model."""
    if name == "predictions":
        from standarderror.llm.predictions import predictions

        return predictions
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# The names of this facade (``predictions`` is resolved on first use, so it is not listed:
# ``from coverage import *`` loads no model).
__all__ = [
    "SCORES", "QUANTILES", "RULES", "conformal_rank", "minimum_calibration", "ye_softmax",
    "label_scores", "conformal_quantile", "conformal_sets", "set_summary", "by_confidence",
    "spearman", "ranking", "inversions", "paired_accuracy", "softmax_logits", "evaluate",
    "demonstration",
]
