"""Every number a reader sees is pinned or declared: the scan behind the build-time check.

After a page is read (executed and parsed), :func:`scan` walks its doctree and finds every
number token in the text a reader sees: paragraphs, headings, admonitions, list items, tables,
figure captions, image ``alt`` text, inline and display maths, the shown attributes of raw HTML
(``title``, ``alt``, ``aria-label`` ...), ``{abbr}`` tooltips, and code outputs that read as
prose (Markdown or HTML an output displays, a print under a hidden input). Each is classed as

* ``pinned``: inside a ``{pin}`` quote (checked against the code by the pin role);
* ``declared``: a number the page chose. Most are inferred: a label (``Table 3``,
  ``episode 2``, ``rows 3 and 9``, a year, a date: :func:`is_label`), or a literal of the
  page's code bound to a name or passed as a named argument, written beside that name
  (``seed=0`` in the code declares "seed 0"; ``bins = 15`` declares "15 bins":
  :func:`inferred_settings`). The others are *setting* phrases listed in the page's front
  matter (``settings:``, a list of strings) or book-wide in the Sphinx config value
  ``se_settings``. Phrases match whitespace-insensitively and case-sensitively (a label's
  word in any case). A declared phrase must
  hold words as well as its number, and each of its numbers must be a literal of the page's
  own code or a label: see :func:`declaration_problems`. A measured number cannot be declared,
  and a literal used elsewhere (a plot's ``alpha=0.5``) declares nothing;
* ``quoted``: inside a box titled "Quoted ..." that names its source with a ``{cite}``; a table
  column of such a box that holds one of our pins (or is headed by words naming us) is ours and
  checked as usual, and a sentence of the box that speaks of us holds no number but a label
  (:mod:`.boxes`);
* ``recorded``: inside a box titled "Record ..." whose title carries the date (YYYY-MM-DD) and
  the machine, on a page without code: numbers of one run of a machine as measured once
  (times, memory, rates, counts), shown outside the checked claims; a result of the model or
  the data there is bare (:mod:`.boxes`);
* ``computed``: a number of a code output that the page's code did not type (it is computed in
  this build; a number the code typed into a string or a display call is checked as prose);
* ``bare``: anything else, and: a measured number in words ("two minutes", "a quarter of an
  hour", "hundredths"), or characters glued to a pin (a digit, a sign, ``%`` outside the quote).
  A bare finding fails the build (see :mod:`standarderror_book.sphinxext`).

Not scanned: code cells and visible code outputs (except a figure's caption and an image's alt
text), inline code, literal blocks, comments, role targets (citations, unresolved
cross-references), footnote and citation labels, autodoc descriptions and docstrings, and the
generated bibliography. Scanned although they look like code: the literals of prose roles
(``{kbd}``, ``{samp}``, ``{file}`` ...), parsed literal blocks and a ``literalinclude`` of a
file that is not code. In maths only tokens with a decimal point, a percent sign or 3+ digits
count, read after ``0{.}91``, ``0{,}92`` and ``95\\,\\%`` are made plain. A picture the build
did not draw fails unless a figure's caption cites its source (:mod:`.pictures`); numbers the
code typed and an output or a figure shows are settings or bare (:mod:`.codetext`).

A number is digits with optional thousands commas, decimals (``.66`` too), exponent, a leading
sign (+, -, U+2212) and a trailing ``%``, a factor such as ``21.5x`` / ``3×``, a unit or
magnitude glued to it (``0.8M``, ``388s``, ``14GB``), superscript digits (``10⁻³``) or a vulgar
fraction (``½``), subscript digits, roman and circled numerals (``₉₁``, ``Ⅻ``, ``⑳``). Digits
glued to a word are not numbers: ``float32``, ``L2``, ``2D``, ``1st``,
``GPT-2``, ``SHA-256``, ``x86-64``, ``top-1``, ``R²``.

Command line, without executing anything (a throwaway Sphinx read with execution off; a code
cell's figure caption and alt text are rendered through a placeholder image)::

    python -m standarderror_book.sphinxext.numbers lectures/ep3_temperature.md [...]

lists each page's bare numbers and refused declarations with ``path:line`` and a per-page count;
it exits 1 when a page has either. Its note "declares nothing" names a setting phrase whose
only occurrences (if any) are in maths, code or outputs.

The scan is split by idea: :mod:`.tokenizer` (what counts as a number, and numbers in words),
:mod:`.settings` (setting phrases: reading, matching, refusing; the code's literals),
:mod:`.doctree` (which nodes a reader sees, boxes, outputs, lines, the text of a unit),
:mod:`.scanner` (the walk, :class:`Finding`, :data:`RULES`, the messages), :mod:`.boxes`
(what a Record and a Quoted box may hold), :mod:`.pictures` (pictures the build did not draw),
:mod:`.codetext` (numbers the code types and an output or a figure shows), :mod:`.configtext`
(the configured text every page shows: title, banner, footer, the table of contents) and
:mod:`.cli` (the command line). This module re-exports their public names (and
``_read_pages``, which the tests call), so ``standarderror_book.sphinxext.numbers.X`` keeps working.
"""

from __future__ import annotations

from . import settings  # noqa: F401  (settings.WANT_REDUNDANT: the CLI's --redundant)
from .cli import _read_pages, main  # noqa: F401  (_read_pages: the tests read pages with it)
from .codetext import drawn_problems, is_typed, typed_by_cell
from .doctree import CHECK, MATH, PIN, PIN_CLASS, SKIP
from .pictures import code_picture_problems
from .scanner import RULES, Finding, counts, message, place, scan
from .settings import (
    CONFIG_KEY,
    FRONT_MATTER_KEY,
    LABEL,
    LABEL_WORDS,
    code_literals,
    declaration_problems,
    inferred_settings,
    is_label,
    literal_pin_problems,
    literal_pins,
    phrase_spans,
    read_settings,
    redundant_settings,
)
from .tokenizer import (
    FRACTIONS,
    NUMBER,
    SUPERSCRIPTS,
    UNIT_SUFFIXES,
    Token,
    is_math_checked,
    tokens,
    word_numbers,
)

__all__ = ["CHECK", "CONFIG_KEY", "FRACTIONS", "FRONT_MATTER_KEY", "LABEL_WORDS", "MATH", "NUMBER",
           "PIN", "PIN_CLASS", "RULES", "SKIP", "SUPERSCRIPTS", "UNIT_SUFFIXES", "Finding", "Token",
           "LABEL", "code_literals", "code_picture_problems", "counts", "declaration_problems",
           "inferred_settings", "is_label", "redundant_settings",
           "drawn_problems", "is_typed", "literal_pin_problems", "typed_by_cell",
           "literal_pins", "is_math_checked", "main", "message",
           "phrase_spans", "place", "read_settings", "scan", "tokens", "word_numbers"]
