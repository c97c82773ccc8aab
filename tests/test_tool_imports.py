"""The benchmarks and scripts name the package's modules and functions in import statements, often
inside ``main()``, where nothing runs them until a reader does: every such name must exist.
(``benchmarks/bench_llama_calibration.py`` imported ``llm.measure`` and
``llm.predictions.windows`` for several sessions after both had moved.)"""

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TOOLS = sorted([*ROOT.glob("benchmarks/*.py"), *ROOT.glob("scripts/*.py")])


def _package_imports(path: Path) -> list[tuple[str, str | None]]:
    """(module, name) for every ``from standarderror... import name`` and ``import
    standarderror...`` in the file, wherever it stands (name None for a plain import)."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and (
                node.module.split(".")[0] == "standarderror"):
            out += [(node.module, alias.name) for alias in node.names]
        elif isinstance(node, ast.Import):
            out += [(alias.name, None) for alias in node.names
                    if alias.name.split(".")[0] == "standarderror"]
    return out


def test_the_tools_are_found():
    assert len(TOOLS) >= 10 and any(p.name == "bench_llama_calibration.py" for p in TOOLS)


@pytest.mark.parametrize("path", TOOLS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_package_name_a_tool_imports_exists(path):
    for module, name in _package_imports(path):
        mod = importlib.import_module(module)  # raises if the module moved
        if name is not None and not hasattr(mod, name):
            importlib.import_module(f"{module}.{name}")  # a submodule, or it moved: raises
