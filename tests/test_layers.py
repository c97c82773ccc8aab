"""The layers run one way (ARCHITECTURE.md, "Layers"), checked on a fresh interpreter's
``sys.modules``: the metrics over arrays load neither torch nor the model package, and the
model package loads no experiment; and in the source, no function of a lower layer imports a
higher one."""

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: The metrics layer: functions over arrays.
METRICS = ("standarderror._checks", "standarderror._parallel", "standarderror._progress",
           "standarderror.uncertainty.scaling",
           "standarderror.uncertainty.metrics", "standarderror.uncertainty.ranks",
           "standarderror.uncertainty.selective", "standarderror.uncertainty.confidence_order",
           "standarderror.uncertainty.calibration",
           "standarderror.uncertainty.binning", "standarderror.uncertainty.coverage",
           "standarderror.uncertainty.conformal", "standarderror.uncertainty.set_size",
           "standarderror.uncertainty.set_size_demo",
           "standarderror.uncertainty.exchangeability", "standarderror.uncertainty.training",
           "standarderror.uncertainty.coverage_results", "standarderror.uncertainty.ece_results",
           "standarderror.uncertainty.scaling_results",
           "standarderror.spectral", "standarderror.spectral._gram",
           "standarderror.spectral.scores", "standarderror.spectral.authors",
           "standarderror.spectral.clusters", "standarderror.spectral.targets",
           "standarderror.spectral.diagrams", "standarderror.spectral.subsample",
           "standarderror.spectral.baselines")
#: The model layer.
MODEL = ("standarderror.llm.tiny", "standarderror.llm.corpus", "standarderror.llm.gpt",
         "standarderror.llm.weights", "standarderror.llm.windows", "standarderror.llm.interface",
         "standarderror.llm.interface.base", "standarderror.llm.interface.tiny_lm",
         "standarderror.llm.interface.directory", "standarderror.llm.interface.hf",
         "standarderror.llm.predictions", "standarderror.llm.semantic", "standarderror.llm.export",
         "standarderror.llm.prefix_tree")

_PROBE = r"""
import importlib, json, sys
out = {}
for name in sys.argv[2:]:
    importlib.import_module(name)
    out[name] = sorted(m for m in sys.modules
                       if m == "torch" or m.startswith(tuple(json.loads(sys.argv[1]))))
print(json.dumps(out))
"""


def _loaded(modules, forbidden) -> dict:
    """For each module imported in turn in one fresh interpreter: the forbidden modules
    loaded so far (the first module that names any is the one that loaded it)."""
    run = subprocess.run([sys.executable, "-c", _PROBE, json.dumps(list(forbidden)), *modules],
                         capture_output=True, text=True, cwd=ROOT, check=True)
    return json.loads(run.stdout)


def _printed(probe: str) -> list[str]:
    """The words a fresh interpreter prints running ``probe``."""
    return subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          cwd=ROOT, check=True).stdout.split()


def test_the_metrics_layer_loads_neither_torch_nor_the_model():
    got = _loaded(METRICS, ("standarderror.llm", "standarderror.experiments"))
    assert list(got) == list(METRICS)
    assert got == {m: [] for m in METRICS}, got


def test_the_model_layer_loads_no_experiment():
    got = _loaded(MODEL, ("standarderror.experiments",))
    assert {m: [x for x in v if x != "torch"] for m, v in got.items()} == {m: [] for m in MODEL}


def test_the_model_interface_imports_no_transformers():
    """``transformers`` is an extra (``standarderror[hf]``): the interface and each of its
    modules import without it, loading it only inside the calls that need it."""
    modules = [m for m in MODEL if m.startswith("standarderror.llm.interface")]
    got = _loaded(modules, ("transformers", "huggingface_hub", "tokenizers"))
    assert got == {m: [x for x in v if x == "torch"] for m, v in got.items()}, got


def _imports(path: Path, package: str) -> set[str]:
    """Every module an ``import`` statement of ``path`` names, at any depth (inside functions
    too), relative imports resolved against ``package``."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")
            base = base[:len(base) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            names |= {module} | {f"{module}.{a.name}" for a in node.names}
    return names


@pytest.mark.parametrize("folder, forbidden", [
    ("uncertainty", ("standarderror.llm", "standarderror.experiments")),
    ("spectral", ("standarderror.llm", "standarderror.experiments")),
    ("llm", ("standarderror.experiments",)),
])
def test_no_function_of_a_lower_layer_imports_a_higher_one(folder, forbidden):
    """An import inside a function escapes the test above (it runs on a call only)."""
    bad = {}
    for path in sorted((ROOT / "standarderror" / folder).rglob("*.py")):
        package = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
        hits = sorted(n for n in _imports(path, package) if n.startswith(forbidden))
        if hits:
            bad[str(path.relative_to(ROOT))] = hits
    assert bad == {}


def test_inside_a_layer_modules_import_their_siblings_not_the_facades():
    """``uncertainty.calibration`` and ``.coverage`` gather names for the lectures; a module
    of the layer imports the module that defines what it uses."""
    facades = ("standarderror.uncertainty.calibration", "standarderror.uncertainty.coverage")
    bad = {}
    for path in sorted((ROOT / "standarderror" / "uncertainty").glob("*.py")):
        if path.stem in ("calibration", "coverage"):
            continue
        hits = sorted(n for n in _imports(path, "standarderror.uncertainty")
                      if n.startswith(facades))
        if hits:
            bad[path.name] = hits
    assert bad == {}


@pytest.mark.slow  # loads the model in a fresh interpreter
def test_loading_the_model_does_not_import_torchs_compiler():
    """``weights._expected_shapes`` builds a meta-device model without initialising it; torch's
    meta ``normal_`` would import ``torch._dynamo`` (about 2 s per process)."""
    probe = ("import sys, torch; from standarderror.llm import tiny; normal = torch.nn.init.normal_; "
             "loaded = tiny.load(); "
             "print('torch._dynamo' in sys.modules, torch.nn.init.normal_ is normal, "
             "float(loaded['model'].tok.weight.std()) > 0)")
    assert _printed(probe) == ["False", "True", "True"]


def test_the_library_never_imports_the_book_toolkit():
    """``standarderror`` stands alone: no module of it imports ``standarderror_book``."""
    root = ROOT / "standarderror"
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            found += [f"{path.relative_to(root)}: {n}" for n in names
                      if n.split(".")[0] == "standarderror_book"]
    assert len(list(root.rglob("*.py"))) > 50
    assert found == []
