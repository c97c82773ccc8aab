r"""Calibration metrics of predictions: binned ECE (equal-width or equal-mass bins), NLL and
the Brier score."""

from __future__ import annotations

import numpy as np

from standarderror import _checks
from standarderror.uncertainty._inputs import (
    _correct,
    _log_of,
)


def ece(confidence, correct, bins: int = 15, adaptive: bool = False) -> float:
    r"""Expected calibration error.

    .. math::

        \mathrm{ECE} = \sum_{b=1}^{B} \frac{n_b}{n}\,\bigl|\mathrm{acc}_b - \mathrm{conf}_b\bigr|

    With ``adaptive=False`` (Guo et al., 2017) bin :math:`b` holds the confidences in
    :math:`(e_{b-1}, e_b]` with edges ``numpy.linspace(0, 1, B + 1)``, the first bin also
    holding exactly 0. With ``adaptive=True``
    the bins hold equal numbers of predictions: rows are sorted by confidence and split into
    ``bins`` consecutive groups whose sizes differ by at most one (``numpy.array_split``),
    except that every copy of a tied confidence joins the bin of its first copy, so the result
    does not depend on the order of the rows. Empty bins contribute nothing.

    Parameters
    ----------
    confidence : array_like, shape (rows,)
        Confidence of the predicted label, in [0, 1].
    correct : array_like of bool, shape (rows,)
        Whether each prediction was right.
    bins : int
        Number of bins :math:`B`.
    adaptive : bool
        Equal-mass bins instead of equal-width bins.

    Returns
    -------
    float
    """
    conf = _checks.array(confidence, "confidence", ndim=1)
    ok = _correct(correct)
    _checks.same_length(confidence=conf, correct=ok)
    bins = _checks.bins(bins)
    if conf.min() < 0 or conf.max() > 1:
        raise ValueError(f"confidence must lie in [0, 1]; got [{conf.min():.3g}, {conf.max():.3g}]")
    which = _bin_index(conf, bins, adaptive)
    gap = np.bincount(which, weights=conf - ok, minlength=bins)
    return float(np.abs(gap).sum() / conf.size)


def bin_index(confidence, bins: int = 15, adaptive: bool = False) -> np.ndarray:
    r"""The bin :func:`ece` puts every confidence in (0-based); rows of a 2-D array are binned
    independently.

    Equal width (``adaptive=False``): bin :math:`b` holds :math:`(e_b, e_{b+1}]` with edges
    ``numpy.linspace(0, 1, B + 1)``, the first bin also holding 0. (Comparing with the stored
    edges, not computing ``ceil(c * B)``, keeps a confidence such as 0.4 with B = 35 in the bin
    whose upper edge it is.) Equal mass (``adaptive=True``): values sorted by confidence
    are cut into ``bins`` consecutive groups whose sizes differ by at most one, larger groups
    first (``numpy.array_split``); all copies of a tied value then join the bin of the first
    copy, so the bins do not depend on the order of the rows (a bin may grow, or stay empty).

    Parameters
    ----------
    confidence : array_like, shape (rows,) or (draws, rows)
        Confidences in [0, 1].
    bins : int
        Number of bins :math:`B`.
    adaptive : bool
        Equal-mass bins instead of equal-width bins.
    """
    c = _checks.array(confidence, "confidence")
    if c.ndim not in (1, 2):
        raise ValueError(f"confidence must be one- or two-dimensional (draws x rows), got shape {c.shape}")
    if c.min() < 0 or c.max() > 1:
        raise ValueError(f"confidence must lie in [0, 1]; got [{c.min():.3g}, {c.max():.3g}]")
    return _bin_index(c, _checks.bins(bins), adaptive)


def _bin_index(c: np.ndarray, bins: int, adaptive: bool) -> np.ndarray:
    """:func:`bin_index` without its input checks (the caller has made them): the one binning
    rule of the package, shared by :func:`ece` and :func:`bin_index`."""
    if not adaptive:
        edges = np.linspace(0.0, 1.0, bins + 1)
        return np.clip(np.searchsorted(edges, c, side="left") - 1, 0, bins - 1)
    c2 = np.atleast_2d(c)
    n = c2.shape[1]
    sizes = np.array([len(a) for a in np.array_split(np.arange(n), bins)])
    slot = np.repeat(np.arange(bins), sizes)  # the bin of each position in sorted order
    order = np.argsort(c2, axis=1, kind="stable")
    ranked = np.take_along_axis(c2, order, axis=1)
    # every copy of a tied value goes to the bin of its first copy (row order cannot matter)
    first = np.zeros(c2.shape, dtype=np.int64)
    np.copyto(first[:, 1:], np.arange(1, n), where=ranked[:, 1:] != ranked[:, :-1])
    np.maximum.accumulate(first, axis=1, out=first)
    which = np.empty(c2.shape, dtype=np.int64)
    np.put_along_axis(which, order, slot[first], axis=1)
    return which.reshape(c.shape)


def nll(p, y) -> float:
    r"""Mean negative log-likelihood of the true labels, :math:`-\frac1n\sum_i \log p_i(y_i)`.

    No floor: a zero probability on a true label gives ``inf``, honestly.

    Parameters
    ----------
    p : array_like, shape (rows, classes)
        Probabilities; rows sum to one.
    y : array_like of int, shape (rows,)
        True labels in ``[0, classes)``.
    """
    logp = _log_of(p)
    y = _checks.labels(y, logp.shape[1], logp.shape[0])
    return float(-logp[np.arange(y.size), y].mean())


def brier(p, y) -> float:
    r"""Multi-class Brier score, :math:`\frac1n\sum_i\sum_k (p_i(k) - [y_i = k])^2` (in [0, 2]).

    Parameters
    ----------
    p : array_like, shape (rows, classes)
        Probabilities; rows sum to one.
    y : array_like of int, shape (rows,)
        True labels in ``[0, classes)``.
    """
    p = _checks.probabilities(p)
    y = _checks.labels(y, p.shape[1], p.shape[0])
    d = p.copy()
    d[np.arange(y.size), y] -= 1.0
    return float((d * d).sum(axis=1).mean())
