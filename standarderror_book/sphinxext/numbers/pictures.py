"""Pictures the build did not draw. A number drawn into a picture is read by no scan, so a
picture on a page is either drawn by this build's execution or quoted from a source:

* drawn: an image of a code output that MyST-NB wrote from the output's own data (it names
  the file by the SHA-256 of its bytes), from code that neither loads a picture file nor types
  the picture's bytes (:func:`code_picture_problems`);
* quoted: an image in a ``{figure}`` whose caption cites its source (``{cite}``), as a
  "Quoted ..." box does: the picture is another work's, its numbers are that work's.

Anything else is refused (:func:`picture_problems`): a ``{figure}`` without a cited source, an
``{image}`` or a Markdown image of a committed file, an image a Markdown or HTML output points
to, and a picture raw HTML embeds (``<img>``, ``<object>``, ``<embed>``, ``<iframe>``,
``<picture>``, ``<video>``; in a code output, one whose source is not inline ``data:``).
"""

from __future__ import annotations

import re

from docutils import nodes

from .doctree import _cites, _is_html, _is_output, _line_of, _skip_subtree

#: The name MyST-NB gives the file of an image output: the SHA-256 of its bytes.
_OUTPUT_FILE = re.compile(r"(?:^|[/\\])[0-9a-f]{64}\.[A-Za-z0-9]+\Z")
_HTML_PICTURE = re.compile(r"<(img|object|embed|iframe|picture|video|source|image)\b([^>]*)>",
                           re.IGNORECASE)
_HTML_SRC = re.compile(r"""\b(?:src|data|srcset|href|xlink:href)\s*=\s*["']?\s*([^"'\s>]*)""",
                       re.IGNORECASE)
#: File names of pictures, as the code may name them.
PICTURE_FILE = re.compile(r"\.(?:png|jpe?g|gif|svg|webp|bmp|tiff?|pdf|eps)\Z", re.IGNORECASE)
#: Calls that write a picture (the file they name is drawn, not shown).
_WRITERS = frozenset({"savefig", "print_figure", "imsave", "save", "write_image"})
#: Display calls of a picture's file or bytes.
_PICTURE_CALLS = frozenset({"Image", "SVG"})

_WHY_STATIC = ("a picture the build did not draw: numbers drawn in it are checked by nothing. "
               "Draw it in a code cell, or show another work's picture in a {figure} whose "
               "caption cites its source ({cite})")


def _in_output(node) -> bool:
    while node is not None:
        if _is_output(node):
            return True
        node = node.parent
    return False


def _skipped(node) -> bool:
    node = node.parent
    while node is not None:
        if _skip_subtree(node):
            return True
        node = node.parent
    return False


def _quoted_figure(image) -> bool:
    figure = image.parent
    while figure is not None and not isinstance(figure, nodes.figure):
        figure = figure.parent
    if figure is None:
        return False
    return any(_cites(c) for c in figure.children if isinstance(c, (nodes.caption, nodes.legend)))


def picture_problems(doctree) -> list[tuple[str, int | None, str]]:
    """(what, line, why) of every picture of the page that the build did not draw and that is
    not quoted from a cited source (see the module docstring)."""
    out = []
    for image in doctree.findall(nodes.image):
        if _skipped(image):
            continue
        uri = str(image.get("uri", ""))
        drawn = _in_output(image) and _OUTPUT_FILE.search(uri) is not None
        if not drawn and not _quoted_figure(image):
            out.append((uri, _line_of(image), _WHY_STATIC))
    for raw in doctree.findall(nodes.raw):
        if not _is_html(raw) or _skipped(raw):
            continue
        in_output = _in_output(raw)
        for m in _HTML_PICTURE.finditer(raw.astext()):
            sources = [s for s in _HTML_SRC.findall(m.group(2)) if s]
            if in_output and sources and all(s.startswith("data:") for s in sources):
                continue
            out.append((f"<{m.group(1)}>", _line_of(raw), _WHY_STATIC))
    return out


def code_picture_problems(sources: list[str]) -> list[str]:
    """Why the page's code shows a picture it did not draw: a string literal naming a picture
    file anywhere but in a call that writes one (``savefig``), or an ``Image``/``SVG`` display
    call given a literal (a file, an address, or the picture's bytes typed in the code)."""
    import ast

    out = []
    for source in sources:
        lines = [("pass" if ln.lstrip().startswith(("%", "!")) else ln)
                 for ln in source.splitlines()]
        try:
            tree = ast.parse("\n".join(lines))
        except SyntaxError:
            continue
        written: set[int] = set()
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
            if name in _WRITERS:
                written.update(id(n) for a in node.args[:1] for n in ast.walk(a))
                written.update(id(n) for k in node.keywords if k.arg in ("fname", "path", "file")
                               for n in ast.walk(k.value))
            elif name in _PICTURE_CALLS:
                typed = [n for n in ast.walk(node) if isinstance(n, ast.Constant)
                         and isinstance(n.value, (str, bytes))]
                if typed:
                    out.append(f"{name}(...) shows a picture from a literal of the code (a file, "
                               "an address or its bytes): " + _WHY_STATIC)
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                    and id(node) not in written and PICTURE_FILE.search(node.value.strip()):
                out.append(f"the code names the picture file {node.value!r}: " + _WHY_STATIC)
    return list(dict.fromkeys(out))
