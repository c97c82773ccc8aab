"""What counts as a number in a unit of text: :func:`tokens` (digits, signs, ``%``, factors,
glued units and magnitudes, superscripts, vulgar fractions; digits glued to a word are names),
:func:`is_math_checked` (which tokens count inside maths) and :func:`word_numbers` (a measured
number written in words). The rules are listed in :mod:`standarderror_book.sphinxext.numbers`."""

from __future__ import annotations

import re
from dataclasses import dataclass

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
#: Subscript digits and signs (``₉₁``).
SUBSCRIPTS = "\u2080\u2081\u2082\u2083\u2084\u2085\u2086\u2087\u2088\u2089"
_SUB_SIGNS = "\u208a\u208b"


def _numeral_characters() -> str:
    """Characters that write a number on their own: roman numerals (Ⅻ), circled, parenthesised
    and full-stop digits (①, ⑴, ⒈, ⓿, ❶, ㉑): Unicode's other and letter numbers in the number
    forms and the enclosed blocks."""
    import unicodedata

    blocks = [(0x2150, 0x218B), (0x2460, 0x24FF), (0x2776, 0x2793), (0x3220, 0x325F),
              (0x3280, 0x32BF), (0x1F100, 0x1F10C)]
    return "".join(chr(c) for a, b in blocks for c in range(a, b + 1)
                   if unicodedata.category(chr(c)) in ("No", "Nl")
                   and unicodedata.numeric(chr(c), None) is not None
                   and chr(c) not in FRACTIONS)


NUMERALS = _numeral_characters()
_OTHER_NUMERALS = re.compile(
    f"[{_SUP_SIGNS}]?[{SUPERSCRIPTS}]+|[{_SUB_SIGNS}]?[{SUBSCRIPTS}]+|[{FRACTIONS}]"
    f"|[{re.escape(NUMERALS)}]+")
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
    # superscript and subscript numbers, vulgar fractions, roman and circled numerals standing
    # on their own (not an exponent or an index: R², x², x₁)
    for m in _OTHER_NUMERALS.finditer(text):
        if any(t.start <= m.start() < t.end for t in out):
            continue
        prev = text[m.start() - 1] if m.start() > 0 else ""
        if m.group(0)[0] not in FRACTIONS and prev and (prev.isalnum() or prev in ")]}_"):
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
    r"|\b(?:a|one)\s+tenth\b"
    # a measured ratio: "doubles the ECE", "halved the time", "an order of magnitude smaller",
    # "tenfold", "nine in ten", "half the questions", "a third of", "two thirds of"
    r"|\b(?:doubles|doubled|triples|tripled|quadruples|quadrupled|halves|halved)\s+"
    r"(?:the|its|their|our|this|that)\b"
    r"|\borders?\s+of\s+magnitude\b"
    rf"|\b{_NUMBER_WORD}[\s\-]?fold\b|\b(?:many|manifold)fold\b"
    rf"|\b{_NUMBER_WORD}\s+(?:in|out\s+of)\s+(?:every\s+)?(?:a\s+)?{_NUMBER_WORD}\b"
    r"|(?<!\bon\s)(?<!\bone\s)(?<!\bother\s)(?<!\brandom\s)(?<!\bfirst\s)(?<!\bsecond\s)"
    r"(?<!\beach\s)(?<!\bthe\s)\bhalf\s+(?:of\s+)?(?:the|its|their|our|all|these|those)\b"
    r"|\b(?:a|one|two|three)\s+(?:thirds?|quarters?|fifths?)\s+of\s+"
    r"(?:the|its|their|our|all|these|those|it|them)\b",
    re.IGNORECASE)


def word_numbers(text: str) -> list[Token]:
    """Measured numbers written in words (see :data:`_WORD_NUMBER`)."""
    return [Token(m.group(0), m.start(), m.end()) for m in _WORD_NUMBER.finditer(text)]
