"""Lecture code writes files only under a temporary directory it creates itself, and reads
only the package, its data and what it wrote there itself.

A static check (no execution): the code cells of every notebook page in ``_toc.yml`` are read
with jupytext and parsed; every call that writes a file (``savefig``, ``open(..., "w"/"a"/"x")``,
``Path.open``, ``write_text``, ``write_bytes``, ``np.save*``, ``np.savetxt``, ``torch.save``,
``to_csv`` and friends, ``plt.imsave``, ``json.dump`` / ``pickle.dump`` into such a file) must
write to a path rooted in a directory the page made with :mod:`tempfile`
(``tempfile.TemporaryDirectory()``, ``mkdtemp()``, ``NamedTemporaryFile()``, ...). A write to a
literal path, such as ``fig.savefig("/tmp/x.png")`` left over from debugging, is flagged;
writes into an in-memory buffer (``io.BytesIO``) are not file writes.

Reads (``open(path)`` to read, ``read_text``, ``np.load``, ``pd.read_csv``, ``torch.load``,
``safetensors`` loads, ``from_pretrained``, directory listings, ...) must take their path from
a temporary directory the page made (what it wrote itself in this execution) or from the
package (a name imported from ``standarderror``, or ``importlib.resources``): a value read
from an earlier run's file (a cache in the working directory, ``/tmp``, ``~/.cache``) would be
pinned with a fresh nonce, so it is flagged.
"""

from __future__ import annotations

import ast
from pathlib import Path

import jupytext
import pytest
from nbval_pages import notebook_pages  # the one list of notebook pages

ROOT = Path(__file__).resolve().parents[1]

_TEMP_CALLS = {"TemporaryDirectory", "mkdtemp", "NamedTemporaryFile", "mkstemp",
               "TemporaryFile", "SpooledTemporaryFile"}
# method / function name -> how to find the path it writes: ("arg", i, keyword) or ("self",)
_WRITERS = {
    "savefig": ("arg", 0, "fname"),
    "imsave": ("arg", 0, "fname"),
    "save": ("arg", 0, "file"),            # np.save(path, a)
    "savez": ("arg", 0, "file"),
    "savez_compressed": ("arg", 0, "file"),
    "savetxt": ("arg", 0, "fname"),
    "to_csv": ("arg", 0, "path_or_buf"),
    "to_json": ("arg", 0, "path_or_buf"),
    "to_parquet": ("arg", 0, "path"),
    "to_pickle": ("arg", 0, "path"),
    "write_text": ("self",),
    "write_bytes": ("self",),
    "touch": ("self",),
    "dump": ("arg", 1, "fp"),              # json.dump(obj, fp), pickle.dump(obj, file)
}


def code_of(page: str) -> str:
    """The page's code cells as one Python module (IPython magics and shell lines blanked)."""
    nb = jupytext.read(ROOT / page)
    cells = []
    for cell in nb.cells:
        if cell.cell_type == "code":
            lines = [("pass" if ln.lstrip().startswith(("%", "!")) else ln)
                     for ln in cell.source.splitlines()]
            cells.append("\n".join(lines))
    return "\n\n".join(cells)


def _callee(node: ast.Call) -> str:
    f = node.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""


def _names(node) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _has_literal(node) -> bool:
    return any(isinstance(n, (ast.JoinedStr,)) or
               (isinstance(n, ast.Constant) and isinstance(n.value, str))
               for n in ast.walk(node))


def _makes_temp(node) -> bool:
    return any(isinstance(n, ast.Call) and _callee(n) in _TEMP_CALLS for n in ast.walk(node))


def _temp_names(tree) -> set[str]:
    """Names bound to a temporary directory/file the code made, and names derived from them."""
    bindings: list[tuple[set[str], ast.AST]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            targets = set().union(*(_names(t) for t in node.targets))
            bindings.append((targets, node.value))
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)) and node.value is not None:
            bindings.append((_names(node.target), node.value))
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                if item.optional_vars is not None:
                    bindings.append((_names(item.optional_vars), item.context_expr))
        elif isinstance(node, (ast.For, ast.comprehension)):
            bindings.append((_names(node.target), node.iter))
    temp: set[str] = set()
    changed = True
    while changed:
        changed = False
        for targets, value in bindings:
            if targets - temp and (_makes_temp(value) or _names(value) & temp):
                temp |= targets
                changed = True
    return temp


def _literal_names(tree, temp: set[str]) -> set[str]:
    """Names bound to a path built from a literal (and not from a temporary directory)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and _has_literal(node.value) \
                and not (_names(node.value) & temp) and not _makes_temp(node.value):
            if isinstance(node.value, (ast.Constant, ast.JoinedStr, ast.BinOp, ast.Call)):
                out |= set().union(*(_names(t) for t in node.targets))
    return out


def _outside_temp(path, temp: set[str], literal: set[str]) -> bool:
    if path is None:
        return False
    if _names(path) & temp or _makes_temp(path):
        return False
    return _has_literal(path) or bool(_names(path) & literal)


def _mode_writes(node: ast.Call, index: int) -> bool:
    mode = node.args[index] if len(node.args) > index else next(
        (k.value for k in node.keywords if k.arg == "mode"), None)
    return (isinstance(mode, ast.Constant) and isinstance(mode.value, str)
            and bool(set(mode.value) & set("wax+")))


def file_writes_outside_temp(source: str) -> list[str]:
    """Each call in ``source`` that writes a file outside a temporary directory it created."""
    tree = ast.parse(source)
    temp = _temp_names(tree)
    literal = _literal_names(tree, temp)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = _callee(node)
        path = None
        if name == "open" and isinstance(node.func, ast.Name):          # open(path, "w")
            if _mode_writes(node, 1):
                path = node.args[0] if node.args else None
        elif name == "open" and isinstance(node.func, ast.Attribute):   # Path(...).open("w")
            if _mode_writes(node, 0):
                path = node.func.value
        elif name in _WRITERS:
            how = _WRITERS[name]
            if how[0] == "self":
                path = node.func.value if isinstance(node.func, ast.Attribute) else None
            else:
                _, i, kw = how
                path = node.args[i] if len(node.args) > i else next(
                    (k.value for k in node.keywords if k.arg == kw), None)
        if _outside_temp(path, temp, literal):
            found.append(f"line {node.lineno}: {ast.unparse(node)[:100]}")
    return found


@pytest.mark.parametrize("snippet", [
    'fig.savefig("/tmp/h12_ep1_fig1.png")',
    'plt.savefig(f"/tmp/{name}.png", dpi=100)',
    'open("out.txt", "w").write("x")',
    'with open("/tmp/log.json", mode="a") as f:\n    json.dump(d, f)',
    'Path("results.csv").write_text(s)',
    'out = Path("/tmp") / "x.npy"\nnp.save(out, a)',
    'df.to_csv("table.csv")',
    'json.dump(d, open("d.json", "w"))',
    'Path("x.bin").open("wb")',
])
def test_writes_to_literal_paths_are_flagged(snippet):
    assert file_writes_outside_temp(snippet)


@pytest.mark.parametrize("snippet", [
    'import tempfile\ntmp = tempfile.mkdtemp()\nfig.savefig(tmp + "/x.png")',
    'import tempfile\nwith tempfile.TemporaryDirectory() as d:\n'
    '    out = Path(d) / "x.npy"\n    np.save(out, a)\n    (Path(d) / "t.txt").write_text("x")',
    'buf = io.BytesIO()\nfig.savefig(buf, format="png")',
    'text = open("data.txt").read()',
    'with open(path, "r") as f:\n    pass',
    'print(df.to_csv())',
    'plt.show()',
])
def test_reads_buffers_and_temporary_directories_pass(snippet):
    assert not file_writes_outside_temp(snippet)


# function / method name -> which argument is the path it reads: ("arg", i, keyword) or ("self",)
_READERS = {
    "read_text": ("self",), "read_bytes": ("self",), "iterdir": ("self",),
    "glob": ("arg", 0, "pathname"), "rglob": ("self",), "iglob": ("arg", 0, "pathname"),
    "listdir": ("arg", 0, "path"), "scandir": ("arg", 0, "path"), "walk": ("arg", 0, "top"),
    "load": ("arg", 0, "file"),            # np.load(path), torch.load(path), joblib.load(path)
    "loadtxt": ("arg", 0, "fname"), "genfromtxt": ("arg", 0, "fname"),
    "fromfile": ("arg", 0, "file"), "memmap": ("arg", 0, "filename"),
    "read_csv": ("arg", 0, "filepath_or_buffer"), "read_table": ("arg", 0, "filepath_or_buffer"),
    "read_json": ("arg", 0, "path_or_buf"), "read_parquet": ("arg", 0, "path"),
    "read_pickle": ("arg", 0, "filepath_or_buffer"), "read_excel": ("arg", 0, "io"),
    "read_feather": ("arg", 0, "path"),
    "load_file": ("arg", 0, "filename"), "safe_open": ("arg", 0, "filename"),
    "imread": ("arg", 0, "fname"), "from_pretrained": ("arg", 0, "pretrained_model_name_or_path"),
    "HFModel": ("arg", 0, "name"), "connect": ("arg", 0, "database"),
    "File": ("arg", 0, "name"),            # h5py.File
}


def _package_names(tree) -> set[str]:
    """Names bound to the package (imported from standarderror) or to importlib.resources."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and (
                node.module.split(".")[0] == "standarderror"
                or node.module.startswith("importlib")):
            out |= {a.asname or a.name for a in node.names}
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "standarderror" or a.name.startswith("importlib"):
                    out.add((a.asname or a.name).split(".")[0])
    return out


def _derived(tree, roots: set[str]) -> set[str]:
    """``roots`` and every name bound from an expression that uses one of them."""
    bindings = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            bindings.append((set().union(*(_names(t) for t in node.targets)), node.value))
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)) and node.value is not None:
            bindings.append((_names(node.target), node.value))
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                if item.optional_vars is not None:
                    bindings.append((_names(item.optional_vars), item.context_expr))
        elif isinstance(node, (ast.For, ast.comprehension)):
            bindings.append((_names(node.target), node.iter))
    out = set(roots)
    changed = True
    while changed:
        changed = False
        for targets, value in bindings:
            if targets - out and _names(value) & out:
                out |= targets
                changed = True
    return out


def _reads_mode(node: ast.Call, index: int) -> bool:
    mode = node.args[index] if len(node.args) > index else next(
        (k.value for k in node.keywords if k.arg == "mode"), None)
    if mode is None:
        return True
    return not (isinstance(mode, ast.Constant) and isinstance(mode.value, str)
                and set(mode.value) & set("wax"))


def file_reads_outside(source: str) -> list[str]:
    """Each call in ``source`` that reads a file neither from the package nor from a
    temporary directory the code made itself."""
    tree = ast.parse(source)
    packaged = _package_names(tree)
    allowed = _derived(tree, _temp_names(tree) | packaged)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = _callee(node)
        path, reads = None, False
        if name == "open" and isinstance(node.func, ast.Name):          # open(path)
            reads, path = _reads_mode(node, 1), (node.args[0] if node.args else None)
        elif name == "open" and isinstance(node.func, ast.Attribute):   # Path(...).open()
            base = node.func.value
            if isinstance(base, ast.Name) and base.id in ("Image", "shelve"):
                reads, path = True, node.args[0] if node.args else None  # Image.open(path)
            else:
                reads, path = _reads_mode(node, 0), base
        elif name in _READERS:
            how = _READERS[name]
            reads = True
            if how[0] == "self":
                path = node.func.value if isinstance(node.func, ast.Attribute) else None
            else:
                _, i, kw = how
                path = node.args[i] if len(node.args) > i else next(
                    (k.value for k in node.keywords if k.arg == kw), None)
                if name == "load" and path is not None and not isinstance(
                        node.func, ast.Attribute):
                    reads = False       # a bare load(...) is the page's own function
                if name in ("load", "connect", "File") and isinstance(path, ast.Call) \
                        and _callee(path) == "open":
                    reads = False       # json.load(open(p)): the open() is checked itself
        if not reads or path is None:
            continue
        if isinstance(node.func, ast.Attribute) and _names(node.func.value) & packaged:
            continue                    # the package's own loader (tiny.load verifies hashes)
        if isinstance(path, ast.Call) and _callee(path) in ("BytesIO", "StringIO"):
            continue                    # an in-memory buffer
        if _names(path) & allowed or _makes_temp(path):
            continue
        if isinstance(path, ast.Name) and name == "load" and path.id in (
                "f", "fh", "fp", "buf", "buffer", "stream"):
            continue                    # json.load(f) of a file opened (and checked) above
        found.append(f"line {node.lineno}: {ast.unparse(node)[:100]}")
    return found


@pytest.mark.parametrize("snippet", [
    'acc = float(open("cache/acc.txt").read())',
    'import numpy as np\nlogits = np.load("/tmp/logits.npy")',
    'from pathlib import Path\nold = Path.home() / ".cache" / "x.json"\nv = old.read_text()',
    'import os\ncache = os.environ["CACHE"]\nwith open(cache, "rb") as f:\n    pass',
    'import tempfile\nold = Path(tempfile.gettempdir()) / "run.npy"\na = np.load(old)',
    'import pandas as pd\ndf = pd.read_csv("results.csv")',
    'import torch\nstate = torch.load("model.pt")',
    'from transformers import AutoModel\nm = AutoModel.from_pretrained("gpt2")',
    'import glob\nfiles = glob.glob("runs/*.json")',
])
def test_reads_of_earlier_runs_files_are_flagged(snippet):
    assert file_reads_outside(snippet)


@pytest.mark.parametrize("snippet", [
    'import tempfile\nwork = tempfile.TemporaryDirectory()\n'
    'out = f"{work.name}/x.json"\nopen(out, "w").write("1")\nv = open(out).read()',
    'import tempfile, numpy as np\nwith tempfile.TemporaryDirectory() as d:\n'
    '    np.save(d + "/a.npy", [1])\n    a = np.load(d + "/a.npy")',
    'from standarderror.llm import tiny\ncard = open(tiny.CARD).read()',
    'from importlib import resources\n'
    'text = (resources.files("standarderror") / "data.txt").read_text()',
    'import io\nbuf = io.BytesIO()\nimg = plt.imread(io.BytesIO(b""))',
    'def load(n):\n    return n\nx = load(3)',
    'open("out.txt", "w")',            # a write: the writes check flags it, not this one
    'from standarderror.llm import tiny\nm = tiny.load(400, directory=tiny.OVERFIT)',
])
def test_reads_of_the_package_and_of_own_temporary_files_pass(snippet):
    assert not file_reads_outside(snippet)


def test_there_are_notebook_pages():
    assert len(notebook_pages()) >= 5


@pytest.mark.parametrize("page", notebook_pages())
def test_lecture_code_writes_only_under_a_temporary_directory(page):
    found = file_writes_outside_temp(code_of(page))
    assert not found, (f"{page} writes files outside a temporary directory it creates "
                       f"(tempfile): {found}")


@pytest.mark.parametrize("page", notebook_pages())
def test_lecture_code_reads_only_the_package_and_what_it_wrote(page):
    found = file_reads_outside(code_of(page))
    assert not found, (f"{page} reads files that are neither the package's nor written by "
                       f"the page itself in a temporary directory: {found}")
