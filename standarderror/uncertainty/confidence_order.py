r"""What temperature does to the order of confidence across predictions (Episode 3's
constructions): the temperature table, the reordering it causes, a pair whose order flips,
and a control in which nothing can reorder.

Within one prediction temperature is a strictly increasing map of the logits, so the argmax
and the accuracy cannot move; between predictions a confidence score can change its order.
"""

from __future__ import annotations

import dataclasses

import numpy as np
from scipy import optimize

from standarderror import _checks
from standarderror.uncertainty._inputs import (
    _log_of,
    _temperatures,
)
from standarderror.uncertainty.metrics import ece
from standarderror.uncertainty.ranks import kendall_tau
from standarderror.uncertainty.scaling import scale

#: Temperatures of the temperature table (Episode 3).
TEMPERATURES = (0.5, 0.8, 1.0, 1.25, 1.5, 2.0, 3.0)


# --------------------------------------------------------------------------------------
# Temperature: the table, the reordering, the swap pair
# --------------------------------------------------------------------------------------


def temperature_table(temperatures=TEMPERATURES, *, data: dict, bins: int = 15) -> dict:
    r"""Accuracy, NLL, ECE and mean confidence of predictions at several temperatures.

    The predictions are passed in: the committed model's held-out predictions are
    :func:`standarderror.llm.predictions.predictions` (the model layer; this layer never
    imports it).

    Parameters
    ----------
    temperatures : sequence of float
        Temperatures to evaluate (1.0 is always evaluated as the reference).
    data : dict
        The predictions: keys ``logp`` (or ``p``) and ``y``.
    bins : int
        Equal-width ECE bins.

    Returns
    -------
    dict
        ``rows``: one dict per temperature (:func:`temperature_row`: ``temperature``,
        ``accuracy``, ``nll``, ``ece``, ``confidence`` (mean top probability) and ``gap``
        (confidence minus accuracy)); ``accuracy_identical``: ``True`` when the argmax is the
        same array at every temperature (compared exactly); ``temperatures``; ``logp`` and
        ``y`` (the unscaled predictions, which :func:`reordering` uses); ``rows_count``.
    """
    ts = _temperatures(temperatures)
    logp = _checks.normalised_logp(data["logp"]) if "logp" in data else _log_of(data["p"])
    y = _checks.labels(data["y"], logp.shape[1], logp.shape[0])
    reference = scale(logp, 1.0).argmax(axis=1)
    rows, identical = [], True
    for t in ts:
        lt = scale(logp, t)
        pred = lt.argmax(axis=1)
        identical &= bool(np.array_equal(pred, reference))
        rows.append(temperature_row(t, pred, np.exp(lt.max(axis=1)),
                                    -lt[np.arange(y.size), y], y, bins=bins))
    return {"rows": rows, "accuracy_identical": identical, "temperatures": ts,
            "logp": logp, "y": y, "rows_count": int(y.size), "bins": int(bins)}


@dataclasses.dataclass(frozen=True)
class TableHeadline:
    """What Episode 3 quotes of a temperature table (:func:`table_headline`).

    ``n_table`` predictions, ``ece_bins`` equal-width ECE bins, the accuracy ``acc`` (one value
    at every temperature), ECE at T = 1, 0.5 and 3 (``ece_t1``, ``ece_t05``, ``ece_t3``),
    mean confidence minus accuracy at T = 0.5, 1 and 3 (``gap_t05``, ``gap_t1``, ``gap_t3``),
    and the NLL at T = 1 and 1.25 (``nll_t1``, ``nll_t125``). ``argmax_identical``: the
    predicted labels are the same array at every temperature of the table and of ``grid``.
    """

    n_table: int
    ece_bins: int
    acc: float
    ece_t1: float
    ece_t05: float
    ece_t3: float
    gap_t05: float
    gap_t1: float
    gap_t3: float
    nll_t1: float
    nll_t125: float
    argmax_identical: bool


def table_headline(table: dict, grid=()) -> TableHeadline:
    """The values Episode 3 quotes of ``table`` (a :func:`temperature_table` result).

    The table must hold T = 0.5, 1, 1.25 and 3. ``argmax_identical`` also compares the argmax
    at every temperature of ``grid`` with the unscaled one, exactly.
    """
    rows = {r["temperature"]: r for r in table["rows"]}
    missing = {0.5, 1.0, 1.25, 3.0} - set(rows)
    if missing:
        raise ValueError(f"table_headline: the table lacks T = {sorted(missing)}")
    top = table["logp"].argmax(axis=1)
    same = table["accuracy_identical"] and all(
        np.array_equal(scale(table["logp"], t).argmax(axis=1), top) for t in grid)
    return TableHeadline(
        n_table=table["rows_count"], ece_bins=table["bins"], acc=rows[1.0]["accuracy"],
        ece_t1=rows[1.0]["ece"], ece_t05=rows[0.5]["ece"], ece_t3=rows[3.0]["ece"],
        gap_t05=rows[0.5]["gap"], gap_t1=rows[1.0]["gap"], gap_t3=rows[3.0]["gap"],
        nll_t1=rows[1.0]["nll"], nll_t125=rows[1.25]["nll"], argmax_identical=bool(same))


def temperature_row(temperature: float, pred, confidence, nll, y, *, bins: int = 15) -> dict:
    """One row of a temperature table from the predictions at that temperature: the one
    place the row is computed (:func:`temperature_table`, and the streamed measurement of
    :func:`standarderror.experiments.measure.calibration`, which never holds the
    predictions x classes array, call it).

    ``pred``: the argmax class of each prediction; ``confidence``: its top probability;
    ``nll``: the negative log-probability of its true label ``y``. Returns ``temperature``,
    ``accuracy``, ``nll`` (mean), ``ece`` (``bins`` equal-width bins), ``confidence``
    (mean) and ``gap`` (mean confidence minus accuracy).
    """
    ok = np.asarray(pred) == np.asarray(y)
    conf = np.asarray(confidence, dtype=float)
    acc = float(ok.mean())
    return {"temperature": temperature, "accuracy": acc,
            "nll": float(np.asarray(nll, dtype=float).mean()),
            "ece": ece(conf, ok, bins=bins), "confidence": float(conf.mean()),
            "gap": float(conf.mean()) - acc}


def _top_set(score: np.ndarray, k: int) -> np.ndarray:
    """Rows whose score is at least the k-th largest (ties at the boundary are all included)."""
    threshold = np.partition(score, score.size - k)[score.size - k]
    return score >= threshold


def reordering(table: dict, top: float = 0.01) -> list[dict]:
    r"""How much the confidence *order between predictions* moves with temperature.

    For each temperature of ``table`` (from :func:`temperature_table`), compares the
    max-probability confidence at :math:`T` with that at :math:`T = 1`:

    * ``tau``: Kendall's :math:`\tau_b` (see :func:`kendall_tau`);
    * ``pairs_reordered``: discordant pairs as a share of all :math:`n(n-1)/2` pairs;
    * ``top_overlap``: of the rows in the most confident ``top`` share at :math:`T = 1`
      (the :math:`k = \max(1, \mathrm{round}(\mathrm{top}\cdot n))` most confident, plus any
      tied with the k-th), the share still in the most confident ``top`` share at :math:`T`.

    Returns
    -------
    list of dict
        One per temperature: ``temperature``, ``tau``, ``pairs_reordered``, ``top_overlap``.
    """
    if not isinstance(table, dict) or "logp" not in table or "temperatures" not in table:
        raise ValueError("table must be the dict returned by temperature_table()")
    top = _checks.alpha(top, "top")
    # log-probabilities, as temperature_table stores them (probabilities here would give a
    # wrong tau without an error)
    logp = _checks.normalised_logp(table["logp"], "table['logp']")
    n = logp.shape[0]
    if n < 2:
        raise ValueError("table needs at least two predictions to compare orders")
    k = max(1, int(round(float(top) * n)))
    base = scale(logp, 1.0).max(axis=1)
    base_top = _top_set(base, k)
    out = []
    for t in table["temperatures"]:
        conf = scale(logp, t).max(axis=1)
        kt = kendall_tau(base, conf)
        out.append({
            "temperature": t,
            "tau": kt["tau"],
            "pairs_reordered": kt["discordant"] / kt["pairs"],
            "top_overlap": float((base_top & _top_set(conf, k)).sum() / base_top.sum()),
        })
    return out


def swap_pair(temperatures=(0.5, 1.0, 2.0, 3.0)) -> dict:
    r"""Two constructed predictions over five labels whose confidence order flips with T.

    * *one rival*: logits ``(2.0, 1.4, -6, -6, -6)`` -- one close rival, three negligible;
    * *crowd*: logits ``(2.0, -0.8, -0.8, -0.8, -0.8)`` -- four rivals, each far behind.

    Label 0 is the prediction of both at every temperature. Cold, the crowd's four distant
    rivals carry almost nothing and the crowd is the more confident; heated, probability
    spreads to rivals and four of them absorb more than one, so the order flips at the
    ``crossing`` temperature.

    Returns
    -------
    dict
        ``logits`` (2 x 5), ``confidence`` (T -> (one rival, crowd) top probabilities),
        ``crossing`` (the T at which they are equal), ``argmax`` (T -> both predicted
        labels), and ``curve`` (``temperature``, ``one rival``, ``crowd`` arrays over
        T in [0.25, 4] for drawing).
    """
    ts = _temperatures(temperatures)
    logits = np.array([[2.0, 1.4, -6.0, -6.0, -6.0],
                       [2.0, -0.8, -0.8, -0.8, -0.8]])

    def top(t):
        lt = scale(logits, t)
        return np.exp(lt.max(axis=1)), lt.argmax(axis=1)

    confidence, argmax = {}, {}
    for t in ts:
        c, a = top(t)
        confidence[t] = (float(c[0]), float(c[1]))
        argmax[t] = (int(a[0]), int(a[1]))
    crossing = optimize.brentq(lambda t: np.subtract(*top(t)[0]), 1.0, 3.0, xtol=1e-12)
    grid = np.linspace(0.25, 4.0, 151)
    curve = np.array([top(t)[0] for t in grid])
    return {"logits": logits, "confidence": confidence, "argmax": argmax,
            "crossing": float(crossing),
            "curve": {"temperature": grid, "one rival": curve[:, 0], "crowd": curve[:, 1]}}


def shared_shape(logp, shape=None) -> np.ndarray:
    r"""A control in which temperature cannot reorder confidence: every row has one shape.

    Row :math:`i` becomes :math:`a_i\,v` with one fixed sorted logit vector :math:`v` (the
    mean of the rows' sorted log-probabilities unless ``shape`` is given), permuted so its top
    entry sits on row :math:`i`'s own predicted label, and with :math:`a_i > 0` solved so the
    row keeps its own top probability at :math:`T = 1`. Rows then differ only by their own
    sharpness, and dividing by :math:`T` moves every row along the same one-parameter family,
    so max probability, entropy and margin keep their order across rows at every :math:`T`.
    Accuracy and the :math:`T = 1` max-probability order are those of the input.

    Parameters
    ----------
    logp : array_like, shape (rows, classes)
        Normalised log-probabilities.
    shape : array_like, shape (classes,), optional
        The common logit shape; needs a unique largest entry.

    Returns
    -------
    numpy.ndarray
        Normalised log-probabilities of the control rows (rows x classes).
    """
    logp = _checks.normalised_logp(logp)
    n, v_count = logp.shape
    if shape is None:
        srt = -np.sort(-np.where(np.isfinite(logp), logp, np.nan), axis=1)
        if np.isnan(srt).any():
            raise ValueError("logp has zero probabilities; pass an explicit shape")
        v = srt.mean(axis=0)
    else:
        v = -np.sort(-_checks.array(shape, "shape", ndim=1))
        if v.size != v_count:
            raise ValueError(f"shape must have {v_count} entries (one per class), got {v.size}")
    gaps = v - v[0]  # 0 then negative
    if not gaps[1] < 0:
        raise ValueError("shape needs a unique largest entry")
    target = logp.max(axis=1)  # log top probability of each row
    if (target <= -np.log(v_count)).any():
        raise ValueError("a row of logp is uniform; no sharpness reproduces it")

    def log_top(a):
        return -np.log1p(np.exp(a[:, None] * gaps[None, 1:]).sum(axis=1))

    lo = np.zeros(n)
    hi = np.ones(n)
    while (log_top(hi) < target).any():
        hi = np.where(log_top(hi) < target, hi * 2, hi)
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        below = log_top(mid) < target
        lo = np.where(below, mid, lo)
        hi = np.where(below, hi, mid)
        if np.all(hi - lo <= 4 * np.finfo(float).eps * hi):
            break
    a = 0.5 * (lo + hi)
    pred = logp.argmax(axis=1)
    # place v[0] on the predicted label and the rest of v on the other labels in index order
    others = np.argsort(np.arange(v_count)[None, :] == pred[:, None], axis=1, kind="stable")[:, :-1]
    z = np.empty_like(logp)
    rows = np.arange(n)[:, None]
    z[rows, others] = a[:, None] * gaps[None, 1:]
    z[np.arange(n), pred] = 0.0
    return scale(z, 1.0)


@dataclasses.dataclass(frozen=True)
class ReorderHeadline:
    """What Episode 3 quotes of :func:`reordering`: Kendall's tau against T = 1 at T = 0.5,
    1.25, 2 and 3 (``tau_t05`` ...), the share of pairs reordered at T = 2 (``pairs_t2``),
    the share of the surest rows at T = 1 that leave them at T = 2 (``top_left_t2``) and the
    share kept at T = 3 (``top_kept_t3``)."""

    tau_t05: float
    tau_t125: float
    tau_t2: float
    tau_t3: float
    pairs_t2: float
    top_left_t2: float
    top_kept_t3: float


def reorder_headline(rows: list[dict]) -> ReorderHeadline:
    """The values Episode 3 quotes of ``rows`` (a :func:`reordering` result holding T = 0.5,
    1.25, 2 and 3)."""
    at = {r["temperature"]: r for r in rows}
    missing = {0.5, 1.25, 2.0, 3.0} - set(at)
    if missing:
        raise ValueError(f"reorder_headline: the rows lack T = {sorted(missing)}")
    return ReorderHeadline(
        tau_t05=at[0.5]["tau"], tau_t125=at[1.25]["tau"], tau_t2=at[2.0]["tau"],
        tau_t3=at[3.0]["tau"], pairs_t2=at[2.0]["pairs_reordered"],
        top_left_t2=1 - at[2.0]["top_overlap"], top_kept_t3=at[3.0]["top_overlap"])
