r"""Calibration, temperature scaling, and what temperature does to abstention.

Temperature scaling divides every logit by one positive number :math:`T` before the softmax,

.. math::

    \log p_T(k \mid x) = \frac{z_k}{T} - \log \sum_j e^{z_j / T}.

Within one prediction this is a strictly increasing map of the logits, so the predicted
label (the argmax) cannot move and accuracy is unchanged at every :math:`T`. Between
predictions nothing is guaranteed: a confidence score such as the top probability or the
entropy can change its *order across rows*, and anything that sorts predictions by
confidence (abstention, review queues) sees a different queue. The logit margin
:math:`z_{(1)} - z_{(2)}` is divided by :math:`T` in every row, so its order is invariant.

Everything here works in log space. Probabilities given as input are turned into
log-probabilities once (``np.log(p)``; zeros become ``-inf``, which the functions handle) and
never floored, so the invariances above hold exactly in floating point, not approximately.

Main entry points (the API of Episode 3):

* :func:`temperature_table` and :func:`reordering` -- accuracy, NLL, ECE and the
  confidence order across temperatures, on predictions passed in (the committed model's
  held-out predictions are :func:`standarderror.llm.predictions.predictions`);
* :func:`swap_pair` -- two constructed predictions whose confidence order flips with T;
* :func:`abstention`, :func:`fitted_temperature`, :func:`best_temperature` -- the
  risk-coverage consequences, with a sequence-level bootstrap;
* :func:`shared_shape` -- a control in which temperature cannot reorder anything.

Building blocks: :func:`scale`, :func:`confidence_scores`, :func:`ece`, :func:`nll`,
:func:`brier`, :func:`risk_coverage`, :func:`aurc`, :func:`kendall_tau`.

This module is a facade, used from outside the layer (the lectures): ``cb.x`` names every
function of the five modules that hold one idea each,
:mod:`~standarderror.uncertainty.scaling` (softmax at :math:`T`, the confidence scores, the
fitted temperature), :mod:`~standarderror.uncertainty.metrics` (ECE, NLL, Brier),
:mod:`~standarderror.uncertainty.selective` (risk-coverage, AURC, abstention),
:mod:`~standarderror.uncertainty.ranks` (Kendall's :math:`\tau_b`) and
:mod:`~standarderror.uncertainty.confidence_order` (Episode 3's constructions), all
functions over arrays; it defines nothing of its own and never imports the model layer.
"""

from __future__ import annotations

from standarderror.uncertainty.confidence_order import (
    TEMPERATURES,
    ReorderHeadline,
    TableHeadline,
    reorder_headline,
    reordering,
    shared_shape,
    swap_pair,
    table_headline,
    temperature_row,
    temperature_table,
)
from standarderror.uncertainty.metrics import bin_index, brier, ece, nll
from standarderror.uncertainty.ranks import kendall_tau, pair_counts
from standarderror.uncertainty.scaling import (
    CONFIDENCE_SCORES,
    TemperatureAtBoundWarning,
    confidence_scores,
    fit_temperature,
    fit_temperature_on_grid,
    fitted_temperature,
    grid_nll_sums,
    scale,
)
from standarderror.uncertainty.selective import (
    ABSTENTION_TEMPERATURES,
    GRID,
    AbstentionHeadline,
    FitHeadline,
    abstention,
    abstention_headline,
    aurc,
    best_temperature,
    fit_headline,
    risk_coverage,
)

__all__ = ["ABSTENTION_TEMPERATURES", "AbstentionHeadline", "CONFIDENCE_SCORES", "FitHeadline",
           "GRID", "fit_headline",
           "ReorderHeadline", "TEMPERATURES", "abstention_headline", "reorder_headline",
           "TemperatureAtBoundWarning", "abstention", "aurc", "best_temperature", "bin_index",
           "brier", "confidence_scores", "ece", "fit_temperature", "fit_temperature_on_grid",
           "fitted_temperature", "grid_nll_sums", "kendall_tau", "nll", "pair_counts",
           "reordering", "risk_coverage", "scale", "shared_shape", "swap_pair", "table_headline",
           "TableHeadline", "temperature_row", "temperature_table"]

