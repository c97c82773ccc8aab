"""Lecture code writes files only under a temporary directory it creates itself.

A static check (no execution): the code cells of every notebook page in ``_toc.yml`` are read
with jupytext and parsed; every call that writes a file (``savefig``, ``open(..., "w"/"a"/"x")``,
``Path.open``, ``write_text``, ``write_bytes``, ``np.save*``, ``np.savetxt``, ``torch.save``,
``to_csv`` and friends, ``plt.imsave``, ``json.dump`` / ``pickle.dump`` into such a file) must
write to a path rooted in a directory the page made with :mod:`tempfile`
(``tempfile.TemporaryDirectory()``, ``mkdtemp()``, ``NamedTemporaryFile()``, ...). A write to a
literal path, such as ``fig.savefig("/tmp/x.png")`` left over from debugging, is flagged;
writes into an in-memory buffer (``io.BytesIO``) are not file writes.
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


def test_there_are_notebook_pages():
    assert len(notebook_pages()) >= 5


@pytest.mark.parametrize("page", notebook_pages())
def test_lecture_code_writes_only_under_a_temporary_directory(page):
    found = file_writes_outside_temp(code_of(page))
    assert not found, (f"{page} writes files outside a temporary directory it creates "
                       f"(tempfile): {found}")
