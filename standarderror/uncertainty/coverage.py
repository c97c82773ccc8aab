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

Pure functions over arrays, used from outside the layer (modules of ``uncertainty`` import
the three modules themselves); it never imports the model layer. The committed model's
held-out predictions that the lectures feed them are
:func:`standarderror.llm.predictions.predictions`.
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

# The names of this facade.
__all__ = [
    "SCORES", "QUANTILES", "RULES", "conformal_rank", "minimum_calibration", "ye_softmax",
    "label_scores", "conformal_quantile", "conformal_sets", "set_summary", "by_confidence",
    "spearman", "ranking", "inversions", "paired_accuracy", "softmax_logits", "evaluate",
    "demonstration",
]
