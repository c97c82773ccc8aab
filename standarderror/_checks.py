"""Validation at the boundary: every public function checks its inputs here and raises a
``ValueError`` that names the argument and says what would fix it."""

from __future__ import annotations

import numpy as np


def array(x, name: str, *, ndim: int | None = None, dtype=float) -> np.ndarray:
    """``x`` as a numpy array of ``dtype`` with ``ndim`` dimensions and no NaN or infinity."""
    try:
        a = np.asarray(x, dtype=dtype)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be numeric, got {type(x).__name__}: {exc}") from None
    if ndim is not None and a.ndim != ndim:
        raise ValueError(f"{name} must have {ndim} dimension(s), got shape {a.shape}")
    if a.size == 0:
        raise ValueError(f"{name} is empty")
    if np.issubdtype(a.dtype, np.floating) and not np.all(np.isfinite(a)):
        raise ValueError(f"{name} contains NaN or infinite values; clean or drop those rows first")
    return a


def probabilities(p, name: str = "p", *, atol: float = 1e-6) -> np.ndarray:
    """A (rows x classes) array of probabilities in [0, 1] whose rows sum to one."""
    p = array(p, name, ndim=2)
    if p.shape[1] < 2:
        raise ValueError(f"{name} must have at least two classes (columns), got shape {p.shape}")
    if p.min() < 0 or p.max() > 1:
        raise ValueError(f"{name} must lie in [0, 1]; got values in [{p.min():.3g}, {p.max():.3g}]")
    err = np.abs(p.sum(axis=1) - 1).max()
    if err > atol:
        raise ValueError(
            f"rows of {name} must sum to one (largest deviation {err:.3g}); "
            "pass softmax probabilities, not logits"
        )
    return p


def labels(y, n_classes: int, rows: int, name: str = "y") -> np.ndarray:
    """Integer labels in [0, n_classes), one per row."""
    a = np.asarray(y)
    if a.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {a.shape}")
    if a.shape[0] != rows:
        raise ValueError(f"{name} has {a.shape[0]} labels but there are {rows} rows of probabilities")
    if not np.issubdtype(a.dtype, np.integer):
        if not np.all(np.isfinite(a)) or np.any(a != np.round(a)):
            raise ValueError(f"{name} must hold integer class labels")
        a = a.astype(np.int64)
    if a.min() < 0 or a.max() >= n_classes:
        raise ValueError(f"{name} must lie in [0, {n_classes}); got values in [{a.min()}, {a.max()}]")
    return a.astype(np.int64, copy=False)


def temperature(t, name: str = "temperature") -> float:
    """A finite temperature > 0."""
    try:
        v = float(t)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number, got {t!r}") from None
    if not np.isfinite(v) or v <= 0:
        raise ValueError(f"{name} must be finite and > 0, got {t!r}")
    return v


def alpha(a, name: str = "alpha") -> float:
    """A miscoverage level strictly inside (0, 1)."""
    try:
        v = float(a)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number in (0, 1), got {a!r}") from None
    if not 0 < v < 1:
        raise ValueError(f"{name} must lie strictly between 0 and 1, got {a!r}")
    return v


def same_length(**arrays) -> int:
    """All keyword arrays have the same first dimension; returns it."""
    lengths = {k: len(v) for k, v in arrays.items()}
    if len(set(lengths.values())) != 1:
        raise ValueError(f"mismatched lengths: {lengths}; every argument needs one entry per row")
    return next(iter(lengths.values()))
