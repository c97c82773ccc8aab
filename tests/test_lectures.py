"""Every page in the table of contents that is a notebook executes top to bottom, through nbval.

The notebook tests themselves are collected next to this file's tests by ``tests/conftest.py``
(see ``tests/nbval_pages.py``), one nbval notebook per page, reported as ``<page>[lax]::Cell N``
or ``<page>[strict]::Cell N``:

* ``[lax]``: the page converted by jupytext into a temporary directory and executed by nbval in
  lax mode, as ``pytest --nbval-lax`` runs it: every cell must run, as in a reader's Jupyter.
  Always so on a fresh clone, where no book has been built.
* ``[strict]``: with ``NOTEBOOKS_FROM=build`` (``.ci/run``, after the book build) or ``auto``,
  where ``jupyter-book build`` has left a fresh executed notebook of the page, nbval
  re-executes that notebook in strict mode instead: every printed output, every pinned
  value (at full precision) and every figure (pixel for pixel) must come out as in the build,
  after the sanitisers of ``tests/nbval_sanitize.cfg``.

Either way, one execution of each page per test run; the fast tier (``-m "not slow"``) runs
none. The tests below check the machinery itself, on small throwaway notebooks.
"""

import base64
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import jupytext
import nbformat
import nbval_pages
import pytest
from myst_page import front

ROOT = Path(__file__).resolve().parents[1]


def test_there_are_notebook_pages():
    pages = nbval_pages.notebook_pages()
    assert "book/model.md" in pages
    assert all((ROOT / p).is_file() for p in pages)


def test_every_notebook_page_is_planned_once():
    plan = nbval_pages.plan()
    assert sorted(plan) == sorted(nbval_pages.notebook_pages())
    assert {how for how, _, _ in plan.values()} <= {"strict", "lax", "missing"}


def test_notebooks_come_from_source_unless_ci_asks_for_the_build(monkeypatch):
    monkeypatch.delenv("NOTEBOOKS_FROM", raising=False)
    assert nbval_pages.mode() == "source"
    assert {how for how, _, _ in nbval_pages.plan().values()} == {"lax"}



@pytest.mark.slow  # a fresh interpreter collecting the pages
def test_a_run_leaves_no_temporary_directory_behind(tmp_path):
    """The pages converted from source share one temporary directory, removed at the end: a
    collection in a fresh interpreter (TMPDIR pointed at an empty directory) leaves it empty."""
    env = {**os.environ, "TMPDIR": str(tmp_path), "NOTEBOOKS_FROM": "source"}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "0", "-p", "no:cacheprovider", "--collect-only",
         "-q", "-m", "notebook", str(ROOT / "tests" / "test_lectures.py")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    collected = [ln for ln in run.stdout.splitlines() if "[lax]::Cell 0" in ln]
    assert len(collected) == len(nbval_pages.notebook_pages()), run.stdout
    assert not list(tmp_path.iterdir()), sorted(p.name for p in tmp_path.iterdir())

@pytest.mark.parametrize("name", ["nbval_sanitize.cfg", "nbval_sanitize_arithmetic.cfg"])
def test_sanitisers_are_few_and_each_is_explained(name):
    """Every sanitiser in tests/nbval_sanitize.cfg (and in the one for another arithmetic) is
    preceded by a comment saying what varies and where; and there are few of them (each one is
    a hole in the comparison)."""
    text = (ROOT / "tests" / name).read_text()
    patterns = nbval_pages.sanitize_patterns(ROOT / "tests" / name)
    assert len(patterns) <= 6, "more than six sanitisers: is every one of them needed?"
    blocks = re.findall(r"((?:^#.*\n)+)^regex: ", text, flags=re.M)
    assert len(blocks) == len(patterns), "every regex needs a comment block above it"
    for regex, _ in patterns:
        re.compile(regex)


# --------------------------------------------------------------------------------------------
# The strict comparison, on a throwaway "book": a page, its built notebook, its glue file


PAGE = front() + """
# A throwaway page

```{code-cell} ipython3
from standarderror_book.page import pin
print("stable", 1 + 1)
pin(answer=0.25)
```

```{code-cell} ipython3
import matplotlib.pyplot as plt
fig, ax = plt.subplots(figsize=(2, 2), dpi=50)
ax.plot([0, 1], [0, 1])
plt.show()
```
"""


def _built(tmp_path: Path) -> tuple[Path, Path]:
    """A page, executed once as the build does: its notebook with outputs, and its pins moved
    out of the outputs into ``<page>.glue.json`` (what myst-nb stores)."""
    import nbclient

    page = tmp_path / "lectures" / "page.md"
    page.parent.mkdir(parents=True)
    page.write_text(PAGE)
    nb = jupytext.read(page)
    nbclient.NotebookClient(nb, timeout=120, kernel_name="python3",
                            resources={"metadata": {"path": str(page.parent)}}).execute()
    glue = {}
    for cell in nb.cells:
        if cell.cell_type == "code":
            for out in [o for o in cell.outputs if "scrapbook" in o.get("metadata", {})]:
                name = out.metadata.scrapbook.name
                glue[name] = {"output_type": "display_data", "metadata": dict(out.metadata),
                              "data": {"text/plain": out.data[nbval_pages.GLUE_PREFIX + "text/plain"]}}
                cell.outputs.remove(out)
    built = tmp_path / "_build" / "jupyter_execute" / "lectures"
    built.mkdir(parents=True)
    nbformat.write(nb, built / "page.ipynb")
    (built / "page.glue.json").write_text(json.dumps(glue))
    return page, built / "page.ipynb"


def test_freshness_follows_the_code_cells(tmp_path, monkeypatch):
    monkeypatch.setattr(nbval_pages, "ROOT", tmp_path)
    (tmp_path / "standarderror").mkdir()
    page = tmp_path / "lectures" / "page.md"
    page.parent.mkdir(parents=True)
    page.write_text(PAGE)
    built = tmp_path / "_build" / "jupyter_execute"
    nb_path = built / "lectures" / "page.ipynb"
    assert "no built notebook" in nbval_pages.freshness("lectures/page.md", built)[1]
    nb_path.parent.mkdir(parents=True)
    nbformat.write(jupytext.read(page), nb_path)
    assert nbval_pages.freshness("lectures/page.md", built) == (nb_path, None)
    page.write_text(PAGE.replace("1 + 1", "2 + 0"))
    assert "code changed" in nbval_pages.freshness("lectures/page.md", built)[1]
    page.write_text(PAGE)
    (tmp_path / "standarderror" / "new.py").write_text("")
    os.utime(nb_path, (1, 1))
    assert "standarderror/new.py" in nbval_pages.freshness("lectures/page.md", built)[1]


def _run_strict(book: Path, **env) -> subprocess.CompletedProcess:
    """Re-execute the book's built page under the strict check, in a child pytest (whose book
    root, for the quotes of the prose, is ``book``)."""
    (book / "strict_runner.py").write_text(textwrap.dedent(f"""
        import pathlib
        import sys
        sys.path.insert(0, {str(ROOT / "tests")!r})
        import nbval_pages
        nbval_pages.ROOT = pathlib.Path({str(book)!r})

        def pytest_collect_file(file_path, parent):
            if file_path.name == "page.ipynb":
                nb = nbval_pages.BuiltNotebook.from_parent(parent, path=file_path)
                nb.page, nb.note = "lectures/page.md", "throwaway"
                nb.lines = [i + 1 for i, line in enumerate(open("lectures/page.md"))
                            if line.startswith("```{{code-cell}}")]
                return nb
    """))
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "strict_runner",
         "--rootdir", str(book), "--nbval-cell-timeout", "120",
         str(book / "_build" / "jupyter_execute" / "lectures" / "page.ipynb")],
        cwd=book, capture_output=True, text=True, timeout=600,
        env=dict({k: v for k, v in os.environ.items() if k != "RERUN_ARITHMETIC"},
                 PYTHONPATH=str(book), BUILT_NOTEBOOKS=str(book / "_build" / "jupyter_execute"),
                 **env))


def _tamper(nb_path, glued: str):
    """Change the built notebook as another execution might: the printed "stable 2" becomes
    "stable 3", a 4 x 3 pixel patch of the figure turns grey, and the pinned 0.25 becomes
    ``glued`` in the glue record. Returns the notebook and its first code cell."""
    import io

    from matplotlib import image

    nb = nbformat.read(nb_path, as_version=4)
    first, second = [c for c in nb.cells if c.cell_type == "code"]
    first.outputs[0].text = first.outputs[0].text.replace("stable 2", "stable 3")
    png = image.imread(io.BytesIO(base64.b64decode(second.outputs[0].data["image/png"])))
    png[2:5, 3:7, :3] = 0.5
    buffer = io.BytesIO()
    image.imsave(buffer, png, format="png")
    second.outputs[0].data["image/png"] = base64.b64encode(buffer.getvalue()).decode()
    nbformat.write(nb, nb_path)
    glue = nb_path.with_suffix(".glue.json")
    glue.write_text(glue.read_text().replace('"0.25"', f'"{glued}"'))
    return nb, first


@pytest.mark.slow
def test_strict_reexecution_passes_and_names_every_difference(tmp_path):
    """A re-execution of an unchanged build passes; a changed print, a changed pin and a
    changed figure each fail, with the page, the cell and both values in the message."""
    _, nb_path = _built(tmp_path)
    same = _run_strict(tmp_path)
    assert same.returncode == 0, same.stdout + same.stderr

    nb, first = _tamper(nb_path, "0.26")
    differ = _run_strict(tmp_path)
    out = differ.stdout
    assert differ.returncode == 1, out + differ.stderr
    assert "lectures/page.md:14, code cell 0: output 'stdout' differs" in out, out
    assert "stable 3" in out and "stable 2" in out, out
    assert "code cell 1:" in out and "figure 1: 12 of" in out and "x 3-6, y 2-4" in out, out
    assert list((tmp_path / "_build" / "nbval-diff").glob("lectures__page-cell1-figure1-*.png"))

    first.outputs[0].text = first.outputs[0].text.replace("stable 3", "stable 2")
    nbformat.write(nb, nb_path)
    differ = _run_strict(tmp_path)
    assert "pin 'answer': the build computed 0.26, the re-execution 0.25" in differ.stdout, differ.stdout


@pytest.mark.slow
def test_reexecution_in_another_arithmetic_compares_like_pins(tmp_path):
    """When the build's arithmetic (its record) is not the re-execution's: a pin is checked
    against its quote in the prose, not the build's last bits; a printed number may be one unit
    off in its last digit, not two; a figure may differ in its pixels, not in its size."""
    page, nb_path = _built(tmp_path)
    page.write_text(PAGE.replace("# A throwaway page", "# A throwaway page\n\nIt is "
                                 "{pin}`answer=0.25`."))
    (tmp_path / "_toc.yml").write_text("format: jb-book\nroot: lectures/page\n")
    (nb_path.parent.parent / nbval_pages.ARITHMETIC_FILE).write_text(json.dumps(
        {"ATEN_CPU_CAPABILITY": "another", "OMP_NUM_THREADS": "2", "capability": "ANOTHER"}))
    nb, first = _tamper(nb_path, "0.2500001")
    ok = _run_strict(tmp_path)
    assert ok.returncode == 0, ok.stdout + ok.stderr

    first.outputs[0].text = first.outputs[0].text.replace("stable 3", "stable 4")
    nbformat.write(nb, nb_path)
    page.write_text(page.read_text().replace("answer=0.25", "answer=0.26"))
    differ = _run_strict(tmp_path)
    out = differ.stdout
    assert differ.returncode == 1, out + differ.stderr
    assert "output 'stdout' differs" in out and "stable 4" in out, out
    first.outputs[0].text = first.outputs[0].text.replace("stable 4", "stable 2")
    nbformat.write(nb, nb_path)
    differ = _run_strict(tmp_path)
    assert differ.returncode == 1, differ.stdout + differ.stderr
    assert "pin 'answer': quoted 0.26 (lectures/page.md:14), re-executed 0.25" in differ.stdout


@pytest.mark.parametrize("a, b, near", [
    ("0.1234", "0.1235", True), ("0.1234", "0.1236", False), ("12", "13", True),
    ("12", "14", False), ("0.12", "0.1200", False), ("1.5e-03", "1.6e-03", True),
    ("1.5e-03", "1.5e-04", False), ("-0.001", "0.000", True), ("0.9", "1.0", True),
])
def test_printed_numbers_are_neighbours_at_most_one_unit_apart(a, b, near):
    assert nbval_pages._neighbours(a, b) is near


def test_reconcile_takes_only_neighbouring_numbers_from_the_build():
    ref = "ECE 0.0366 over 1,024 rows (T = 1.10)"
    assert nbval_pages._reconcile_text("ECE 0.0365 over 1,024 rows (T = 1.10)", ref) == ref
    far = "ECE 0.0364 over 1,024 rows (T = 1.10)"
    assert nbval_pages._reconcile_text(far, ref) == far
    words = "ECE 0.0365 over 1,024 lines (T = 1.10)"
    assert nbval_pages._reconcile_text(words, ref) == "ECE 0.0366 over 1,024 lines (T = 1.10)"


@pytest.mark.parametrize("value", ["fast", "default", "default/one", "avx3/1", "laptop/0"])
def test_rerun_arithmetic_must_be_capability_slash_threads(monkeypatch, value):
    monkeypatch.setenv("RERUN_ARITHMETIC", value)
    with pytest.raises(pytest.UsageError, match="RERUN_ARITHMETIC=.*CAPABILITY/THREADS"):
        nbval_pages.kernel_env()


def test_rerun_arithmetic_sets_the_kernels_environment(monkeypatch):
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "avx2")
    monkeypatch.setenv("RERUN_ARITHMETIC", "native/1")
    env = nbval_pages.kernel_env()
    assert "ATEN_CPU_CAPABILITY" not in env and env["OMP_NUM_THREADS"] == "1"
    monkeypatch.setenv("RERUN_ARITHMETIC", "default/3")
    env = nbval_pages.kernel_env()
    assert env["ATEN_CPU_CAPABILITY"] == "default" and env["OMP_NUM_THREADS"] == "3"


def test_rerun_arithmetic_may_be_an_emulated_cpu_and_others_keep_the_machines_kernels(monkeypatch):
    """``laptop/2`` forces torch's capability and the libraries' kernels together
    (standarderror_book.page.EMULATED_CPUS), as scripts/fragility.py's settings do; a library
    variable the machine sets is kept by every arithmetic that does not force it."""
    monkeypatch.setenv("OPENBLAS_CORETYPE", "Prescott")  # the machine's
    monkeypatch.delenv("OPENBLAS_L2_SIZE", raising=False)
    monkeypatch.setenv("RERUN_ARITHMETIC", "laptop/2")
    env = nbval_pages.kernel_env()
    assert {k: env.get(k) for k in ("ATEN_CPU_CAPABILITY", "OMP_NUM_THREADS",
                                    *nbval_pages.KERNEL_VARIABLES)} == {
        "ATEN_CPU_CAPABILITY": "avx2", "OMP_NUM_THREADS": "2", "OPENBLAS_CORETYPE": "Haswell",
        "OPENBLAS_L2_SIZE": None, "MKL_ENABLE_INSTRUCTIONS": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"}
    assert nbval_pages.arithmetics()[1].endswith(
        "[OPENBLAS_CORETYPE=Haswell MKL_ENABLE_INSTRUCTIONS=AVX2 ONEDNN_MAX_CPU_ISA=AVX2]")
    monkeypatch.setenv("RERUN_ARITHMETIC", "native/1")
    assert nbval_pages.kernel_env()["OPENBLAS_CORETYPE"] == "Prescott"
    monkeypatch.delenv("RERUN_ARITHMETIC")
    assert nbval_pages.kernel_env()["OPENBLAS_CORETYPE"] == "Prescott"  # unset: inherited


def test_the_kernel_starts_in_the_rerun_arithmetic_with_the_whole_environment(monkeypatch):
    """_KernelEnv swaps the process environment for the kernel's while nbval starts the
    kernel. kernel_env() must be read before the swap: read after os.environ is cleared, it
    sees no RERUN_ARITHMETIC and hands the kernel an empty environment, and a re-execution
    in "another arithmetic" would run the build's kernels."""
    monkeypatch.setenv("RERUN_ARITHMETIC", "default/1")
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "avx2")
    seen: dict = {}

    class Start:  # stands for nbval's IPyNbFile.setup, which starts the kernel
        def setup(self):
            seen.update(os.environ)

    class Probe(nbval_pages._KernelEnv, Start):
        pass

    before = dict(os.environ)
    Probe().setup()
    assert seen["ATEN_CPU_CAPABILITY"] == "default" and seen["OMP_NUM_THREADS"] == "1"
    assert seen["OPENBLAS_NUM_THREADS"] == "1"  # tests/conftest.py's, kept
    set_ = ("ATEN_CPU_CAPABILITY", "OMP_NUM_THREADS")  # the machine's library variables kept
    assert {k: v for k, v in seen.items() if k not in set_} == {
        k: v for k, v in before.items() if k not in set_}
    assert dict(os.environ) == before  # restored


@pytest.mark.slow  # starts a Jupyter kernel and imports torch in it
def test_a_started_kernel_computes_in_the_rerun_arithmetic(monkeypatch):
    """End to end: a kernel started the way the notebook tests start theirs reports the torch
    kernels and threads that RERUN_ARITHMETIC asks for."""
    from nbval.kernel import RunningKernel

    monkeypatch.setenv("RERUN_ARITHMETIC", "default/1")

    class Start:
        def setup(self):
            self.kernel = RunningKernel("python3")

    probe = type("Probe", (nbval_pages._KernelEnv, Start), {})()
    probe.setup()
    try:
        probe.kernel.execute_cell_input(
            "import os, torch; print(torch.backends.cpu.get_cpu_capability(), "
            "torch.get_num_threads(), os.environ.get('OPENBLAS_NUM_THREADS'))",
            allow_stdin=False)
        text = ""
        while not text:
            msg = probe.kernel.get_message(stream="iopub", timeout=60)
            if msg["msg_type"] == "stream":
                text = msg["content"]["text"]
    finally:
        probe.kernel.stop()
    assert text.split() == ["DEFAULT", "1", "1"]


def test_numpys_blas_threads_are_part_of_the_build_arithmetic(monkeypatch, tmp_path):
    """The kernels run numpy's BLAS on one thread (tests/conftest.py), as scripts/book.sh
    does; a record without OPENBLAS_NUM_THREADS (an older build, whose BLAS followed
    OMP_NUM_THREADS) is another arithmetic unless its threads were one."""
    assert nbval_pages.kernel_env()["OPENBLAS_NUM_THREADS"] == "1"
    monkeypatch.delenv("RERUN_ARITHMETIC", raising=False)
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    monkeypatch.setattr(nbval_pages, "built_dir", lambda: tmp_path)
    cap = nbval_pages.capability(os.environ.get("ATEN_CPU_CAPABILITY"))
    # the library kernels this machine forces, if any, recorded as scripts/book.sh records them
    kernels = {k: os.environ[k] for k in nbval_pages.KERNEL_VARIABLES if os.environ.get(k)}
    record = {"ATEN_CPU_CAPABILITY": os.environ.get("ATEN_CPU_CAPABILITY"),
              "OMP_NUM_THREADS": "2", "capability": cap, "kernels": kernels}
    (tmp_path / nbval_pages.ARITHMETIC_FILE).write_text(json.dumps(record))
    assert not nbval_pages.same_arithmetic()  # BLAS on 2 threads then, on 1 now
    record["OPENBLAS_NUM_THREADS"] = "1"
    (tmp_path / nbval_pages.ARITHMETIC_FILE).write_text(json.dumps(record))
    assert nbval_pages.same_arithmetic()
    assert nbval_pages.arithmetics()[0] == f"{cap}/2 (BLAS 1)" + nbval_pages._forced(kernels)


def test_forced_library_kernels_are_part_of_the_build_arithmetic(monkeypatch, tmp_path):
    """A build whose BLAS kernels were forced (an AVX2 laptop emulated with OPENBLAS_CORETYPE
    and MKL_ENABLE_INSTRUCTIONS) is another arithmetic than a re-execution without them, and
    the same one with them; the variables are recorded as scripts/book.sh writes them."""
    monkeypatch.delenv("RERUN_ARITHMETIC", raising=False)
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    for k in nbval_pages.KERNEL_VARIABLES:
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setattr(nbval_pages, "built_dir", lambda: tmp_path)
    cap = nbval_pages.capability(os.environ.get("ATEN_CPU_CAPABILITY"))
    forced = {"OPENBLAS_CORETYPE": "Haswell", "MKL_ENABLE_INSTRUCTIONS": "AVX2"}
    record = {"ATEN_CPU_CAPABILITY": os.environ.get("ATEN_CPU_CAPABILITY"),
              "OMP_NUM_THREADS": "2", "OPENBLAS_NUM_THREADS": "1", "capability": cap,
              "kernels": forced}
    (tmp_path / nbval_pages.ARITHMETIC_FILE).write_text(json.dumps(record))
    assert not nbval_pages.same_arithmetic()
    assert nbval_pages.arithmetics()[0] == (f"{cap}/2 (BLAS 1) "
                                            "[OPENBLAS_CORETYPE=Haswell MKL_ENABLE_INSTRUCTIONS=AVX2]")
    for k, v in forced.items():
        monkeypatch.setenv(k, v)
    assert nbval_pages.same_arithmetic()


def test_every_quote_of_the_book_names_a_notebook_page():
    """The quotes the cross-arithmetic check reads resolve, as the build resolves them."""
    pages = {p[:-3] for p in nbval_pages.notebook_pages()}
    quotes = nbval_pages.book_quotes()
    assert any(q[0] == "book/syllabus.md" for q in quotes)
    assert {doc for _, _, doc, _, _ in quotes} <= pages


def test_the_next_sections_walk_the_book_in_the_order_of_the_table_of_contents():
    """Each page's "Next" section links the page that follows it in ``_toc.yml``, from the
    landing page to the API reference's overview (whose pages the theme's own previous/next
    links walk), so the reading path is one chain with no loop."""
    import yaml

    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    order = [toc["root"]] + [ch["file"] for part in toc["parts"] for ch in part["chapters"]]
    order = order[:order.index("book/api") + 1]
    problems = []
    for page, following in zip(order, order[1:]):
        text = (ROOT / f"{page}.md").read_text(encoding="utf-8")
        section = re.search(r"\n## Next\n(.*?)(?=\n## |\Z)", text, re.S)
        if section is None:
            problems.append(f"{page}: no Next section")
            continue
        targets = [os.path.normpath(os.path.join(os.path.dirname(page), t)) for t in
                   re.findall(r"\{doc\}`(?:[^`<]*<)?([^`<>]+)>?`", section.group(1))]
        if not targets or targets[0] != following:
            problems.append(f"{page}: Next leads to {targets[:1]}, not {following}")
    assert not problems, "\n".join(problems)
