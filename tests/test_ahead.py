"""Notebook pages executed ahead, several at once (standarderror_book/sphinxext/ahead.py): the pages
of a throwaway book run at the same time under ``se_pages_at_once: 2`` and one after another
under 1, their pins checked fresh either way; a notebook that differs from the one executed
ahead, and a page executed ahead but never read, each fail the build. (That every pin, figure
and printed output of the real book is the same either way is checked by hand, with
``scripts/glue.py diff`` and ``benchmarks/bench_pages_at_once.py``.)"""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
import yaml
from myst_page import front

ROOT = Path(__file__).resolve().parents[1]

PAGE = front() + """
# Page NAME

```{code-cell} ipython3
import json, os, time
from standarderror_book.page import pin
start = time.time()
time.sleep(SLEEP)
print(json.dumps({"start": start, "end": time.time(), "wait": os.environ.get("OMP_WAIT_POLICY")}))
pin("answer", sum([0.125, 0.125]))  # computed, as a pinned value must be
```

The answer is {pin}`answer=0.25`.
"""


def _book(tmp_path: Path, at_once: int, sleep: float) -> Path:
    book = tmp_path / f"book{at_once}"
    (book / "lectures").mkdir(parents=True)
    (book / "book").mkdir()
    cfg = yaml.safe_load((ROOT / "_config.yml").read_text())
    cfg["sphinx"]["config"]["se_pages_at_once"] = at_once
    cfg["sphinx"]["config"]["se_slowest_pages"] = ["lectures/c"]
    (book / "_config.yml").write_text(yaml.safe_dump(cfg, sort_keys=False))
    shutil.copy(ROOT / "book" / "references.bib", book / "book" / "references.bib")
    shutil.copytree(ROOT / "book" / "_static", book / "book" / "_static")
    for name in "abc":
        (book / "lectures" / f"{name}.md").write_text(
            PAGE.replace("NAME", name).replace("SLEEP", str(sleep)))
    (book / "_toc.yml").write_text("format: jb-book\nroot: lectures/a\nchapters:\n"
                                   "  - file: lectures/b\n  - file: lectures/c\n")
    return book


def _build(book: Path, **env) -> subprocess.CompletedProcess:
    jb = Path(sys.executable).with_name("jupyter-book")
    environ = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    return subprocess.run([str(jb), "build", str(book), "--all", "-W", "--keep-going"],
                          capture_output=True, text=True, timeout=300, env={**environ, **env})


def _runs(book: Path) -> dict[str, dict]:
    """Each page's printed run: when its cell started and ended, and its OMP_WAIT_POLICY."""
    out = {}
    for name in "abc":
        nb = nbformat.read(book / "_build" / "jupyter_execute" / "lectures" / f"{name}.ipynb", 4)
        text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code"
                       for o in c.outputs if o.output_type == "stream")
        out[name] = json.loads(re.search(r"\{.*\}", text).group(0))
    return out


@pytest.mark.slow  # two throwaway books built with jupyter-book
def test_pages_run_at_once_or_in_turn_with_fresh_pins(tmp_path):
    together = _book(tmp_path, 2, 3)  # 3 s each: more than a kernel's start-up under load
    r = _build(together)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "[ahead] executing 3 notebook pages, 2 at a time" in r.stdout
    a, b, c = (_runs(together)[k] for k in "abc")
    # c (named slowest) and a (first in reading order) ran side by side; b waited for one of them
    assert max(a["start"], c["start"]) < min(a["end"], c["end"]), (a, c)
    assert b["start"] >= min(a["end"], c["end"]) - 0.5, (a, b, c)
    assert {run["wait"] for run in (a, b, c)} == {"PASSIVE"}        # set for the kernels
    html = (together / "_build" / "html" / "lectures" / "c.html").read_text()
    assert re.search(r'<span class="pin"[^>]*>0\.25</span>', html)  # the pin checked, fresh

    apart = _book(tmp_path, 1, 1)     # in turn the order is the reading order, not a race
    r = _build(apart)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "[ahead]" not in r.stdout
    a, b, c = (_runs(apart)[k] for k in "abc")
    assert a["end"] <= b["start"] and b["end"] <= c["start"], (a, b, c)  # in reading order
    assert {run["wait"] for run in (a, b, c)} == {None}             # nothing set when serial


@pytest.fixture
def direct(monkeypatch):
    """MyST-NB's direct execution wrapped by ahead.py, with a stand-in for the real run (which
    records its calls), and ahead.py's state emptied before and after."""
    import myst_nb.core.execute.direct as direct

    from standarderror_book.sphinxext import ahead

    calls = []

    def run(nb, cwd, **kwargs):
        calls.append(cwd)
        return "ran"

    monkeypatch.setattr(direct, "single_nb_execution", run)
    for state in (ahead._JOBS, ahead._ENV, ahead._LEFT):
        state.clear()
    ahead._wrap_execution()
    yield direct, ahead, calls
    for state in (ahead._JOBS, ahead._ENV, ahead._LEFT):
        state.clear()


class _Env:
    def __init__(self, docname):
        self.temp_data = {"docname": docname}


def _notebook(source: str):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(source)]
    return nb


def test_a_notebook_that_differs_from_the_one_run_ahead_fails(direct):
    from concurrent.futures import Future

    from sphinx.errors import ExtensionError

    direct, ahead, calls = direct
    kw = {"cwd": "/book/lectures", "allow_errors": False, "timeout": 60, "meta_override": True}
    ahead._ENV[:] = [_Env("lectures/a")]
    ahead._JOBS["lectures/a"] = (_notebook("x = 1"), kw, Future())
    with pytest.raises(ExtensionError, match="lectures/a: the notebook or its execution"):
        direct.single_nb_execution(_notebook("x = 2"), **kw)
    ahead._JOBS["lectures/a"] = (_notebook("x = 1"), kw, Future())
    with pytest.raises(ExtensionError, match="differ from those executed ahead"):
        direct.single_nb_execution(_notebook("x = 1"), **{**kw, "timeout": 61})
    assert calls == []                                   # neither ran a second time
    # a page not run ahead (here: another docname) is executed as before
    assert direct.single_nb_execution(_notebook("y = 1"), **kw) == "ran"
    assert calls == ["/book/lectures"]


def test_the_same_notebook_gets_the_executed_outputs_and_keeps_its_ids(direct):
    from concurrent.futures import Future

    from jupyter_cache.executors.utils import ExecutionResult

    direct, ahead, calls = direct
    kw = {"cwd": "/book/lectures", "allow_errors": False, "timeout": 60, "meta_override": True}
    read_by_mystnb, ahead_copy = _notebook("print(1)"), _notebook("print(1)")
    assert read_by_mystnb.cells[0].id != ahead_copy.cells[0].id  # nbformat draws ids
    done = _notebook("print(1)")
    done.cells[0].outputs = [nbformat.v4.new_output("stream", text="1\n")]
    done.cells[0].execution_count = 1
    done.metadata["language_info"] = {"name": "python"}
    future = Future()
    future.set_result(ExecutionResult(done, kw["cwd"], 1.5))
    ahead._ENV[:] = [_Env("lectures/a")]
    ahead._JOBS["lectures/a"] = (ahead_copy, kw, future)
    ident = read_by_mystnb.cells[0].id
    result = direct.single_nb_execution(read_by_mystnb, **kw)
    assert result.nb is read_by_mystnb and result.time == 1.5 and calls == []
    assert read_by_mystnb.cells[0].outputs[0].text == "1\n"
    assert read_by_mystnb.cells[0].execution_count == 1
    assert read_by_mystnb.cells[0].id == ident
    assert read_by_mystnb.metadata["language_info"] == {"name": "python"}


def test_a_page_run_ahead_and_never_read_is_a_problem(direct):
    from concurrent.futures import Future

    _, ahead, _ = direct
    done = Future()
    done.set_result(None)
    ahead._JOBS["lectures/z"] = (None, {}, done)
    ahead.finish(None, None)
    assert ahead.problems() == ["ahead lectures/z: executed ahead but never read by Sphinx; "
                                "build with se_pages_at_once = 1 and report it"]
    assert not ahead._JOBS


def test_a_lone_page_is_left_to_myst_nb_and_two_run_with_sleeping_threads(direct, monkeypatch):
    import types

    direct, ahead, calls = direct
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    app = types.SimpleNamespace(config={ahead.AT_ONCE: 2, ahead.FIRST: ["lectures/b"]})
    one = [("lectures/a", _notebook("x = 1"), {"cwd": "/book/lectures"})]
    monkeypatch.setattr(ahead, "_notebooks", lambda env: one)
    assert ahead.start(app, object(), set(), set(), set()) == []
    assert not ahead._JOBS and "OMP_WAIT_POLICY" not in os.environ and not calls
    two = one + [("lectures/b", _notebook("y = 2"), {"cwd": "/book/other"})]
    monkeypatch.setattr(ahead, "_notebooks", lambda env: two)
    ahead.start(app, object(), set(), set(), set())
    assert os.environ["OMP_WAIT_POLICY"] == "PASSIVE" and set(ahead._JOBS) == {"lectures/a",
                                                                               "lectures/b"}
    ahead.finish(app, None)
    assert len(ahead.problems()) == 2  # both started ahead, never read


def test_the_start_order_is_the_named_slowest_then_the_rest_in_the_given_order():
    from standarderror_book.sphinxext import ahead

    docs = ["book/model", "lectures/a", "lectures/b", "lectures/c"]
    assert ahead.order(docs, ["lectures/c", "absent/page", "lectures/a"]) == [
        "lectures/c", "lectures/a", "book/model", "lectures/b"]
    assert ahead.order(docs, None) == docs


def test_every_execution_waits_for_late_outputs_and_never_drops_one(monkeypatch):
    """nbclient skips, without an error, the outputs that arrive more than ``iopub_timeout``
    seconds after a cell's reply (4 s by default: on a loaded machine a cell's last pins were
    lost). Every execution, ahead or by MyST-NB, runs with ahead.IOPUB: a longer wait, then a
    failure instead of a silent drop."""
    import types

    import myst_nb.core.execute.direct as direct

    from standarderror_book.sphinxext import ahead

    seen = []

    def run(nb, cwd, **kwargs):
        seen.append(kwargs)
        return "ran"

    monkeypatch.setattr(direct, "single_nb_execution", run)
    for state in (ahead._JOBS, ahead._ENV, ahead._LEFT):
        state.clear()
    app = types.SimpleNamespace(config={ahead.AT_ONCE: 1, ahead.FIRST: []})
    ahead.start(app, object(), set(), set(), set())   # one at a time: MyST-NB's own order
    direct.single_nb_execution(_notebook("x = 1"), "/book", timeout=60)
    assert seen == [{"timeout": 60, **ahead.IOPUB}]
    assert ahead.IOPUB["raise_on_iopub_timeout"] is True and ahead.IOPUB["iopub_timeout"] > 4
    from nbclient import NotebookClient

    client = NotebookClient(_notebook("x = 1"), **ahead.IOPUB)  # names nbclient knows
    assert client.iopub_timeout == ahead.IOPUB["iopub_timeout"]
    assert client.raise_on_iopub_timeout is True
