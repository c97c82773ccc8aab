"""Every number a reader sees is pinned or declared: the scan behind the build-time check.

After a page is read (executed and parsed), :func:`scan` walks its doctree and finds every
number token in the text a reader sees: paragraphs, headings, admonitions, list items, tables,
figure captions and image ``alt`` text. Each token is classed as

* ``pinned``: inside a ``{pin}`` quote (checked against the code by the pin role);
* ``declared``: inside an occurrence of a *setting* phrase, i.e. a number the page chose, listed
  in the page's front matter (``settings:``, a list of strings) or book-wide in the Sphinx config
  value ``se_settings``; phrases match whitespace-insensitively and case-sensitively;
* ``bare``: anything else. A bare number fails the build (see :mod:`standarderror.sphinxext`).

Not scanned: code cells and their outputs (except a figure's caption and an image's alt text),
inline code, literal blocks, display maths, raw non-HTML (raw HTML's text *is* scanned),
comments, role targets (citations, unresolved cross-references), footnote labels, autodoc
descriptions and docstrings, and the generated bibliography. Inline maths is scanned, but only
its tokens with a decimal point or 3+ digits count.

A number is digits with optional thousands commas, decimals, exponent, a leading sign (+, -,
U+2212) and a trailing ``%``, or a factor such as ``21.5x`` / ``3×``. Digits glued to a word are
not numbers: ``float32``, ``L2``, ``2D``, ``1st``, ``GPT-2``, ``SHA-256``, ``x86-64``, ``top-1``.

Command line, without executing anything (a throwaway Sphinx read with execution off; a code
cell's figure caption and alt text are rendered through a placeholder image)::

    python -m standarderror.sphinxext.numbers lectures/ep3_temperature.md [...]

lists each page's bare numbers with ``path:line`` and a per-page count (found, pinned, declared,
quoted, bare); it exits 1 when a page has a bare number. Numbers inside an admonition titled
"Quoted ..." are another work's, quoted with their source: they are counted as quoted, not
checked (DESIGN.md: external numbers are marked as quotations and are not pinned).
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


def tokens(text: str) -> list[Token]:
    """The number tokens of ``text`` (see the module docstring for what counts)."""
    out: list[Token] = []
    pos = 0
    while True:
        m = NUMBER.search(text, pos)
        if m is None:
            return out
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
        glued_before = (
            (prev and (prev.isalnum() or prev in "_."))
            or (prev in _HYPHENS and start >= 2 and text[start - 2].isalpha())
        )
        after = text[end] if end < len(text) else ""
        glued_after = bool(after) and (after.isalpha() or after == "_")
        if glued_before or glued_after:
            pos = _skip_run(text, start)
            continue
        out.append(Token(text[start:end], start, end))
        pos = end


def _skip_run(text: str, start: int) -> int:
    end = _RUN.match(text, start).end()
    return max(end, start + 1)


def is_math_checked(token: str) -> bool:
    """Inside inline maths only a decimal point or 3+ digits makes a number checked."""
    return "." in token or sum(c.isdigit() for c in token) >= 3


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
    squeezed, where = _squeeze(text)
    spans = []
    for phrase in phrases:
        p = "".join(phrase.split())
        if not p:
            continue
        i = squeezed.find(p)
        while i >= 0:
            spans.append((where[i], where[i + len(p) - 1] + 1))
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
    problems = [f"setting {p!r} contains no number; declare only phrases with numbers"
                for p in phrases if not tokens(p)]
    return phrases, problems


# ------------------------------------------------------------------------------------------
# Walking a doctree
# ------------------------------------------------------------------------------------------

CHECK, MATH, PIN, SKIP = "check", "math", "pin", "skip"

#: Nodes whose whole subtree a reader does not see as prose (or that is generated later).
_SKIP_TYPES = (
    nodes.literal, nodes.literal_block, nodes.math_block, nodes.comment,
    nodes.target, nodes.citation, nodes.citation_reference, nodes.footnote_reference,
    nodes.label, nodes.substitution_definition, nodes.system_message, nodes.docinfo,
    nodes.doctest_block,
)
_SKIP_CLASS_NAMES = {"desc", "toctree", "bibliography", "meta", "pending_xref_condition",
                     "index"}


_HTML_HIDDEN = re.compile(r"<(script|style)\b.*?</\1\s*>|<!--.*?-->", re.S | re.I)
_HTML_TAG = re.compile(r"<[^>]*>")


def _is_html(node) -> bool:
    return isinstance(node, nodes.raw) and "html" in node.get("format", "").split()


def _html_text(html: str) -> str:
    """What a reader sees of raw HTML: its text, without tags, scripts, styles or comments."""
    return _HTML_TAG.sub(" ", _HTML_HIDDEN.sub(" ", html))


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


def _is_quoted_box(node) -> bool:
    """An admonition whose title starts with "Quoted" (the seed-overlap tool skips it too)."""
    if not isinstance(node, nodes.Admonition):
        return False
    title = next((c for c in node.children if isinstance(c, nodes.title)), None)
    return title is not None and title.astext().lstrip().startswith("Quoted")


def _is_output(node) -> bool:
    return isinstance(node, nodes.container) and node.get("nb_element") in (
        "cell_code_output", "mime_bundle")


@dataclass
class Finding:
    """One number token, where it is and how it is accounted for."""

    number: str
    line: int | None
    kind: str  # "prose", "caption", "alt" or "math"
    cls: str   # "pinned", "declared", "quoted" or "bare"
    context: str

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
            out.append((str(child), mode))
        elif _is_html(child):
            out.append((_html_text(child.astext()), mode))
        elif _skip_subtree(child):
            out.append((child.astext(), SKIP))
        elif isinstance(child, nodes.inline) and PIN_CLASS in child.get("classes", []):
            out.append((child.astext(), PIN))
        elif isinstance(child, nodes.math):
            out.append((child.astext(), MATH if mode == CHECK else mode))
        elif isinstance(child, nodes.Element):
            _segments(child, mode, out)


def _scan_unit(unit, kind, phrases, findings):
    pieces: list = []
    _segments(unit, CHECK, pieces)
    _scan_pieces(pieces, _line_of(unit), kind, phrases, findings)


def _scan_pieces(pieces, line, kind, phrases, findings):
    text = "".join(t for t, _ in pieces)
    if not any(c.isdigit() for c in text):
        return
    bounds, pos = [], 0
    for t, mode in pieces:
        bounds.append((pos, pos + len(t), mode))
        pos += len(t)
    for m in _ADDRESS.finditer(text):   # addresses are skipped wherever they appear
        bounds.insert(0, (m.start(), m.end(), SKIP))
    spans = phrase_spans(text, phrases)
    for tok in tokens(text):
        mode = next((md for a, b, md in bounds if a <= tok.start < b), CHECK)
        if mode == SKIP:
            continue
        if mode == MATH and not is_math_checked(tok.text):
            continue
        if mode == PIN:
            cls = "pinned"
        elif any(a <= tok.start and tok.end <= b for a, b in spans):
            cls = "declared"
        else:
            cls = "bare"
        where = None if line is None else line + text.count("\n", 0, tok.start)
        findings.append(Finding(tok.text, where, "math" if mode == MATH else kind, cls,
                                _context(text, tok.start, tok.end)))


def scan(doctree, phrases: list[str]) -> list[Finding]:
    """Every number token a reader sees on the page, classed pinned / declared / bare."""
    findings: list[Finding] = []

    def visit(node, in_output: bool):
        for child in node.children:
            if not isinstance(child, nodes.Element) or _skip_subtree(child):
                continue
            if isinstance(child, nodes.image) and child.get("alt"):
                _scan_pieces([(child["alt"], CHECK)], _line_of(child), "alt", phrases, findings)
            if _is_html(child):  # raw HTML in the page's source: its text is prose
                if not in_output:
                    _scan_pieces([(_html_text(child.astext()), CHECK)], _line_of(child),
                                 "prose", phrases, findings)
                continue
            if _is_quoted_box(child):
                # a box titled "Quoted ...": another work's numbers, quoted with their source
                # (DESIGN: external numbers are marked as quotations and are not pinned)
                first = len(findings)
                visit(child, in_output)
                for f in findings[first:]:
                    if f.cls != "pinned":
                        f.cls = "quoted"
                continue
            if in_output or _is_output(child):
                # code output: only a figure's caption/legend and an image's alt are prose
                if isinstance(child, (nodes.caption, nodes.legend)):
                    _scan_text_units(child, "caption")
                else:
                    visit(child, True)
                continue
            if isinstance(child, nodes.TextElement):
                kind = "caption" if isinstance(child, (nodes.caption, nodes.legend)) else "prose"
                _scan_text_units(child, kind)
            else:
                visit(child, False)

    def _scan_text_units(node, kind):
        if isinstance(node, nodes.TextElement):
            _scan_unit(node, kind, phrases, findings)
            for img in node.findall(nodes.image):
                if img.get("alt"):
                    _scan_pieces([(img["alt"], CHECK)], _line_of(img), "alt", phrases, findings)
        else:
            for child in node.children:
                if isinstance(child, nodes.Element) and not _skip_subtree(child):
                    _scan_text_units(child, kind)

    visit(doctree, False)
    return findings


def counts(findings: list[Finding]) -> dict:
    c = {"found": len(findings), "pinned": 0, "declared": 0, "quoted": 0, "bare": 0}
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
    what = {"caption": "in a figure caption", "alt": "in alt text", "math": "in inline maths",
            "prose": ""}[f.kind]
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
                                     "unused": rec.get("unused_settings", [])}
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
    total = {"found": 0, "pinned": 0, "declared": 0, "quoted": 0, "bare": 0}
    failed = False
    for page in pages:
        res = results[page]
        rel = page.resolve().relative_to(root)
        findings = [Finding(**f) for f in res["findings"]]
        for problem in res["problems"]:
            print(f"{rel}: {problem}")
            failed = True
        for f in findings:
            if f.cls == "bare" or args.all:
                tag = "" if f.cls == "bare" else f" [{f.cls}]"
                print(f"{place(str(rel), f.line)}: {f.number}{tag} ({f.kind}) \"{f.context}\"")
        for phrase in res["unused"]:
            print(f"{rel}: note: setting {phrase!r} occurs nowhere in the page's checked text")
        c = counts(findings)
        for k in total:
            total[k] += c[k]
        failed |= c["bare"] > 0
        print(f"{rel}: {c['found']} numbers: {c['pinned']} pinned, {c['declared']} declared, "
              f"{c['quoted']} quoted, {c['bare']} bare")
    if len(pages) > 1:
        print(f"total: {total['found']} numbers: {total['pinned']} pinned, "
              f"{total['declared']} declared, {total['quoted']} quoted, {total['bare']} bare")
    sys.stdout.flush()
    print(f"({time.time() - t0:.1f} s, nothing executed)", file=sys.stderr)
    return 1 if failed else 0


def _book_root(page: Path) -> Path:
    for parent in page.resolve().parents:
        if (parent / "_config.yml").is_file():
            return parent
    raise SystemExit(f"no _config.yml above {page}")


if __name__ == "__main__":
    raise SystemExit(main())
