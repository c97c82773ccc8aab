"""Fixes to the built site that are not about numbers: the executed notebook offered as a
download, and inline scripts emitted twice."""

from __future__ import annotations


def offer_ipynb(app, pagename, templatename, context, doctree):
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


