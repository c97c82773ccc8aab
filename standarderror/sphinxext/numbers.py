"""Every number a reader sees is pinned or declared: the scan behind the build-time check.

After a page is read (executed and parsed), :func:`scan` walks its doctree and finds every
number token in the text a reader sees: paragraphs, headings, admonitions, list items, tables,
figure captions, image ``alt`` text, inline and display maths, the shown attributes of raw HTML
(``title``, ``alt``, ``aria-label`` ...), ``{abbr}`` tooltips, and code outputs that read as
prose (Markdown or HTML an output displays, a print under a hidden input). Each is classed as

* ``pinned``: inside a ``{pin}`` quote (checked against the code by the pin role);
* ``declared``: inside an occurrence of a *setting* phrase, i.e. a number the page chose, listed
  in the page's front matter (``settings:``, a list of strings) or book-wide in the Sphinx config
  value ``se_settings``; phrases match whitespace-insensitively and case-sensitively. A phrase
  must hold words as well as its number, and each of its numbers must be a literal of the
  page's own code or a label (episode, figure, table, row, year, date): see
  :func:`declaration_problems`. A measured number cannot be declared;
* ``quoted``: inside a box titled "Quoted ..." that names its source with a ``{cite}``; a table
  column of such a box that holds one of our pins is ours and checked as usual;
* ``recorded``: inside a box titled "Record ..." whose title carries the date (YYYY-MM-DD) and
  the machine, on a page without code: numbers of one machine as measured once (timings),
  shown outside the checked claims;
* ``computed``: a number of a code output that the page's code did not type (it is computed in
  this build; a number the code typed into a string or a display call is checked as prose);
* ``bare``: anything else, and: a measured number in words ("two minutes", "a quarter of an
  hour", "hundredths"), or characters glued to a pin (a digit, a sign, ``%`` outside the quote).
  A bare finding fails the build (see :mod:`standarderror.sphinxext`).

Not scanned: code cells and visible code outputs (except a figure's caption and an image's alt
text), inline code, literal blocks, comments, role targets (citations, unresolved
cross-references), footnote labels, autodoc descriptions and docstrings, and the generated
bibliography. In maths only tokens with a decimal point, a percent sign or 3+ digits count.

A number is digits with optional thousands commas, decimals (``.66`` too), exponent, a leading
sign (+, -, U+2212) and a trailing ``%``, a factor such as ``21.5x`` / ``3×``, a unit or
magnitude glued to it (``0.8M``, ``388s``, ``14GB``), superscript digits (``10⁻³``) or a vulgar
fraction (``½``). Digits glued to a word are not numbers: ``float32``, ``L2``, ``2D``, ``1st``,
``GPT-2``, ``SHA-256``, ``x86-64``, ``top-1``, ``R²``.

Command line, without executing anything (a throwaway Sphinx read with execution off; a code
cell's figure caption and alt text are rendered through a placeholder image)::

    python -m standarderror.sphinxext.numbers lectures/ep3_temperature.md [...]

lists each page's bare numbers and refused declarations with ``path:line`` and a per-page count;
it exits 1 when a page has either. Its note "declares nothing" names a setting phrase whose
only occurrences (if any) are in maths, code or outputs.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from pathlib import Path

from docutils import nodes

#: Sphinx config value: setting phrases declared for every page of the book.
CONFIG_KEY = "se_settings"
#: Front-matter key (or notebook metadata key) of a page's own settings.
FRONT_MATTER_KEY = "settings"
#: Class of the span the pin role renders; such spans are pinned, not bare.
PIN_CLASS = "pin"

_SIGN = "+-\u2212"
NUMBER = re.compile(
    r"(?P<sign>[+\-\u2212])?"
    r"(?P<int>\d{1,3}(?:,\d{3})+(?!\d)|\d+)"
    r"(?P<frac>\.\d+)?"
    r"(?P<exp>[eE][+\-\u2212]?\d+)?"
    r"(?P<pct>%)?"
    r"(?P<x>[x\u00d7](?![A-Za-z0-9_]))?"
)
# A run of word characters and hyphens: skipped as a whole once any number in it is glued.
_RUN = re.compile(r"[\w\-\u2212\u2010\u2011.]*")
_HYPHENS = "-\u2010\u2011\u2212"
# Text that looks like numbers but is an address: URLs, DOIs, arXiv identifiers.
_ADDRESS = re.compile(r"(?:\b[a-z][a-z0-9+.\-]*://|\bdoi:|\barXiv:)\S+", re.IGNORECASE)


@dataclass(frozen=True)
class Token:
    """A number token found in a unit of text."""

    text: str
    start: int
    end: int


#: Superscript digits and signs (``10⁻³``), and vulgar fractions (``½``): numbers too.
SUPERSCRIPTS = "\u2070\u00b9\u00b2\u00b3\u2074\u2075\u2076\u2077\u2078\u2079"
_SUP_SIGNS = "\u207a\u207b"
FRACTIONS = "\u00bc\u00bd\u00be\u2150\u2151\u2152\u2153\u2154\u2155\u2156\u2157\u2158\u2159" \
            "\u215a\u215b\u215c\u215d\u215e\u215f\u2189"
_SUP_RUN = re.compile(f"[{_SUP_SIGNS}]?[{SUPERSCRIPTS}]+")
#: A unit or magnitude glued to a number is part of it: ``0.8M``, ``388s``, ``24.6k``, ``14GB``.
UNIT_SUFFIXES = frozenset(
    "k K M B G T s ms us µs μs ns min mins h hr hrs d GB MB KB kB TB GiB MiB KiB TiB Gb Mb "
    "bit bits px pt pp cm mm km m Hz kHz MHz GHz W kW".split())
_LETTERS = re.compile(r"[^\W\d_]+")


def tokens(text: str) -> list[Token]:
    """The number tokens of ``text`` (see the module docstring for what counts)."""
    out: list[Token] = []
    pos = 0
    while True:
        m = NUMBER.search(text, pos)
        if m is None:
            break
        start, end = m.start(), m.end()
        sign = m.group("sign")
        prev = text[start - 1] if start > 0 else ""
        if sign and prev and (prev.isalnum() or prev == "_"):
            if sign in _HYPHENS and prev.isdigit():
                start += 1            # a range such as 10-20: the hyphen is not a sign
                prev = text[start - 1]
            else:                     # GPT-2, SHA-256, e-5: glued to the word before
                pos = _skip_run(text, start)
                continue
        if prev == "." and not sign and (start < 2 or not (text[start - 2].isalnum()
                                                           or text[start - 2] in "_.")):
            start -= 1                # a leading-dot decimal: .66
            prev = text[start - 1] if start > 0 else ""
        glued_before = (
            (prev and (prev.isalnum() or prev in "_."))
            or (prev in _HYPHENS and start >= 2 and text[start - 2].isalpha())
        )
        if glued_before:
            pos = _skip_run(text, start)
            continue
        sup = _SUP_RUN.match(text, end)              # 10⁻³
        if sup:
            end = sup.end()
        while end < len(text) and text[end] in FRACTIONS:  # 1½
            end += 1
        after = text[end] if end < len(text) else ""
        if after.isalpha() or after == "_":
            word = _LETTERS.match(text, end)
            rest = text[word.end()] if word and word.end() < len(text) else ""
            glued_unit = word is not None and not (rest.isalnum() or rest == "_") and (
                word.group(0) in UNIT_SUFFIXES or m.group("frac") is not None)
            if not glued_unit:        # float32, 2D, 1st: a name, not a number
                pos = _skip_run(text, start)
                continue
            end = word.end()          # 0.8M, 388s, 14GB, 1.5B: the unit is part of it
        out.append(Token(text[start:end], start, end))
        pos = end
    # superscript numbers and vulgar fractions standing on their own (not an exponent: R², x²)
    for m in re.finditer(f"[{_SUP_SIGNS}]?[{SUPERSCRIPTS}]+|[{FRACTIONS}]", text):
        if any(t.start <= m.start() < t.end for t in out):
            continue
        prev = text[m.start() - 1] if m.start() > 0 else ""
        if m.group(0)[0] not in FRACTIONS and (prev.isalnum() or prev in ")]}_"):
            continue
        out.append(Token(m.group(0), m.start(), m.end()))
    out.sort(key=lambda t: t.start)
    return out


def _skip_run(text: str, start: int) -> int:
    end = _RUN.match(text, start).end()
    return max(end, start + 1)


def is_math_checked(token: str) -> bool:
    """Inside maths only a decimal point, a percent sign or 3+ digits makes a number checked."""
    return "." in token or "%" in token or sum(c.isdigit() for c in token) >= 3


# A number written in words next to what it measures: "about two minutes", "a quarter of an
# hour", "thousands of times the tolerance", "a few hundredths wide". Such a number cannot be
# pinned or declared; the check asks for it in digits.
_NUMBER_WORD = (r"(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|"
                r"thirteen|fourteen|fifteen|sixteen|seventeen|eighteen|nineteen|twenty|"
                r"thirty|forty|fifty|sixty|seventy|eighty|ninety|hundreds?|thousands?|"
                r"millions?|billions?|dozens?|tens|half|quarter|quarters|thirds?|twice|"
                r"thrice|a\s+few|several)")
_UNIT_WORD = (r"(?:(?:milli|micro|nano)?seconds?|minutes?|hours?|days?|weeks?|months?|years?|"
              r"times\s+(?:the|as|more|less|fewer|larger|smaller|longer|shorter|higher|lower|"
              r"taller|wider|bigger|faster|slower|greater|in|out\s+of|over)\b|"
              r"fold|percent|per\s+cent|percentage\s+points?|"
              r"(?:kilo|mega|giga|tera)?bytes|[KMGT]i?B|as\s+(?:many|much|large|small|wide|"
              r"long|fast|slow|often|big|high|low))")
_WORD_NUMBER = re.compile(
    rf"\b{_NUMBER_WORD}(?:[\s\-]+(?:and\s+)?{_NUMBER_WORD})*(?:\s+(?:of\s+)?(?:a|an|the)?)?"
    rf"(?:\s+\w+){{0,2}}?\s+{_UNIT_WORD}"
    r"|\b(?:tenths|hundredths?|thousandths?|millionths?)\b"
    r"|\b(?:a|one)\s+tenth\b",
    re.IGNORECASE)


def word_numbers(text: str) -> list[Token]:
    """Measured numbers written in words (see :data:`_WORD_NUMBER`)."""
    return [Token(m.group(0), m.start(), m.end()) for m in _WORD_NUMBER.finditer(text)]


# ------------------------------------------------------------------------------------------
# Setting phrases
# ------------------------------------------------------------------------------------------


def _squeeze(text: str) -> tuple[str, list[int]]:
    """``text`` without whitespace, and the original index of each kept character."""
    kept, where = [], []
    for i, c in enumerate(text):
        if not c.isspace():
            kept.append(c)
            where.append(i)
    return "".join(kept), where


def phrase_spans(text: str, phrases: list[str]) -> list[tuple[int, int]]:
    """Spans of ``text`` covered by an occurrence of a phrase (whitespace-insensitive)."""
    return [(a, b) for a, b, _ in _phrase_hits(text, phrases)]


def _phrase_hits(text: str, phrases: list[str]) -> list[tuple[int, int, str]]:
    squeezed, where = _squeeze(text)
    spans = []
    for phrase in phrases:
        p = "".join(phrase.split())
        if not p:
            continue
        i = squeezed.find(p)
        while i >= 0:
            spans.append((where[i], where[i + len(p) - 1] + 1, phrase))
            i = squeezed.find(p, i + 1)
    return spans


def read_settings(path: str | Path) -> tuple[list[str], list[str]]:
    """The ``settings:`` phrases of a page (front matter of a .md, metadata of a .ipynb).

    Returns the phrases and a list of problems (a malformed declaration).
    """
    import json

    import yaml

    path = Path(path)
    try:
        text = path.read_text(encoding="utf8")
    except OSError:
        return [], []
    meta: dict = {}
    if path.suffix == ".ipynb":
        try:
            meta = json.loads(text).get("metadata", {})
        except ValueError:
            return [], []
    elif text.startswith("---"):
        lines = text.splitlines()
        for j in range(1, len(lines)):
            if lines[j].rstrip() in ("---", "..."):
                try:
                    meta = yaml.safe_load("\n".join(lines[1:j])) or {}
                except yaml.YAMLError:
                    meta = {}
                break
    if not isinstance(meta, dict):
        return [], []
    value = meta.get(FRONT_MATTER_KEY)
    if value is None:
        return [], []
    if not isinstance(value, list) or not all(isinstance(v, (str, int, float)) for v in value):
        return [], [f"front matter `{FRONT_MATTER_KEY}:` must be a list of strings, got {value!r}"]
    phrases = [str(v) for v in value]
    return phrases, []


#: Words after which a number is a label (an episode, a figure, a row ...), not a quantity.
LABEL_WORDS = frozenset("""
episode episodes ep figure figures fig figs table tables theorem theorems lemma lemmas
proposition corollary definition definitions remark example examples exercise exercises
algorithm algorithms equation equations eq eqs section sections sec § chapter chapters part
parts row rows column columns col appendix step? version versions release python
""".replace("step?", "").split())
_ISO_DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}\b")
_LABEL_BEFORE = re.compile(
    r"(?:^|[^\w§])(?:" + "|".join(sorted(LABEL_WORDS, key=len, reverse=True)) + r")\.?\s*"
    r"(?:[\d.,]+\s*(?:and|or|to|,|-|\u2013|\u2014|&|/)\s*)*$", re.IGNORECASE)


_MAGNITUDE = {"k": 1e3, "K": 1e3, "M": 1e6, "B": 1e9, "G": 1e9, "T": 1e12}


def _number_value(text: str) -> float | None:
    """The value a number token writes (a ``%`` token as its percent figure, ``7B`` as 7e9,
    a unit dropped: ``388s`` is 388), or None."""
    core = text.strip(_SIGN).replace(",", "").rstrip("%x\u00d7")
    word = _LETTERS.search(core)
    scale = 1.0
    if word:
        scale = _MAGNITUDE.get(word.group(0), 1.0)
        core = core[:word.start()]
    try:
        return float(core) * scale
    except ValueError:
        return None


def _is_label(phrase: str, tok: Token) -> bool:
    """A year (1900-2099), a date, or a number that follows a label word (``Episode 5``,
    ``rows 3 and 9``, ``Table 1``)."""
    if any(m.start() <= tok.start < m.end() for m in _ISO_DATE.finditer(phrase)):
        return True
    if re.fullmatch(r"(19|20)\d\d", tok.text):
        return True
    return _LABEL_BEFORE.search(phrase[:tok.start]) is not None


_RANGE_AFTER = re.compile(r"\s*(?:to|-|\u2013)\s*([\d.,]+)")
_RANGE_BEFORE = re.compile(r"([\d.,]+)\s*(?:to|-|\u2013)\s*\Z")


def _range_end_ok(phrase: str, tok: Token, value: float, literals: set[float]) -> bool:
    """An end of a range of whole numbers whose edges are literals of the code: "positions 8
    to 31" for edges (8, 32) or (7.5, 31.5). The start may be half a step above an edge, the
    end half or one step below one, and the other end of the range must hold too."""
    after = _RANGE_AFTER.match(phrase, tok.end)
    before = _RANGE_BEFORE.search(phrase[:tok.start])
    if after:        # tok starts a range
        end = _number_value(after.group(1))
        return (value in literals or value - 0.5 in literals) and end is not None and (
            end in literals or end + 0.5 in literals or end + 1 in literals)
    if before:       # tok ends a range
        start = _number_value(before.group(1))
        return (value + 0.5 in literals or value + 1 in literals) and start is not None and (
            start in literals or start - 0.5 in literals)
    return False


def declaration_problems(phrases: list[str], literals: set[float] | None) -> list[str]:
    """Why each refused declaration cannot declare a setting (empty if all are accepted).

    A setting phrase must hold words as well as its number (a bare number would declare every
    occurrence of it on the page), and each of its numbers must be a literal of the page's own
    code (``literals``; ``None`` for book-wide settings, which have no code; a percentage p%
    matches a literal p/100 or 1 - p/100, the coverage of a level alpha) or a label: a year, a
    date, or a number after a label word (episode, figure, table, theorem, row, ...).
    A measured value cannot be declared: pin it.
    """
    problems = []
    for phrase in phrases:
        toks = tokens(phrase)
        if not toks:
            problems.append(f"setting {phrase!r} contains no number; declare only phrases "
                            "with numbers")
            continue
        rest = phrase
        for t in reversed(toks):
            rest = rest[:t.start] + " " + rest[t.end:]
        if not any(c.isalpha() for c in rest):
            problems.append(f"setting {phrase!r} is only a number; a setting phrase holds the "
                            "words that say what the number sets (e.g. \"T = 2\", \"seed 0\")")
            continue
        for t in toks:
            if _is_label(phrase, t):
                continue
            value = _number_value(t.text)
            ok = value is not None and literals is not None and (
                value in literals or ("%" in t.text and (
                    round(value / 100, 12) in literals            # 90% for 0.9
                    or round(1 - value / 100, 12) in literals)))  # 90% for alpha = 0.1
            if not ok and value is not None and literals is not None:
                ok = _range_end_ok(phrase, t, value, literals)
            if not ok:
                where = ("a literal of the page's code" if literals is not None
                         else "a label (book-wide settings have no code)")
                problems.append(
                    f"setting {phrase!r}: {t.text} is neither {where} nor a label (episode, "
                    "figure, table, row, year, ...); a measured number cannot be declared: "
                    "pin it, or show it in a dated \"Record ...\" box")
                break
    return problems


def _typed_form(text: str) -> str:
    """A number as typed, for comparing an output's token with the code's: no sign, no
    thousands commas ("90%", "0.93", "3" and "3.0" stay distinct)."""
    return text.strip(_SIGN).replace(",", "")


def code_literals(sources: list[str]) -> tuple[set[float], set[str]]:
    """The numeric literals of a page's code cells, and the numbers it types for display.

    The second set holds, as typed (:func:`_typed_form`), the numbers inside string literals
    and the numeric literals inside a display call (``Markdown``, ``HTML``, ``print``, ``display``,
    ``DataFrame`` ...): a
    number of a prose-like output that is one of them was typed, not computed.
    """
    import ast

    literals: set[float] = set()
    typed: set[float] = set()
    display_calls = {"Markdown", "HTML", "Latex", "Math", "SVG", "display", "print",
                     "DataFrame", "Series", "write", "to_markdown", "to_html"}
    for source in sources:
        lines = [("pass" if ln.lstrip().startswith(("%", "!")) else ln)
                 for ln in source.splitlines()]
        try:
            tree = ast.parse("\n".join(lines))
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) \
                    and not isinstance(node.value, bool):
                literals.add(abs(float(node.value)))
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                typed.update(_typed_form(t.text) for t in tokens(node.value))
            elif isinstance(node, ast.Call):
                f = node.func
                name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
                if name in display_calls:
                    for sub in ast.walk(node):
                        if isinstance(sub, ast.Constant) and isinstance(sub.value, (int, float)) \
                                and not isinstance(sub.value, bool):
                            typed.add(_typed_form(repr(abs(sub.value))))
    return literals, typed


# ------------------------------------------------------------------------------------------
# Walking a doctree
# ------------------------------------------------------------------------------------------

CHECK, MATH, PIN, SKIP = "check", "math", "pin", "skip"

#: Nodes whose whole subtree a reader does not see as prose (or that is generated later).
_SKIP_TYPES = (
    nodes.literal, nodes.literal_block, nodes.comment,
    nodes.target, nodes.citation, nodes.citation_reference, nodes.footnote_reference,
    nodes.label, nodes.substitution_definition, nodes.system_message, nodes.docinfo,
    nodes.doctest_block,
)
_SKIP_CLASS_NAMES = {"desc", "toctree", "bibliography", "meta", "pending_xref_condition",
                     "index"}


_HTML_HIDDEN = re.compile(r"<(script|style)\b.*?</\1\s*>|<!--.*?-->", re.S | re.I)
_HTML_TAG = re.compile(r"<[^>]*>")
#: Attributes of raw HTML that a reader sees (as a tooltip, in place of an image, read aloud).
_HTML_SHOWN_ATTR = re.compile(
    r"""\b(?:title|alt|aria-label|aria-description|aria-valuetext|placeholder|label|summary|"""
    r"""value|data-tooltip|data-title|data-original-title)\s*=\s*"""
    r"""(?:"([^"]*)"|'([^']*)'|([^\s>"']+))""", re.I)


def _is_html(node) -> bool:
    return isinstance(node, nodes.raw) and "html" in node.get("format", "").split()


def _html_text(html: str) -> str:
    """What a reader sees of raw HTML: its text and its shown attributes (``title``, ``alt``,
    ``aria-label`` ...), entities decoded; no tags, scripts, styles or comments."""
    import html as html_lib

    def tag(m):
        shown = [next(g for g in a.groups() if g is not None)
                 for a in _HTML_SHOWN_ATTR.finditer(m.group(0))]
        return " " + " ".join(shown) + " "

    return html_lib.unescape(_HTML_TAG.sub(tag, _HTML_HIDDEN.sub(" ", html)))


def _skip_subtree(node) -> bool:
    if isinstance(node, _SKIP_TYPES):
        return True
    if isinstance(node, nodes.raw) and not _is_html(node):
        return True  # LaTeX and other formats the site does not show
    if ":docstring of " in (getattr(node, "source", None) or ""):
        return True  # autodoc: text from the package's docstrings, not from the page
    name = type(node).__name__
    if name in _SKIP_CLASS_NAMES:
        return True
    if name == "pending_xref" and not node.get("refexplicit"):
        return True  # the text is the target; Sphinx replaces it by a generated title
    if isinstance(node, nodes.reference) and node.get("refuri"):
        text = node.astext()
        uri = node["refuri"]
        if text == uri or uri.endswith(text):
            return True  # a bare address shown as its own link text
    if isinstance(node, nodes.container) and node.get("nb_element") == "cell_code_source":
        return True
    return False


def _box_title(node) -> str | None:
    if not isinstance(node, nodes.Admonition):
        return None
    title = next((c for c in node.children if isinstance(c, nodes.title)), None)
    return None if title is None else title.astext().lstrip()


def _is_quoted_box(node) -> bool:
    """An admonition whose title starts with "Quoted" (the seed-overlap tool skips it too)."""
    title = _box_title(node)
    return title is not None and title.startswith("Quoted")


def _is_record_box(node) -> bool:
    """An admonition whose title starts with "Record": a dated record of a machine's numbers."""
    title = _box_title(node)
    return title is not None and title.startswith("Record")


def _cites(node) -> bool:
    """Whether ``node`` holds a citation (``{cite}`` or a reST citation reference)."""
    for n in node.findall(nodes.Element):
        if isinstance(n, nodes.citation_reference):
            return True
        if type(n).__name__ == "pending_xref" and n.get("refdomain") == "cite":
            return True
    return False


def _has_pin(node) -> bool:
    return any(PIN_CLASS in n.get("classes", []) for n in node.findall(nodes.inline))


def _mark_our_columns(box) -> None:
    """In a Quoted box's table, a column holding one of our pins is ours: its numbers are not
    another work's (they must be pinned or declared like any other)."""
    for tgroup in box.findall(nodes.tgroup):
        rows = [r for part in tgroup.children if isinstance(part, (nodes.thead, nodes.tbody))
                for r in part.children if isinstance(r, nodes.row)]
        ours = set()
        for row in rows:
            for i, entry in enumerate(row.children):
                if _has_pin(entry):
                    ours.add(i)
        for row in rows:
            for i, entry in enumerate(row.children):
                if i in ours and not isinstance(row.parent, nodes.thead):
                    entry.se_ours = True


def _is_ours(node) -> bool:
    while node is not None:
        if getattr(node, "se_ours", False):
            return True
        node = node.parent
    return False


def _is_output(node) -> bool:
    return isinstance(node, nodes.container) and node.get("nb_element") in (
        "cell_code_output", "mime_bundle")


def _is_cell(node) -> bool:
    return isinstance(node, nodes.container) and node.get("nb_element") == "cell_code"


def _hides_input(node) -> bool:
    """A code cell whose source the reader does not see (removed, or hidden behind a toggle):
    its printed output reads as prose."""
    if not _is_cell(node):
        return False
    shown = any(isinstance(c, nodes.Element) and c.get("nb_element") == "cell_code_source"
                for c in node.children)
    return not shown or node.get("hide_mode") in ("all", "input", "input+output")


#: The rules of the third round of the check (issue 24), by name: every page meets all of
#: them (the findings name the rule they break).
RULES = {
    "settings": "a setting phrase holds words, and its numbers are code literals or labels",
    "words": "a measured number is written in digits, not in words",
    "forms": "numbers glued to a unit, leading-dot decimals, superscripts, vulgar fractions",
    "maths": "display maths, and percentages in maths",
    "outputs": "numbers typed in the code and shown as prose by an output",
    "glued-pin": "nothing glued to a pinned quote (digits, signs, units, %)",
    "boxes": "a Quoted box cites its source, our columns in it are checked, a Record box "
             "is dated",
    "precision": "a quote carries a significant digit of its value",
}


def _old_form(text: str) -> bool:
    m = NUMBER.fullmatch(text)
    return m is not None


@dataclass
class Finding:
    """One number token, where it is and how it is accounted for."""

    number: str
    line: int | None
    kind: str  # "prose", "caption", "alt", "math", "output", "words", "pin" or "box"
    cls: str   # "pinned", "declared", "quoted", "recorded", "computed" or "bare"
    context: str
    why: str = ""      # for a bare finding that is not a plain bare number: what is wrong
    phrase: str = ""   # for a declared number: the setting phrase that declares it
    rule: str = ""     # for a bare finding: the rule (see RULES) that it breaks

    def as_dict(self) -> dict:
        return asdict(self)


def _line_of(node) -> int | None:
    while node is not None:
        if isinstance(node, nodes.row) and not getattr(node, "line", None):
            line = _row_line(node)
            if line:
                return line
        line = getattr(node, "line", None)
        if line:
            return line
        node = node.parent
    return None


def _row_line(row) -> int | None:
    """A markdown table row has no line of its own: the table's line plus its position."""
    group = row.parent
    tgroup = group.parent if group is not None else None
    table = tgroup.parent if tgroup is not None else None
    if table is None or not getattr(table, "line", None):
        return None
    index = group.index(row)
    if isinstance(group, nodes.tbody):
        heads = [c for c in tgroup.children if isinstance(c, nodes.thead)]
        index += (len(heads[0].children) + 1) if heads else 0  # + the |---| line
    return table.line + index


_SENTENCE_END = re.compile(r"[.;!?]\s+(?=\S)")
_ABBREVIATIONS = ("Fig", "Figs", "Eq", "Eqs", "Sec", "al", "cf", "vs", "e.g", "i.e", "approx")


def _sentence_ends(text: str, lo: int, hi: int) -> list[re.Match]:
    out = []
    for m in _SENTENCE_END.finditer(text, lo, hi):
        word = re.search(r"[\w.]*$", text[max(0, m.start() - 8):m.start()]).group(0)
        if text[m.start()] == "." and word.rstrip(".") in _ABBREVIATIONS:
            continue
        out.append(m)
    return out


def _context(text: str, start: int, end: int, width: int = 70) -> str:
    """The sentence around a token (at most ``width`` characters either side)."""
    lo = max(0, start - width)
    hi = min(len(text), end + width)
    ends = [m.end() for m in _sentence_ends(text, lo, start)]
    if ends:
        lo = ends[-1]
    after = _sentence_ends(text, end, hi)
    if after:
        hi = after[0].start() + 1
    snippet = " ".join(text[lo:hi].split())
    return (("..." if lo > 0 and not ends else "") + snippet
            + ("..." if hi < len(text) and not after else ""))


def _segments(node, mode: str, out: list):
    """Collect (text, mode) pieces of a text unit in document order."""
    for child in node.children:
        if isinstance(child, nodes.Text):
            out.append((child.astext(), mode))   # (reST keeps escapes as NUL in str())
        elif _is_html(child):
            out.append((_html_text(child.astext()), mode))
        elif _skip_subtree(child):
            out.append((child.astext(), SKIP))
        elif isinstance(child, nodes.inline) and PIN_CLASS in child.get("classes", []):
            out.append((child.astext(), PIN))
        elif isinstance(child, nodes.math):
            out.append((child.astext(), MATH if mode == CHECK else mode))
        elif isinstance(child, nodes.abbreviation) and child.get("explanation"):
            _segments(child, mode, out)   # {abbr}: the tooltip is read too
            out.append((" (" + str(child["explanation"]) + ")", mode))
        elif isinstance(child, nodes.Element):
            _segments(child, mode, out)
            if child.get("title") and isinstance(child, (nodes.reference, nodes.image)):
                out.append((" (" + str(child["title"]) + ")", mode))


_GLUED_AFTER_PIN = re.compile(
    r"[\w%\u2030\u00d7" + SUPERSCRIPTS + FRACTIONS + r"]|\.\d|\s*(?:%|\u2030|per\s?cent\b)",
    re.IGNORECASE)
_GLUED_BEFORE_PIN = re.compile(r"(?:[\d.+\-\u2212" + SUPERSCRIPTS + FRACTIONS + r"]|\d,)\Z")


class _Scanner:
    def __init__(self, phrases, typed, executes=False):
        self.executes = executes
        self.phrases = phrases
        self.by_cell = typed if isinstance(typed, dict) else None
        self.typed = set() if isinstance(typed, dict) else (typed or set())
        self.findings: list[Finding] = []
        self.display = False   # inside display maths

    def add(self, number, line, kind, cls, context, why="", rule=""):
        self.findings.append(Finding(number, line, kind, cls, context, why, rule=rule))

    def unit(self, unit, kind):
        pieces: list = []
        _segments(unit, CHECK, pieces)
        first = len(self.findings)
        self.pieces(pieces, _line_of(unit), kind)
        if _is_ours(unit):
            for f in self.findings[first:]:
                f._ours = True

    def pieces(self, pieces, line, kind):
        pieces = [(t.replace("\\%", "%%"), md) if md == MATH else (t, md) for t, md in pieces]
        text = "".join(t for t, _ in pieces)
        if not any(c.isdigit() or c.isalpha() for c in text):
            return
        bounds, pos = [], 0
        for t, mode in pieces:
            bounds.append((pos, pos + len(t), mode))
            pos += len(t)
        for m in _ADDRESS.finditer(text):   # addresses are skipped wherever they appear
            bounds.insert(0, (m.start(), m.end(), SKIP))

        def line_at(i):
            return None if line is None else line + text.count("\n", 0, i)

        spans = _phrase_hits(text, self.phrases)
        for tok in tokens(text):
            mode = next((md for a, b, md in bounds if a <= tok.start < b), CHECK)
            if mode == SKIP:
                continue
            if mode == MATH and not is_math_checked(tok.text):
                continue
            phrase = ""
            if mode == PIN:
                cls = "pinned"
            else:
                phrase = next((p for a, b, p in spans if a <= tok.start and tok.end <= b), "")
                if kind == "output" and _typed_form(tok.text) not in self.typed:
                    cls = "computed"   # computed by the code, not typed into it
                else:
                    cls = "declared" if phrase else "bare"
            rule = ""
            if cls == "bare":
                rule = ("outputs" if kind == "output" else "forms" if not _old_form(tok.text)
                        else "maths" if mode == MATH and (self.display or (
                            "%" in tok.text and not is_math_checked(tok.text.rstrip("%"))))
                        else "")
            self.findings.append(Finding(tok.text, line_at(tok.start),
                                         "math" if mode == MATH else kind, cls,
                                         _context(text, tok.start, tok.end), phrase=phrase,
                                         rule=rule))
        if kind == "output":
            return
        for tok in word_numbers(text):
            mode = next((md for a, b, md in bounds if a <= tok.start < b), CHECK)
            if mode == CHECK:
                self.add(tok.text, line_at(tok.start), "words", "bare",
                         _context(text, tok.start, tok.end),
                         f"a measured number in words ({tok.text!r}); write it in digits, "
                         "as a pinned number", "words")
        for a, b, mode in bounds:
            if mode != PIN:
                continue
            if _GLUED_AFTER_PIN.match(text, b) or _GLUED_BEFORE_PIN.search(text[:a]):
                self.add(text[a:b], line_at(a), "pin", "bare", _context(text, a, b),
                         f"characters glued to the pinned quote {text[a:b]!r} change what it "
                         "says (a digit, a sign, a unit or % outside the quote); put the whole "
                         "number, with its % or sign, inside the quote", "glued-pin")

    def visit(self, node, in_output=False, hidden=False):
        for child in node.children:
            if not isinstance(child, nodes.Element):
                continue
            if in_output and hidden and isinstance(child, nodes.literal_block):
                self.pieces([(child.astext(), CHECK)], _line_of(child), "output")
                continue   # printed by a cell whose code is hidden: it reads as prose
            if isinstance(child, nodes.math_block) and not in_output:
                self.display = True
                self.pieces([(child.astext(), MATH)], _line_of(child), "math")
                self.display = False
                continue
            if _skip_subtree(child):
                continue
            if isinstance(child, nodes.image) and child.get("alt"):
                self.pieces([(child["alt"], CHECK)], _line_of(child), "alt")
            if _is_html(child):  # raw HTML: its text is prose (or output text)
                self.pieces([(_html_text(child.astext()), CHECK)], _line_of(child),
                            "output" if in_output else "prose")
                continue
            if _is_quoted_box(child):
                self.quoted_box(child, in_output, hidden)
                continue
            if _is_record_box(child):
                self.record_box(child, in_output, hidden)
                continue
            if in_output or _is_output(child):
                # code output: a figure's caption/legend is prose; Markdown or HTML that the
                # code displays is checked against what the code typed
                if isinstance(child, (nodes.caption, nodes.legend)):
                    self.text_units(child, "caption")
                elif isinstance(child, nodes.TextElement):
                    self.text_units(child, "output")
                else:
                    self.visit(child, True, hidden)
                continue
            if isinstance(child, nodes.TextElement):
                kind = "caption" if isinstance(child, (nodes.caption, nodes.legend)) else "prose"
                self.text_units(child, kind)
            elif _is_cell(child) and self.by_cell is not None:
                self.typed = self.by_cell.get(child.get("cell_index"), set())
                self.visit(child, False, hidden or _hides_input(child))
                self.typed = set()
            else:
                self.visit(child, False, hidden or _hides_input(child))

    def text_units(self, node, kind):
        if isinstance(node, nodes.TextElement):
            self.unit(node, kind)
            for img in node.findall(nodes.image):
                if img.get("alt"):
                    self.pieces([(img["alt"], CHECK)], _line_of(img), "alt")
        else:
            for child in node.children:
                if isinstance(child, nodes.Element) and not _skip_subtree(child):
                    self.text_units(child, kind)

    def quoted_box(self, box, in_output, hidden):
        # a box titled "Quoted ...": another work's numbers, quoted with their source
        # (ARCHITECTURE.md, "Pins": external numbers are marked as quotations and are not
        # pinned). It must name the source, and a table column of ours inside it is checked as usual.
        if not _cites(box):
            self.add("", _line_of(box), "box", "bare", " ".join(_box_title(box).split()),
                     "a box titled \"Quoted ...\" must name its source with a {cite}", "boxes")
        _mark_our_columns(box)
        first = len(self.findings)
        self.visit(box, in_output, hidden)
        for f in self.findings[first:]:
            ours = f.__dict__.pop("_ours", False)
            if f.cls in ("declared", "bare") and f.kind not in ("pin", "box") and not ours:
                f.cls = "quoted"
                f.rule = ""
            elif ours and f.cls == "bare" and not f.rule:
                f.rule = "boxes"

    def record_box(self, box, in_output, hidden):
        # a box titled "Record ...": a machine's numbers as measured once, with the date (and
        # machine) in the title; shown as a record, outside the checked claims
        title = " ".join(_box_title(box).split())
        if self.executes:
            self.add("", _line_of(box), "box", "bare", title,
                     "a page that executes code measures its numbers in the build: a "
                     "\"Record ...\" box belongs on a page without code", "boxes")
        if not _ISO_DATE.search(title):
            self.add("", _line_of(box), "box", "bare", title,
                     "a box titled \"Record ...\" must carry the date of the record "
                     "(YYYY-MM-DD) and the machine in its title", "boxes")
        first = len(self.findings)
        self.visit(box, in_output, hidden)
        for f in self.findings[first:]:
            if f.cls in ("declared", "bare") and f.kind not in ("pin", "box"):
                f.cls = "recorded"
                f.rule = ""


def scan(doctree, phrases: list[str], typed: set[float] | None = None,
         executes: bool = False) -> list[Finding]:
    """Every number token a reader sees on the page, classed (see :class:`Finding`).

    ``typed``: the numbers the page's code typed for display (:func:`code_literals`), a set or,
    per code cell, a dict {cell index: set}; a number of a Markdown/HTML output, or of a print
    under a hidden input, is checked like prose when its cell typed it, and counted as
    computed otherwise. ``executes``: the page has code (a
    Record box is refused there: such a page measures its numbers in the build).
    """
    scanner = _Scanner(phrases, typed, executes)
    scanner.visit(doctree)
    return scanner.findings


def counts(findings: list[Finding]) -> dict:
    c = {"found": len(findings), "pinned": 0, "declared": 0, "quoted": 0, "recorded": 0,
         "computed": 0, "bare": 0}
    for f in findings:
        c[f.cls] += 1
    return c


def place(where: str, line: int | None) -> str:
    """``page:line``; myst-nb numbers the lines of a stored .ipynb as (cell + 1) * 10000 + line."""
    if not line:
        return f"{where}:?"
    if line >= 10000:
        return f"{where}:cell {line // 10000 - 1}:line {line % 10000}"
    return f"{where}:{line}"


def message(where: str, f: Finding) -> str:
    if f.why:
        return f'number {place(where, f.line)}: {f.why}: "{f.context}"'
    what = {"caption": "in a figure caption", "alt": "in alt text", "math": "in maths",
            "prose": "", "output": "in a code output shown as prose (typed in the code)"
            }.get(f.kind, "")
    return (f"number {place(where, f.line)}: bare number {f.number} {what}".rstrip()
            + f': "{f.context}" -- pin it ({{pin}}`name={f.number}`, pin(name=...) in code) '
            "or, if the page chose it, declare the phrase under `settings:` in the front matter")


# ------------------------------------------------------------------------------------------
# Command line: list a page's numbers without executing it
# ------------------------------------------------------------------------------------------

_PNG = (  # a 1x1 transparent PNG: the placeholder output that carries a cell's figure options
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII="
)


def _placeholder_outputs(notebook):
    """No execution: drop per-page execution settings, give figure cells a placeholder image."""
    import nbformat

    meta = notebook.metadata.get("mystnb")
    if isinstance(meta, dict):
        for key in list(meta):
            if key.startswith("execution"):
                meta.pop(key)
    for cell in notebook.cells:
        if cell.cell_type != "code":
            continue
        opts = cell.metadata.get("mystnb") or {}
        if isinstance(opts, dict) and ("figure" in opts or "image" in opts):
            if not any(o.get("output_type") == "display_data" for o in cell.get("outputs", [])):
                cell.outputs = [nbformat.v4.new_output(
                    "display_data", data={"image/png": _PNG, "text/plain": "<Figure>"})]
    return notebook


def _read_pages(pages: list[Path], root: Path) -> dict:
    """Read ``pages`` in a throwaway Sphinx project with execution off; findings per page."""
    import io
    import shutil
    import tempfile

    import myst_nb.core.read as nb_read
    from jupyter_book.config import get_final_config
    from jupyter_book.utils import init_myst_file  # noqa: F401  (jupyter-book is present)
    from sphinx.application import Sphinx
    from sphinx.util.docutils import docutils_namespace, patch_docutils

    from standarderror import sphinxext

    original_md, original_ipynb = nb_read.read_myst_markdown_notebook, nb_read.standard_nb_read

    def read_md(*args, **kwargs):
        return _placeholder_outputs(original_md(*args, **kwargs))

    def read_ipynb(text):
        return _placeholder_outputs(original_ipynb(text))

    results = {}
    with tempfile.TemporaryDirectory(prefix="se-numbers-") as tmp:
        src = Path(tmp) / "src"
        src.mkdir()
        shutil.copy(root / "_config.yml", src / "_config.yml")
        bib = root / "book" / "references.bib"
        if bib.is_file():
            (src / "book").mkdir()
            shutil.copy(bib, src / "book" / "references.bib")
        docnames = []
        for page in pages:
            rel = page.resolve().relative_to(root)
            (src / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(page, src / rel)
            docnames.append(str(rel.with_suffix("")))
        toc = "format: jb-book\nroot: " + docnames[0] + "\n"
        if len(docnames) > 1:
            toc += "chapters:\n" + "".join(f"  - file: {d}\n" for d in docnames[1:])
        (src / "_toc.yml").write_text(toc)
        config, _ = get_final_config(
            user_yaml=src / "_config.yml",
            cli_config={"latex_individualpages": False},
            sourcedir=src, use_external_toc=True)
        config.update(nb_execution_mode="off", html_static_path=[], html_extra_path=[])
        nb_read.read_myst_markdown_notebook = read_md
        nb_read.standard_nb_read = read_ipynb
        warnings = io.StringIO()
        try:
            with patch_docutils(src), docutils_namespace():
                app = Sphinx(srcdir=src, confdir=None, outdir=Path(tmp) / "out",
                             doctreedir=Path(tmp) / "doctrees", buildername="dummy",
                             confoverrides=config, status=None, warning=warnings,
                             freshenv=True)
                # no execution, so no computed values: a {pin} quote is only marked as pinned
                app.add_role("pin", sphinxext.scan_only_pin_role, override=True)
                app.builder.read()
                state = sphinxext._state(app.env)
                for page, doc in zip(pages, docnames):
                    rec = state.get(doc, {})
                    results[page] = {"findings": rec.get("numbers", []),
                                     "problems": rec.get("setting_problems", []),
                                     "unused": rec.get("unused_settings", []),
                                     "settings": len(read_settings(page)[0])}
        finally:
            nb_read.read_myst_markdown_notebook = original_md
            nb_read.standard_nb_read = original_ipynb
    return results


def main(argv: list[str] | None = None) -> int:
    import argparse
    import sys
    import time

    parser = argparse.ArgumentParser(
        prog="python -m standarderror.sphinxext.numbers",
        description="List the numbers of book pages that are neither pinned nor declared "
                    "(no execution).")
    parser.add_argument("pages", nargs="+", type=Path, help="page sources (.md or .ipynb)")
    parser.add_argument("--all", action="store_true",
                        help="list every number found, not only the bare ones")
    args = parser.parse_args(argv)
    t0 = time.time()
    pages = [p for p in args.pages]
    for p in pages:
        if not p.is_file():
            parser.error(f"no such page: {p}")
    root = _book_root(pages[0])
    results = _read_pages(pages, root)
    total = {"found": 0, "pinned": 0, "declared": 0, "quoted": 0, "recorded": 0,
             "computed": 0, "bare": 0, "settings": 0, "refused": 0}
    failed = False
    for page in pages:
        res = results[page]
        rel = page.resolve().relative_to(root)
        findings = [Finding(**f) for f in res["findings"]]
        for problem in res["problems"]:
            print(f"{rel}: refused: {problem}")
        for f in findings:
            if f.cls == "bare" or args.all:
                tag = "" if f.cls == "bare" else f" [{f.cls}]"
                rule = f" [rule: {f.rule}]" if f.rule else ""
                what = f" {f.why}" if f.why else ""
                print(f"{place(str(rel), f.line)}: {f.number}{tag} ({f.kind}){rule}{what} "
                      f"\"{f.context}\"")
        for phrase in res["unused"]:
            print(f"{rel}: note: setting {phrase!r} declares nothing the page's checked text "
                  "shows (its occurrences, if any, are in maths, code or outputs)")
        c = counts(findings)
        c["settings"], c["refused"] = res["settings"], len(res["problems"])
        for k in total:
            total[k] += c[k]
        failed |= c["bare"] > 0 or c["refused"] > 0
        print(f"{rel}: {_summary(c)}")
    if len(pages) > 1:
        print(f"total: {_summary(total)}")
    sys.stdout.flush()
    print(f"({time.time() - t0:.1f} s, nothing executed)", file=sys.stderr)
    return 1 if failed else 0


def _summary(c: dict) -> str:
    return (f"{c['found']} numbers: {c['pinned']} pinned, {c['declared']} declared, "
            f"{c['quoted']} quoted, {c['recorded']} recorded, {c['computed']} computed, "
            f"{c['bare']} bare; {c['settings']} settings, {c['refused']} refused")


def _book_root(page: Path) -> Path:
    for parent in page.resolve().parents:
        if (parent / "_config.yml").is_file():
            return parent
    raise SystemExit(f"no _config.yml above {page}")


if __name__ == "__main__":
    raise SystemExit(main())
