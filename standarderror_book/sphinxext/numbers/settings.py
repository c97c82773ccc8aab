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
    r"(?P<list>(?:\d+(?:\.\d+)*[a-z]?\s*(?:and|or|to|,|&|/|-|\u2013|\u2014)\s*)*)$",
    re.IGNORECASE)
#: The form of a label: a whole number, or a dotted one (``3.2``), with an optional letter.
_LABEL_FORM = re.compile(r"[1-9]\d*(?:\.\d+)*[a-z]?|0")
_LIST_GOES_ON = re.compile(r"\s*(?:,|and\b|or\b|&)\s*\d")
#: What may stand before a year: an opening bracket, a capitalised word (a venue, a month, a
#: name: ``ICML 2017``, ``March 2024``, ``et al. 2025``) or a word that introduces a time.
_YEAR_BEFORE = re.compile(r"(?:\(|\b[A-Z][\w.]*\.?|\b(?:in|since|until|year|years))\s*\Z")
#: What may follow a year: the end, punctuation, a bracket, or a capitalised word.
_YEAR_AFTER = re.compile(r"[a-z]?(?:\s*\Z|\s*[)\].,;:]|\s+[A-Z(])")


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
    """A date, a year, or a number that follows a label word (``Episode 5``, ``rows 3 and 9``,
    ``Table 1``, ``Tables 3-5``).

    A year is a whole number 1900-2099 after an opening bracket, a capitalised word or a word
    that introduces a time, and before the end, punctuation or a capitalised word ("ICML 2017",
    "Lamb et al. (2025)"; not "2013 correct answers"). A label has the form of one (a whole
    or dotted number: not ``0.012`` nor ``41%``); a dash joins labels only unspaced, and a
    label after a comma is one only where the list goes on ("rows 3, 9 and 41"; not "Table 2,
    41 questions").
    """
    if any(m.start() <= tok.start < m.end() for m in _ISO_DATE.finditer(phrase)):
        return True
    if re.fullmatch(r"(19|20)\d\d", tok.text):
        return bool(_YEAR_BEFORE.search(phrase[:tok.start])
                    and _YEAR_AFTER.match(phrase, tok.end))
    m = _LABEL_BEFORE.search(phrase[:tok.start])
    if m is None or not _LABEL_FORM.fullmatch(tok.text):
        return False
    joins = re.findall(r"\s*(?:and|or|to|,|&|/|-|\u2013|\u2014)\s*", m.group("list"),
                       re.IGNORECASE)
    if any(j.strip() in ("-", "\u2013", "\u2014") and j != j.strip() for j in joins):
        return False     # a spaced dash is punctuation: "Table 3 - 41"
    if joins and joins[-1].strip() == ",":
        return _LIST_GOES_ON.match(phrase, tok.end) is not None
    return True


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


#: Keyword arguments that set how a figure looks, not what the page computes: their literals
#: declare nothing (``alpha=0.5`` in a plot call does not make "an accuracy of about 0.5" a
#: setting).
STYLE_KEYWORDS = frozenset("""
alpha lw linewidth linewidths ls linestyle fontsize labelsize titlesize size s markersize ms
markeredgewidth mew zorder figsize dpi pad labelpad rotation capsize capthick elinewidth
shrink fraction aspect hspace wspace bbox_to_anchor ncol ncols handlelength borderpad
columnspacing framealpha headwidth headlength width height rwidth
""".split())
#: Drawing calls (matplotlib's methods and functions): their style keywords are
#: :data:`STYLE_KEYWORDS`.
DRAWING_CALLS = frozenset("""
plot scatter hist hist2d bar barh fill_between fill_betweenx axhline axvline axhspan axvspan
hlines vlines errorbar step stairs imshow pcolormesh contour contourf legend text annotate
figure subplots subplot add_subplot colorbar grid boxplot violinplot stem pie tick_params
set_title suptitle set_xlabel set_ylabel xlabel ylabel title savefig tight_layout
subplots_adjust arrow quiver ecdf semilogx semilogy loglog
""".split())


def _style_constants(node):
    """The numeric constants under the style keywords of a drawing call (empty otherwise)."""
    import ast

    if not isinstance(node, ast.Call):
        return []
    f = node.func
    name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
    if name not in DRAWING_CALLS:
        return []
    return [sub for kw in node.keywords if kw.arg in STYLE_KEYWORDS
            for sub in ast.walk(kw.value) if isinstance(sub, ast.Constant)]


#: Calls that show what they are given as prose: Markdown, HTML, print, a table ...
DISPLAY_CALLS = frozenset({"Markdown", "HTML", "Latex", "Math", "SVG", "display", "print",
                           "DataFrame", "Series", "write", "to_markdown", "to_html", "table"})


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
    for source in sources:
        lines = [("pass" if ln.lstrip().startswith(("%", "!")) else ln)
                 for ln in source.splitlines()]
        try:
            tree = ast.parse("\n".join(lines))
        except SyntaxError:
            continue
        style = {id(sub) for node in ast.walk(tree) for sub in _style_constants(node)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) \
                    and not isinstance(node.value, bool):
                if id(node) not in style:
                    literals.add(abs(float(node.value)))
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                typed.update(_typed_form(t.text) for t in tokens(node.value))
            elif isinstance(node, ast.Call):
                f = node.func
                name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
                if name in DISPLAY_CALLS:
                    for sub in ast.walk(node):
                        if isinstance(sub, ast.Constant) and isinstance(sub.value, (int, float)) \
                                and not isinstance(sub.value, bool):
                            typed.add(_typed_form(repr(abs(sub.value))))
    return literals, typed


_WRAPPERS = frozenset({"float", "int", "round", "abs", "float64", "float32", "int64"})


def parse_code(source: str):
    """The syntax tree of a code cell (IPython's magic and shell lines read as ``pass``), or
    None when it is not Python."""
    import ast

    lines = [("pass" if ln.lstrip().startswith(("%", "!")) else ln)
             for ln in source.splitlines()]
    try:
        return ast.parse("\n".join(lines))
    except SyntaxError:
        return None


def bindings(trees) -> dict:
    """Every binding of a name in the page's code: name -> the expressions bound to it, None
    for a binding that binds no expression of its own (a loop, an argument, an import, an
    augmented assignment, the unpacking of something computed)."""
    import ast

    bound: dict[str, list] = {}
    handled: set[int] = set()      # the Name targets of assignments, read with their values
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    handled.update(id(n) for n in ast.walk(target) if isinstance(n, ast.Name))
                    if isinstance(target, ast.Name):
                        bound.setdefault(target.id, []).append(node.value)
                    elif isinstance(target, (ast.Tuple, ast.List)):
                        values = node.value.elts if isinstance(
                            node.value, (ast.Tuple, ast.List)) and len(node.value.elts) == len(
                            target.elts) else [None] * len(target.elts)
                        for t, v in zip(target.elts, values):
                            for n in ast.walk(t):
                                if isinstance(n, ast.Name):
                                    bound.setdefault(n.id, []).append(v if n is t else None)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)) \
                    and id(node) not in handled:
                bound.setdefault(node.id, []).append(None)   # any other binding
            elif isinstance(node, ast.arg):
                bound.setdefault(node.arg, []).append(None)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                for alias in node.names:
                    bound.setdefault((alias.asname or alias.name).split(".")[0], []).append(None)
    return bound


def literal_pins(sources: list[str]) -> dict[str, float]:
    """The pins of a page's code whose value is typed, not computed: name -> value.

    A value is typed when it is a numeric literal (``pin("acc", 0.5466)``, ``pin(acc=-1)``), a
    literal passed through a conversion (``float(0.5466)``, ``round(0.5466, 4)``), or a name
    that the page's code binds only to such values (``acc = 0.5466`` and no other binding of
    ``acc``: no loop, argument, augmented assignment or unpacking of something computed; see
    :func:`bindings`).
    """
    import ast

    trees = [t for t in map(parse_code, sources) if t is not None]

    def typed(node):
        if node is None:
            return None
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            inner = typed(node.operand)
            return None if inner is None else (-inner if isinstance(node.op, ast.USub) else inner)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) \
                and not isinstance(node.value, bool):
            return float(node.value)
        if isinstance(node, ast.Call) and node.args and not node.keywords:
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
            if name in _WRAPPERS and all(typed(a) is not None for a in node.args):
                return typed(node.args[0])
        return None

    bound = {name: [typed(v) for v in values] for name, values in bindings(trees).items()}

    def value_of(node):
        v = typed(node)
        if v is None and isinstance(node, ast.Name):
            values = bound.get(node.id, [])
            if values and all(x is not None for x in values) and len(set(values)) == 1:
                v = values[0]
        return v

    out: dict[str, float] = {}
    for tree in trees:
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            f = node.func
            if (f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")) != "pin":
                continue
            pairs = [(kw.arg, kw.value) for kw in node.keywords if kw.arg]
            if len(node.args) == 2 and isinstance(node.args[0], ast.Constant) \
                    and isinstance(node.args[0].value, str):
                pairs.append((node.args[0].value, node.args[1]))
            for name, expr in pairs:
                v = value_of(expr)
                if v is not None:
                    out[name] = v
    return out


def literal_pin_problems(sources: list[str], phrases: list[str]) -> list[str]:
    """A pin whose value the code typed (:func:`literal_pins`) passes a typed number off as a
    measurement; it is refused unless one of the page's setting phrases declares that number."""
    declared = {_number_value(t.text) for p in phrases for t in tokens(p)}
    return [f"{name!r} pins {value:g}, a number typed in the code, not computed by it; a "
            "number the page chose is a setting: declare its phrase under `settings:` and "
            "write it in the prose without {pin}"
            for name, value in literal_pins(sources).items() if abs(value) not in declared]


# --------------------------------------------------------------------------------------
# Settings inferred from the page's code
# --------------------------------------------------------------------------------------

#: Label for a number of the prose that is a label (``Table 3``, ``Episode 2``, a year, a
#: date): the phrase a finding names when no declared or inferred phrase covers it.
LABEL = "(label)"


def is_label(text: str, tok: Token) -> bool:
    """Whether the number ``tok`` of ``text`` is a label: a date, a year where a year stands,
    or a whole or dotted number after a label word, case-insensitively (``Table 3``,
    ``episode 2``, ``rows 3 and 9``); see :func:`_is_label`."""
    return _is_label(text, tok)


def _number_forms(value: float, typed: str) -> set[str]:
    """How the prose may write a literal of the code: as typed, and for a whole value without
    its ``.0`` and with thousands commas (``10000`` -> ``10000``, ``10,000``)."""
    forms = {typed}
    if float(value).is_integer():
        whole = int(value)
        forms |= {str(whole), f"{whole:,}"}
    else:
        forms.add(repr(float(value)))
    return {f for f in forms if f}


def _name_words(name: str) -> set[str]:
    """The words of a name the prose may use beside its value: the name, and its parts of
    three letters or more (``n_bins`` -> ``n_bins``, ``bins``)."""
    words = {name}
    words |= {part for part in name.split("_") if len(part) >= 3 and part.isalpha()}
    return words


def _phrases_for(name: str, value: float, typed: str) -> set[str]:
    """The phrases that state ``name`` set to ``value``: ``seed 0``, ``seed = 0``,
    ``15 bins``, ``bins = 15``, and those that start with the word capitalised as a sentence
    starts (``Seed 0``); a name of one or two letters only as written (``T = 2``)."""
    out = set()
    for word in _name_words(name):
        for number in _number_forms(value, typed):
            out.add(f"{word} = {number}")
            if len(word) >= 3:
                starts = {f"{word} = {number}", f"{word} {number}", f"{word}s {number}"}
                out |= starts | {f"{number} {word}", f"{number} {word}s"}
                out |= {p[0].upper() + p[1:] for p in starts if p[0].islower()}
    return out


def inferred_settings(sources: list[str]) -> list[str]:
    """The setting phrases a page's code declares by itself: for every numeric literal the
    code binds to a name (``bins = 15``, ``B, C = 8, 5``; the name bound to nothing else) or
    passes as a named argument (``seed=0``, ``alpha=0.1``; a literal in a tuple or list counts,
    each element, in nested ones too),
    the phrases that put that name beside that value in the prose (:func:`_phrases_for`).

    What this cannot declare, by construction: a number the code computes (it is no literal);
    a literal passed by position (nothing names it); a literal that sets how a figure looks
    (a drawing call's style keyword: ``alpha=0.5`` in ``plot`` declares nothing); and a
    literal written in the prose without its name ("about 0.5"). A literal bound to a name
    that is bound to anything else as well (a loop, an argument, a computed value) is none
    either.
    """
    import ast

    trees = [t for t in map(parse_code, sources) if t is not None]
    bound = bindings(trees)

    def literals_of(node) -> list[tuple[float, str]]:
        if isinstance(node, (ast.Tuple, ast.List)):      # nested ones too: ((1.0, 1.3), ...)
            parts = [literals_of(elt) for elt in node.elts]
            return [lit for part in parts for lit in part] if parts and all(parts) else []
        sign = ""
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            node, sign = node.operand, "-"
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) \
                and not isinstance(node.value, bool):
            value = -float(node.value) if sign else float(node.value)
            return [(value, sign + repr(node.value))]
        return []

    phrases: set[str] = set()
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                f = node.func
                call = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
                for kw in node.keywords:
                    if not kw.arg or (call in DRAWING_CALLS and kw.arg in STYLE_KEYWORDS):
                        continue
                    for value, typed in literals_of(kw.value):
                        phrases |= _phrases_for(kw.arg, value, typed)
            elif isinstance(node, ast.Assign) and len(node.targets) == 1:
                target = node.targets[0]
                if isinstance(target, ast.Name):
                    pairs = [(target.id, node.value)]
                elif isinstance(target, (ast.Tuple, ast.List)) and isinstance(
                        node.value, (ast.Tuple, ast.List)) and len(node.value.elts) == len(
                        target.elts):     # B, C = 8, 5
                    pairs = [(t.id, v) for t, v in zip(target.elts, node.value.elts)
                             if isinstance(t, ast.Name)]
                else:
                    pairs = []
                for name, expr in pairs:
                    found = literals_of(expr)
                    values = bound.get(name, [])
                    if found and all(v is not None and literals_of(v) == found for v in values):
                        for value, typed in found:
                            phrases |= _phrases_for(name, value, typed)
    return sorted(phrases)


#: Set by the command line's ``--redundant``: the build then scans each page a second time
#: without its declared phrases (:func:`redundant_settings`).
WANT_REDUNDANT = False


def redundant_settings(page_phrases: list[str], findings: list, without: list,
                       sources: list[str]) -> list[str]:
    """The page's declared phrases that the inference covers: every number a phrase declares
    (``findings``, the scan with it) is declared without the page's phrases too (``without``,
    the same scan with only the inferred and book-wide ones), and no pin of the code's
    literals needs it (:func:`literal_pin_problems`). A phrase that declares nothing (its
    occurrences, if any, are in maths or code) is listed too, unless the code's text holds it:
    an output may show it, and the command line executes nothing. The build also keeps a
    phrase that a figure's text needs (:func:`.codetext.drawn_problems`)."""
    def key(f):
        return (f.number, f.line, f.kind, f.context)

    after: dict = {}
    for f in without:
        after.setdefault(key(f), []).append(f)
    pinned = {abs(v) for v in literal_pins(sources).values()}
    out = []
    for phrase in page_phrases:
        mine = [f for f in findings if f.phrase == phrase]
        if any(_number_value(t.text) in pinned for t in tokens(phrase)):
            continue
        if not mine and any(_phrase_hits(source, [phrase]) for source in sources):
            continue    # an output may show it (the command line executes nothing)
        if all(any(g.cls != "bare" for g in after.get(key(f), [])) for f in mine):
            out.append(phrase)
    return out
