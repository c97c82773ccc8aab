"""Which nodes of a page's doctree a reader sees, and their text: the subtrees the scan skips
(code, literals, targets, citations, autodoc, generated text), raw HTML read as its text and
shown attributes, the "Quoted ..." and "Record ..." boxes and the table columns of ours in a
Quoted box, code cells and their outputs (hidden inputs), the source line of a node (a table
row's too), and the (text, mode) pieces of a text unit."""

from __future__ import annotations

import re

from docutils import nodes

#: Class of the span the pin role renders; such spans are pinned, not bare.
PIN_CLASS = "pin"
#: The attribute only the ``{pin}`` role sets on its span: a span given the class by other
#: means (a reST ``.. role::`` with ``:class: pin``) is not a pin, and its text is scanned.
PIN_MARK = "se_pin"


def pin_node(rawtext: str, text: str, classes=()) -> nodes.inline:
    """The span of a ``{pin}`` quote (see :data:`PIN_MARK`)."""
    node = nodes.inline(rawtext, text, classes=[PIN_CLASS, *classes])
    node[PIN_MARK] = True
    return node


def _is_pin(node) -> bool:
    return (isinstance(node, nodes.inline) and PIN_CLASS in node.get("classes", [])
            and bool(node.get(PIN_MARK)))


CHECK, MATH, PIN, SKIP = "check", "math", "pin", "skip"

#: Nodes whose whole subtree a reader does not see as prose (or that is generated later).
_SKIP_TYPES = (
    nodes.literal, nodes.literal_block, nodes.comment,
    nodes.target, nodes.citation_reference, nodes.footnote_reference,
    nodes.label, nodes.substitution_definition, nodes.system_message, nodes.docinfo,
    nodes.doctest_block,
)
#: Roles that render as a literal but mark up prose (a key, a sample, a file name, a GUI
#: label ...): their text is read like the prose around it.
_PROSE_LITERAL_ROLES = {"kbd", "samp", "file", "guilabel", "menuselection", "command",
                        "program", "option", "envvar", "mimetype", "makevar", "regexp", "dfn",
                        "manpage", "newsgroup"}
#: Suffixes of files a ``literalinclude`` shows as code, not as results.
_CODE_SUFFIXES = {".py", ".pyi", ".sh", ".bash", ".toml", ".cfg", ".ini", ".yml", ".yaml",
                  ".js", ".css", ".tex", ".bib", ".c", ".h", ".cpp", ".rs", ".go", ".r", ".jl",
                  ".ipynb", ".rst", ".in", ".lock"}
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


def _read_as_prose(node) -> bool:
    """A literal a reader reads as prose: a prose role's literal (``{kbd}``, ``{samp}``,
    ``{file}`` ...), a parsed literal block (its text is marked up), or a ``literalinclude``
    of a file that is not code (a results file)."""
    if isinstance(node, nodes.literal):
        return bool(set(node.get("classes", [])) & _PROSE_LITERAL_ROLES
                    or node.get("role") in _PROSE_LITERAL_ROLES)
    if isinstance(node, nodes.literal_block):
        if any(isinstance(c, nodes.Element) for c in node.children) or (
                node.rawsource and node.rawsource != node.astext()):
            return True    # parsed-literal: Sphinx's own test (it does not highlight these)
        included = node.get("source")
        if included:
            from pathlib import PurePath

            return PurePath(str(included)).suffix.lower() not in _CODE_SUFFIXES
    return False


def _skip_subtree(node) -> bool:
    if isinstance(node, _SKIP_TYPES) and not _read_as_prose(node):
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
        text = node.astext().strip().rstrip("/")
        uri = str(node["refuri"]).rstrip("/")
        if text and text in (uri, uri.split("://", 1)[-1], uri.removeprefix("mailto:")):
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
    return any(_is_pin(n) for n in node.findall(nodes.inline))


def _mark_our_columns(box) -> None:
    """In a Quoted box's table, a column holding one of our pins, or headed by words that
    name us ("ours", "this page": :data:`.boxes.OURS`), is ours: its numbers are not another
    work's (they must be pinned or declared like any other)."""
    from .boxes import OURS

    for tgroup in box.findall(nodes.tgroup):
        rows = [r for part in tgroup.children if isinstance(part, (nodes.thead, nodes.tbody))
                for r in part.children if isinstance(r, nodes.row)]
        ours = set()
        for row in rows:
            for i, entry in enumerate(row.children):
                if _has_pin(entry) or (isinstance(row.parent, nodes.thead)
                                       and OURS.search(entry.astext())):
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


def _segments(node, mode: str, out: list):
    """Collect (text, mode) pieces of a text unit in document order."""
    for child in node.children:
        if isinstance(child, nodes.Text):
            out.append((child.astext(), mode))   # (reST keeps escapes as NUL in str())
        elif _is_html(child):
            out.append((_html_text(child.astext()), mode))
        elif _skip_subtree(child):
            out.append((child.astext(), SKIP))
        elif _is_pin(child):
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
