"""Shared loader for the scripts that recompute Ye et al. (2024) from their released logits.

Ye, Yang, Pang, Wang, Wong, Yilmaz, Shi and Tu, "Benchmarking LLMs via Uncertainty
Quantification", NeurIPS 2024 Datasets and Benchmarks, arXiv:2401.12794. The scripts take one
argument, the directory of the upstream release, laid out as

    <release>/data/<task>.json                             [{"id": ..., "answer": "A".."F", ...}, ...]
    <release>/outputs_base/<model>_<task>_<prompt>_icl1.pkl  [{"id": ..., "logits_options": float32[6]}, ...]

with ``<prompt>`` one of ``base``, ``shared``, ``task``. Task and model names may contain
underscores: the task is recognised as the longest ``_<task>`` suffix (after removing the
prompt) that names a file in ``data/``.

**Pickle.** The upstream release ships its logits as pickle files, and a plain ``pickle.load``
can run arbitrary code. These scripts read them with a restricted unpickler
(:func:`read_logits`) that admits only what the release contains: a list of dicts
``{"id": int, "logits_options": float32 array of 6}``, pickled with protocol 4 under numpy
1.x, whose arrays are rebuilt through ``numpy.core.multiarray._reconstruct`` (numpy 2 keeps
that module as an alias of ``numpy._core``), ``numpy.ndarray`` and ``numpy.dtype``. Any other
global, or any other structure, is refused with an error naming the file.

Conventions (our reading of the upstream script; check them against it before relying on a
third decimal):

* questions with id 1, 3, 5, 7, 9 served as in-context demonstrations and are removed;
* the remaining questions, in the order of ``data/<task>.json``, are split 50/50 into
  calibration and test halves with ``sklearn.model_selection.train_test_split(...,
  train_size=0.5, random_state=42)`` (the first part calibrates);
* probabilities are the softmax of the six option logits, computed in float64;
* the threshold is Ye et al.'s ``np.quantile(scores, ceil((n+1)(1-alpha))/n, method="higher")``
  (``quantile="ye"`` in :func:`standarderror.uncertainty.coverage.conformal_quantile`), alpha = 0.1;
* accuracy, coverage and size are measured on the test half, for each prompt, then averaged
  over the three prompts, as the paper does.
"""

from __future__ import annotations

import json
import pickle
import sys
from pathlib import Path

import numpy as np

from standarderror.uncertainty import coverage as cv

LETTERS = "ABCDEF"
PROMPTS = ("base", "shared", "task")
DEMONSTRATIONS = frozenset({1, 3, 5, 7, 9})
SPLIT_SEED = 42
ALPHA = 0.1
SUFFIX = "_icl1.pkl"


_RECONSTRUCT = np.ndarray((0,)).__reduce__()[0]  # numpy's _reconstruct, in numpy 1 and 2
_ALLOWED = {
    ("numpy.core.multiarray", "_reconstruct"): _RECONSTRUCT,
    ("numpy._core.multiarray", "_reconstruct"): _RECONSTRUCT,
    ("numpy", "ndarray"): np.ndarray,
    ("numpy", "dtype"): np.dtype,
}


class _ReleaseUnpickler(pickle.Unpickler):
    """Resolves only the four globals a release file's numpy arrays need; nothing else."""

    def find_class(self, module, name):
        try:
            return _ALLOWED[(module, name)]
        except KeyError:
            raise pickle.UnpicklingError(f"global {module}.{name} is not allowed") from None

    def persistent_load(self, pid):
        raise pickle.UnpicklingError("persistent ids are not allowed")


def read_logits(path: Path) -> list[dict]:
    """Read one ``outputs_base/*.pkl`` file with the restricted unpickler and check its layout.

    Returns ``[{"id": int, "logits_options": float32 array of 6}, ...]``; raises ``SystemExit``
    naming the file for anything else (a disallowed global, another structure or dtype).
    """
    path = Path(path)
    try:
        with open(path, "rb") as fh:
            records = _ReleaseUnpickler(fh).load()
    except Exception as exc:  # noqa: BLE001 - any failure: refuse the file, name it
        raise SystemExit(f"{path}: refused, not a release logits file ({type(exc).__name__}: "
                         f"{exc})") from None
    if not isinstance(records, list):
        raise SystemExit(f"{path}: refused, expected a list of records, got {type(records).__name__}")
    out = []
    for r in records:
        z = r.get("logits_options") if isinstance(r, dict) else None
        ok = (isinstance(r, dict) and set(r) <= {"id", "logits_options"}
              and isinstance(r.get("id"), (int, np.integer)) and not isinstance(r["id"], bool)
              and isinstance(z, np.ndarray) and z.dtype in (np.float32, np.float64)
              and z.shape == (len(LETTERS),))
        if not ok:
            raise SystemExit(f"{path}: refused, each record must be {{'id': int, "
                             f"'logits_options': float array of {len(LETTERS)}}}, got {r!r:.200}")
        out.append({"id": int(r["id"]), "logits_options": z})
    return out


def release_dir(argv: list[str]) -> Path:
    if len(argv) != 2:
        raise SystemExit(f"usage: python {Path(argv[0]).name} <directory of the upstream release>")
    root = Path(argv[1])
    for sub in ("data", "outputs_base"):
        if not (root / sub).is_dir():
            raise SystemExit(f"{root / sub} is not a directory: pass the root of the upstream "
                             "release (it holds data/ and outputs_base/)")
    return root


def _label(answer, where: str) -> int:
    a = str(answer).strip().upper()
    if a not in LETTERS:
        raise SystemExit(f"{where}: answer {answer!r} is not one of {', '.join(LETTERS)}")
    return LETTERS.index(a)


def calibration_mask(n: int, seed: int = SPLIT_SEED) -> np.ndarray:
    """The 50/50 split: True for calibration rows."""
    from sklearn.model_selection import train_test_split

    cal_idx, _ = train_test_split(np.arange(n), train_size=0.5, random_state=seed)
    mask = np.zeros(n, dtype=bool)
    mask[cal_idx] = True
    return mask


def load(root: Path) -> dict:
    """``{task: {"ids", "y", "calibration", "logits": {model: {prompt: (n x 6) float64}}}}``."""
    root = Path(root)
    tasks = sorted(p.stem for p in (root / "data").glob("*.json"))
    if not tasks:
        raise SystemExit(f"no <task>.json files in {root / 'data'}")
    out = {}
    for task in tasks:
        rows = json.loads((root / "data" / f"{task}.json").read_text())
        rows = [r for r in rows if int(r["id"]) not in DEMONSTRATIONS]
        ids = [int(r["id"]) for r in rows]
        y = np.array([_label(r["answer"], f"data/{task}.json id {r['id']}") for r in rows])
        out[task] = {"ids": ids, "y": y, "calibration": calibration_mask(len(ids)), "logits": {}}
    by_length = sorted(tasks, key=len, reverse=True)
    for f in sorted((root / "outputs_base").glob(f"*{SUFFIX}")):
        stem = f.name[: -len(SUFFIX)]
        model_task, _, prompt = stem.rpartition("_")
        task = next((t for t in by_length if model_task.endswith("_" + t)), None)
        if prompt not in PROMPTS or task is None:
            print(f"# skipped {f.name}: not <model>_<task>_<prompt>{SUFFIX}", file=sys.stderr)
            continue
        model = model_task[: -len(task) - 1]
        records = read_logits(f)
        table = {r["id"]: np.asarray(r["logits_options"], dtype=np.float64) for r in records}
        missing = [i for i in out[task]["ids"] if i not in table]
        if missing:
            raise SystemExit(f"{f.name} has no logits for {len(missing)} questions of {task} "
                             f"(first ids: {missing[:5]})")
        z = np.stack([table[i] for i in out[task]["ids"]])
        if z.shape[1] != len(LETTERS):
            raise SystemExit(f"{f.name}: expected {len(LETTERS)} option logits, got {z.shape[1]}")
        out[task]["logits"].setdefault(model, {})[prompt] = z
    return out


def evaluate(task: dict, temperature=1.0) -> dict:
    """Per model: accuracy, coverage and size per score, averaged over prompts.

    ``temperature`` is a number, or a callable ``(model, prompt, logits, y, calibration) -> T``.
    Returns ``{model: {"accuracy", "lac_coverage", "lac_size", "aps_coverage", "aps_size",
    "average_size", "runs": [per-prompt dicts], "temperatures": [...]}}``.
    """
    y, cal = task["y"], task["calibration"]
    out = {}
    for model in sorted(task["logits"]):
        runs = []
        for prompt in PROMPTS:
            z = task["logits"][model].get(prompt)
            if z is None:
                continue
            t = temperature(model, prompt, z, y, cal) if callable(temperature) else temperature
            e = cv.evaluate(cv.softmax_logits(z, t), y, cal, alpha=ALPHA, quantile="ye")
            runs.append({"prompt": prompt, "temperature": float(t), "accuracy": e["accuracy"],
                         "lac_coverage": e["lac"]["coverage"], "lac_size": e["lac"]["mean_size"],
                         "aps_coverage": e["aps"]["coverage"], "aps_size": e["aps"]["mean_size"]})
        keys = ("accuracy", "lac_coverage", "lac_size", "aps_coverage", "aps_size")
        mean = {k: float(np.mean([r[k] for r in runs])) for k in keys}
        mean["average_size"] = (mean["lac_size"] + mean["aps_size"]) / 2
        out[model] = {**mean, "runs": runs, "temperatures": [r["temperature"] for r in runs]}
    return out


def fitted(model, prompt, z, y, cal) -> float:
    """Maximum-likelihood temperature on the calibration half."""
    return cv.fit_temperature(z[cal], y[cal])


def header(root: Path, data: dict) -> None:
    print(f"# Ye et al. (2024) recomputed from the release at {root}")
    print(f"# alpha={ALPHA}; demonstrations {sorted(DEMONSTRATIONS)} removed; 50/50 split, "
          f"random_state={SPLIT_SEED}; quantile as released (np.quantile, method='higher')")
    for task, d in data.items():
        print(f"# task {task}: questions={len(d['ids'])} calibration={int(d['calibration'].sum())} "
              f"test={int((~d['calibration']).sum())} models={len(d['logits'])}")
