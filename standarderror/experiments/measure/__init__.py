r"""The book's three measurements on any model of the interface (:mod:`standarderror.llm.interface`).

* :func:`calibration` -- next-token predictions on held-out text: accuracy, NLL and ECE at
  Episode 3's temperatures, the fitted temperature, and the AURC of the three confidence
  scores at a few temperatures.
* :func:`conformal` -- the review's six-option next-word task: LAC and APS sets at
  :math:`\alpha = 0.1`, their coverage and mean size.
* :func:`spectral` -- Episode 5's pipeline: sampled one-word answers, embedded, density
  matrices, the matrix temperature, risk, entropy, reliability and AUROC.

Each returns a plain dict (JSON-ready after :func:`to_json`); :func:`write` saves it with its
figures, :func:`summary` prints a short table. ``python -m standarderror measure`` runs them.

**Bounded memory (calibration).** The held-out windows are run in blocks of at most
:data:`~standarderror.llm.interface.base.MAX_ELEMENTS` float64 log-probabilities (32 MiB: for a
32,000-token vocabulary, two 64-token windows at a time; working copies bring the peak to a
few times that). From each block only what the metrics
need is kept, per prediction: the label, the argmax and the top probability and true-label
log-probability at each table temperature, the three confidence scores at each abstention
temperature, and its contribution to the NLL at each of :data:`FIT_GRID`'s temperatures.
That is about fifty numbers per prediction whatever the vocabulary; no predictions x
vocabulary array is ever held. Every statistic is computed row by row exactly as
:func:`~standarderror.uncertainty.calibration.temperature_table` computes it, so on our tiny
model the table is the same to the bit. The one approximation is the fitted temperature:
NLL is known on the grid only (:func:`~standarderror.uncertainty.scaling.grid_nll_sums`,
added up block by block), and its minimum is refined by the parabola in :math:`\log T` through
the lowest grid point and its two neighbours
(:func:`~standarderror.uncertainty.scaling.fit_temperature_on_grid`; tested against the exact
bounded fit to 1e-3).
"""

from __future__ import annotations

from ._common import DRAWS, versions
from .calibration_task import (
    CHUNK_BYTES,
    FIT_GRID,
    MAX_TEXT_BYTES,
    _window_stats,  # noqa: F401  (a test calls it on the facade)
    calibration,
    ece_floor,
    encode_file,
    is_ours,
)
from .conformal_task import conformal, word_calibration
from .report import TASKS, figures, run, summary, to_json, write
from .spectral_task import spectral

__all__ = ["CHUNK_BYTES", "DRAWS", "FIT_GRID", "MAX_TEXT_BYTES", "TASKS", "calibration",
           "conformal", "ece_floor", "encode_file", "figures", "is_ours", "run", "spectral",
           "summary", "to_json", "versions", "word_calibration", "write"]
