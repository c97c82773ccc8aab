r"""Reliability diagrams for eigenvalue calibration: the paper's Eq. 10 (bins of the
predicted :math:`\lambda_{\max}`) and its Algorithm 1 (clusters within each bin), for one
setting or a grid of bin and cluster counts."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .._parallel import ordered_map
from ._gram import (
    _answers,
    _count,
    _log_scaled,
    _option,
    _spectrum,
    _targets,
    _temperature,
    _variant,
)
from .clusters import _cosine, _distance, _Linkage, _method, cluster
from .targets import _lambda_max_rows, calibration_curve


def _equal_mass(values: np.ndarray, bins: int) -> list[np.ndarray]:
    order = np.argsort(values, kind="stable")
    return np.array_split(order, bins)


def naive_reliability(answers, targets, temperature: float = 1.0, bins: int = 8) -> dict:
    r"""Reliability diagram for eigenvalue calibration as in the paper's Eq. 10: equal-mass
    bins of the predicted :math:`\lambda_{\max}`; per bin, the largest eigenvalue of the
    bin's target density matrix :math:`\frac{1}{n_b}\sum_{i\in b} y_i y_i^\top`.

    By the paper's Theorem 1 this target is *at most* the prediction even for a matrix-calibrated
    predictor, so this diagram can show a gap that is not miscalibration.

    Returns
    -------
    dict
        ``predicted`` (B,) mean predicted :math:`\lambda_{\max}` per bin, ``target`` (B,),
        ``count`` (B,), ``ece`` = :math:`\sum_b \frac{n_b}{n}|\mathrm{predicted}_b - \mathrm{target}_b|`,
        ``bins`` (list of index arrays).
    """
    a = _answers(answers)
    n, _, d = a.shape
    y = _targets(targets, n, d)
    t = _temperature(temperature)
    b = _count(bins, "bins")
    if b > n:
        raise ValueError(f"bins must be <= the number of questions ({n}), got {b}")
    top = _log_scaled(_spectrum(a)["lam"], 1.0 / t)[0][:, 0]
    groups = _equal_mass(top, b)
    pred = np.array([top[g].mean() for g in groups])
    targ = np.array([_lambda_max_rows(y[g]) for g in groups])
    count = np.array([len(g) for g in groups])
    return {"predicted": pred, "target": targ, "count": count,
            "ece": float(count @ np.abs(pred - targ) / n), "bins": groups}


def _quantile_bins(values: np.ndarray, bins: int) -> list[np.ndarray]:
    """The authors' bins: equal-mass edges from :func:`numpy.quantile`, duplicate edges merged
    with :func:`numpy.unique`, values assigned with ``numpy.digitize(..., right=True)`` on the
    inner edges (a value equal to an edge joins the bin below it; tied values share a bin, and
    fewer than ``bins`` bins may remain)."""
    edges = np.unique(np.quantile(values, np.linspace(0.0, 1.0, bins + 1)))
    idx = np.digitize(values, edges[1:-1], right=True)
    return [np.flatnonzero(idx == b) for b in range(len(edges) - 1) if np.any(idx == b)]


def reliability(answers, targets, temperature: float = 1.0, bins: int = 8, clusters: int = 5, *,
                method: str = "average", weighting: str = "uniform", variant: str = "ours",
                binning: str | None = None, distance: str | None = None,
                cluster_on: str | None = None, min_cluster: int | None = None) -> dict:
    r"""Algorithm 1 of the paper: a reliability diagram for eigenvalues that conditions on the
    predicted density matrix.

    1. :math:`\lambda_{\max}` of every (scaled) prediction; ``bins`` equal-mass bins.
    2. In each bin, hierarchical clusters (``clusters`` of them) of the predicted matrices by
       their Frobenius cosine similarity (:func:`scipy.cluster.hierarchy.linkage`, ``method``).
    3. Per cluster, the largest eigenvalue of its targets' density matrix
       :math:`\lambda_{\max}(\frac{1}{n_c} Y_c^\top Y_c)`.
    4. Per bin: the mean predicted :math:`\lambda_{\max}`, and the average of the cluster
       targets (``weighting="uniform"``, as written in Algorithm 1, or ``"size"``, weighting each
       cluster by its number of questions).

    ``variant="ours"`` and ``variant="authors"`` differ in four places that can each be set on
    their own (``None`` follows the variant), and in the target of a bin left without clusters
    (below):

    ================ ===================================== ==========================================
    option           ours                                  authors'
    ================ ===================================== ==========================================
    ``binning``      ``"split"``: sorted, ``array_split``  ``"quantile"``: ``np.quantile`` edges,
                     (ties split by question order)        ``np.unique``, ``np.digitize`` with
                                                           ``right=True`` (ties share)
    ``distance``     ``"cosine"``: ``1 - similarity``      ``"rows"``: Euclidean between rows of the
                                                           similarity matrix (``pdist``)
    ``cluster_on``   ``"scaled"`` matrices                 ``"unscaled"`` (T = 1) matrices
    ``min_cluster``  1 (singletons kept)                   2 (smaller clusters dropped)
    ================ ===================================== ==========================================

    With the authors' variant a bin may hold fewer questions than ``clusters`` (then it gets one
    cluster per question). A bin whose clusters are all dropped has target 0 with
    ``variant="authors"``, as their code gives it (the bin counts in the ECE with its whole
    predicted value as gap); otherwise it has no target (NaN) and is left out of the ECE.

    Returns
    -------
    dict
        ``predicted`` (B,), ``target`` (B,), ``count`` (B,), ``ece`` (count-weighted mean
        absolute gap over bins with a target), ``cluster_targets`` (list of arrays),
        ``cluster_sizes`` (list of arrays, before dropping), ``within_cluster`` and
        ``within_bin`` (mean pairwise similarity of the matrices clustered, over distinct pairs
        sharing a cluster / a bin; the paper's Table 4), ``bins``.
    """
    return reliability_grid(answers, targets, temperature, (bins,), (clusters,), method=method,
                            weighting=weighting, variant=variant, binning=binning,
                            distance=distance, cluster_on=cluster_on,
                            min_cluster=min_cluster)[bins, clusters]


def reliability_grid(answers, targets, temperature: float = 1.0, bins=(8,), clusters=(5,), *,
                     method: str = "average", weighting: str = "uniform", variant: str = "ours",
                     binning: str | None = None, distance: str | None = None,
                     cluster_on: str | None = None, min_cluster: int | None = None) -> dict:
    """:func:`reliability` for every pair of ``bins`` and ``clusters``: ``{(B, C): result}``.

    Each bin's similarity matrix and linkage are computed once and cut at every ``C`` (the
    clustering of a bin does not depend on how many clusters are asked for), so a grid costs
    about one call per ``B``; each result is the one :func:`reliability` returns (it calls
    this function).
    """
    a = _answers(answers)
    n, m, d = a.shape
    y = _targets(targets, n, d)
    t = _temperature(temperature)
    bs = [_count(b, "bins") for b in np.atleast_1d(np.asarray(bins, dtype=object))]
    ks = [_count(k, "clusters") for k in np.atleast_1d(np.asarray(clusters, dtype=object))]
    method = _method(method)
    authors = _variant(variant) == "authors"
    binning = _option("binning", binning, authors)
    distance = _distance(_option("distance", distance, authors))
    cluster_on = _option("cluster_on", cluster_on, authors)
    low = _count(_option("min_cluster", min_cluster, authors), "min_cluster")
    if weighting not in ("uniform", "size"):
        raise ValueError(f"weighting must be 'uniform' or 'size', got {weighting!r}")
    for b in bs:
        if b > n:
            raise ValueError(f"bins must be <= the number of questions ({n}), got {b}")
        for k in ks:
            if binning == "split" and k > n // b:
                raise ValueError(f"clusters must be <= the smallest bin's {n // b} questions "
                                 f"(n={n}, bins={b}), got {k}")
    alpha = 1.0 / t
    spec = _spectrum(a, vectors=True)  # each bin's factors take their rows of it
    top = _log_scaled(spec["lam"], alpha)[0][:, 0]

    def clustered(g):
        """One bin: its similarity and linkage, and per ``C`` the sums over its pairs, its
        cluster targets and sizes (added up over the bins below, in bin order)."""
        sim = _cosine(a, alpha if cluster_on == "scaled" else 1.0, spec, rows=g)
        iu = np.triu_indices(len(g), 1)
        tree = _Linkage(sim, method, distance)
        per = {}
        for k in ks:
            lab = tree.cut(min(k, len(g)))
            same = lab[iu[0]] == lab[iu[1]]
            kk = lab.max() + 1
            tc = np.array([_lambda_max_rows(y[g][lab == c]) for c in range(kk)])
            per[k] = (sim[iu].sum(), len(iu[0]), sim[iu][same].sum(), int(same.sum()), tc,
                      np.bincount(lab, minlength=kk))
        return per

    out = {}
    for b in bs:
        groups = _equal_mass(top, b) if binning == "split" else _quantile_bins(top, b)
        per_k = {k: ([], [], [], [], [0.0, 0], [0.0, 0]) for k in ks}
        for g, per in zip(groups, ordered_map(clustered, groups)):
            for k in ks:
                pred, targ, ctargets, csizes, pair_c, pair_b = per_k[k]
                sum_b, n_b, sum_c, n_c, tc, sc = per[k]
                pair_b[0] += sum_b
                pair_b[1] += n_b
                pair_c[0] += sum_c
                pair_c[1] += n_c
                kept = sc >= low
                pred.append(top[g].mean())
                if not kept.any():
                    targ.append(0.0 if authors else np.nan)
                elif weighting == "uniform":
                    targ.append(tc[kept].mean())
                else:
                    targ.append(float(sc[kept] @ tc[kept] / sc[kept].sum()))
                ctargets.append(tc)
                csizes.append(sc)
        count = np.array([len(g) for g in groups])
        for k, (pred, targ, ctargets, csizes, pair_c, pair_b) in per_k.items():
            pred, targ = np.array(pred), np.array(targ)
            has = np.isfinite(targ)
            if not has.any():
                raise ValueError(f"no bin keeps a cluster of at least min_cluster={low} "
                                 f"matrices (bins={b}, clusters={k}): lower min_cluster or "
                                 "clusters")
            out[b, k] = {
                "predicted": pred, "target": targ, "count": count,
                "ece": float(count[has] @ np.abs(pred[has] - targ[has]) / count[has].sum()),
                "cluster_targets": ctargets, "cluster_sizes": csizes,
                "within_cluster": pair_c[0] / pair_c[1] if pair_c[1] else float("nan"),
                "within_bin": pair_b[0] / pair_b[1] if pair_b[1] else float("nan"),
                "bins": groups,
            }
    return out


def _halves(n: int, seed: int, repeats: int = 3) -> list[np.ndarray]:
    """``repeats`` random splits of ``n`` questions into two halves, each half sorted: the
    split ``k`` is drawn with ``default_rng(seed + k)``."""
    return [np.sort(h) for k in range(repeats)
            for h in np.array_split(np.random.default_rng(seed + k).permutation(n), 2)]


@dataclass(frozen=True)
class ReliabilityComparison:
    """The binned diagram (:func:`naive_reliability`) and the clustered one
    (:func:`reliability`, unweighted and size-weighted) at T = 1 and at a fitted temperature.

    Number fields: each diagram's gap (``ece_*``: ``_1`` at T = 1, ``_fit`` at the fit); the
    mean prediction and target of the lowest and highest bins at T = 1; the share of singleton
    clusters and the smallest bin at T = 1; the bins whose prediction exceeds their target;
    and, over ``n_halves`` random halves of the questions, the range of the change that
    scaling makes to the unweighted (``gap_alg_*``) and size-weighted (``gap_size_*``) gaps.
    ``naive``, ``alg`` and ``alg_size`` map each temperature to the diagram's dict."""

    n_halves: int
    gap_alg_lo: float
    gap_alg_hi: float
    gap_size_lo: float
    gap_size_hi: float
    ece_naive_1: float
    ece_naive_fit: float
    ece_alg_1: float
    ece_alg_fit: float
    pred_top_bin_1: float
    alg_top_bin_1: float
    naive_top_bin_1: float
    pred_low_bin_1: float
    alg_low_bin_1: float
    ece_alg_size_1: float
    ece_alg_size_fit: float
    singleton_share: float
    bin_size: int
    bins_over_1: int
    bins_over_fit: int
    naive: dict = field(repr=False)
    alg: dict = field(repr=False)
    alg_size: dict = field(repr=False)


def reliability_comparison(answers, targets, temperature: float, *, bins: int = 8,
                           clusters: int = 5, halves_seed: int = 50) -> ReliabilityComparison:
    """Both reliability diagrams before (T = 1) and after scaling to ``temperature``, and the
    spread of the clustered diagram's change over three random splits of the questions into
    halves (:func:`_halves` with ``halves_seed``)."""
    a, y, t = answers, targets, temperature
    naive = {s: naive_reliability(a, y, s, bins=bins) for s in (1.0, t)}
    alg = {s: reliability(a, y, s, bins=bins, clusters=clusters) for s in (1.0, t)}
    alg_size = {s: reliability(a, y, s, bins=bins, clusters=clusters, weighting="size")
                for s in (1.0, t)}
    singles = np.mean([np.mean(c == 1) for c in alg[1.0]["cluster_sizes"]])
    halves = _halves(len(a), halves_seed)
    half_gap = {w: np.array([
        reliability(a[h], y[h], t, weighting=w)["ece"]
        - reliability(a[h], y[h], 1.0, weighting=w)["ece"] for h in halves])
        for w in ("uniform", "size")}
    return ReliabilityComparison(
        n_halves=len(halves), gap_alg_lo=half_gap["uniform"].min(),
        gap_alg_hi=half_gap["uniform"].max(), gap_size_lo=half_gap["size"].min(),
        gap_size_hi=half_gap["size"].max(),
        ece_naive_1=naive[1.0]["ece"], ece_naive_fit=naive[t]["ece"],
        ece_alg_1=alg[1.0]["ece"], ece_alg_fit=alg[t]["ece"],
        pred_top_bin_1=alg[1.0]["predicted"][-1], alg_top_bin_1=alg[1.0]["target"][-1],
        naive_top_bin_1=naive[1.0]["target"][-1], pred_low_bin_1=alg[1.0]["predicted"][0],
        alg_low_bin_1=alg[1.0]["target"][0], ece_alg_size_1=alg_size[1.0]["ece"],
        ece_alg_size_fit=alg_size[t]["ece"], singleton_share=singles,
        bin_size=int(alg[1.0]["count"].min()),
        bins_over_1=int(np.sum(alg[1.0]["predicted"] > alg[1.0]["target"])),
        bins_over_fit=int(np.sum(alg[t]["predicted"] > alg[t]["target"])),
        naive=naive, alg=alg, alg_size=alg_size)


@dataclass(frozen=True)
class Cominimisation:
    """The risk, the estimate of :math:`\\mathrm{Cal}_S` on a fixed partition and the
    clustered diagram's gap over a grid of temperatures.

    Number fields: each curve's argmin on the grid; the estimate at T = 1 (``cal_1``) and at
    the fitted temperature (``cal_fit``); its change from T = 1 to the fit minus the risk's
    (zero for a partition on which the predictions are constant); and at T = 1 the terms of
    the decomposition: Cal - Sharp + Noise (``decomposed_1``), the risk (``risk_ce_1``),
    ``sharp_1`` and ``noise_1``. ``grid`` is the grid; ``curves`` maps each curve's name
    (``"risk"``, ``"Cal_S"``, ``"λ-gap (clustered diagram)"``) to its values on it."""

    argmin_risk: float
    argmin_cal: float
    argmin_ece: float
    cal_1: float
    cal_fit: float
    dcal_minus_drisk: float
    decomposed_1: float
    risk_ce_1: float
    sharp_1: float
    noise_1: float
    grid: np.ndarray = field(repr=False)
    curves: dict = field(repr=False)


def cominimisation(answers, targets, grid, temperature: float, *,
                   clusters: int = 50) -> Cominimisation:
    """The three curves over ``grid`` (which holds 1.0 and the fitted ``temperature``), the
    calibration estimate conditioning on one partition of the unscaled matrices into
    ``clusters`` clusters (scaling is injective, so the conditioning is fixed)."""
    grid = np.asarray(grid)
    labels = cluster(answers, clusters)
    ces = calibration_curve(answers, targets, grid, labels=labels)  # one decomposition
    ce_1 = ces[list(grid).index(1.0)]
    co = {"risk": np.array([ce["risk"] for ce in ces]),
          "Cal_S": np.array([ce["calibration"] for ce in ces]),
          "λ-gap (clustered diagram)": np.array([reliability(answers, targets, t)["ece"]
                                                 for t in grid])}
    i1 = int(np.argmin(np.abs(grid - 1)))
    it = int(np.argmin(np.abs(grid - temperature)))
    return Cominimisation(
        argmin_risk=grid[np.argmin(co["risk"])], argmin_cal=grid[np.argmin(co["Cal_S"])],
        argmin_ece=grid[np.argmin(co["λ-gap (clustered diagram)"])], cal_1=co["Cal_S"][i1],
        cal_fit=co["Cal_S"][it],
        dcal_minus_drisk=(co["Cal_S"][it] - co["Cal_S"][i1]) - (co["risk"][it] - co["risk"][i1]),
        decomposed_1=ce_1["decomposed"], risk_ce_1=ce_1["risk"], sharp_1=ce_1["sharpness"],
        noise_1=ce_1["noise"], grid=grid, curves=co)
