"""Fixes to the built site that are not about numbers: the executed notebook offered as a
download, inline scripts emitted twice, and links to the printed PDFs only where a PDF was
printed.

**The PDFs.** ``bash scripts/pdf.sh`` prints the built site into ``pdf/`` of the site, after the
build. A page links a PDF only where the file exists: the build writes no ``href`` into ``pdf/``
(a link the page's source writes there keeps its target in ``data-se-href`` and its file in
``data-se-pdf``), removes the PDFs of an earlier build, and writes ``_static/pdfs.js``, the list
of printed PDFs, empty; the PDF step rewrites that list with what it printed
(:func:`write_pdf_manifest`), and ``book/_static/pdf-links.js`` turns a placeholder into a link,
and adds the download menu's entries, for the files the list names only.
"""

from __future__ import annotations

import json
import posixpath
import re
from pathlib import Path

#: The site's folder of printed PDFs, and the script that lists them (in ``_static/``).
PDF_DIR = "pdf"
PDF_MANIFEST = "pdfs.js"
_MANIFEST_HEAD = ("// The PDFs printed into this site's pdf/ folder (paths inside it): written "
                  "empty by the build,\n// with the printed files by bash scripts/pdf.sh "
                  "(standarderror_book.sphinxext.site.write_pdf_manifest).\n")
_MANIFEST_LINE = re.compile(r"^window\.sePdfs = (\[.*\]);$", re.M)


def offer_ipynb(app, pagename, templatename, context, doctree):
    """Offer every executed page as an ``.ipynb`` download (sphinx-book-theme's download menu):
    myst-nb's executed notebook, its code cells and outputs unchanged, its Markdown rewritten
    for a plain notebook renderer, with a first cell on how to install and run it
    (:mod:`standarderror_book.sphinxext.download`).

    The theme offers a notebook in ``_sources`` only when a launch service (Binder,
    JupyterHub, ...) is configured; this book runs offline and has none, so it is written
    here, before the theme builds its buttons (priority 400 < the theme's 500).
    """
    import nbformat

    from standarderror_book.sphinxext import download

    executed = Path(app.outdir).parent / "jupyter_execute" / f"{pagename}.ipynb"
    if app.builder.format != "html" or not executed.is_file():
        return
    target = Path(app.outdir) / "_sources" / f"{pagename}.ipynb"
    target.parent.mkdir(parents=True, exist_ok=True)
    title = app.env.titles[pagename].astext() if pagename in app.env.titles else pagename
    repository = (app.config.html_theme_options or {}).get("repository_url") or \
        "the book's Git repository"
    first = download.first_cell(app.config.project, title, repository)
    notebook = download.plain_notebook(nbformat.read(executed, as_version=4),
                                       download.sphinx_lookup(app, pagename), first)
    nbformat.write(notebook, target)
    context["ipynb_source"] = f"{pagename}.ipynb"


def dedupe_scripts(app, pagename, templatename, context, doctree):
    """Drop repeated inline scripts from the page head.

    With Sphinx 7.4, sphinx-thebe's inline ``const THEBE_JS_URL = ...`` script (and
    sphinx-togglebutton's selector) are emitted twice, so every page logs "Uncaught SyntaxError:
    Identifier 'THEBE_JS_URL' has already been declared" in the reader's console. Keep the first
    of each (same file or same inline body, same attributes).
    """
    scripts = context.get("script_files")
    if not scripts:
        return
    seen, unique = set(), []
    for js in scripts:
        attributes = getattr(js, "attributes", {}) or {}
        key = (getattr(js, "filename", str(js)) or "", tuple(sorted(attributes.items())))
        if key not in seen:
            seen.add(key)
            unique.append(js)
    context["script_files"] = unique




def pdf_manifest_text(pdfs: list[str]) -> str:
    """The text of ``_static/pdfs.js`` naming ``pdfs`` (paths inside ``pdf/``)."""
    return _MANIFEST_HEAD + f"window.sePdfs = {json.dumps(sorted(pdfs))};\n"


def read_pdf_manifest(html_dir) -> list[str]:
    """The PDFs a built site's ``_static/pdfs.js`` names (paths inside ``pdf/``)."""
    text = (Path(html_dir) / "_static" / PDF_MANIFEST).read_text(encoding="utf-8")
    m = _MANIFEST_LINE.search(text)
    if m is None:
        raise ValueError(f"{PDF_MANIFEST}: no line 'window.sePdfs = [...];'")
    return json.loads(m.group(1))


def write_pdf_manifest(html_dir) -> list[str]:
    """List every PDF under the site's ``pdf/`` in ``_static/pdfs.js``; return the list."""
    html_dir = Path(html_dir)
    folder = html_dir / PDF_DIR
    pdfs = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*.pdf")
                  if p.is_file()) if folder.is_dir() else []
    (html_dir / "_static").mkdir(parents=True, exist_ok=True)
    (html_dir / "_static" / PDF_MANIFEST).write_text(pdf_manifest_text(pdfs), encoding="utf-8")
    return pdfs


_A_TAG = re.compile(r"<a\b[^>]*>", re.I)
_HREF = re.compile(r"""\shref=(["'])(.*?)\1""", re.I | re.S)


def unlink_pdfs(app, pagename, templatename, context, doctree):
    """A link of the page's body into the site's ``pdf/`` becomes a placeholder: its target
    moves to ``data-se-href``, its file to ``data-se-pdf``; ``pdf-links.js`` makes it a link
    again where ``_static/pdfs.js`` names the file."""
    body = context.get("body")
    if app.builder.format != "html" or not body or PDF_DIR not in body:
        return
    here = posixpath.dirname(pagename)

    def placeholder(tag: re.Match) -> str:
        text = tag.group(0)
        href = _HREF.search(text)
        if href is None or re.match(r"[a-z][a-z0-9+.-]*:|//|#", href.group(2), re.I):
            return text
        path = posixpath.normpath(posixpath.join(here, href.group(2).split("#")[0]))
        if not path.startswith(PDF_DIR + "/"):
            return text
        quote, target = href.group(1), href.group(2)
        inside = path[len(PDF_DIR) + 1:]
        return (text[:href.start()] + f" data-se-href={quote}{target}{quote}"
                f" data-se-pdf={quote}{inside}{quote}" + text[href.end():])

    context["body"] = _A_TAG.sub(placeholder, body)


def reset_pdfs(app, exception):
    """After an HTML build: the PDFs in the site's ``pdf/`` were printed from an earlier build,
    so they are removed, and ``_static/pdfs.js`` names none (``bash scripts/pdf.sh`` prints
    this build's)."""
    import shutil

    if getattr(app.builder, "format", "") != "html" or app.builder.name == "singlehtml":
        return
    shutil.rmtree(Path(app.outdir) / PDF_DIR, ignore_errors=True)
    write_pdf_manifest(app.outdir)
