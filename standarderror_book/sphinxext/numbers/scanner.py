"""The scan: :func:`scan` walks a page's doctree and classes every number token a reader sees
(:class:`Finding`: pinned, declared, quoted, recorded, computed or bare, with the rule of
:data:`RULES` a bare one breaks); :func:`counts`, :func:`place` and :func:`message` report the
findings. What counts as a number is :mod:`.tokenizer`'s, what a page declares is
:mod:`.settings`', which nodes are read is :mod:`.doctree`'s."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass

from docutils import nodes

from .boxes import ours_problem, record_problem
from .codetext import is_typed
from .doctree import (
    CHECK,
    MATH,
    PIN,
    SKIP,
    _box_title,
    _cites,
    _hides_input,
    _html_text,
    _is_cell,
    _is_html,
    _is_ours,
    _is_output,
    _is_quoted_box,
    _is_record_box,
    _line_of,
    _mark_our_columns,
    _segments,
    _skip_subtree,
)
from .pictures import picture_problems
from .settings import _ISO_DATE, LABEL, _phrase_hits, is_label
from .tokenizer import _ADDRESS, FRACTIONS, NUMBER, SUPERSCRIPTS, is_math_checked, tokens, word_numbers

#: The rules of the check, by name: every page meets all of
#: them (the findings name the rule they break).
RULES = {
    "settings": "a setting phrase holds words, and its numbers are code literals or labels",
    "words": "a measured number is written in digits, not in words",
    "forms": "numbers glued to a unit, leading-dot decimals, superscripts, vulgar fractions",
    "maths": "display maths, and percentages in maths",
    "outputs": "numbers typed in the code and shown as prose by an output",
    "glued-pin": "nothing glued to a pinned quote (digits, signs, units, % in any form), no "
                 "sign before it across a space, no invisible character beside it",
    "boxes": "a Quoted box cites its source, our numbers in it stand only in a pinned column; "
             "a Record box is dated, on a page without code, and holds records of a run "
             "(times, memory, counts), no results",
    "pictures": "a picture is drawn by the build, or quoted in a figure whose caption cites "
                "its source",
    "precision": "a quote carries a significant digit of its value, and of its distance to "
                 "the bound 1",
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


_MATHS_DECIMAL = re.compile(r"(?<=\d)\{([.,])\}(?=\d)")
_MATHS_SPACE = re.compile(r"\\[,;:!> ]|~|\\(?:thinspace|medspace|thickspace|quad|qquad)\b")


def _plain_maths(tex: str) -> str:
    """A number of maths as a reader reads it: ``0{.}91`` and ``0{,}92`` (a decimal comma) as
    0.91 and 0.92, ``95\\,\\%`` as 95%: braces around a decimal separator and LaTeX's spaces
    between a number and its sign are dropped, ``\\%`` is a percent sign."""
    tex = _MATHS_DECIMAL.sub(".", tex)
    tex = _MATHS_SPACE.sub("", tex)
    return tex.replace("\\%", "%%")


def _sentence(text: str, start: int, end: int) -> tuple[int, int]:
    """The bounds of the sentence of ``text`` around ``text[start:end]``."""
    ends = [m.end() for m in _sentence_ends(text, 0, start)]
    after = _sentence_ends(text, end, len(text))
    return (ends[-1] if ends else 0), (after[0].start() + 1 if after else len(text))


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


#: Percent and per-mille signs in every form a reader reads as one (full-width, small, Arabic,
#: per ten thousand).
PERCENT_SIGNS = "%\u2030\u2031\uff05\ufe6a\u066a"
_GLUED_AFTER_PIN = re.compile(
    r"[\w\u00d7" + PERCENT_SIGNS + SUPERSCRIPTS + FRACTIONS + r"]|\.\d|\s*(?:["
    + PERCENT_SIGNS + r"]|per\s?cent\b|per\s?mille\b)",
    re.IGNORECASE)
_GLUED_BEFORE_PIN = re.compile(r"(?:[\d.+\-\u2212" + SUPERSCRIPTS + FRACTIONS + r"]|\d,)\Z")
#: Characters a reader takes for the sign of the number after them, even across a space:
#: hyphen-minus, minus, figure dash, the small, full-width, superscript, subscript and
#: modifier forms of minus and plus, and plus.
SIGN_LIKE = ("+-\u2212\u2012\ufe63\uff0d\u207b\u208b\u02d7\u2796\u2010\u2011"
             "\uff0b\ufe62\u207a\u208a\u02d6\u2795")
#: An en dash reads as a sign glued to a number, and as a range after a digit (0.97–1.00).
_EN_DASH = "\u2013"


def _invisible(c: str) -> bool:
    """A character that takes no room on the page: zero-width spaces and joiners, soft hyphens,
    byte-order marks, and the bidirectional marks, embeddings, overrides and isolates."""
    import unicodedata

    return unicodedata.category(c) == "Cf"


def pin_neighbour_problem(text: str, a: int, b: int) -> str:
    """Why what surrounds the pinned quote ``text[a:b]`` changes what the reader takes it to say,
    or "" (see :data:`RULES`, "glued-pin").

    Refused: a digit, a decimal point, a sign, a superscript or a fraction glued before it; a
    sign (any form of :data:`SIGN_LIKE`) before it, glued or across spaces; an en dash glued
    before it but after no digit; a letter, a digit, a unit, a superscript or a percent sign
    (any form of :data:`PERCENT_SIGNS`, or "percent") after it; and an invisible character
    (:func:`_invisible`) on either side, which can hide a sign or reorder the text.
    """
    i = a
    while i > 0 and (text[i - 1].isspace() or _invisible(text[i - 1])):
        i -= 1
    j = b
    while j < len(text) and (text[j].isspace() or _invisible(text[j])):
        j += 1
    if any(_invisible(c) for c in text[i:a] + text[b:j]):
        return "an invisible character next to it can hide a sign or reorder what the reader sees"
    before = text[i - 1] if i > 0 else ""
    if before and before in SIGN_LIKE:
        return f"the sign {before!r} before it reads as the quote's sign"
    if before == _EN_DASH and i == a and not (i >= 2 and text[i - 2].isdigit()):
        return "an en dash glued before it reads as a minus sign"
    if _GLUED_AFTER_PIN.match(text, b) or _GLUED_BEFORE_PIN.search(text[:a]):
        return "a digit, a sign, a unit or % glued to it"
    return ""


#: The attributes of a code cell that MyST-NB shows as its toggle's labels.
_PROMPTS = ("prompt_show", "prompt_hide")


class _Scanner:
    def __init__(self, phrases, typed, executes=False):
        self.executes = executes
        self.phrases = phrases
        self.by_cell = typed if isinstance(typed, dict) else None
        self.typed = set() if isinstance(typed, dict) else (typed or set())
        self.findings: list[Finding] = []
        self.display = False   # inside display maths
        self.box = ""          # "quoted" or "record" inside such a box (see .boxes)

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
        pieces = [(_plain_maths(t), md) if md == MATH else (t, md) for t, md in pieces]
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
                if not phrase and mode == CHECK and is_label(text, tok):
                    phrase = LABEL      # "Table 3", "Episode 2", a year: declares itself
                if kind == "output" and not is_typed(tok.text, self.typed):
                    cls = "computed"   # computed by the code, not typed into it
                else:
                    cls = "declared" if phrase else "bare"
            rule = ""
            if cls == "bare":
                rule = ("outputs" if kind == "output" else "forms" if not _old_form(tok.text)
                        else "maths" if mode == MATH and (self.display or (
                            "%" in tok.text and not is_math_checked(tok.text.rstrip("%"))))
                        else "")
            why = ""
            if self.box and mode == CHECK and cls in ("declared", "bare"):
                why = (record_problem(text, tok) if self.box == "record"
                       else ours_problem(text[slice(*_sentence(text, tok.start, tok.end))], tok))
                if why:
                    cls, rule = "bare", "boxes"
            self.findings.append(Finding(tok.text, line_at(tok.start),
                                         "math" if mode == MATH else kind, cls,
                                         _context(text, tok.start, tok.end), why=why,
                                         phrase=phrase, rule=rule))
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
            why = pin_neighbour_problem(text, a, b)
            if why:
                self.add(text[a:b], line_at(a), "pin", "bare", _context(text, a, b),
                         f"characters glued to the pinned quote {text[a:b]!r} change what it "
                         f"says ({why}); put the whole number, with its % or sign, inside "
                         "the quote", "glued-pin")

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
            if _is_cell(child) and any(child.get(k) for k in _PROMPTS):
                # the labels of a hidden cell's toggle (``code_prompt_show``) read as prose
                labels = " / ".join(str(child[k]) for k in _PROMPTS if child.get(k))
                self.pieces([(labels.replace("{type}", "source"), CHECK)], _line_of(child),
                            "prose")
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
        self.box, outer = "quoted", self.box
        self.visit(box, in_output, hidden)
        self.box = outer
        for f in self.findings[first:]:
            ours = f.__dict__.pop("_ours", False)
            if f.rule == "boxes":
                continue          # our number in the box's prose (boxes.ours_problem)
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
        self.box, outer = "record", self.box
        self.visit(box, in_output, hidden)
        self.box = outer
        for f in self.findings[first:]:
            if f.cls in ("declared", "bare") and f.kind not in ("pin", "box") \
                    and f.rule != "boxes":     # a result, not a record (boxes.record_problem)
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
    for what, line, why in picture_problems(doctree):
        scanner.add(what, line, "picture", "bare", what, why, "pictures")
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
