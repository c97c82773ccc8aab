"""What a "Record ..." and a "Quoted ..." box may hold, number by number.

A **Record** box holds what one run of one machine measured of itself: times, memory, speeds
and their ratios, counts (of tests, pins, pages, cores), dates and times of day, commit hashes,
the machine's description. A measurement of the model or the data (an ECE, an AUROC, a fitted
temperature, a coverage) is a result: it is computed and pinned on a page with code, never
recorded. :func:`record_problem` says why a number of a Record box is a result:

* a number with a fractional part or a percent sign (``0.70``, ``4.904``, ``30%``) is a result
  unless a unit of the run follows it, or the list or range it closes (``21.2, 15.1, 16.5 s``,
  ``58.9 to 59.9 s``): a unit of time, memory or rate (:data:`RUN_UNITS`), ``cores``, or a
  ratio of runs (``1.9 times``, ``4.44x``);
* any number in a clause that names a result (:data:`RESULT_WORDS`: "an ECE of 3", "AUROC
  0.87 times ..."), or a whole number that counts results ("2013 correct answers"), is a result
  unless a unit of time, memory or rate follows it;
* a date, a time of day (``14:00``), a year or a label (Episode 5, Table 2) is neither.

A **Quoted** box holds another work's numbers. Ours appear in it only in a table column that
holds a pin (checked like any pin); a number in a sentence of the box that speaks of us
(:data:`OURS`: "we", "our", "this page", "here" ...) is refused by :func:`ours_problem`, unless
it is a label or a year: our numbers are pinned in our column, or stated outside the box.
"""

from __future__ import annotations

import re

from .settings import _is_label
from .tokenizer import Token

#: A number as it may stand in a list or a range that a unit closes.
_NUM = r"[+\-\u2212]?\d[\d,]*(?:\.\d+)?%?"
_JOIN = r"(?:\s*(?:,|\band\b|\bor\b|\bto\b|\bagainst\b|-|\u2013|/)\s*|\s+)"
#: Units of a run of the machine: time, memory, rate (anything per second), and cores.
RUN_UNITS = (r"(?:ms|µs|μs|us|ns|s|secs?|seconds?|mins?|minutes?|h|hrs?|hours?|days?|"
             r"[KMGT]i?B|kB|bytes?|[\w-]+/s|per\s+second|cores?|threads?)(?![\w/])")
_RATIO = r"(?:times\b|[x\u00d7](?![\w]))"
_RUN_UNIT_AFTER = re.compile(rf"(?:{_JOIN}{_NUM})*\s*{RUN_UNITS}")
_RATIO_AFTER = re.compile(rf"(?:{_JOIN}{_NUM})*\s*{_RATIO}")
_GLUED_RUN_UNIT = re.compile(rf"\d{RUN_UNITS}\Z")
_WHOLE = re.compile(r"[+\-\u2212]?(?:\d{1,3}(?:,\d{3})+|\d+)")
#: Names of results, measurements of the model or the data: a number in their clause is one.
RESULT_WORDS = re.compile(
    r"\b(?:ECEs?|AU(?:RO|PR)?Cs?|AURCs?|accurac(?:y|ies)|coverages?|temperatures?|Brier|NLL|"
    r"log[- ]?loss|perplexit(?:y|ies)|calibration\s+errors?|set\s+sizes?|p[- ]?values?|"
    r"t[- ]?statistics?|correlations?|tau|precision|recall|F1|likelihoods?|quoted|computed|"
    r"pinned\s+values?)\b", re.IGNORECASE)
#: Words after a whole number that make it a count of results, not of the run's things.
_COUNTS_RESULTS = re.compile(
    r"\s+(?:\w+\s+)?(?:correct|incorrect|wrong|right|covered|misclassified|abstained)\b",
    re.IGNORECASE)
_CLAUSE_END = re.compile(r"[;:()\[\]]|[.!?](?=\s|\Z)|,\s")
_TIME_OF_DAY = re.compile(r"\b\d{1,2}:\d{2}\b")


def _clause_start(text: str, start: int) -> int:
    ends = [m.end() for m in _CLAUSE_END.finditer(text, 0, start)]
    return ends[-1] if ends else 0


def record_problem(text: str, tok: Token) -> str:
    """Why the number ``tok`` of a Record box's ``text`` is a result, not a record of the run,
    or "" (see the module docstring)."""
    if _is_label(text, tok) or any(m.start() <= tok.start < m.end()
                                   for m in _TIME_OF_DAY.finditer(text)):
        return ""
    unit = bool(_GLUED_RUN_UNIT.search(tok.text) or _RUN_UNIT_AFTER.match(text, tok.end))
    if unit:
        return ""
    lo = _clause_start(text, tok.start)
    names = list(RESULT_WORDS.finditer(text, lo, tok.start))
    named = names[-1] if names else None      # the result nearest before the number
    if named:
        return (f"{tok.text} stands in a clause that names a result ({named.group(0)!r}): a "
                "measurement of the model or the data is pinned on a page that computes it, "
                "not recorded")
    whole = _WHOLE.fullmatch(tok.text) is not None
    if whole and _COUNTS_RESULTS.match(text, tok.end):
        return (f"{tok.text} counts results: a measurement of the model or the data is pinned "
                "on a page that computes it, not recorded")
    if not whole and not (tok.text[-1:] in "x\u00d7" or _RATIO_AFTER.match(text, tok.end)):
        return (f"{tok.text} carries no unit of the run (a time, memory, a rate, cores, or a "
                "ratio of them, 'times'): a Record box holds what a run of the machine "
                "measured of itself; a result of the model or the data is pinned on a page "
                "that computes it")
    return ""


#: Words by which a sentence speaks of us (the page, the book, its build), not of the source.
OURS = re.compile(
    r"\b(?:we|our|ours|ourselves|us|here|this\s+(?:page|book|lecture|episode|course|build|"
    r"notebook|chapter|run|model|section))\b", re.IGNORECASE)


def ours_problem(sentence: str, tok: Token) -> str:
    """Why the number ``tok`` of a Quoted box's ``sentence`` is ours, not the source's, or ""
    (see the module docstring). A label or a year passes."""
    m = OURS.search(sentence)
    if m is None or _is_label(sentence, tok):
        return ""
    return (f"a sentence of a Quoted box that speaks of us ({m.group(0)!r}) holds {tok.text}: "
            "in a Quoted box only a table column holding a {pin} is ours; pin the number there, "
            "or state it outside the box")
