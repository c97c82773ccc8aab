"""Sphinx extension for the book: checked quotes (``{pin}``) and no unchecked number on a page.

**Pinned quotes.** In a lecture's prose, ``{pin}`name=0.5466``` renders as ``0.5466``. While the
executed notebook is parsed, the role looks up the value the code pinned under ``name`` (see
:func:`standarderror_book.page.pin`) and compares it with the literal at the precision written.
``{pin}`ep3_temperature:name=0.5466``` quotes a value pinned on another page of the same build
(the page's docname or its last component); it is checked once every page has been read.
Every problem is reported with the page and line, and the build then fails:

* the literal differs from the computed value (names quantity, quoted and computed values);
* the quote names a value the page's code never pinned (an unknown name);
* the value was glued by something other than :func:`~standarderror_book.page.pin` (plain
  ``myst_nb.glue``), or the same name was pinned more than once (one name, one value);
* the value was not computed by an execution in *this* build: each build exports a fresh random
  nonce to the kernels it starts and ``pin()`` stores it with the value, so stored outputs (a
  page with ``execution_mode: "off"``, a stored ``.ipynb``, a cache) are refused;
* the page pinned a value that its own prose never quotes (a computed value nobody checks);
* the value is typed in the code, not computed (a literal, a conversion of one, or a name
  bound only to one), and no setting phrase of the page declares it;
* the role's text is malformed (not ``name=number``).

**Numbers.** After each page is read, :func:`standarderror_book.sphinxext.numbers.scan` finds every
number a reader sees (prose, headings, admonitions, lists, tables, figure captions, alt text);
each must be inside a ``{pin}`` quote or inside a *setting* phrase the page declares in its front
matter (``settings:``, a list of strings) or the book declares in ``se_settings``. A bare number
is reported as ``path:line`` with the number and its sentence. The check is always on.

**Freshness.** Every build reads every page again (an ``env-get-outdated`` hook), so every
notebook page is executed again whatever the command (``jupyter-book build .`` without
``--all`` included); a page not read in this build fails it. With ``se_pages_at_once`` above 1
the notebook pages execute several at once, ahead of Sphinx's reading (:mod:`.ahead`), in this
build and under its nonce; a page executed so but never read fails the build. Every page with
code must have executed in this build (not an execution mode of off or cache, not 'auto' on
stored outputs, not excluded, no ``skip-execution`` cell), and no cell may hold an error output
(``raises-exception`` and ``execution_allow_errors`` do not excuse one). A name output by
``pin()`` more than once in the notebook is refused however the kernel counted
(``importlib.reload``). A quote must carry a significant digit of its value
(:func:`standarderror_book.page.precision_problem`) and, for a value nearer 1 than 0, a significant
digit of its distance to 1 (:func:`.pins.bound_problem`: 0.96 is not ``1``, 0.9951 not
``1.00``). The configured text every page shows (title, announcement, footer, the table of
contents' captions and titles) is scanned like prose.

Every failure is raised from ``build-finished``, so it cannot be skipped by building without
``-W``: any pin or number problem makes ``jupyter-book build`` exit non-zero. No page is
excused: the config value ``se_pending``, which once listed pages not yet meeting a rule, is
refused if set. A failed HTML build removes the pages it wrote, so no wrong number stays on
disk; every HTML build removes the pages of its output folder that no page of the book writes
(a page dropped from ``_toc.yml``).
"""

from __future__ import annotations

import os

from sphinx.errors import ExtensionError
from sphinx.util import logging

from standarderror_book import kernel as _kernel
from standarderror_book.sphinxext import ahead, numbering, pins, site, status
from standarderror_book.sphinxext.pins import (  # noqa: F401  (_split, scan_only_pin_role: the CLI's)
    _build_nonce,
    _code_sources,
    _doc,
    _execution_problems,
    _split,
    _state,
    scan_only_pin_role,
)

logger = logging.getLogger(__name__)

#: The MyST-NB release the run-time replacements below were checked against; a test fails on
#: any other installed version, so an upgrade is read against them before it is taken.
MYST_NB_CHECKED = "1.4.0"
#: MyST-NB functions this extension replaces at run time (module, attribute, by whom). Each
#: wrapper calls the original and only adds: see ARCHITECTURE.md, "MyST-NB internals".
MYST_NB_REPLACED = (
    ("myst_nb.sphinx_", "create_client", "pins._capture_clients"),
    ("myst_nb.core.execute.base", "extract_glue_data", "pins._capture_clients"),
    ("myst_nb.core.execute.direct", "single_nb_execution", "ahead._wrap_execution"),
    ("myst_nb.core.read", "read_myst_markdown_notebook", "numbers.cli._read_pages"),
    ("myst_nb.core.read", "standard_nb_read", "numbers.cli._read_pages"),
)
#: MyST-NB internals read, not replaced (module, attribute).
MYST_NB_READ = (
    ("myst_nb.core.execute", "NotebookClientDirect"),
    ("myst_nb.core.execute", "NotebookClientInline"),
    ("myst_nb.sphinx_", "NbMetadataCollector"),
    ("myst_nb.core.read", "create_nb_reader"),
    ("myst_nb.core.nb_to_tokens", "nb_node_to_dict"),
)


def _check_numbers(app, doctree):
    from standarderror_book.sphinxext import numbers

    env = app.env
    record = _doc(env, env.docname)
    record["build"] = _build_nonce()
    path = env.doc2path(env.docname)
    try:
        shown = os.path.relpath(path, app.srcdir)
    except ValueError:
        shown = str(path)
    client = pins._CLIENTS.pop(os.path.abspath(str(path)), None)
    literals, _ = numbers.code_literals(_code_sources(client))
    typed = {} if client is None else numbers.typed_by_cell(
        {i: c.get("source", "") for i, c in enumerate(client.notebook.cells)
         if c.get("cell_type") == "code"})
    page_phrases, setting_problems = numbers.read_settings(path)
    refused = numbers.declaration_problems(page_phrases, literals)
    book = [str(p) for p in app.config[numbers.CONFIG_KEY] or []]
    inferred = numbers.inferred_settings(_code_sources(client))
    executes = bool(_code_sources(client))
    findings = numbers.scan(doctree, book + page_phrases + inferred, typed, executes=executes)
    record["numbers"] = [f.as_dict() for f in findings]
    record["setting_problems"] = setting_problems + refused
    used = {f.phrase for f in findings if f.phrase}
    record["unused_settings"] = [p for p in page_phrases if p not in used]
    record["inferred_settings"] = sorted({f.phrase for f in findings if f.phrase
                                          and f.phrase not in page_phrases
                                          and f.phrase not in book})
    if numbers.settings.WANT_REDUNDANT:
        without = numbers.scan(doctree, book + inferred, typed, executes=executes)
        drawn = len(numbers.drawn_problems(_code_sources(client), book + page_phrases))
        record["redundant_settings"] = [
            p for p in numbers.redundant_settings(page_phrases, findings, without,
                                                  _code_sources(client))
            if len(numbers.drawn_problems(_code_sources(client), book + [
                q for q in page_phrases if q != p])) == drawn]   # no figure text needs it

    def report(full, rule="", line=None):
        record["problems"].append(full)
        logger.error(full, location=(env.docname, line) if line else env.docname, type="pin")

    for msg in numbers.literal_pin_problems(_code_sources(client), page_phrases):
        report(f"pin {shown}: {msg}")
    record["code_problems"] = (numbers.code_picture_problems(_code_sources(client))
                               + numbers.drawn_problems(_code_sources(client),
                                                        book + page_phrases))
    for msg in record["code_problems"]:
        report(f"number {shown}: {msg}", "pictures")
    for msg in setting_problems:
        report(f"number {shown}: {msg}")
    for msg in refused:
        report(f"number {shown}: {msg}", "settings")
    for f in findings:
        if f.cls == "bare":
            report(numbers.message(shown, f), f.rule, f.line)
    record["execution_problems"] = _execution_problems(client)
    for msg in record["execution_problems"]:
        report(f"execution {shown}: {msg}")


def _doctree_read(app, doctree):
    """After a page is read: its numbers are all accounted for, and every pin is quoted."""
    env = app.env
    _check_numbers(app, doctree)
    from myst_nb.sphinx_ import NbMetadataCollector

    data = NbMetadataCollector.get_doc_data(env).get(env.docname, {})
    glued = set(data.get("glue", []))
    record = _state(env).get(env.docname)
    quoted = record["quoted"] if record else set()
    for key in sorted(glued - quoted):
        msg = (f"pin {env.docname}: the code pinned {key!r} but the prose never quotes it; "
               f"quote it as {{pin}}`{key}=...` or stop pinning it")
        _doc(env, env.docname)["problems"].append(msg)
        logger.error(msg, location=env.docname, type="pin")


def _config_problems(app) -> list[str]:
    """Bare numbers in the text the configuration shows on every page (title, banner, footer,
    the table of contents' captions and titles): see :mod:`.numbers.configtext`."""
    from standarderror_book.sphinxext.numbers import CONFIG_KEY
    from standarderror_book.sphinxext.numbers.configtext import config_findings

    site_map = getattr(app.env, "external_site_map", None)
    book = [str(p) for p in app.config[CONFIG_KEY] or []]
    return [f"number ({where}): {f.why or 'bare number ' + f.number}: \"{f.context}\" -- a "
            "number shown on every page is a label declared in se_settings, or none"
            for where, f in config_findings(app.config, site_map, book) if f.cls == "bare"]


#: Pages an HTML build writes that are no source page's: Sphinx's, the root's redirect to the
#: landing page (jupyter-book writes index.html when the root page has another name), and every
#: domain's index (sphinx-proof's prf-prf.html; see _generated_pages).
_GENERATED_PAGES = {"genindex", "search", "py-modindex", "_modules/index", "index"}


def _generated_pages(app) -> set:
    return _GENERATED_PAGES | {name for name, *_ in getattr(app.builder, "domain_indices", [])}


def _written_pages(app) -> dict:
    """docname-like name -> path of every page file in an HTML builder's output folder."""
    from pathlib import Path

    out = Path(app.outdir)
    suffix = getattr(app.builder, "out_suffix", ".html")
    pages = {}
    for path in out.rglob("*" + suffix):
        rel = path.relative_to(out)
        if rel.parts[0].startswith("_") and rel.parts[0] != "_modules":
            continue     # _static, _sources, _images: not pages
        name = rel.as_posix()[:-len(suffix)]
        if getattr(app.builder, "name", "") == "dirhtml" and name.endswith("/index"):
            name = name[:-len("/index")] or app.config.root_doc
        pages[name] = path
    return pages


def _drop_left_overs(app) -> None:
    """An HTML build's output holds only this build's pages: a page no longer in the book (one
    dropped from ``_toc.yml``) would still be served with the numbers of an earlier build, so
    its file is removed."""
    if getattr(app.builder, "format", "") != "html" or app.builder.name == "singlehtml":
        return
    docs = set(app.env.found_docs)
    generated = _generated_pages(app)
    for name, path in _written_pages(app).items():
        if name not in docs and name not in generated and not name.startswith(
                "_modules/"):
            path.unlink()
            logger.info(f"removed {path}: no page of this build writes it")


def _unwrite(app) -> None:
    """A failed build leaves no page a reader could open: the pages it wrote are removed, so no
    wrong number is left on disk (the build's pin problems name what to fix)."""
    from pathlib import Path

    if getattr(app.builder, "format", "") != "html":
        return
    if app.builder.name == "singlehtml":
        target = Path(app.outdir) / (app.config.root_doc + app.builder.out_suffix)
        target.unlink(missing_ok=True)
        return
    for path in _written_pages(app).values():
        path.unlink(missing_ok=True)


def _finished(app, exception):
    if exception is not None:
        return
    from standarderror_book.sphinxext import numbers

    problems = [p for rec in _state(app.env).values()
                for p in rec["problems"] + rec.get("cross_problems", [])]
    problems += [f"pin {doc}: this page was not read in this build, so what it shows comes "
                 "from an earlier one; build every page (jupyter-book build --all)"
                 for doc, rec in _state(app.env).items() if rec.get("build") != _build_nonce()]
    problems += [f"number (se_settings in the config): {p}" for p in
                 numbers.declaration_problems(list(app.config[numbers.CONFIG_KEY] or []), None)]
    problems += _config_problems(app)
    problems += ahead.problems()
    _drop_left_overs(app)
    if problems:
        _unwrite(app)
        raise ExtensionError(
            f"{len(problems)} pin problem(s): a quoted number differs from, or has no, computed "
            "value, or a number on a page is neither pinned nor declared:\n  "
            + "\n  ".join(problems)
        )


def setup(app):
    """Register the extension. The events, in the order Sphinx emits them in one build:

    1. ``builder-inited`` (:func:`pins._builder_inited`): this build's nonce, exported to the
       kernels it starts, so that ``pin()`` stamps every value with it;
    2. ``env-get-outdated`` (:func:`pins._every_page_outdated`): every page is read again;
       with ``se_pages_at_once`` above 1, :func:`ahead.start` starts executing every notebook
       page, that many at once (:mod:`.ahead`);
    3. per page, while it is read: the ``{pin}`` role (:func:`pins.pin_role`) checks each quote
       against the values its execution pinned (the executing client is captured by
       :func:`pins._capture_clients`); then ``doctree-read`` (:func:`_doctree_read`) scans the
       page's numbers (:mod:`.numbers`), its execution, and pins its prose never quotes;
       ``env-purge-doc`` / ``env-merge-info`` keep the per-page records;
    4. ``env-get-updated`` (:func:`numbering.per_page`, after Sphinx's own numbering): figures,
       tables, equations, theorems and exercises numbered per page (``3.1, 3.2, ...``);
       ``env-check-consistency`` (:func:`pins._check_cross_pages`): quotes of values pinned on
       other pages, once every page has been read;
    5. per page written: the execution-status table filled in (:mod:`.status`, a
       post-transform, ``{se-execution-status}``); ``doctree-resolved``
       (:func:`pins.render_pins`): each pinned number with its note (name, computed value,
       rule, a link to the cell that computed it);
       ``html-page-context``, per page written (:mod:`.site`): the executed notebook offered
       as a download (before the theme's buttons), repeated inline scripts dropped, links into
       the printed PDFs' folder made placeholders;
    6. ``build-finished`` (:func:`_finished`): every problem recorded above is raised, so no
       build with a pin or number problem exits zero; before it, :func:`ahead.finish` keeps
       any page executed ahead that was never read, a problem too, and :func:`site.reset_pdfs`
       removes the PDFs of an earlier build and lists none in ``_static/pdfs.js``.
    """
    app.connect("html-page-context", site.offer_ipynb, priority=400)
    app.connect("html-page-context", site.dedupe_scripts)
    app.connect("html-page-context", site.unlink_pdfs)
    # normal codec lookup in the Sphinx process (sphinxcontrib-bibtex's "ulatex")
    _kernel.release_codec_hijack()
    app.add_config_value("se_settings", [], "env", types=[list])  # numbers.CONFIG_KEY
    # registered only to be refused when set (pins._refuse_pending): no page is excused
    app.add_config_value("se_pending", {}, "env", types=[dict])
    app.add_role("pin", pins.pin_role)
    pins._capture_clients()
    app.connect("builder-inited", pins._builder_inited)
    app.connect("env-get-outdated", pins._every_page_outdated)
    app.add_config_value(ahead.AT_ONCE, 1, "", types=[int])
    app.add_config_value(ahead.FIRST, [], "", types=[list])
    app.connect("env-get-outdated", ahead.start)
    app.connect("doctree-read", _doctree_read)
    app.connect("env-get-updated", numbering.per_page, priority=900)
    app.connect("env-check-consistency", pins._check_cross_pages)
    app.connect("doctree-resolved", pins.render_pins)
    status.setup(app)
    app.connect("env-purge-doc", pins._purge)
    app.connect("env-merge-info", pins._merge)
    app.connect("build-finished", ahead.finish, priority=400)
    app.connect("build-finished", site.reset_pdfs, priority=400)
    app.connect("build-finished", _finished)
    return {"version": "0.1", "parallel_read_safe": False, "parallel_write_safe": True,
            "env_version": 2}
