"""The notebook tests: every notebook page of the book, executed through nbval.

Loaded by ``tests/conftest.py``, which hands each page to :func:`collect_pages` when pytest
collects ``tests/test_lectures.py``. For each page of ``_toc.yml`` that is a MyST notebook there
are two ways to test it, and each test run executes the page exactly once:

**From its source** (the default; always so on a fresh clone). jupytext converts the page into a
temporary directory and nbval executes the notebook in lax mode, as ``pytest --nbval-lax`` does:
every cell must run without an error, as in a reader's Jupyter. There are no outputs to compare.

**From the book build, strictly.** When ``jupyter-book build`` has left an executed notebook of
the page, ``_build/jupyter_execute/<page>.ipynb``, that is *fresh* (its code cells are the page's
code cells now, and it is newer than every file of the package), nbval re-executes that notebook
in strict mode, as ``pytest --nbval`` does: every cell must run and print exactly what it printed
in the build, after the sanitisers of ``tests/nbval_sanitize.cfg``. On top of nbval's comparison:

* every pinned value is compared at full precision with the build's (myst-nb takes the pins out
  of the stored notebook and keeps them in ``<page>.glue.json``; the re-execution's pins are
  compared with that file and then set aside, so nbval sees the build's outputs);
* every figure is compared pixel for pixel with the build's PNG (nbval skips images). The built
  notebook holds the rendered PNG and not the arrays behind it, so the pixels are the most
  direct record of the data a figure plots that there is to compare against; the same
  matplotlib renders the same data to the same bytes, so any change in the plotted data that
  moves a pixel fails, and a difference names the figure, the number of pixels that differ and
  their bounding box, and saves both PNGs under ``_build/nbval-diff/``.

A difference names the page, the code cell and both outputs in full (with a diff).

**In another arithmetic.** That exact comparison holds only when the re-execution computes as
the build did: the same torch CPU kernels (``ATEN_CPU_CAPABILITY``; the kernels torch really
uses, since asking for more than the CPU offers falls back) and the same thread count
(``OMP_NUM_THREADS``, which orders the sums). ``scripts/book.sh`` records the build's in
``<built notebooks>/arithmetic.json``; ``RERUN_ARITHMETIC=CAPABILITY/THREADS`` (a torch
capability or an emulated CPU; ``.ci/run``: ``old/1``, the older CPU on one thread) starts the
kernels in another (:func:`kernel_env`). When the two differ, last
bits differ by design and the comparison is of what a reader is told:

* every pin is checked against every quote of it in the book's prose (any page's ``{pin}``
  quote, read with the build's parser; the build's check, with its margin,
  :func:`standarderror_book.page.check_quote`), not against the build's last bits;
* printed numbers are compared like pins: each may be the build's or its neighbour at the
  printed precision (one unit in the last printed digit, the most a rounding boundary crossed
  by last-bit noise moves it); the text around them, and any number further off, exactly;
* figures must be the same in number and in size (pixels may move).

The pytest header says which comparison ran.

``NOTEBOOKS_FROM`` chooses: ``source`` (default: every page from its source, so that a local
run never depends on files a build left behind), ``build`` (every page from a fresh build
notebook, or the page fails: ``.ci/run`` sets this after building the book), ``auto`` (the
build's notebook where it is fresh, the source otherwise).
``BUILT_NOTEBOOKS`` points to another build's ``jupyter_execute`` folder.

By hand, the same two checks for one page::

    jupytext --to ipynb -o /tmp/nb/ep3.ipynb lectures/ep3_temperature.md
    pytest --nbval-lax /tmp/nb/ep3.ipynb
    pytest --nbval --nbval-sanitize-with tests/nbval_sanitize.cfg \\
        _build/jupyter_execute/lectures/ep3_temperature.ipynb      # nbval alone: no pins, no figures
"""

from __future__ import annotations

import base64
import difflib
import json
import os
import re
import shutil
import tempfile
from pathlib import Path

import jupytext
import nbformat
import pytest
from nbval.plugin import IPyNbCell, IPyNbFile, NbCellError, get_sanitize_patterns

from standarderror_book.page import GLUE_PREFIX, KERNEL_VARIABLES, arithmetic_env

ROOT = Path(__file__).resolve().parents[1]
SANITIZE = ROOT / "tests" / "nbval_sanitize.cfg"
#: Added in another arithmetic only: printed measures of last-bit noise (see the file).
SANITIZE_ARITHMETIC = ROOT / "tests" / "nbval_sanitize_arithmetic.cfg"
MODES = ("auto", "build", "source")


def notebook_pages() -> list[str]:
    """Every page of ``_toc.yml`` that is a MyST notebook, as a path relative to the root."""
    toc = (ROOT / "_toc.yml").read_text()
    pages = []
    for name in re.findall(r"(?:root|file):\s*(\S+)", toc):
        path = ROOT / f"{name}.md"
        if path.exists() and path.read_text().startswith("---\njupytext:"):
            pages.append(path.relative_to(ROOT).as_posix())
    return pages


def toc_pages() -> list[str]:
    """Every page of ``_toc.yml`` that is a Markdown file, as a path relative to the root."""
    toc = (ROOT / "_toc.yml").read_text()
    names = re.findall(r"(?:root|file):\s*(\S+)", toc)
    return [f"{n}.md" for n in names if (ROOT / f"{n}.md").is_file()]


_QUOTE_ROLE = re.compile(r"\{pin\}`([^`]*)`")


def book_quotes() -> list[tuple[str, int, str, str, str]]:
    """Every ``{pin}`` quote of the book's pages: (quoting page, line, docname of the page that
    pins the value, name, quoted literal), read from the sources with the build's own parser
    (:func:`standarderror_book.sphinxext._split`; a ``page:name`` quote names a docname or its last
    component, as in the build)."""
    from standarderror_book.sphinxext import _split

    pages = toc_pages()
    docs = [p[:-3] for p in pages]
    out = []
    for page in pages:
        for i, line in enumerate((ROOT / page).read_text().splitlines(), 1):
            for m in _QUOTE_ROLE.finditer(line):
                parts = _split(m.group(1))
                if parts is None:
                    continue
                other, name, quoted = parts
                doc = page[:-3]
                if other is not None:
                    match = [d for d in docs if d == other or d.rsplit("/", 1)[-1] == other]
                    doc = match[0] if len(match) == 1 else other
                out.append((page, i, doc, name, quoted))
    return out


def code_cell_lines(page: str) -> list[int]:
    """The line of the page's source where each code cell starts (1-based)."""
    lines = (ROOT / page).read_text().splitlines()
    return [i + 1 for i, line in enumerate(lines) if line.lstrip().startswith("```{code-cell}")]


def built_dir() -> Path:
    return Path(os.environ.get("BUILT_NOTEBOOKS", ROOT / "_build" / "jupyter_execute"))


def mode() -> str:
    value = os.environ.get("NOTEBOOKS_FROM", "source").strip().lower() or "source"
    if value not in MODES:
        raise pytest.UsageError(f"NOTEBOOKS_FROM={value!r}: use one of {', '.join(MODES)}")
    return value


# --------------------------------------------------------------------------------------------
# Arithmetic: which CPU kernels and how many threads the build and the re-execution use

#: The build's arithmetic, written by scripts/book.sh next to the executed notebooks.
ARITHMETIC_FILE = "arithmetic.json"
_CAPABILITY = "import torch; print(torch.backends.cpu.get_cpu_capability())"
_capabilities: dict[tuple, str] = {}


def kernel_env() -> dict[str, str]:
    """The environment the notebooks' kernels start with: the test process's, or, under
    ``RERUN_ARITHMETIC=CAPABILITY/THREADS`` (``default/1``, ``native/1``, ``laptop/2``), the
    arithmetic's (:func:`standarderror_book.page.arithmetic_env`: torch's capability, an emulated
    CPU's library kernels, the thread count)."""
    value = os.environ.get("RERUN_ARITHMETIC", "").strip()
    if not value:
        return dict(os.environ)
    try:
        return arithmetic_env(value)
    except ValueError as e:
        raise pytest.UsageError(f"RERUN_ARITHMETIC={e}") from None


def capability(cap: str | None) -> str:
    """The kernels torch really uses under ``ATEN_CPU_CAPABILITY=cap`` on this CPU (``AVX2``,
    ``DEFAULT``, ...): asking for more than the CPU has falls back, so ``native`` and ``avx2``
    are one arithmetic on an AVX2 machine."""
    key = (cap,)
    if key not in _capabilities:
        import subprocess
        import sys

        env = dict(os.environ)
        env.pop("ATEN_CPU_CAPABILITY", None)
        if cap:
            env["ATEN_CPU_CAPABILITY"] = cap
        _capabilities[key] = subprocess.run([sys.executable, "-c", _CAPABILITY], env=env,
                                            capture_output=True, text=True,
                                            check=True).stdout.strip()
    return _capabilities[key]


def _forced(env) -> str:
    """`` [NAME=value ...]`` for the variables of :data:`KERNEL_VARIABLES` set in ``env``."""
    set_ = [f"{k}={env[k]}" for k in KERNEL_VARIABLES if env.get(k)]
    return f" [{' '.join(set_)}]" if set_ else ""


def arithmetics() -> tuple[str | None, str]:
    """(the build's arithmetic, the re-execution's), each as ``KERNELS/THREADS`` such as
    ``AVX2/2``, followed by `` (BLAS k)`` when numpy's BLAS runs on another number of threads
    (``OPENBLAS_NUM_THREADS``: one in the build and the tests) and by the libraries' forced
    kernels (:data:`KERNEL_VARIABLES`), if any; the build's is None when it left no record
    (scripts/book.sh writes it)."""
    env = kernel_env()
    cap, threads = env.get("ATEN_CPU_CAPABILITY"), env.get("OMP_NUM_THREADS")
    blas = env.get("OPENBLAS_NUM_THREADS") or threads
    rerun = (f"{capability(cap)}/{threads or '?'}" + (f" (BLAS {blas})" if blas != threads else "")
             + _forced(env))
    record = built_dir() / ARITHMETIC_FILE
    if not record.is_file():
        return None, rerun
    data = json.loads(record.read_text())
    omp = data["OMP_NUM_THREADS"]
    # numpy's BLAS follows OMP_NUM_THREADS where OPENBLAS_NUM_THREADS is not set (older builds)
    built_blas = data.get("OPENBLAS_NUM_THREADS") or omp
    build = (f"{data['capability']}/{omp}" + (f" (BLAS {built_blas})" if built_blas != omp else "")
             + _forced(data.get("kernels", {})))
    return build, rerun


def same_arithmetic() -> bool:
    """Whether the strict re-execution runs in the build's arithmetic (exact comparison) or in
    another (pins against their quotes, printed numbers like pins, figures by size): see the
    module docstring. Without a record of the build's, the same unless RERUN_ARITHMETIC says."""
    build, rerun = arithmetics()
    if build is None:
        return not os.environ.get("RERUN_ARITHMETIC", "").strip()
    return build == rerun


def _package_files() -> list[Path]:
    return [p for p in (ROOT / "standarderror").rglob("*")
            if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"]


def _code(nb) -> list[str]:
    return [c.source for c in nb.cells if c.cell_type == "code"]


def freshness(page: str, built: Path | None = None) -> tuple[Path, str | None]:
    """The build's notebook of ``page`` and why it cannot be used (``None`` when it is fresh).

    Fresh means: it exists, its code cells are the page's code cells now (so re-executing it
    tests the page as it is), and it is newer than every file of the package (so its outputs
    were made by the package as it is).
    """
    nb_path = (built or built_dir()) / (page[:-3] + ".ipynb")
    if not nb_path.is_file():
        return nb_path, f"no built notebook {nb_path}"
    nb = nbformat.read(nb_path, as_version=4)
    if _code(nb) != _code(jupytext.read(ROOT / page)):
        return nb_path, f"{nb_path} is stale: the page's code changed after the build"
    built_at = nb_path.stat().st_mtime
    newer = [p for p in _package_files() if p.stat().st_mtime > built_at]
    if newer:
        return nb_path, (f"{nb_path} is stale: {newer[0].relative_to(ROOT)} changed after the "
                         "build")
    return nb_path, None


def plan(pages: list[str] | None = None) -> dict[str, tuple[str, Path, str | None]]:
    """For each page: ("strict", built notebook, None), ("lax", source, why not strict), or
    ("missing", built notebook, why) when NOTEBOOKS_FROM=build and it cannot be used."""
    how = mode()
    out = {}
    for page in pages if pages is not None else notebook_pages():
        if how == "source":
            out[page] = ("lax", ROOT / page, "NOTEBOOKS_FROM=source")
            continue
        nb_path, why = freshness(page)
        if why is None:
            out[page] = ("strict", nb_path, None)
        elif how == "build":
            out[page] = ("missing", nb_path, why)
        else:
            out[page] = ("lax", ROOT / page, why)
    return out


# --------------------------------------------------------------------------------------------
# pytest collection


class NotebookPages(pytest.Collector):
    """One collector under ``tests/test_lectures.py`` that holds every page's notebook."""

    def collect(self):
        for page, (how, path, why) in plan().items():
            if how == "missing":
                item = MissingBuild.from_parent(self, name=page, why=why)
            elif how == "strict":
                item = BuiltNotebook.from_parent(self, path=path, nodeid=f"{page}[strict]")
                item.page, item.note = page, f"re-executed from {path}"
            else:
                target = _source_dir(self.config) / (page[:-3] + ".ipynb")
                target.parent.mkdir(parents=True, exist_ok=True)
                nb = jupytext.read(path)
                nbformat.write(nb, target)
                item = SourceNotebook.from_parent(self, path=target, nodeid=f"{page}[lax]")
                item.page, item.note = page, f"executed from source ({why})"
            if how != "missing":
                item.lines = code_cell_lines(page)
            item.add_marker(pytest.mark.slow)
            item.add_marker(pytest.mark.notebook)
            yield item


_TMP = pytest.StashKey[str]()


def _source_dir(config) -> Path:
    """The run's one temporary directory for the pages converted from source (made on first
    use; :func:`cleanup` removes it)."""
    if _TMP not in config.stash:
        config.stash[_TMP] = tempfile.mkdtemp(prefix="nbval-pages-")
    return Path(config.stash[_TMP])


def cleanup(config) -> None:
    tmp = config.stash.get(_TMP, None)
    if tmp:
        shutil.rmtree(tmp, ignore_errors=True)


class MissingBuild(pytest.Item):
    """NOTEBOOKS_FROM=build and this page has no fresh built notebook: a failure, not a skip."""

    def __init__(self, *, why: str, **kw):
        super().__init__(**kw)
        self.why = why

    def runtest(self):
        raise AssertionError(
            f"{self.name}: NOTEBOOKS_FROM=build, but {self.why}. Build the book first "
            "(bash scripts/book.sh), or run with NOTEBOOKS_FROM=source to execute it from source.")

    def repr_failure(self, excinfo):
        return str(excinfo.value)

    def reportinfo(self):
        return self.path, 0, f"{self.name} (strict: no fresh build)"


class _KernelEnv:
    """Start the kernel with :func:`kernel_env` (``RERUN_ARITHMETIC``)."""

    def setup(self):
        saved = dict(os.environ)
        env = kernel_env()  # read before the environment is cleared: it reads RERUN_ARITHMETIC
        os.environ.clear()
        os.environ.update(env)
        try:
            super().setup()
        finally:
            os.environ.clear()
            os.environ.update(saved)


class SourceNotebook(_KernelEnv, IPyNbFile):
    """The page converted by jupytext, executed as ``pytest --nbval-lax`` would."""

    page = note = ""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.compare_outputs = False  # lax: run every cell, compare nothing (there is nothing)

    def collect(self):
        for cell in super().collect():
            cell.__class__ = PageCell
            yield cell


class BuiltNotebook(_KernelEnv, IPyNbFile):
    """The notebook the build wrote, re-executed as ``pytest --nbval`` would, plus pins and
    figures (see the module docstring)."""

    page = note = ""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.compare_outputs = True  # strict, whatever the command line says
        glue = self.path.with_suffix(".glue.json")
        self.build_pins = json.loads(glue.read_text()) if glue.is_file() else {}
        self.rerun_pins: dict[str, str] = {}
        self.exact = same_arithmetic()

    def get_sanitize_files(self):
        return [str(SANITIZE)] + ([] if self.exact else [str(SANITIZE_ARITHMETIC)])

    def collect(self):
        for cell in super().collect():
            cell.__class__ = BuiltCell
            yield cell
        yield PinsComplete.from_parent(self, name="every pin of the build re-pinned")


class PageCell(IPyNbCell):
    """nbval's cell, reported under the page's name and the line where the cell starts."""

    @property
    def where(self) -> str:
        lines = getattr(self.parent, "lines", [])
        line = f":{lines[self.cell_num]}" if self.cell_num < len(lines) else ""
        return f"{self.parent.page}{line}, code cell {self.cell_num}"

    def reportinfo(self):
        return self.path, 0, f"{self.where} ({self.parent.note})"


def _text(value) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


def _pngs(outputs) -> list[bytes]:
    return [base64.b64decode(_text(o["data"]["image/png"]))
            for o in outputs if "data" in o and "image/png" in o["data"]]


def _is_pin(output) -> bool:
    return output.get("output_type") == "display_data" and any(
        k.startswith(GLUE_PREFIX) for k in output.get("data", {}))


class BuiltCell(PageCell):
    """A cell of a built notebook: nbval's strict comparison, plus pins and figures, and a
    message that names the page, the cell and both outputs in full."""

    def runtest(self):
        try:
            super().runtest()
        except BaseException:
            self.parent.failed = True
            raise
        finally:
            for out in self.test_outputs or []:
                if _is_pin(out):
                    name = out.get("metadata", {}).get("scrapbook", {}).get("name", "?")
                    self.parent.rerun_pins[name] = _text(out["data"][GLUE_PREFIX + "text/plain"])

    def compare_outputs(self, test, ref, skip_compare=None):
        pins = [o for o in test if _is_pin(o)]
        test = [o for o in test if not _is_pin(o)]
        if not self.parent.exact:
            test = _reconcile_numbers(test, ref)
        self._dumped = False
        if not super().compare_outputs(test, ref, skip_compare):
            if not self._dumped:
                self.comparison_traceback += [
                    f"{self.where}:",
                    "--- the build's outputs:", _dump(ref, self.sanitize),
                    "+++ the re-execution's outputs:", _dump(test, self.sanitize)]
            return False
        return self._compare_pins(pins) and self._compare_figures(test, ref)

    def _fail(self, lines: list[str]) -> bool:
        self.comparison_traceback = [f"{self.where}:"] + lines
        return False

    def _compare_pins(self, pins) -> bool:
        build = self.parent.build_pins
        problems = []
        for out in pins:
            name = out.get("metadata", {}).get("scrapbook", {}).get("name", "?")
            value = _text(out["data"][GLUE_PREFIX + "text/plain"])
            if name not in build:
                problems.append(f"pin {name!r} = {value} was not pinned by the build")
                continue
            was = _text(build[name]["data"].get("text/plain"))
            if self.parent.exact and was != value:
                problems.append(f"pin {name!r}: the build computed {was}, the re-execution {value}")
            elif not self.parent.exact:
                problems += _check_against_quotes(self.parent.page, name, was, value)
        return self._fail(problems) if problems else True

    def _compare_figures(self, test, ref) -> bool:
        new, old = _pngs(test), _pngs(ref)
        if len(new) != len(old):
            return self._fail([f"the build drew {len(old)} figure(s), the re-execution {len(new)}"])
        if not self.parent.exact:
            return self._compare_figure_sizes(new, old)
        problems = []
        for k, (a, b) in enumerate(zip(old, new), 1):
            if a != b:
                problems.append(f"figure {k}: " + _describe_png_difference(a, b, self._diff_stem(k)))
        return self._fail(problems) if problems else True

    def _compare_figure_sizes(self, new, old) -> bool:
        """Under another arithmetic: the same figures, of the same size in pixels."""
        import io

        from matplotlib import image

        problems = []
        for k, (a, b) in enumerate(zip(old, new), 1):
            x, y = image.imread(io.BytesIO(a)), image.imread(io.BytesIO(b))
            if x.shape != y.shape:
                problems.append(f"figure {k}: size {x.shape[1]}x{x.shape[0]} in the build, "
                                f"{y.shape[1]}x{y.shape[0]} now")
        return self._fail(problems) if problems else True

    def _diff_stem(self, k: int) -> Path:
        return built_dir().parent / "nbval-diff" / (
            f"{self.parent.page[:-3].replace('/', '__')}-cell{self.cell_num}-figure{k}")

    def format_output_compare(self, key, left, right):
        """Both outputs in full, then a line diff (nbval's default elides the common parts)."""
        left, right = _text(left), _text(right)
        self._dumped = True
        lines = [f"{self.where}: output {key!r} differs",
                 "--- the build's output:", _indent(left),
                 "+++ the re-execution's output:", _indent(right), "diff:"]
        lines += ["  " + d for d in difflib.unified_diff(
            left.splitlines(), right.splitlines(), "build", "re-execution", lineterm="", n=1)]
        self.comparison_traceback.extend(lines)


_quotes: dict[tuple[str, str], list[tuple[str, int, str]]] = {}


def _check_against_quotes(page: str, name: str, was: str, value: str) -> list[str]:
    """Under another arithmetic: every quote of the pin, on any page, holds for the
    re-execution's value (the build's pin check, margin included)."""
    from standarderror_book.page import check_quote

    if not _quotes:
        for qpage, line, doc, qname, quoted in book_quotes():
            _quotes.setdefault((doc, qname), []).append((qpage, line, quoted))
    if (page[:-3], name) not in _quotes:
        return [f"pin {name!r} = {value}: no page quotes it, so another arithmetic cannot be "
                "checked against the prose"]
    problems = []
    for qpage, line, quoted in _quotes[(page[:-3], name)]:
        ok, rendered = check_quote(quoted, float(value))
        if not ok:
            problems.append(f"pin {name!r}: quoted {quoted} ({qpage}:{line}), re-executed "
                            f"{rendered} (exact value {value}; the build computed {was})")
    return problems


_NUMBER = re.compile(r"(-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)")


def printed_move(a: str, b: str) -> float:
    """How far apart two printed numbers are, in units of their last printed digit: 0 when
    they are printed the same, ``inf`` when their forms differ (other digits after the point,
    another exponent)."""
    def form(t):
        mant, _, exp = t.lower().partition("e")
        return len(mant.partition(".")[2]), int(exp or 0)
    if a == b:
        return 0.0
    if form(a) != form(b):
        return float("inf")
    decimals, exp = form(a)
    return abs(float(a) - float(b)) / 10.0 ** (exp - decimals)


def _neighbours(a: str, b: str) -> bool:
    """Whether two printed numbers are equal or one unit apart in their common last digit
    (the most a last-bit change can move a printed value across a rounding boundary)."""
    return printed_move(a, b) <= 1 + 1e-9


def _reconcile_text(test: str, ref: str) -> str:
    """``test`` with each printed number that is a neighbour of the build's (see
    :func:`_neighbours`) replaced by the build's; anything else is left to differ."""
    t, r = _NUMBER.split(test), _NUMBER.split(ref)
    if len(t) != len(r):
        return test
    return "".join(b if k % 2 and a != b and _neighbours(a, b) else a
                   for k, (a, b) in enumerate(zip(t, r)))


def _reconcile_numbers(test: list, ref: list) -> list:
    """Under another arithmetic, printed numbers are compared like pins: a re-executed output
    whose numbers are each the build's or its neighbour at the printed precision is taken as
    the build's; any other difference (text, a number further off) is compared exactly."""
    import copy

    def kind(o):
        return o.get("output_type"), o.get("name"), tuple(sorted(o.get("data", {})))

    by_kind: dict = {}
    for r in ref:
        by_kind.setdefault(kind(r), []).append(r)
    seen: dict = {}
    out = []
    for t in test:   # the j-th output of a kind is compared with the build's j-th of that kind
        j = seen[kind(t)] = seen.get(kind(t), -1) + 1
        same = by_kind.get(kind(t), [])
        r = same[j] if j < len(same) else None
        if r is None:
            out.append(t)
            continue
        t = nbformat.from_dict(copy.deepcopy(dict(t)))
        if "text" in t and "text" in r:
            t["text"] = _reconcile_text(_text(t["text"]), _text(r["text"]))
        for mime, value in t.get("data", {}).items():
            if mime.startswith("text/") and mime in r.get("data", {}):
                t["data"][mime] = _reconcile_text(_text(value), _text(r["data"][mime]))
        out.append(t)
    return out


def _dump(outputs, sanitize) -> str:
    """Every output of a cell as text (a figure as its size), after the sanitisers."""
    parts = []
    for out in outputs:
        if out.get("output_type") == "stream":
            parts.append(f"[{out['name']}]\n" + sanitize(_text(out["text"])))
        elif "data" in out:
            for mime, value in out["data"].items():
                if mime.startswith("image/"):
                    parts.append(f"[{mime}: {len(_text(value))} base64 characters]")
                else:
                    parts.append(f"[{mime}]\n" + sanitize(_text(value)))
        else:
            parts.append(f"[{out.get('output_type')}]")
    return _indent("\n".join(parts)) if parts else "    (no output)"


def _indent(text: str) -> str:
    return "\n".join("    " + line for line in text.splitlines()) or "    (empty)"


def _describe_png_difference(a: bytes, b: bytes, stem: Path) -> str:
    import io

    import numpy as np
    from matplotlib import image

    stem.parent.mkdir(parents=True, exist_ok=True)
    stem.with_name(stem.name + "-build.png").write_bytes(a)
    stem.with_name(stem.name + "-rerun.png").write_bytes(b)
    saved = f"both saved as {stem}-{{build,rerun}}.png"
    x, y = image.imread(io.BytesIO(a)), image.imread(io.BytesIO(b))
    if x.shape != y.shape:
        return f"size {x.shape[1]}x{x.shape[0]} in the build, {y.shape[1]}x{y.shape[0]} now; {saved}"
    diff = np.any(x != y, axis=-1) if x.ndim == 3 else x != y
    if not diff.any():
        return f"same pixels, different PNG bytes (encoder or metadata changed); {saved}"
    rows, cols = np.nonzero(diff)
    return (f"{int(diff.sum())} of {diff.size} pixels differ, within x {cols.min()}-{cols.max()}, "
            f"y {rows.min()}-{rows.max()} (of {x.shape[1]}x{x.shape[0]}); {saved}")


class PinsComplete(pytest.Item):
    """After the last cell: every value the build pinned was pinned again by the re-execution."""

    def runtest(self):
        nb = self.parent
        if getattr(nb, "failed", False):
            pytest.skip("a cell of this notebook failed: its later pins were never computed")
        missing = sorted(set(nb.build_pins) - set(nb.rerun_pins))
        if missing:
            raise AssertionError(f"{nb.page}: the build pinned {', '.join(missing)}, the "
                                 "re-execution did not")

    def reportinfo(self):
        return self.path, 0, f"{self.parent.page}::{self.name}"


def sanitize_patterns(path: Path = SANITIZE) -> list[tuple[str, str]]:
    return get_sanitize_patterns(path.read_text())


__all__ = ["NotebookPages", "cleanup", "notebook_pages", "plan", "freshness", "NbCellError"]
