"""Validation of the calibration modules' inputs (log-probabilities may hold -inf)."""

from __future__ import annotations

import numpy as np

from standarderror import _checks


def _log_of(p, name: str = "p") -> np.ndarray:
    """Validate probabilities and take their logarithm once (zeros become -inf; no floor)."""
    p = _checks.probabilities(p, name)
    with np.errstate(divide="ignore"):
        return np.log(p)


def _correct(correct, name: str = "correct") -> np.ndarray:
    """A 1-D boolean array (bools or 0/1 values)."""
    a = _checks.real(correct, name)
    if a.ndim != 1 or a.size == 0:
        raise ValueError(f"{name} must be a non-empty one-dimensional array, got shape {a.shape}")
    if a.dtype == bool:
        return a
    a = _checks.array(a, name, ndim=1)
    if not np.isin(a, (0, 1)).all():
        raise ValueError(f"{name} must hold booleans or 0/1 values")
    return a.astype(bool)


def _score(score, name: str = "score") -> np.ndarray:
    """A 1-D float array without NaN (infinite scores are allowed: they sort first or last)."""
    a = _checks.real(score, name)
    if a.dtype.kind != "f":  # keep float64 or longdouble as given
        a = a.astype(float)
    if a.ndim != 1 or a.size == 0:
        raise ValueError(f"{name} must be a non-empty one-dimensional array, got shape {a.shape}")
    if np.isnan(a).any():
        raise ValueError(f"{name} contains NaN; a confidence score must be comparable")
    return a


def _temperatures(ts, name: str = "temperatures") -> tuple[float, ...]:
    try:
        values = tuple(ts)
    except TypeError:
        raise ValueError(f"{name} must be a sequence of temperatures, got {ts!r}") from None
    if not values:
        raise ValueError(f"{name} is empty; pass at least one temperature")
    return tuple(_checks.temperature(t, name) for t in values)


def _sequence_index(sequence, rows: int, name: str = "sequence") -> tuple[np.ndarray, int]:
    """Dense 0..S-1 ids of the sequences (windows) rows belong to; needs S >= 2."""
    s = np.asarray(sequence)
    if s.dtype.kind not in "biuf":
        s = _checks.real(s, name) if s.dtype.kind in "cO" else s  # ids may be strings
    if s.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {s.shape}")
    if s.shape[0] != rows:
        raise ValueError(f"{name} has {s.shape[0]} entries but there are {rows} rows; "
                         "pass one sequence id per prediction")
    if s.dtype.kind == "f" and np.isnan(s).any():
        raise ValueError(f"{name} contains NaN; pass an integer window id per row")
    _, idx = np.unique(s, return_inverse=True)
    count = int(idx.max()) + 1
    if count < 2:
        raise ValueError(f"{name} holds {count} distinct sequence; the bootstrap resamples whole "
                         "sequences and needs at least two")
    return idx.reshape(-1), count


