"""The ``{pin}`` role and the pins' bookkeeping: which values this build's execution pinned,
the quotes checked against them (on the page and across pages), and the freshness rules (every
page read and executed in this build, no error output). See :mod:`standarderror_book.sphinxext`
for the rules and the order of the events.
"""

from __future__ import annotations

import math
import os
import secrets

from sphinx.errors import ExtensionError
from sphinx.util import logging

from standarderror_book.page import NONCE_ENV, PIN_METADATA, check_quote, parse_quote, precision_problem
from standarderror_book.sphinxext.numbers.doctree import pin_node

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
    return _ran_now(document["nb_renderer"].renderer.nb_client)


def _ran_now(client) -> bool:
    """Whether a myst-nb client executed its notebook in this build (a cache hit did not)."""
    from myst_nb.core.execute import NotebookClientDirect, NotebookClientInline

    return type(client) in (NotebookClientDirect, NotebookClientInline)


# myst-nb's notebook clients, by source path, and how often each glued name was output
# (counted before myst-nb folds the outputs into one dict, which keeps only the last).
_CLIENTS: dict = {}
_GLUE_COUNTS: dict = {}
# ... and which code cell output each glued name first (the link of a pinned number's note)
_GLUE_CELLS: dict = {}


def _capture_clients() -> None:
    """Wrap myst-nb's client factory and glue extraction to see every notebook page's client.

    The client holds the executed notebook (outputs, errors, tags, code), how it ran, and its
    glue; myst-nb drops it from the document before ``doctree-read``.
    """
    import myst_nb.core.execute.base as base
    import myst_nb.sphinx_ as nb_sphinx

    if getattr(nb_sphinx.create_client, "_se_wrapped", False):
        return
    create, extract = nb_sphinx.create_client, base.extract_glue_data

    def create_client(notebook, source, *args, **kwargs):
        client = create(notebook, source, *args, **kwargs)
        _CLIENTS[os.path.abspath(str(source))] = client
        return client

    def extract_glue_data(notebook, *args, **kwargs):
        seen: dict = {}
        for cell in notebook.cells:
            for output in cell.get("outputs", []) if cell.get("cell_type") == "code" else []:
                name = ((output.get("metadata") or {}).get("scrapbook") or {}).get("name")
                if name is not None:
                    seen[name] = seen.get(name, 0) + 1
        _GLUE_COUNTS[id(notebook)] = seen
        _GLUE_CELLS[id(notebook)] = _pinning_cells(notebook)
        return extract(notebook, *args, **kwargs)

    create_client._se_wrapped = True
    nb_sphinx.create_client = create_client
    base.extract_glue_data = extract_glue_data


def _build_nonce() -> str:
    return os.environ.get(NONCE_ENV, "")


def _builder_inited(app):
    """A fresh nonce per build (the kernels started by this build inherit it), after refusing
    ``se_pending``: it once listed pages excused from named number rules, and a config line
    that switches the check off is none, so any entry stops the build before it starts."""
    _refuse_pending(app)
    os.environ[NONCE_ENV] = secrets.token_hex(16)


def _refuse_pending(app) -> None:
    pending = app.config.se_pending
    if pending:
        raise ExtensionError(
            f"se_pending is set ({pending!r}), but no page may be excused from the number "
            "rules: fix the page (python -m standarderror_book.sphinxext.numbers PAGE.md lists "
            "its problems) and remove se_pending from _config.yml")


def _pinned_values(env, document) -> dict:
    """This page's glued values: name -> (raw value, None) or (None, why it cannot be quoted).

    Also records the good values on the page's record, for quotes from other pages.
    """
    temp = env.temp_data
    if temp.get("se_pinned_doc") == id(document):
        return temp["se_pinned"]
    glued = _glued(document) or {}
    notebook = document["nb_renderer"].renderer.nb_client.notebook
    seen = _GLUE_COUNTS.get(id(notebook), {})
    out = {}
    for key, output in glued.items():
        meta = (output.get("metadata") or {}).get(PIN_METADATA)
        raw = (output.get("data") or {}).get("text/plain")
        if not isinstance(meta, dict):
            out[key] = (None, f"{key!r} was glued by something other than pin() (plain "
                              "myst_nb.glue?); glue quoted values with standarderror_book.page.pin")
        elif not _build_nonce() or meta.get("nonce") != _build_nonce():
            out[key] = (None, f"the value of {key!r} was not computed by an execution in this "
                              "build (a stored output: per-page execution_mode, a stored .ipynb "
                              "or a cache); the page must execute at build time")
        elif max(int(meta.get("count", 1)), seen.get(key, 1)) > 1:
            times = max(int(meta.get("count", 1)), seen.get(key, 1))
            out[key] = (None, f"{key!r} was pinned {times} times; a name is pinned "
                              "once (one name, one value)")
        else:
            out[key] = (raw, None)
    temp["se_pinned_doc"] = id(document)
    temp["se_pinned"] = out
    _doc(env, env.docname)["values"] = {k: v for k, (v, why) in out.items() if why is None}
    _doc(env, env.docname)["cells"] = _GLUE_CELLS.get(id(notebook), {})
    return out


def _pinning_cells(notebook) -> dict:
    """name -> index of the code cell whose output holds the name's pin (the first one)."""
    cells: dict = {}
    for i, cell in enumerate(notebook.cells):
        for output in cell.get("outputs", []) if cell.get("cell_type") == "code" else []:
            name = ((output.get("metadata") or {}).get("scrapbook") or {}).get("name")
            if name is not None:
                cells.setdefault(name, i)
    return cells


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


#: How close to 1 a value counts as 1 itself (a correlation of 0.9999999999999999 is 1 up to
#: the last bits of its arithmetic).
EXACT_BOUND = 1e-12


def bound_problem(quoted: str, value: float) -> str | None:
    """Why ``quoted`` hides how far ``value`` lies from the bound 1, or None.

    A quote carries a significant digit of its value (:func:`standarderror_book.page.precision_problem`,
    which also refuses a nonzero value quoted as 0), and, for a value nearer 1 than 0 in
    magnitude, a significant digit of its distance to 1: ``1``, ``1.0`` and ``1.00`` quote
    only 1 itself (within :data:`EXACT_BOUND`), and a value below 1 keeps the digits that show
    how far below it lies (0.96 as ``0.96``, 0.9951 as ``0.995``; ``0.99`` for 0.9951 says 1%
    short where it is 0.5%). A value above 1 has no bound there.
    """
    quote = parse_quote(quoted)
    scale = 100 if quote.percent else 1
    v = abs(float(value))
    if not 0.5 < v < 1 - EXACT_BOUND:
        return None
    q = abs(float(quote.text.replace(",", "").rstrip("%"))) / scale
    shown = f"{(1 - q) * scale:.{quote.decimals}f}".lstrip("-") + ("%" if quote.percent else "")
    if precision_problem(shown, 1 - v) is None:
        return None
    lead = math.floor(math.log10(float(f"{1 - v:.1g}")))
    need = f"{float(value) * scale:.{max(-lead - (2 if quote.percent else 0), 0)}f}" + (
        "%" if quote.percent else "")
    return (f"quoted {quoted} hides how far the value {value!r} lies from the bound 1 (it is "
            f"{1 - v:.2g} short of it); quote the digits that show it (e.g. {need})")


def _precision(key: str, quoted: str, raw) -> str | None:
    """A quote must carry a significant digit of its value (see book.precision_problem) and of
    its distance to the bound 1 (see :func:`bound_problem`)."""
    why = precision_problem(quoted, float(raw)) or bound_problem(quoted, float(raw))
    return None if why is None else f"quantity {key!r}: {why}"


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
    from standarderror_book.sphinxext.numbers import place

    document = inliner.document
    env = document.settings.env
    where = place(env.docname, lineno)
    record = _doc(env, env.docname)

    def problem(msg):
        full = f"pin {where}: {msg}"
        record["problems"].append(full)
        logger.error(full, location=(env.docname, lineno), type="pin")
        return [pin_node(rawtext, text, ["pin-error"])], []

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
        return [_named(pin_node(rawtext, quoted), key, page)], []
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
    imprecise = _precision(key, quoted, raw)
    if imprecise:
        return problem(imprecise)
    return [_named(pin_node(rawtext, quoted), key, None)], []


def _named(node, key: str, page: str | None):
    """The pin's span, carrying what its rendering shows (:func:`render_pins`): the name, and
    the page that pinned it (None: this page)."""
    node["se_pin_name"] = key
    node["se_pin_page"] = page
    return node


def scan_only_pin_role(name, rawtext, text, lineno, inliner, options=None, content=None):
    """The ``{pin}`` role of :mod:`standarderror_book.sphinxext.numbers`' command line.

    Nothing is executed there, so a quote is only marked as pinned, not compared.
    """
    parts = _split(text)
    quoted = parts[2] if parts else text
    return [pin_node(rawtext, quoted)], []


def _code_sources(client) -> list[str]:
    if client is None:
        return []
    return [c.get("source", "") for c in client.notebook.cells if c.get("cell_type") == "code"]


def _execution_problems(client) -> list[str]:
    """Why a notebook page's outputs are not proven fresh, or hide a failure (empty if fine).

    Every page with code must have executed in this build (not skipped by its execution mode,
    an exclude pattern, 'auto' mode on stored outputs, or a cache hit), with no cell skipped
    (``skip-execution`` keeps stored outputs) and no error output anywhere (a
    ``raises-exception`` tag or ``execution_allow_errors`` would let a failed assert pass).
    """
    if client is None:
        return []
    cells = client.notebook.cells
    code = [i for i, c in enumerate(cells) if c.get("cell_type") == "code"]
    if not code:
        return []
    out = []
    if not _ran_now(client):
        out.append("this page has code but was not executed in this build (its execution "
                   "mode is off or cache, 'auto' found stored outputs, or it is excluded from "
                   "execution), so what it shows is not proven fresh; let it execute")
    elif client.exec_metadata and not client.exec_metadata.get("succeeded", True):
        out.append(f"its execution failed ({client.exec_metadata.get('error')}); fix the code")
    for i in code:
        cell = cells[i]
        where = f"cell at line {client.cell_line(i)}" if i < len(client._source_map) else \
            f"cell {i}"
        tags = (cell.get("metadata") or {}).get("tags") or []
        if "skip-execution" in tags:
            out.append(f"{where} is tagged skip-execution: its outputs are not computed in "
                       "this build; remove the tag")
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                out.append(f"{where} raised {output.get('ename')}: {output.get('evalue')!s:.200}"
                           " (an error output fails the build, even under raises-exception or "
                           "execution_allow_errors)")
    return out


def _every_page_outdated(app, env, added, changed, removed):
    """Every build reads every page again, so every notebook page is executed again.

    Sphinx re-reads only pages whose source changed; a change to the package (or its data)
    changes no source, so an incremental ``jupyter-book build .`` would ship the numbers of an
    earlier build. The check in :func:`_finished` fails any page not read in this build.
    """
    return sorted(set(env.found_docs) - set(added) - set(changed) - set(removed))


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
            err = _compare(key, quoted, values[key]) or _precision(key, quoted, values[key])
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


# --------------------------------------------------------------------------------------------
# Rendering: a pinned number on the site


#: The id of the code cell that pinned ``name``, on its page.
PINNED_ID = "se-pinned-{name}"


def pin_rule(quoted: str, raw) -> str:
    """In words, the rule by which ``quoted`` was checked against the pinned value ``raw``."""
    from standarderror_book.page import BOUNDARY_MARGIN, render

    quote = parse_quote(quoted)
    value = float(raw)
    digits = f"{quote.decimals} decimal{'s' if quote.decimals != 1 else ''}"
    form = f"as a percentage to {digits}" if quote.percent else f"to {digits}"
    if render(value, quote) == quote.text:
        rule = f"the computed value, written {form}, is the quote"
    else:
        rule = (f"the computed value lies within {BOUNDARY_MARGIN} of a unit of the quote's last "
                "digit beyond its rounding interval (the boundary margin for last-bit noise)")
    if 0.5 < abs(value) < 1 - EXACT_BOUND:
        rule += "; the quote keeps a significant digit of its distance to 1"
    return rule


def _source_doc(state: dict, docname: str, page: str | None) -> str | None:
    """The docname that pinned a quote's value: this page, or the page a cross-page quote
    names (its docname, or its last component when one page alone is called that)."""
    if page is None:
        return docname
    if page in state:
        return page
    found = [doc for doc in state if doc.rsplit("/", 1)[-1] == page]
    return found[0] if len(found) == 1 else None


def _pin_html(node, k: int, docname: str, state: dict, builder) -> str | None:
    """The HTML of one pinned number with its note, or None when nothing is known of it."""
    from html import escape

    key, page = node.get("se_pin_name"), node.get("se_pin_page")
    source = _source_doc(state, docname, page)
    record = state.get(source) if source else None
    if key is None or record is None or key not in record.get("values", {}):
        return None
    quoted, raw = node.astext(), record["values"][key]
    note = f"se-pin-note-{k}"
    cell = record.get("cells", {}).get(key)
    where = "" if source == docname else escape(builder.get_relative_uri(docname, source))
    origin = "" if source == docname else f" on {escape(source)}"
    link = ("" if cell is None else
            f' <a class="se-pin-source" href="{where}#{PINNED_ID.format(name=escape(key))}">'
            f"the code cell that computed it{origin}</a>")
    return (f'<span class="se-pin-wrap">'
            f'<span class="pin" tabindex="0" aria-describedby="{note}">{escape(quoted)}</span>'
            f'<span class="se-pin-note" id="{note}">'
            f'<span class="se-pin-label">pinned value</span> '
            f'<code class="se-pin-name">{escape(key)}</code> = '
            f'<code class="se-pin-value">{escape(str(raw))}</code>. '
            f'<span class="se-pin-label">checked by the build:</span> '
            f'<span class="se-pin-rule">{escape(pin_rule(quoted, raw))}</span>.{link}'
            "</span></span>")


def render_pins(app, doctree, docname):
    """On an HTML page (``doctree-resolved``, after every check): every pinned number becomes a
    focusable span whose note (shown on hover and on keyboard focus, and its description for a
    screen reader) gives the pin's name, the full-precision value the code computed, the rule
    the quote was checked by, and a link to the code cell that computed it, which carries the
    id :data:`PINNED_ID`."""
    from docutils import nodes

    from standarderror_book.sphinxext.numbers.doctree import _is_pin

    if getattr(app.builder, "format", "") != "html":
        return
    state = _state(app.env)
    record = state.get(docname) or {}
    by_cell: dict = {}
    for name, index in record.get("cells", {}).items():
        by_cell.setdefault(index, []).append(PINNED_ID.format(name=name))
    for cell in doctree.findall(nodes.container):
        if cell.get("nb_element") == "cell_code" and cell.get("cell_index") in by_cell:
            cell["ids"].extend(i for i in by_cell[cell["cell_index"]] if i not in cell["ids"])
    for k, node in enumerate(list(doctree.findall(_is_pin))):
        if "pin-error" in node.get("classes", []):
            continue
        html = _pin_html(node, k, docname, state, app.builder)
        if html is not None:  # not replace_self: it would give the raw HTML the span's class
            node.parent.replace(node, nodes.raw("", html, format="html"))
