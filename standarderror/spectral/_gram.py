"""The core of :mod:`standarderror.spectral`: input validation, the exact eigendecomposition
of each question's density matrix in the ``m x m`` Gram space, and the log-space temperature
scaling that every per-question quantity is computed from."""

from __future__ import annotations

import hashlib
import threading
import weakref
from collections import OrderedDict

import numpy as np
from scipy.special import logsumexp

from .. import _checks
from .._immutable import immutable
from .._parallel import ordered_map

#: Eigenvalues of the Gram matrix at or below this value are exact zeros of the density matrix.
ZERO = 1e-12
#: The paper's replacement for zero eigenvalues inside the logarithm.
EPS = 1e-10
#: The arithmetics of the per-question quantities: ours, and the authors' with its two halves.
ARITHMETICS = ("exact", "authors", "float64-abs", "float32-clip", "float64-clip")
#: Rough working-memory budget (bytes) for one chunk of questions.
_CHUNK_BYTES = 1 << 25


# --------------------------------------------------------------------------------------
# Validation
# --------------------------------------------------------------------------------------


#: Validated unit answers by content (see :func:`_answers`), least recently used first; each
#: entry also keeps the answers' Gram spectrum once :func:`_spectrum` has computed it.
_CACHE: OrderedDict = OrderedDict()
#: The cache keeps at most this many sets of answers, and at most this many bytes of them.
_CACHE_SIZE = 8
_CACHE_BYTES = 1 << 29
#: Cached unit arrays by ``id``: how :func:`_spectrum` recognises answers it has seen.
_BY_ID: dict = {}
#: One caller at a time reads or changes the cache (a reader may call from several threads).
_LOCK = threading.Lock()


#: Bytes per piece of :func:`digest` (hashed in parallel).
_DIGEST_PIECE = 8 << 20


def digest(x: np.ndarray) -> str:
    """A content key for the caches: SHA-256 of the array's shape and dtype followed by the
    SHA-256 of each 8 MiB piece of its bytes, the pieces hashed among the package's threads
    (hashlib releases the GIL; a page's answers, 100 MB, were hashed some seventy times, a
    few seconds on one core). The key depends on the bytes alone, not on the thread count."""
    h = hashlib.sha256(f"{x.shape}{x.dtype.str}".encode())
    data = np.ascontiguousarray(x).view(np.uint8).ravel()
    pieces = [data[i:i + _DIGEST_PIECE] for i in range(0, max(len(data), 1), _DIGEST_PIECE)]
    for d in ordered_map(_sha256, pieces):
        h.update(d)
    return h.hexdigest()


def _sha256(piece) -> bytes:
    return hashlib.sha256(piece).digest()


#: Digests of immutable arrays (:func:`immutable`) already hashed, by ``id``: ``(weak
#: reference, digest)``. Such an array holds the same numbers for life, so the same object is
#: hashed once: a page passes its answers, 100 MB, to some forty functions.
_DIGESTS: dict = {}


def content_key(x: np.ndarray) -> str:
    """:func:`digest` of ``x``, computed once for an immutable array (:func:`immutable`: its
    numbers cannot have changed since) and every time for any other."""
    seen = _DIGESTS.get(id(x))
    if seen is not None and seen[0]() is x:
        return seen[1]
    key = digest(x)
    if immutable(x):
        i = id(x)

        def forget(ref, i=i):  # x is gone, so its id may be reused: drop the entry
            if _DIGESTS.get(i, (None,))[0] is ref:
                del _DIGESTS[i]

        _DIGESTS[i] = (weakref.ref(x, forget), key)
    return key


def _answers(answers, name: str = "answers", *, cache: bool = True) -> np.ndarray:
    """``answers`` checked (3-D, finite, at least two answers, no zero vector) and each row
    scaled to unit norm (:func:`_unit`).

    A page hands the same answers to many functions, and each would check, normalise and
    decompose them again. So the result is cached by content (SHA-256 of the float64 array):
    the same numbers give the same unit array, the very object computed the first time, made
    read-only so that no caller can change it. ``cache=False`` (the streamed chunks of
    :func:`spectrum`, seen once) neither reads nor fills the cache.

    Immutable float64 answers (:func:`~standarderror._immutable.immutable`, as
    :func:`standarderror.llm.semantic.arrays` returns them) are looked up before they are
    checked: their key is kept for their life (:func:`content_key`), and a hit means that
    these very bytes were checked and normalised before, so the scan for NaN and infinity is
    not made again (a page passes the same 100 MB of answers to some forty functions)."""
    a = answers
    known = (cache and isinstance(a, np.ndarray) and a.dtype == np.float64 and a.ndim == 3
             and a.nbytes <= _CACHE_BYTES and immutable(a))
    if not known:
        a = _checks.array(answers, name, ndim=3)
    key = None
    if cache and a.nbytes <= _CACHE_BYTES:
        key = content_key(a)
        with _LOCK:
            hit = _CACHE.get(key)
            if hit is not None:
                _CACHE.move_to_end(key)
                return hit["unit"]
    if known:  # not seen before: checked now, as any other array
        a = _checks.array(a, name, ndim=3)
    unit = _checked_unit(a, name)
    if key is not None:
        unit.flags.writeable = False
        with _LOCK:
            if key in _CACHE:  # another thread got there first: keep its object
                return _CACHE[key]["unit"]
            _CACHE[key] = {"unit": unit}
            _BY_ID[id(unit)] = key
            while len(_CACHE) > _CACHE_SIZE or sum(
                    e["unit"].nbytes for e in _CACHE.values()) > _CACHE_BYTES:
                _, old = _CACHE.popitem(last=False)
                _BY_ID.pop(id(old["unit"]), None)
    return unit


def _checked_unit(a: np.ndarray, name: str) -> np.ndarray:
    n, m, d = a.shape
    if m < 2:
        raise ValueError(
            f"{name} must hold at least m = 2 answers per question (axis 1); got shape {a.shape}"
        )
    top = _abs_max(a, 2)
    bad = np.argwhere(top <= 0)
    if bad.size:
        q, j = bad[0]
        raise ValueError(
            f"{name} has {len(bad)} zero-norm embedding(s), first at question {q}, answer {j}; "
            "a zero vector has no direction: drop or re-embed those answers"
        )
    return _unit(a, top)


def _abs_max(a: np.ndarray, axis: int) -> np.ndarray:
    """``np.abs(a).max(axis)`` without the array of absolute values (the same numbers:
    negation is exact)."""
    return np.maximum(a.max(axis=axis), -a.min(axis=axis))


def _unit(a: np.ndarray, top: np.ndarray) -> np.ndarray:
    """Rows divided by their largest absolute entry, then by their norm (no overflow or
    underflow at any finite scale)."""
    a = a / top[..., None]
    a /= np.linalg.norm(a, axis=-1, keepdims=True)
    return a


def _targets(targets, n: int, d: int, name: str = "targets") -> np.ndarray:
    y = _checks.array(targets, name, ndim=2)
    if y.shape != (n, d):
        raise ValueError(
            f"{name} must have shape (n, d) = ({n}, {d}) to match answers; got {y.shape}"
        )
    top = _abs_max(y, 1)
    bad = np.flatnonzero(top <= 0)
    if bad.size:
        raise ValueError(f"{name} has {bad.size} zero-norm row(s), first at {bad[0]}; drop them")
    return _unit(y, top)


def _temperature(t, name: str = "temperature") -> float:
    """A temperature > 0 whose reciprocal (the exponent 1/T) is finite."""
    v = _checks.temperature(t, name)
    if not np.isfinite(1.0 / v):
        raise ValueError(f"{name} is too small: 1/{name} = 1/{t!r} is not a finite number")
    return v


def _arithmetic(arithmetic) -> str:
    if arithmetic not in ARITHMETICS:
        raise ValueError(f"arithmetic must be one of {ARITHMETICS}, got {arithmetic!r}")
    return arithmetic


def _variant(variant) -> str:
    if variant not in ("ours", "authors"):
        raise ValueError(f"variant must be 'ours' or 'authors', got {variant!r}")
    return variant


# The options whose default depends on the variant: (ours, the authors'), then the allowed
# values (None: the caller validates, as ``distance`` is by ``clusters._distance``).
_OPTIONS = {
    "binning": ("split", "quantile", ("split", "quantile")),
    "cluster_on": ("scaled", "unscaled", ("scaled", "unscaled")),
    "weighting": ("size", "uniform", ("uniform", "size")),
    "distance": ("cosine", "rows", None),
    "min_cluster": (1, 2, None),
}


def _option(name: str, value, authors: bool):
    """``value``, or, when it is not given (None, or an empty string), option ``name``'s
    default under the variant (the authors' when ``authors``); it must then be one of the
    option's allowed values where the option has a fixed set."""
    ours, theirs, allowed = _OPTIONS[name]
    if value is None or (isinstance(value, str) and not value):
        value = theirs if authors else ours
    if allowed is not None and value not in allowed:
        raise ValueError(f"{name} must be {allowed[0]!r} or {allowed[1]!r}, got {value!r}")
    return value


def _open_unit(value, name: str) -> float:
    """A number strictly between 0 and 1 (a floor ``eps``, an interval's ``level``)."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number in (0, 1), got {value!r}") from None
    if not 0 < v < 1:
        raise ValueError(f"{name} must lie strictly between 0 and 1, got {value!r}")
    return v


def _eps(eps) -> float:
    return _open_unit(eps, "eps")


def _count(v, name: str, low: int = 1, high: int | None = None) -> int:
    """An integer of at least ``low`` and, with ``high``, at most ``high``."""
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < low:
        raise ValueError(f"{name} must be an integer >= {low}, got {v!r}")
    return int(v) if high is None else _checks.at_most(int(v), name, high)


def _chunk(m: int, d: int) -> int:
    return max(1, _CHUNK_BYTES // (8 * m * max(d, m)))


def _level(level) -> float:
    return _open_unit(level, "level")


# --------------------------------------------------------------------------------------
# The Gram-space eigendecomposition
# --------------------------------------------------------------------------------------


def _held(a: np.ndarray):
    """``(key, entry)`` of the cache when ``a`` is the very unit array :func:`_answers` cached
    (looked up by ``id``, then checked to be the same object), else ``(None, None)``. The caller
    holds :data:`_LOCK`."""
    key = _BY_ID.get(id(a))
    entry = _CACHE.get(key) if key is not None else None
    return (key, entry) if entry is not None and entry["unit"] is a else (None, None)


def _spectrum(a: np.ndarray, y: np.ndarray | None = None, *, vectors: bool = False) -> dict:
    """Eigenvalues (descending, exact zeros below :data:`ZERO`) of every question's density
    matrix; with targets, the squared projections of each target on the lifted eigenvectors.

    For unit answers that :func:`_answers` cached, the spectrum (eigenvalues and eigenvectors,
    read-only) is computed once and kept with them, and the projections of each set of
    targets are kept beside it (:func:`_memo`, keyed by the targets' content): a page asks for
    the risk of the same answers and targets many times, and no call decomposes a question
    again. Both are the numbers :func:`_decompose` gives, bit for bit: the
    eigenvectors are those it computes, and the projections are taken from them by the same
    function (:func:`_projections`, on the same chunks)."""
    with _LOCK:
        _, entry = _held(a)
    if entry is None:
        return _decompose(a, y, vectors=vectors)
    if "lam" not in entry:
        sp = _decompose(a, None, vectors=True)
        for v in (sp["lam"], sp["vec"]):
            v.flags.writeable = False
        entry["lam"], entry["vec"] = sp["lam"], sp["vec"]  # two threads: the same numbers
    lam, vec = entry["lam"], entry["vec"]
    proj = None
    if y is not None:
        proj = _memo(a, ("proj", content_key(y)), lambda: _cached_projections(a, y, lam, vec))
    return {"lam": lam, "proj": proj, "vec": vec if vectors else None}


def _cached_projections(a: np.ndarray, y: np.ndarray, lam: np.ndarray,
                        vec: np.ndarray) -> np.ndarray:
    """The projections of :func:`_decompose`, from the eigenpairs it returned: the same chunks
    of questions, each through :func:`_projections`."""
    n, m, d = a.shape
    step = _chunk(m, d)

    def part(s):
        return _projections(_unit_rows(a[s:s + step]), y[s:s + step], vec[s:s + step],
                            lam[s:s + step], m)

    return np.concatenate(ordered_map(part, range(0, n, step)))


#: Results kept with one set of cached answers by :func:`_memo`: at most this many, and at
#: most this many bytes of them.
_MEMO_SIZE = 64
_MEMO_BYTES = 1 << 28


def answers_key(a: np.ndarray) -> tuple:
    """A content key for unit answers as the computations receive them: for the very array
    that :func:`_answers` cached, ``("cached", key)`` with the key of the answers it was made
    from (read-only, the package's own object: no hashing); for any other array
    ``("bytes", content_key(a))``."""
    with _LOCK:
        key, _ = _held(a)
    return ("cached", key) if key is not None else ("bytes", content_key(a))


def _memo(a: np.ndarray, key, compute):
    """``compute()``, an array that depends on the answers ``a`` alone (and on ``key``, which
    names it): kept with ``a`` when ``a`` is a unit array :func:`_answers` cached, read-only,
    and served again for the same ``key`` (the same bytes as computing it again); computed
    each time otherwise. The results go with the answers when the cache lets them go."""
    with _LOCK:
        _, entry = _held(a)
        if entry is not None:
            memo = entry.setdefault("memo", OrderedDict())
            hit = memo.get(key)
            if hit is not None:
                memo.move_to_end(key)
                return hit
    value = compute()
    if entry is not None:
        value.flags.writeable = False
        with _LOCK:
            memo[key] = value
            while len(memo) > _MEMO_SIZE or sum(v.nbytes for v in memo.values()) > _MEMO_BYTES:
                memo.popitem(last=False)
    return value


def _decompose(a: np.ndarray, y: np.ndarray | None, *, vectors: bool) -> dict:
    """:func:`_spectrum`, computed: per chunk of questions, the Gram matrices and ``eigh``. The
    chunks are independent and shared out among the package's threads
    (:func:`~standarderror._parallel.ordered_map`: each chunk's arithmetic is the plain loop's,
    on numpy's BLAS at one thread, so the numbers do not depend on the thread count)."""
    n, m, d = a.shape
    step = _chunk(m, d)

    def part(s):
        e = _unit_rows(a[s:s + step])
        g = e @ e.transpose(0, 2, 1) / m
        w, v = np.linalg.eigh(g)
        w, v = w[:, ::-1], np.ascontiguousarray(v[:, :, ::-1])
        w = np.where(w > ZERO, w, 0.0)
        proj = None if y is None else _projections(e, y[s:s + step], v, w, m)
        return w, (v if vectors else None), proj

    parts = ordered_map(part, range(0, n, step))  # n >= 1: empty answers fail their check
    return {"lam": np.concatenate([w for w, _, _ in parts]),
            "proj": None if y is None else np.concatenate([p for _, _, p in parts]),
            "vec": np.concatenate([v for _, v, _ in parts]) if vectors else None}


def _unit_rows(e: np.ndarray) -> np.ndarray:
    """Each answer of a chunk divided by its norm (as every Gram-space computation does)."""
    return e / np.linalg.norm(e, axis=2, keepdims=True)


def _projections(e: np.ndarray, y: np.ndarray, v: np.ndarray, lam: np.ndarray,
                 m: int) -> np.ndarray:
    r"""Squared projections of each unit target on the lifted unit eigenvectors of a chunk:
    :math:`(v_k^\top E y)^2 / (m \lambda_k)` where :math:`\lambda_k > 0`, else zero (``v``
    the Gram eigenvectors, columns in the order of ``lam``)."""
    pos = lam > ZERO
    z = np.einsum("qjd,qd->qj", e, y)
    c = np.einsum("qjk,qj->qk", v, z)
    return np.where(pos, c * c / (m * np.where(pos, lam, 1.0)), 0.0)


def _log_scaled(lam: np.ndarray, alpha: float):
    """``(mu, log mu)`` of temperature-scaled eigenvalues, computed in log space (exact zeros
    stay zero; ``log mu`` is ``-inf`` there)."""
    pos = lam > 0
    s = np.where(pos, alpha * np.log(np.where(pos, lam, 1.0)), -np.inf)
    logmu = s - logsumexp(s, axis=-1, keepdims=True)
    return np.exp(logmu), logmu


def _finite(logmu):
    """``log mu`` with ``-inf`` (exact zeros) replaced by 0, for products that vanish there."""
    return np.where(np.isfinite(logmu), logmu, 0.0)


def _entropy_from(lam, alpha):
    mu, logmu = _log_scaled(lam, alpha)
    return -np.sum(mu * _finite(logmu), axis=-1)


def _score_from(lam, proj, alpha, eps):
    mu, logmu = _log_scaled(lam, alpha)
    pos = lam > 0
    inside = np.sum(np.where(pos, -_finite(logmu) * proj, 0.0), axis=-1)
    outside = np.clip(1.0 - proj.sum(axis=-1), 0.0, None)
    return inside - np.log(eps) * outside


def _unit_gram(a: np.ndarray) -> np.ndarray:
    n, m, d = a.shape
    out = np.empty((n, m, m))
    step = _chunk(m, d)
    for s in range(0, n, step):
        e = _unit_rows(a[s:s + step])
        out[s:s + step] = e @ e.transpose(0, 2, 1)
    return out
