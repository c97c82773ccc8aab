"""Target density matrices (the mean outer product of the unit targets of a group of
questions), and the matrix calibration error with its calibration-sharpness decomposition
(the paper's Lemma 2), conditioned on clusters of the predictions."""

from __future__ import annotations

import functools

import numpy as np

from .._parallel import ordered_map
from ._gram import (
    EPS,
    ZERO,
    _answers,
    _count,
    _eps,
    _option,
    _score_from,
    _spectrum,
    _targets,
    _temperature,
    _variant,
)
from .clusters import _cosine, _distance, _factors, _hcluster, _method, _unique_rows


def _rows_spectrum(rows: np.ndarray):
    r"""Eigenpairs of the density matrix :math:`\frac1n\sum_j r_j r_j^\top` of unit rows,
    through the Gram matrix of the distinct rows (repeated rows are merged with their counts).

    Returns ``(lam, uniq, coef)``: eigenvalues above :data:`ZERO`, the distinct rows, and
    coefficients with eigenvectors ``u_k = uniq.T @ coef[:, k]`` (never formed)."""
    uniq, _, counts = _unique_rows(rows)
    sw = np.sqrt(counts / len(rows))
    b = uniq * sw[:, None]
    lam, v = np.linalg.eigh(b @ b.T)
    keep = lam > ZERO
    lam, v = lam[keep], v[:, keep]
    return lam, uniq, (v / np.sqrt(lam)) * sw[:, None]


def _lambda_max_rows(rows: np.ndarray) -> float:
    """Largest eigenvalue of the density matrix of unit rows (mean outer product)."""
    g = rows @ rows.T / len(rows)
    return float(np.linalg.eigvalsh(g)[-1])


def _neg_entropy_rows(rows: np.ndarray) -> float:
    lam = _rows_spectrum(rows)[0]
    return float(np.sum(lam * np.log(lam)))


def _thin_svd(x: np.ndarray):
    """Singular values and right singular vectors of a tall matrix: those of
    ``numpy.linalg.svd(x, full_matrices=False)``, bit for bit, without its left singular
    vectors, which the caller does not use.

    LAPACK's ``dgesdd`` (behind ``numpy.linalg.svd``) first reduces a matrix with at least
    ``MNTHR = int(11 * n / 6)`` rows to the ``n x n`` triangle of its QR factorisation and
    takes the singular values and right vectors from that triangle; forming the left vectors
    then costs more than the rest. On such a matrix this function does the same two steps
    itself (``numpy.linalg.qr(mode="r")``, the same ``dgeqrf``, then the square ``dgesdd``):
    the same numbers, in under half the time (``tests/test_spectral.py`` checks the
    equality). Below ``MNTHR`` rows ``dgesdd`` works on ``x`` directly, and so does this."""
    rows, n = x.shape
    if rows >= int(n * 11.0 / 6.0):
        x = np.linalg.qr(x, mode="r")
    _, sv, vt = np.linalg.svd(x, full_matrices=False)
    return sv, vt


def _cluster_cal(c, *, lab, F, row_lab, neg_h, y, d, e):
    """Cluster ``c``'s term of the calibration error (one item of calibration_curve's pool)."""
    members = np.flatnonzero(lab == c)
    yc = y[members]
    fc = F[row_lab == c] / np.sqrt(len(members))
    if len(fc) <= d:  # Gram route: eigenpairs of fc fc^T lift to d-space
        w, v = np.linalg.eigh(fc @ fc.T)
        pos = w > ZERO
        w, v = w[pos], v[:, pos]
        p = (v.T @ (fc @ yc.T)) ** 2 / w[:, None]  # (r, n_c) squared projections
    else:  # the cluster mean may have full rank d: thin SVD of the factor rows
        sv, vt = _thin_svd(fc)
        w = sv * sv
        pos = w > ZERO
        w = w[pos]
        p = (vt[pos] @ yc.T) ** 2
    cross = np.log(w) @ p + np.log(e) * np.clip(1.0 - p.sum(0), 0.0, None)
    return neg_h[c] - cross.mean()


def calibration_error(answers, targets, temperature: float = 1.0, *, clusters: int = 20,
                      labels=None, method: str = "average", eps: float = EPS,
                      variant: str = "ours", weighting: str | None = None,
                      distance: str | None = None) -> dict:
    r"""Matrix calibration error :math:`\mathrm{Cal}_S` and the calibration-sharpness
    decomposition (the paper's Lemma 2) for the matrix log score.

    Conditioning on :math:`d(X)` is approximated by a partition of the questions (hierarchical
    clusters of the predicted matrices, or ``labels``). For each cluster :math:`c` with target
    density matrix :math:`\bar Y_c = \frac{1}{n_c}\sum_{i\in c} y_i y_i^\top` and mean prediction
    :math:`\bar D_c = \frac1{n_c}\sum_{i \in c} h_T(\hat d(x_i))`:

    .. math:: \widehat{\mathrm{Cal}}_S = \sum_c \tfrac{n_c}{n} D(\bar Y_c, \bar D_c),\quad
       \widehat{\mathrm{Sharp}} = \sum_c \tfrac{n_c}{n} D(\bar Y_c, \bar Y),\quad
       \widehat{\mathrm{Noise}} = H(\bar Y),

    with :math:`D(M_1, M_2) = \operatorname{tr}[M_1\log M_1] - \operatorname{tr}[M_1 \log M_2]`
    (zero eigenvalues of :math:`M_2` replaced by ``eps``). A cluster mean is the one place where
    the rank can reach :math:`d`: when a cluster's stacked factor rows outnumber :math:`d`, its
    mean is decomposed by a thin SVD of those rows (right singular vectors, at most
    :math:`d \times d`); otherwise through their Gram matrix. Per-question quantities never
    leave the :math:`m \times m` Gram space. When every cluster holds identical
    predictions, ``risk == calibration - sharpness + noise`` exactly.

    Parameters
    ----------
    clusters : int
        Number of clusters when ``labels`` is not given (clustered at ``temperature``).
    labels : array (n,), optional
        A fixed partition; pass the same labels across temperatures to hold the conditioning
        fixed (temperature scaling is injective, so it does not change what it conditions on).
    variant : ``"ours"`` or ``"authors"``
        Ours weights clusters by size (``weighting="size"``) and clusters on ``1 - similarity``
        (``distance="cosine"``); the authors' takes the unweighted mean over clusters
        (``"uniform"``) and clusters on the Euclidean distance between rows of the similarity
        matrix (``"rows"``, as in their Algorithm 1), re-clustering at each temperature when
        ``labels`` is not given. ``weighting`` and ``distance`` override one part.

    Returns
    -------
    dict
        ``calibration``, ``sharpness``, ``noise``, ``risk`` (mean log score),
        ``decomposed`` (= calibration - sharpness + noise), ``labels``, ``sizes``.
    """
    return calibration_curve(answers, targets, (temperature,), clusters=clusters, labels=labels,
                             method=method, eps=eps, variant=variant, weighting=weighting,
                             distance=distance)[0]


def calibration_curve(answers, targets, temperatures, *, clusters: int = 20, labels=None,
                      method: str = "average", eps: float = EPS, variant: str = "ours",
                      weighting: str | None = None, distance: str | None = None) -> list[dict]:
    """:func:`calibration_error` at each of ``temperatures``: a list of its results.

    What does not depend on the temperature is computed once: the Gram spectra of the
    answers, the targets' density matrices and, with fixed ``labels``, every cluster's target
    terms (its entropy and sharpness). Without ``labels`` the questions are re-clustered at
    each temperature, as :func:`calibration_error` does.
    """
    a = _answers(answers)
    n, _, d = a.shape
    y = _targets(targets, n, d)
    ts = [_temperature(t) for t in np.atleast_1d(np.asarray(temperatures, dtype=object))]
    e = _eps(eps)
    authors = _variant(variant) == "authors"
    weighting = _option("weighting", weighting, authors)
    distance = _distance(_option("distance", distance, authors))
    if labels is None:
        k = _count(clusters, "clusters")
        if k > n:
            raise ValueError(f"clusters must be <= the number of questions ({n}), got {k}")
        method = _method(method)
        fixed = None
    else:
        fixed = np.asarray(labels)
        if fixed.shape != (n,) or not np.issubdtype(fixed.dtype, np.integer):
            raise ValueError(f"labels must be {n} integers (one cluster id per question)")
        _, fixed = np.unique(fixed, return_inverse=True)
    sp = _spectrum(a, y, vectors=True)
    # Sharpness and noise: all targets' density matrix.
    lam_all, uniq_all, coef_all = _rows_spectrum(y)
    neg_h_all = float(np.sum(lam_all * np.log(lam_all)))

    def target_terms(lab):
        """Per cluster of ``lab``: -H of its targets' density matrix, and its sharpness."""
        kk = lab.max() + 1
        neg_h, sharp = np.empty(kk), np.empty(kk)
        for c in range(kk):
            yc = y[lab == c]
            neg_h[c] = _neg_entropy_rows(yc)
            p = ((yc @ uniq_all.T) @ coef_all) ** 2  # (n_c, r)
            sharp[c] = neg_h[c] - float(np.mean(p @ np.log(lam_all)))
        return neg_h, sharp

    terms = target_terms(fixed) if fixed is not None else None
    out = []
    for t in ts:
        alpha = 1.0 / t
        lab = fixed if fixed is not None else _hcluster(_cosine(a, alpha, sp), k, method,
                                                        distance)
        neg_h, sharp = terms if fixed is not None else target_terms(lab)
        F, owner, lam, mu = _factors(a, alpha, sp)
        score = _score_from(sp["lam"], sp["proj"], alpha, e)
        row_lab = lab[owner]
        kk = lab.max() + 1
        sizes = np.bincount(lab, minlength=kk)
        one = functools.partial(_cluster_cal, lab=lab, F=F, row_lab=row_lab, neg_h=neg_h,
                                y=y, d=d, e=e)
        cal = np.array(ordered_map(one, range(kk)), dtype=float)
        wts = sizes / n if weighting == "size" else np.full(kk, 1.0 / kk)
        calibration = float(wts @ cal)
        sharpness = float(wts @ sharp)
        noise = -neg_h_all
        out.append({
            "calibration": calibration,
            "sharpness": sharpness,
            "noise": noise,
            "risk": float(score.mean()),
            "decomposed": calibration - sharpness + noise,
            "labels": lab,
            "sizes": sizes,
        })
    return out
