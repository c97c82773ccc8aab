"""The execution-status page: the ``{se-execution-status}`` directive, filled in by the build.

The directive leaves a placeholder; once every page has been read and executed, the page is
written and the placeholder becomes (a post-transform, before references are resolved) a
"Record" box: when and on what machine and arithmetic the build ran, and a table of every
notebook page of the book: whether it executed in this build (its pins carry this build's
nonce) and succeeded, how long its execution took, how many values its code pinned (each
quoted and checked by its prose), how many quotes of other pages' pins it holds, and its
problems (none, or the build fails). Its numbers are
generated after the number scan, as a build's record of a run (a machine's times and counts),
never a result of the model.
"""

from __future__ import annotations

import os
import platform
import time

from docutils import nodes
from sphinx.transforms.post_transforms import SphinxPostTransform
from sphinx.util.docutils import SphinxDirective

#: The columns of the table, in order.
COLUMNS = ("page", "status", "execution (s)", "values pinned", "quotes of other pages",
           "problems")


class execution_status(nodes.General, nodes.Element):
    """Where the build puts the table."""


class ExecutionStatus(SphinxDirective):
    has_content = False

    def run(self):
        return [execution_status()]


def _cpu() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine() -> str:
    """The machine and arithmetic of this build, in words."""
    capability = os.environ.get("ATEN_CPU_CAPABILITY") or "native"
    return (f"{_cpu()}, {os.cpu_count()} cores, {platform.system()} {platform.machine()}, "
            f"Python {platform.python_version()}; torch's CPU kernels {capability}, "
            f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}, "
            f"OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', 'unset')}")


def rows(env) -> list[dict]:
    """One row per notebook page (a page whose execution MyST-NB recorded), in docname order."""
    from myst_nb.sphinx_ import NbMetadataCollector

    from standarderror_book.sphinxext.pins import _build_nonce, _state

    state = _state(env)
    out = []
    for docname, data in sorted(NbMetadataCollector.get_doc_data(env).items()):
        run = data.get("exec_data")
        if not run:
            continue
        record = state.get(docname, {})
        problems = (list(record.get("problems", [])) + list(record.get("cross_problems", []))
                    + list(record.get("execution_problems", [])))
        fresh = bool(_build_nonce()) and record.get("build") == _build_nonce()
        ok = fresh and bool(run.get("succeeded")) and not problems
        why = ("executed in this build, every pin checked" if ok else
               "not executed in this build" if not fresh else
               f"execution failed: {run.get('error')}" if not run.get("succeeded") else
               "problems")
        out.append({"docname": docname, "ok": ok, "status": why,
                    "runtime": run.get("runtime"), "pinned": len(record.get("values", {})),
                    "cross": len(record.get("cross", [])), "problems": len(problems)})
    return out


def _table(docname: str, found: list[dict]) -> nodes.table:
    import posixpath

    from sphinx.addnodes import pending_xref

    table = nodes.table(classes=["colwidths-auto", "se-execution-status"])
    group = nodes.tgroup(cols=len(COLUMNS))
    table += group
    group += [nodes.colspec(colwidth=1) for _ in COLUMNS]
    head = nodes.thead()
    group += head
    head += nodes.row("", *[nodes.entry("", nodes.paragraph(text=c)) for c in COLUMNS])
    body = nodes.tbody()
    group += body
    for r in found:
        link = pending_xref(refdoc=docname, refdomain="std", reftype="doc", refexplicit=False,
                            reftarget="/" + r["docname"], refwarn=True, classes=["xref", "doc"])
        link += nodes.inline(text=r["docname"])
        runtime = "-" if r["runtime"] is None else f"{r['runtime']:.1f}"
        cells = [nodes.paragraph("", "", link),
                 nodes.paragraph(text=("\u2705 " if r["ok"] else "\u274c ") + r["status"]),
                 nodes.paragraph(text=runtime), nodes.paragraph(text=str(r["pinned"])),
                 nodes.paragraph(text=str(r["cross"])), nodes.paragraph(text=str(r["problems"]))]
        row = nodes.row(classes=["se-status-ok" if r["ok"] else "se-status-failed"])
        row["ids"].append("status-" + posixpath.basename(r["docname"]))
        row += [nodes.entry("", c) for c in cells]
        body += row
    return table


class FillExecutionStatus(SphinxPostTransform):
    """Replace every placeholder with the record of this build's execution: run once every
    page has been read, when the page is written, before its references are resolved (so the
    table's page links resolve with the rest)."""

    default_priority = 8

    def run(self, **kwargs) -> None:
        placeholders = list(self.document.findall(execution_status))
        if not placeholders:
            return
        found = rows(self.env)
        when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        for node in placeholders:
            box = nodes.admonition(classes=["se-execution-record"])
            box += nodes.title(text=f"Record of this build's execution, {when}")
            box += nodes.paragraph(text=f"Machine: {machine()}.")
            box += _table(self.env.docname, found)
            node.replace_self(box)


def setup(app) -> None:
    app.add_node(execution_status)
    app.add_directive("se-execution-status", ExecutionStatus)
    app.add_post_transform(FillExecutionStatus)
