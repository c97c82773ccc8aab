r"""Calibration along a training run: when does overconfidence arrive?

A training run leaves a family of checkpoints. For each one we measure, on the same held-out
predictions,

* the held-out loss (mean negative log-likelihood of the true next character, nats),
* the accuracy of the predicted (argmax) character,
* the mean confidence :math:`\bar c = \frac1n \sum_i \max_k p_i(k)` and the **gap**
  :math:`\bar c - \mathrm{acc}` (positive: overconfident on average),
* the expected calibration error (:func:`standarderror.uncertainty.calibration.ece`),
* the temperature :math:`\hat T` that temperature scaling would fit, by minimising the NLL of
  :math:`\operatorname{softmax}(z / T)` on those predictions
  (:func:`standarderror.uncertainty.calibration.fitted_temperature`), and the ECE and NLL
  after dividing by it. :math:`\hat T > 1` means its distributions have to be softened
  (heated) to be calibrated: it is overconfident; :math:`\hat T < 1`, underconfident.

Everything is computed by the functions of :mod:`standarderror.uncertainty.calibration`; this
module only arranges them per checkpoint, as pure functions of arrays:
:func:`checkpoint_metrics` measures one checkpoint's predictions, :func:`turning_point` finds
where the held-out loss stops falling. Running the checkpoints of a training run is an
experiment, in :mod:`standarderror.experiments.trajectory`.
"""

from __future__ import annotations

import numpy as np

from standarderror import _checks
from standarderror.uncertainty.metrics import ece, nll
from standarderror.uncertainty.scaling import fitted_temperature, scale

#: The keys of the dict of :func:`checkpoint_metrics` (and of one row of
#: :func:`standarderror.experiments.trajectory.trajectory`).
METRICS = ("loss", "accuracy", "confidence", "gap", "ece", "temperature", "temperature_low",
           "temperature_high", "loss_scaled", "ece_scaled", "rows")


def checkpoint_metrics(logp, y, sequence, *, bins: int = 15, halves: int = 20,
                       seed: int = 0) -> dict:
    r"""Loss, accuracy, confidence gap, ECE and fitted temperature of one set of predictions.

    Parameters
    ----------
    logp : array_like, shape (rows, classes)
        Normalised log-probabilities of the predictions (rows of ``exp(logp)`` sum to one).
    y : array_like of int, shape (rows,)
        True labels.
    sequence : array_like, shape (rows,)
        The window (sequence) each prediction belongs to. The fitted temperature's range is
        taken over ``halves`` fits, each on a random half of the *sequences*, because
        predictions in one window share context.
    bins : int
        Equal-width ECE bins (Guo et al., 2017).
    halves : int
        Number of random-half fits behind ``temperature_low`` and ``temperature_high``.
    seed : int
        Seed of the random halves.

    Returns
    -------
    dict
        ``loss`` :math:`= -\frac1n\sum_i \log p_i(y_i)`; ``accuracy``; ``confidence`` (mean
        top probability); ``gap`` (``confidence - accuracy``); ``ece``; ``temperature``
        (:math:`\hat T`, fitted on every row), ``temperature_low`` and ``temperature_high``
        (smallest and largest fit over the random halves); ``loss_scaled`` and ``ece_scaled``
        (NLL and ECE after dividing the logits by :math:`\hat T`); ``rows``.
    """
    logp = _checks.normalised_logp(logp, "logp")
    n = logp.shape[0]
    y = _checks.labels(y, logp.shape[1], n)
    bins = _checks.bins(bins)
    halves = _checks.draws(halves, "halves")
    rows = np.arange(n)
    pred = logp.argmax(axis=1)
    ok = pred == y
    conf = np.exp(logp[rows, pred])
    p = np.exp(logp)
    fit = fitted_temperature(p, y, sequence, halves=halves, seed=seed)
    t_hat = fit["all"]
    scaled = scale(logp, t_hat)
    accuracy = float(ok.mean())
    confidence = float(conf.mean())
    return {
        "loss": nll(p, y),
        "accuracy": accuracy,
        "confidence": confidence,
        "gap": confidence - accuracy,
        "ece": ece(conf, ok, bins=bins),
        "temperature": t_hat,
        "temperature_low": fit["low"],
        "temperature_high": fit["high"],
        "loss_scaled": float(-scaled[rows, y].mean()),
        "ece_scaled": ece(np.exp(scaled[rows, pred]), ok, bins=bins),
        "rows": int(n),
    }


def turning_point(steps, losses) -> dict:
    """Where a loss curve stops falling: its minimum, and how far it has risen since.

    Parameters
    ----------
    steps : array_like of int, shape (n,)
        Training steps, strictly increasing.
    losses : array_like, shape (n,)
        The held-out loss at each step.

    Returns
    -------
    dict
        ``step`` (of the minimum; the first one if tied), ``loss`` (the minimum), ``last``
        (the loss at the last step), ``rise`` (``last - loss``, >= 0), ``turned`` (whether the
        minimum is before the last step, i.e. the curve has turned up), ``index``.
    """
    s = _checks.array(steps, "steps", ndim=1)
    v = _checks.array(losses, "losses", ndim=1)
    _checks.same_length(steps=s, losses=v)
    if np.any(np.diff(s) <= 0):
        raise ValueError("steps must be strictly increasing (one loss per step, in training order)")
    i = int(np.argmin(v))
    return {"step": int(s[i]), "loss": float(v[i]), "last": float(v[-1]),
            "rise": float(v[-1] - v[i]), "turned": bool(i < v.size - 1), "index": i}


def window_difference(diff, window, *, draws: int = 2000, seed: int = 0,
                      level: float = 0.95) -> dict:
    r"""Mean of a per-prediction difference between two checkpoints (or two scorings) and its
    central bootstrap interval over resampled windows.

    Predictions in one window share their context and are not independent, so the windows
    are resampled: each of ``draws`` resamples draws as many windows as there are, with
    replacement (``numpy.random.default_rng(seed).integers``), and averages the windows'
    mean differences. ``window`` gives each prediction's window, ``0..W-1``, every window
    present. The interval's tails are ``100 (1 - level) / 2`` per cent each, rounded to 12
    decimals (0.95 gives exactly 2.5 and 97.5).

    Returns
    -------
    dict
        ``mean`` (over predictions), ``low``, ``high``, ``windows`` (W).
    """
    d = _checks.array(diff, "diff", ndim=1)
    w = np.asarray(window)
    if w.shape != d.shape or not np.issubdtype(w.dtype, np.integer):
        raise ValueError(f"window must hold one integer window index per prediction "
                         f"(shape {d.shape}), got dtype {w.dtype} and shape {w.shape}")
    count = np.bincount(w) if w.size and w.min() >= 0 else None
    if count is None or not np.all(count > 0):
        raise ValueError("window must number the windows 0..W-1, every window present")
    draws = _checks.draws(draws)
    level = _checks.alpha(level, "level")  # strictly inside (0, 1), like a miscoverage level
    n = len(count)
    per_window = np.bincount(w, d) / count
    pick = np.random.default_rng(seed).integers(0, n, (draws, n))
    tail = round(100 * (1 - level) / 2, 12)
    low, high = np.percentile(per_window[pick].mean(axis=1), [tail, 100 - tail])
    return {"mean": float(d.mean()), "low": float(low), "high": float(high), "windows": n}
