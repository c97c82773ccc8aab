"""The layers run one way (ARCHITECTURE.md, "Layers"), checked on a fresh interpreter's
``sys.modules``: the metrics over arrays load neither torch nor the model package, and the
model package loads no experiment."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # every test starts a fresh interpreter (most import torch: 1-2.5 s each)

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


def test_the_seeds_names_reach_the_model_on_first_use_only():
    probe = ("import sys; from standarderror.uncertainty import coverage as cv; "
             "before = 'standarderror.llm.predictions' in sys.modules; "
             "from standarderror.llm import predictions as pr; "
             "print(before, cv.predictions is pr.predictions, 'torch' in sys.modules)")
    # coverage alone loads no model; the seed's cv.predictions is the model layer's function;
    # and even that module defers torch until it runs the model
    assert _printed(probe) == ["False", "True", "False"]


def test_loading_the_model_does_not_import_torchs_compiler():
    """``weights._expected_shapes`` builds a meta-device model without initialising it; torch's
    meta ``normal_`` would import ``torch._dynamo`` (about 2 s per process)."""
    probe = ("import sys, torch; from standarderror.llm import tiny; normal = torch.nn.init.normal_; "
             "loaded = tiny.load(); "
             "print('torch._dynamo' in sys.modules, torch.nn.init.normal_ is normal, "
             "float(loaded['model'].tok.weight.std()) > 0)")
    assert _printed(probe) == ["False", "True", "True"]
