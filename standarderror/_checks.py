"""Validation at the boundary: every public function checks its inputs here and raises a
``ValueError`` that names the argument and says what would fix it."""

from __future__ import annotations

import math
import os
import stat
import warnings

import numpy as np


def real(x, name: str) -> np.ndarray:
    """``x`` as a numpy array of booleans, integers or real floats (any dtype of those kinds).

    Complex input is refused (casting would drop the imaginary part with only a warning), and
    so are strings, bytes, dates and objects that are not real numbers."""
    try:
        a = np.asarray(x)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be a numeric array, got {type(x).__name__}: {exc}") from None
    kind = a.dtype.kind
    if kind == "c":
        raise ValueError(f"{name} must be real, got complex values (dtype {a.dtype}); "
                         "pass the real part explicitly if that is what you mean")
    if kind == "O":
        if any(isinstance(v, (complex, np.complexfloating)) for v in a.ravel().tolist()):
            raise ValueError(f"{name} must be real, got complex values")
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("error")
                a = a.astype(float)
        except (TypeError, ValueError, Warning) as exc:
            raise ValueError(f"{name} must be numeric, got non-numeric entries: {exc}") from None
        kind = "f"
    if kind not in "biuf":
        raise ValueError(f"{name} must be numeric, got dtype {a.dtype}")
    return a


def array(x, name: str, *, ndim: int | None = None, dtype=float) -> np.ndarray:
    """``x`` as a numpy array of ``dtype`` with ``ndim`` dimensions and no NaN or infinity."""
    a = real(x, name)
    try:
        a = np.asarray(a, dtype=dtype)
    except (TypeError, ValueError, OverflowError) as exc:
        raise ValueError(f"{name} must be numeric, got {type(x).__name__}: {exc}") from None
    if ndim is not None and a.ndim != ndim:
        raise ValueError(f"{name} must have {ndim} dimension(s), got shape {a.shape}")
    if a.size == 0:
        raise ValueError(f"{name} is empty")
    if np.issubdtype(a.dtype, np.floating) and not np.all(np.isfinite(a)):
        raise ValueError(f"{name} contains NaN or infinite values; clean or drop those rows first")
    return a


#: The largest tolerance :func:`sum_tolerance` ever returns: 2**-7 (under 0.8% of a row's
#: mass, eight float16 epsilons). Above it a row is not a probability vector whatever its dtype.
SUM_TOLERANCE_CAP = 2.0 ** -7


def sum_tolerance(dtype, classes: int, atol: float = 1e-6) -> float:
    """How far a row of ``classes`` probabilities (or exponentiated log-probabilities) stored
    in ``dtype`` may sum away from one:

    ``max(atol, min(SUM_TOLERANCE_CAP, 4 * eps(dtype) + 16 * eps(acc) * sqrt(classes)))``

    where ``acc`` is the precision the normaliser was summed in: ``dtype`` itself, but at
    least float32. The two terms are the two roundings of a softmax.

    * Storing each probability in ``dtype`` rounds it by a relative ``eps/2`` at most, so the
      stored row sums to one within ``eps/2`` of its mass; probabilities below float16's
      smallest normal number (6.1e-5) are rounded by up to 2**-25 each instead, which over
      a row of random signs adds about ``sqrt(classes) * 2**-25`` (1.2e-5 at 150,000
      classes). ``4 * eps`` leaves room for a factor of eight.
    * The normaliser is a sum of ``classes`` terms; accumulated in ``acc`` its relative error
      grows like ``eps(acc) * sqrt(classes)`` for rounding errors of random sign. numpy and
      torch accumulate float16 in float32 (a float16 accumulator stalls once the sum's ulp
      exceeds a term: its errors are real errors), hence ``acc``. Measured (torch and scipy
      softmax on CPU, normal logits of scale 1 to 10): float32 rows deviate by up to
      0.55 ``eps * sqrt(classes)`` at 150,000 classes (2.5e-5), float16 rows by up to 0.74
      ``eps(float16)`` at any size; the factors 4 and 16 leave at least five-fold room.
    * The cap keeps the check meaningful at any size: a row of zeros, or one summing to 1.5 or
      0.2, is refused in every dtype. float64 keeps the fixed ``atol`` (1e-6 by default) for
      any realistic number of classes.

    Float16 at 32,000 classes gets 4.2e-3 (it was 2.8, which accepted anything); float32 at
    32,000 gets 3.4e-4."""
    dt = np.dtype(dtype)
    if dt.kind != "f":
        return float(atol)
    eps = float(np.finfo(dt).eps)
    acc = float(np.finfo(np.promote_types(dt, np.float32)).eps)
    grown = 4 * eps + 16 * acc * math.sqrt(max(int(classes), 1))
    return max(float(atol), min(SUM_TOLERANCE_CAP, grown))


def probabilities(p, name: str = "p", *, atol: float = 1e-6) -> np.ndarray:
    """A (rows x classes) float64 array of probabilities in [0, 1] whose rows sum to one
    (within :func:`sum_tolerance` of the input's dtype and number of classes, never more than
    :data:`SUM_TOLERANCE_CAP`). Input of lower precision than float64 that passes is
    renormalised once in float64, which moves each row by at most that tolerance; rows that
    are not probabilities (a zero row, a row summing to 1.5) are refused, never rescaled."""
    raw = real(p, name)
    p = array(raw, name, ndim=2)
    atol = sum_tolerance(raw.dtype, p.shape[1], atol)
    if p.shape[1] < 2:
        raise ValueError(f"{name} must have at least two classes (columns), got shape {p.shape}")
    if p.min() < 0 or p.max() > 1:
        raise ValueError(f"{name} must lie in [0, 1]; got values in [{p.min():.3g}, {p.max():.3g}]")
    sums = p.sum(axis=1)
    err = np.abs(sums - 1).max()
    if err > atol or not (sums > 0).all():
        row = int(np.argmax(np.abs(sums - 1)))
        raise ValueError(
            f"rows of {name} must sum to one (row {row} sums to {sums[row]:.6g}; tolerance "
            f"{atol:.2g} for {raw.dtype} with {p.shape[1]} classes); pass softmax "
            "probabilities, not logits, counts or unnormalised weights"
        )
    if raw.dtype.kind == "f" and raw.dtype.itemsize < 8:
        # lower precision accepted within its own tolerance: renormalise once in float64, so
        # the rows sum to one at float64 precision for everything downstream
        p = p / p.sum(axis=1, keepdims=True)
    return p


def log_array(z, name: str) -> np.ndarray:
    """A float array (at least 1-D, classes on the last axis) with no NaN and no +inf;
    -inf is allowed (a zero probability) but every row needs one finite entry."""
    a = np.asarray(real(z, name), dtype=float)
    if a.ndim < 1 or a.size == 0:
        raise ValueError(f"{name} must be a non-empty array with classes on the last axis")
    if a.shape[-1] < 2:
        raise ValueError(f"{name} must have at least two classes (last axis), got shape {a.shape}")
    if np.isnan(a).any():
        raise ValueError(f"{name} contains NaN; clean or drop those rows first")
    if np.isposinf(a).any():
        raise ValueError(f"{name} contains +inf; logits and log-probabilities must be finite or -inf")
    if not np.isfinite(a).any(axis=-1).all():
        raise ValueError(f"{name} has a row with every entry -inf; each row needs a finite entry")
    return a


def normalised_logp(logp, name: str = "logp", *, atol: float = 1e-6) -> np.ndarray:
    """2-D log-probabilities whose rows exponentiate to sum to one (within
    :func:`sum_tolerance` of the input's dtype and number of classes)."""
    raw = real(logp, name)
    a = log_array(raw, name)
    if a.ndim != 2:
        raise ValueError(f"{name} must have 2 dimensions (rows x classes), got shape {a.shape}")
    if a.max() > 0:
        raise ValueError(f"{name} must be log-probabilities (<= 0); got a maximum of {a.max():.3g}. "
                         "Pass scale(logits, 1.0) to normalise logits")
    err = np.abs(np.exp(a).sum(axis=1) - 1).max()
    if err > sum_tolerance(raw.dtype, a.shape[1], atol):
        raise ValueError(f"rows of exp({name}) must sum to one (largest deviation {err:.3g}); "
                         "pass scale(logits, 1.0) to normalise logits")
    if raw.dtype.kind == "f" and raw.dtype.itemsize < 8:  # renormalise once in float64
        top = a.max(axis=1, keepdims=True)
        a = a - (top + np.log(np.exp(a - top).sum(axis=1, keepdims=True)))
    return a


def labels(y, n_classes: int, rows: int, name: str = "y") -> np.ndarray:
    """Integer labels in [0, n_classes), one per row (booleans count as 0/1)."""
    a = real(y, name)
    if a.dtype.kind == "b":
        a = a.astype(np.int64)
    if a.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {a.shape}")
    if a.shape[0] != rows:
        raise ValueError(f"{name} has {a.shape[0]} labels but there are {rows} rows of probabilities")
    if a.size == 0:
        raise ValueError(f"{name} is empty")
    if not np.issubdtype(a.dtype, np.integer):
        if not np.all(np.isfinite(a)) or np.any(a != np.round(a)):
            raise ValueError(f"{name} must hold integer class labels")
        a = a.astype(np.int64)
    if a.min() < 0 or a.max() >= n_classes:
        raise ValueError(f"{name} must lie in [0, {n_classes}); got values in [{a.min()}, {a.max()}]")
    return a.astype(np.int64, copy=False)


def temperature(t, name: str = "temperature") -> float:
    """A finite temperature > 0."""
    v = scalar(t, name)
    if not np.isfinite(v) or v <= 0:
        raise ValueError(f"{name} must be finite and > 0, got {t!r}")
    with np.errstate(over="ignore", divide="ignore"):
        inverse = np.float64(1.0) / np.float64(v)
    if not np.isfinite(inverse):
        raise ValueError(f"{name} = {t!r} is so small that 1/{name} overflows; pass a larger one")
    return v


def scalar(x, name: str) -> float:
    """A real number (not a bool, a string, a complex number or an array of several values)."""
    if isinstance(x, (bool, np.bool_, str, bytes, complex, np.complexfloating)):
        raise ValueError(f"{name} must be a real number, got {x!r}")
    try:
        return float(x)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"{name} must be a real number, got {x!r}") from None


def positive_int(v, name: str) -> int:
    """A positive integer (not a bool, not a float)."""
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)) or v < 1:
        raise ValueError(f"{name} must be a positive integer, got {v!r}")
    return int(v)


#: The most bins a binned estimate takes: beyond it a bin holds too few predictions to mean
#: anything at any sample size this package reads (the book uses at most 60), and the bin
#: arrays of a resampled estimate (draws x bins) would not fit in memory.
MAX_BINS = 10_000
#: The most resamples a bootstrap or a Monte Carlo estimate draws (``draws``, ``bootstrap``,
#: ``halves``, ``subsets``): 50 times the book's largest (2,000); each one is a pass over the
#: data, and several functions hold every draw's indices at once.
MAX_DRAWS = 100_000
#: The most answers sampled per question: a hundred times the book's largest (100), enough for
#: a simulation of the sampler; the answers' embeddings are held as questions x answers x dims.
MAX_ANSWERS = 10_000


def at_most(v: int, name: str, high: int) -> int:
    """``v`` itself when it is at most ``high``; else a ``ValueError`` that names the bound."""
    if v > high:
        raise ValueError(f"{name} must be at most {high:,}, got {v:,}")
    return v


def bins(v, name: str = "bins") -> int:
    """A bin count: a positive integer of at most :data:`MAX_BINS`."""
    return at_most(positive_int(v, name), name, MAX_BINS)


def draws(v, name: str = "draws") -> int:
    """A number of resamples: a positive integer of at most :data:`MAX_DRAWS`."""
    return at_most(positive_int(v, name), name, MAX_DRAWS)


def answers(v, name: str = "m") -> int:
    """A number of answers sampled per question: a positive integer of at most
    :data:`MAX_ANSWERS`."""
    return at_most(positive_int(v, name), name, MAX_ANSWERS)


_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"))


def open_regular(path, what: str = "", *, max_bytes: int | None = None,
                 setting: str | None = None):
    """Open ``path`` for binary reading when it is a regular file (symbolic links resolved)
    of at most ``max_bytes`` bytes; returns the open file, positioned at its start.

    The file is opened without blocking (``O_NONBLOCK``: opening a FIFO for reading would
    wait for a writer) and checked on the open descriptor (``fstat``), so the file checked is
    the file read. A directory, a FIFO, a socket or a device (``/dev/zero``) is refused with a
    ``ValueError`` before a byte is read, and so is a file larger than ``max_bytes`` (the
    message names ``setting``, the constant that holds the cap, when given); a missing file
    raises ``FileNotFoundError``, any other failure to open it a ``ValueError`` with the
    system's reason. ``what`` names the file in messages (``"--text"``, ``"checkpoint"``).
    Whoever reads the file reads at most ``max_bytes + 1`` bytes: a file that grows after
    the check is caught there (:func:`read_regular`)."""
    label = f"{what} {path}" if what else str(path)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) \
        | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(os.fspath(path), flags)
    except FileNotFoundError:
        raise FileNotFoundError(f"{label}: no such file") from None
    except IsADirectoryError:
        raise ValueError(f"{label} is not a regular file (a directory)") from None
    except OSError as exc:
        raise ValueError(f"{label} cannot be opened: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = next((k for test, k in _KINDS if test(st.st_mode)), "not a plain file")
            raise ValueError(f"{label} is not a regular file ({kind})")
        if max_bytes is not None and st.st_size > max_bytes:
            where = f" ({setting})" if setting else ""
            raise ValueError(f"{label} is {st.st_size:,} bytes, more than the {max_bytes:,} "
                             f"allowed{where}")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_regular(path, what: str = "", *, max_bytes: int, setting: str | None = None) -> bytes:
    """The bytes of a regular file of at most ``max_bytes`` bytes (:func:`open_regular`); a
    file that grew past the cap while it was read is refused too."""
    with open_regular(path, what, max_bytes=max_bytes, setting=setting) as f:
        raw = f.read(max_bytes + 1)
    if len(raw) > max_bytes:
        label = f"{what} {path}" if what else str(path)
        raise ValueError(f"{label} holds more than the {max_bytes:,} bytes allowed"
                         + (f" ({setting})" if setting else ""))
    return raw


def choice(value, name: str, allowed: tuple) -> str:
    """One of ``allowed`` (compared with ``==``; unhashable values are refused, not raised on)."""
    if not isinstance(value, str) or value not in allowed:
        raise ValueError(f"{name} must be one of {allowed}, got {value!r}")
    return value


def alpha(a, name: str = "alpha") -> float:
    """A miscoverage level strictly inside (0, 1)."""
    v = scalar(a, name)
    if not 0 < v < 1:
        raise ValueError(f"{name} must lie strictly between 0 and 1, got {a!r}")
    return v


def same_length(**arrays) -> int:
    """All keyword arrays have the same first dimension; returns it."""
    lengths = {k: len(v) for k, v in arrays.items()}
    if len(set(lengths.values())) != 1:
        raise ValueError(f"mismatched lengths: {lengths}; every argument needs one entry per row")
    return next(iter(lengths.values()))


def sets(s, name: str = "sets") -> np.ndarray:
    """A non-empty two-dimensional boolean array (rows x classes) of prediction sets."""
    a = np.asarray(s)
    if a.ndim != 2 or a.dtype != bool:
        raise ValueError(f"{name} must be a two-dimensional boolean array (rows x K), got "
                         f"dtype {a.dtype} and shape {a.shape}")
    if a.size == 0:
        raise ValueError(f"{name} is empty")
    return a
