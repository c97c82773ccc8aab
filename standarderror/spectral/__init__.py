r"""Density matrices from semantic embeddings: eigenvalues as probabilities, the matrix log
score, matrix temperature scaling and the calibration diagnostics of Gruber, Walha, Bach and
Buettner, "Eigenvalue Calibration for Semantic Embeddings of Large Language Models",
arXiv preprint arXiv:2607.08377 (2026).

The setting
-----------
A language model answers question :math:`x` with sampled answers :math:`a_1, \dots, a_m`; a
sentence embedder maps each to a unit vector :math:`e(a_j) \in \mathbb{R}^d`. The *predicted
density matrix* is

.. math:: \hat d(x) = \frac1m \sum_{j=1}^m e(a_j)\, e(a_j)^\top = \tfrac1m E^\top E,
   \qquad E \in \mathbb{R}^{m\times d},

positive semi-definite with unit trace, so its eigenvalues lie on the simplex and are read as
probabilities of latent semantic outcomes. The target is the unit embedding :math:`y` of the
true answer. Matrix temperature scaling with :math:`\alpha = 1/T` is

.. math:: h_T(M) = \frac{M^\alpha}{\operatorname{tr} M^\alpha}
   = \sum_k \frac{\lambda_k^\alpha}{\sum_l \lambda_l^\alpha}\, u_k u_k^\top ,

the matrix log score is :math:`y^\top S(M)\, y` with :math:`S(M) = -\log M` (a spectral function),
its entropy is the von Neumann entropy :math:`H(M) = -\sum_k \lambda_k \log \lambda_k`, and the
matrix divergence is the quantum relative entropy
:math:`D(M_1, M_2) = \operatorname{tr}[M_1 \log M_1] - \operatorname{tr}[M_1 \log M_2]`.

Gram space: no :math:`d \times d` matrix is ever formed
-----------------------------------------------------------
:math:`\hat d(x)` has rank at most :math:`m`. Its non-zero eigenvalues are those of the
:math:`m \times m` Gram matrix :math:`G = E E^\top / m`; an eigenpair :math:`(\lambda_k, v_k)` of
:math:`G` lifts to the unit eigenvector :math:`u_k = E^\top v_k / \sqrt{m \lambda_k}` of
:math:`\hat d(x)`. Hence, for a unit target :math:`y`,

.. math:: y^\top(-\log h_T(\hat d))\,y = \sum_{\lambda_k > 0} -\log \mu_k\,
   \frac{(v_k^\top E y)^2}{m\lambda_k} \;+\; (-\log\varepsilon)\Bigl(1 - \sum_{\lambda_k>0}
   \frac{(v_k^\top E y)^2}{m\lambda_k}\Bigr),

where :math:`\mu_k` are the scaled eigenvalues and the second term is the part of :math:`y`
outside the span of the answers, whose eigenvalues are zero and receive :math:`\varepsilon`
(as in the paper, :math:`\varepsilon = 10^{-10}`). Eigenvalues of :math:`G` at or below
:data:`ZERO` (``1e-12``; the trace is one, so this is an absolute scale) are treated as exactly
zero: repeated answers make :math:`G` exactly singular, and floating-point round-off must not be
amplified by temperature scaling. Frobenius inner products between two predicted matrices come
from cross-Gram blocks :math:`E_i E_j^\top`. Every function processes questions in chunks, so
memory stays bounded for any number of questions.

Inputs
------
``answers``: array ``(n, m, d)`` of answer embeddings (``n`` questions, ``m >= 2`` answers each);
``targets``: array ``(n, d)``. Rows are unit-normalised inside (each row is first divided by
its largest absolute entry, so rows at any finite scale normalise without overflow or
underflow); a zero or non-finite row is an error.

The authors' computation
------------------------
The paper's numbers come from a different computation, which this module also offers as
explicit options (the defaults stay exact):

* ``arithmetic="authors"`` (:func:`log_score`, :func:`risk`, :func:`entropy`,
  :func:`risk_curve`, :func:`fit_spectral_temperature`): each :math:`d \times d` density matrix is
  built and eigendecomposed in float32; the absolute value of every eigenvalue is raised to
  :math:`1/T` and renormalised over all :math:`d`, giving the scaled eigenvalues
  :math:`\mu_k`; the log score is :math:`-\sum_{k=1}^{d} p_k \log\max(\mu_k, \varepsilon)`
  with :math:`p_k = (u_k^\top y)^2` (the floor applies to *every* scaled eigenvalue, not only
  to exact zeros: their code, not the paper's sentence about zero eigenvalues, produced their
  numbers), and the entropy is :math:`-\sum_k \mu_k\log\mu_k` with :math:`0\log 0 = 0` and
  no floor. The fitted temperature is the argmin over :data:`AUTHORS_GRID` (log-spaced).
  Three variations of that recipe separate its two halves: ``"float64-abs"`` (float64
  decomposition, absolute values), ``"float32-clip"`` (float32 decomposition, negative
  eigenvalues set to zero) and ``"float64-clip"`` (neither half: float64, negative
  eigenvalues set to zero); all use the same floor.
* ``variant="authors"`` (:func:`reliability`, :func:`calibration_error`, :func:`auroc`,
  :func:`kernel_language_entropy`): the conventions of their Algorithm 1, Cal_S, AUROC and KLE
  (see each function).
"""

from __future__ import annotations

from ._gram import ARITHMETICS, EPS, ZERO
from .baselines import LAMB_GRID, auroc, auroc_difference, kernel_language_entropy, semantic_entropy
from .clusters import cluster, similarity
from .comparisons import (
    ArithmeticComparison,
    AurocComparison,
    AuthorsAfterScaling,
    AuthorsDiagnostics,
    BinClusterGrid,
    ClusterCounts,
    EmbedderComparison,
    EntropyRiskIdentity,
    FitSensitivity,
    FloorRefit,
    FloorTerm,
    NullSpaceComparison,
    SamplingBaselineGaps,
    SamplingTemperatureSearch,
    ShuffleControl,
    TemperatureIntervals,
    arithmetic_comparison,
    auroc_comparison,
    authors_after_scaling,
    authors_diagnostics,
    bin_cluster_grid,
    cluster_counts,
    embedder_comparison,
    entropy_risk_identity,
    fit_sensitivity,
    floor_refit,
    floor_term,
    null_space_comparison,
    sampling_baseline_gaps,
    sampling_temperature_search,
    shuffle_control,
    temperature_intervals,
)
from .diagrams import (
    Cominimisation,
    ReliabilityComparison,
    cominimisation,
    naive_reliability,
    reliability,
    reliability_comparison,
    reliability_grid,
)
from .scores import (
    AUTHORS_GRID,
    ConstantPredictor,
    Spectrum,
    TemperatureEffect,
    constant_predictor,
    eigenvalues,
    entropy,
    fit_spectral_temperature,
    log_score,
    null_share,
    outside_share,
    risk,
    risk_curve,
    spectrum,
    temperature_difference,
    temperature_effect,
    temperature_interval,
)
from .subsample import MaxEigenvalueBias, max_eigenvalue_bias, max_eigenvalue_subsample
from .targets import calibration_curve, calibration_error

__all__ = [
    "ZERO", "EPS", "AUTHORS_GRID", "LAMB_GRID", "ARITHMETICS", "null_share", "outside_share",
    "eigenvalues", "entropy", "log_score", "risk", "risk_curve", "fit_spectral_temperature",
    "Spectrum", "spectrum",
    "temperature_interval", "temperature_difference", "auroc_difference", "similarity",
    "cluster", "calibration_error",
    "calibration_curve",
    "naive_reliability",
    "reliability", "reliability_grid", "max_eigenvalue_subsample", "auroc", "semantic_entropy",
    "kernel_language_entropy",
    "TemperatureEffect", "temperature_effect", "ConstantPredictor", "constant_predictor",
    "ReliabilityComparison", "reliability_comparison", "Cominimisation", "cominimisation",
    "MaxEigenvalueBias", "max_eigenvalue_bias",
    "TemperatureIntervals", "temperature_intervals", "AurocComparison", "auroc_comparison",
    "BinClusterGrid", "bin_cluster_grid", "EmbedderComparison", "embedder_comparison",
    "ArithmeticComparison", "arithmetic_comparison", "NullSpaceComparison",
    "null_space_comparison", "FitSensitivity", "fit_sensitivity", "FloorTerm", "floor_term",
    "AuthorsDiagnostics", "authors_diagnostics", "AuthorsAfterScaling",
    "authors_after_scaling", "ShuffleControl", "shuffle_control", "SamplingTemperatureSearch",
    "sampling_temperature_search", "SamplingBaselineGaps", "sampling_baseline_gaps",
    "FloorRefit", "floor_refit", "ClusterCounts", "cluster_counts", "EntropyRiskIdentity",
    "entropy_risk_identity",
]
