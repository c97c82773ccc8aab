"""Setting phrases: the numbers a page chose, declared in its front matter (``settings:``) or
book-wide (``se_settings``). :func:`read_settings` reads them, :func:`phrase_spans` finds their
occurrences in a text, :func:`declaration_problems` refuses a phrase whose numbers are neither
literals of the page's code nor labels, and :func:`code_literals` reads those literals (and the
numbers the code types for display) from the code cells."""

from __future__ import annotations

import re
from pathlib import Path

from .tokenizer import _LETTERS, _SIGN, Token, tokens

#: Sphinx config value: setting phrases declared for every page of the book.
CONFIG_KEY = "se_settings"
#: Front-matter key (or notebook metadata key) of a page's own settings.
FRONT_MATTER_KEY = "settings"


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
