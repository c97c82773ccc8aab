"""Notebook pages executed ahead, several at once, while Sphinx reads the book in order.

MyST-NB executes each notebook page when Sphinx reads it, one page after another, so a
two-core machine runs one kernel at a time and much of the second core idles (the sampler and
the Python between the BLAS calls use one). With ``se_pages_at_once = N`` (N > 1) in the
config, every notebook page is started at ``env-get-outdated`` in a pool of N executions, the
pages of ``se_slowest_pages`` first. When Sphinx then reads a page, MyST-NB's execution of it
waits for that page's execution instead of starting another; everything after (the glue, the
pins, the freshness checks of :mod:`.pins`) sees the executed notebook as if MyST-NB had run it.

What does not change, by construction:

* **the execution.** The notebook is read by MyST-NB's own reader with the page's own
  configuration (its front matter's ``mystnb`` overrides: the per-cell timeout), run in the
  page's directory by the same function with the same arguments
  (``jupyter_cache.executors.utils.single_nb_execution``), in a kernel with the same
  environment: the pool starts after :func:`.pins._builder_inited` has exported this build's
  nonce, so every ``pin()`` still proves its value fresh.
* **the notebook.** Before a page's result is handed over, the notebook MyST-NB read must equal
  the one executed ahead, field for field, before execution; otherwise the build fails. So
  does a page executed ahead that Sphinx never asks for: no page can silently run twice.
* **the arithmetic.** Each kernel keeps ``OMP_NUM_THREADS``; only more than one kernel runs at
  a time. Two kernels that each spin-wait on two threads fight over two cores (Episode 5 took
  362 s instead of 98 s), so unless it is set already, :func:`start` sets
  ``OMP_WAIT_POLICY=PASSIVE`` for the kernels, under which idle threads sleep. Neither changes
  a sum's order. A build with a single notebook page (``scripts/page.sh``) is left to MyST-NB:
  alone, a page is faster with its threads spinning (Episode 5: 62 s against 72 s).

**No output is lost.** nbclient waits :data:`IOPUB` ``["iopub_timeout"]`` seconds after a cell's
reply for the cell's last outputs, and by default skips what has not arrived by then, without
an error; on a loaded machine a cell's last ``pin()`` displays arrived later and were dropped.
Every execution of a page, ahead or by MyST-NB, waits longer and fails instead of dropping.

Only ``execution_mode: force`` with execution in the page's directory is run ahead (the book's
configuration); anything else is left to MyST-NB, page by page. When a page fails, the build
stops as before; pages not yet started are not started, and those running finish before the
process exits.
"""

from __future__ import annotations

import copy
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path, PurePosixPath

from sphinx.errors import ExtensionError
from sphinx.util import logging

logger = logging.getLogger(__name__)

#: nbclient's settings for the outputs that follow a cell's reply: wait up to two minutes,
#: and fail the page rather than drop an output (see the module docstring).
IOPUB = {"iopub_timeout": 120, "raise_on_iopub_timeout": True}

AT_ONCE = "se_pages_at_once"
FIRST = "se_slowest_pages"

_LOCK = threading.Lock()
_JOBS: dict[str, tuple] = {}  # docname -> (notebook before execution, arguments, its run)
_ENV: list = []               # the build's environment: which page Sphinx is reading
_POOL: list[ThreadPoolExecutor] = []
_LEFT: list[str] = []         # pages executed ahead and never read (build-finished)


def _content(nb) -> dict:
    """A notebook without its cells' ids (nbformat draws a random id for each cell it reads)."""
    return {**nb, "cells": [{k: v for k, v in c.items() if k != "id"} for c in nb.cells]}


def _wrap_execution() -> None:
    """Route MyST-NB's direct execution through the pages executed ahead (once per process)."""
    import myst_nb.core.execute.direct as direct

    if getattr(direct.single_nb_execution, "_se_run", None) is not None:
        return
    run = direct.single_nb_execution

    def execute(nb, cwd, **kwargs):
        docname = _ENV[-1].temp_data.get("docname") if _ENV else None
        with _LOCK:
            job = _JOBS.pop(docname, None) if docname else None
        if job is None:
            return run(nb, cwd, **kwargs, **IOPUB)
        before, planned, future = job
        if _content(nb) != _content(before) or {"cwd": str(cwd), **kwargs} != planned:
            future.cancel()
            raise ExtensionError(
                f"{docname}: the notebook or its execution settings differ from those executed "
                f"ahead (standarderror_book.sphinxext.ahead); build with {AT_ONCE} = 1 and report it")
        result = future.result()
        # the executed notebook, in the objects MyST-NB holds (each cell keeps its id)
        for cell, done in zip(nb.cells, result.nb.cells):
            cell.update({k: v for k, v in done.items() if k != "id"})
        nb.metadata = result.nb.metadata
        result.nb = nb
        return result

    execute._se_run = run
    direct.single_nb_execution = execute


def _notebooks(env) -> list[tuple[str, object, dict]]:
    """(docname, notebook as MyST-NB reads it, the arguments MyST-NB executes it with) for every
    notebook page that MyST-NB would execute directly in its own directory."""
    from myst_nb.core.nb_to_tokens import nb_node_to_dict
    from myst_nb.core.read import create_nb_reader

    out = []
    for docname in sorted(env.found_docs):
        path = Path(env.doc2path(docname))
        text = path.read_text(encoding="utf-8")
        reader = create_nb_reader(str(path), env.myst_config, env.mystnb_config, text)
        if reader is None:
            continue
        nb = reader.read(text)
        cfg = env.mystnb_config
        if cfg.metadata_key in nb.metadata:
            overrides = nb_node_to_dict(nb.metadata[cfg.metadata_key])
            overrides.pop("output_folder", None)
            cfg = cfg.copy(**overrides)
        posix = PurePosixPath(path.as_posix())
        if (cfg.execution_mode != "force" or cfg.execution_in_temp or cfg.kernel_rgx_aliases
                or any(posix.match(p) for p in cfg.execution_excludepatterns)):
            continue  # left to MyST-NB, page by page
        out.append((docname, nb, {"cwd": str(path.parent),
                                  "allow_errors": cfg.execution_allow_errors,
                                  "timeout": cfg.execution_timeout, "meta_override": True}))
    return out


def order(docnames, first) -> list[str]:
    """The order the build starts notebook pages in: the pages named in ``first``
    (``se_slowest_pages``) in its order, then the others in the order given (the build gives
    them sorted by name). Names in ``first`` that are not pages only order."""
    first = [str(d) for d in first or []]
    return sorted(docnames, key=lambda d: first.index(d) if d in first else len(first))


def start(app, env, added, changed, removed) -> list[str]:
    """At ``env-get-outdated`` (every page found, this build's nonce exported): start every
    notebook page's execution, the slowest first. Asks Sphinx to read no further page."""
    n = app.config[AT_ONCE]
    if not isinstance(n, int) or n < 1:
        raise ExtensionError(f"{AT_ONCE} must be an integer of at least 1, got {n!r}")
    _wrap_execution()  # every execution with IOPUB, ahead or not
    if n == 1:
        return []
    pages = _notebooks(env)
    if len(pages) < 2:  # nothing to run beside it: the page is MyST-NB's, threads as they are
        return []
    import myst_nb.core.execute.direct as direct

    run = direct.single_nb_execution._se_run
    rank = {d: i for i, d in enumerate(order([d for d, _, _ in pages], app.config[FIRST]))}
    pages.sort(key=lambda p: rank[p[0]])
    _ENV[:] = [env]
    # Idle OpenMP threads sleep instead of spinning (the kernels inherit it): see above.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    pool = ThreadPoolExecutor(n, thread_name_prefix="se-page")
    _POOL.append(pool)
    for docname, nb, kw in pages:
        before = copy.deepcopy(nb)
        future = pool.submit(run, nb, **kw, **IOPUB)
        with _LOCK:
            _JOBS[docname] = (before, kw, future)
    logger.info(f"[ahead] executing {len(pages)} notebook pages, {n} at a time")
    return []


def finish(app, exception) -> None:
    """At ``build-finished``, before :func:`standarderror_book.sphinxext._finished`: after a failed
    build no page waiting to start is started; a page executed ahead that Sphinx never read is
    kept for :func:`problems`."""
    with _LOCK:
        _LEFT[:] = sorted(_JOBS)
        _JOBS.clear()
    for pool in _POOL:
        pool.shutdown(wait=exception is None, cancel_futures=True)
    _POOL.clear()
    _ENV.clear()


def problems() -> list[str]:
    """The pages executed ahead but never read in this build (each fails it: a page ran, but
    its numbers were never checked)."""
    return [f"ahead {doc}: executed ahead but never read by Sphinx; build with "
            f"{AT_ONCE} = 1 and report it" for doc in _LEFT]
