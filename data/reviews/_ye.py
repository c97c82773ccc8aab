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
can run arbitrary code; even numpy's own array and dtype constructors, the only globals such a
file needs, can be driven by a forged state into reading memory the file points at. These
scripts therefore read the files with :func:`read_logits`, which never calls numpy (or
anything else the file names) on the file's data: it caps the file's size, its number of
opcodes and its nesting depth, admits only the opcodes and the three globals a release file
uses (``numpy.core.multiarray._reconstruct`` as numpy 1.x writes it, or
``numpy._core.multiarray._reconstruct`` from numpy 2, ``numpy.ndarray`` and ``numpy.dtype``),
lets pickle's unpickler build the structure with plain-Python stand-ins for those three, checks
it is a list of ``{"id": int, "logits_options": float32 array of 6}`` records exactly as numpy
pickles them (dtype ``<f4``, shape ``(6,)``, 24 raw bytes) with distinct ids, and builds each
array itself with ``np.frombuffer``. The release was pickled with protocol 4 under numpy 1.x.
Anything else is refused with a one-line error naming the file.

Conventions (the facts of the upstream script, ``uncertainty_quantification_via_cp.py``):

* the rows at **positions** 1, 3, 5, 7, 9 of ``data/<task>.json`` and of every logits file
  served as in-context demonstrations and are removed (by position, not by id); the
  remaining rows of a logits file must then carry the ids of the data file's rows, in the
  same order (the upstream script asserts it), and ids must not repeat (the upstream script
  keys its sets by id);
* the remaining questions, in that order, are split 50/50 into calibration and test halves
  with ``sklearn.model_selection.train_test_split(..., train_size=0.5, random_state=42)``
  (the first part calibrates);
* the sets are ``rule="ye"`` of :func:`standarderror.uncertainty.coverage.conformal_sets`:
  probabilities are the softmax of the six option logits in their stored dtype (float32),
  ``e = exp(z - max z); e / sum(e)`` (:func:`~standarderror.uncertainty.coverage.ye_softmax`),
  and every score and running sum is computed in that arithmetic; the APS score is the
  running sum in the order of numpy's argsort reversed, not capped at one; the threshold is
  ``np.quantile(scores, ceil((n+1)(1-alpha))/n, method="higher")``, alpha = 0.1; LAC keeps
  the options with ``p >= 1 - qhat``, APS keeps options while the running sum is
  ``<= qhat``; and **an empty set receives the top option** (LAC: ``argmax(p)``; APS: the
  first option of its order);
* a model's answer is the argmax of its logits (not of the rounded probabilities);
* accuracy, coverage and size are measured on the test half, for each prompt, then averaged
  over the three prompts, as the paper does.
* ``ye_temperature.py`` divides the stored logits by T in their dtype before the softmax
  (the upstream script has no temperature; fitted temperatures are fitted in float64).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
from _ye_pickle import LETTERS, read_logits

# standarderror.uncertainty.coverage (scipy.stats, torch) is imported by the two functions
# that compute with it: reading and checking a release file needs numpy alone, so a reader
# started in a fresh process (the scripts, tests/test_ye_reader.py's probes) starts fast.

PROMPTS = ("base", "shared", "task")
DEMONSTRATIONS = frozenset({1, 3, 5, 7, 9})
SPLIT_SEED = 42
ALPHA = 0.1
SUFFIX = "_icl1.pkl"


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
    """``{task: {"ids", "y", "calibration", "logits": {model: {prompt: (n x 6), stored dtype}}}}``."""
    root = Path(root)
    tasks = sorted(p.stem for p in (root / "data").glob("*.json"))
    if not tasks:
        raise SystemExit(f"no <task>.json files in {root / 'data'}")
    out = {}
    for task in tasks:
        rows = json.loads((root / "data" / f"{task}.json").read_text())
        rows = [r for i, r in enumerate(rows) if i not in DEMONSTRATIONS]   # by position
        ids = [int(r["id"]) for r in rows]
        if len(set(ids)) != len(ids):
            raise SystemExit(f"data/{task}.json: ids repeat; the upstream script keys its sets "
                             "by id, so repeated ids are not reproduced here")
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
        records = [r for i, r in enumerate(records) if i not in DEMONSTRATIONS]  # by position
        got = [r["id"] for r in records]
        if got != out[task]["ids"]:
            bad = next((i for i, (a, b) in enumerate(zip(got, out[task]["ids"])) if a != b),
                       min(len(got), len(out[task]["ids"])))
            raise SystemExit(f"{f.name}: after removing positions {sorted(DEMONSTRATIONS)}, "
                             f"its {len(got)} rows must carry the ids of data/{task}.json's "
                             f"{len(out[task]['ids'])} rows in the same order; first "
                             f"difference at row {bad}")
        dtypes = {r["logits_options"].dtype for r in records}
        if len(dtypes) != 1:
            raise SystemExit(f"{f.name}: logits of mixed dtypes {sorted(map(str, dtypes))}")
        z = np.stack([r["logits_options"] for r in records])   # stored dtype (float32)
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
    from standarderror.uncertainty import coverage as cv

    y, cal = task["y"], task["calibration"]
    out = {}
    for model in sorted(task["logits"]):
        runs = []
        for prompt in PROMPTS:
            z = task["logits"][model].get(prompt)
            if z is None:
                continue
            t = temperature(model, prompt, z, y, cal) if callable(temperature) else temperature
            e = cv.evaluate(cv.ye_softmax(z, t), y, cal, alpha=ALPHA, rule="ye",
                            answers=np.argmax(z, axis=1))
            runs.append({"prompt": prompt, "temperature": float(t), "accuracy": e["accuracy"],
                         "lac_coverage": e["lac"]["coverage"], "lac_size": e["lac"]["mean_size"],
                         "aps_coverage": e["aps"]["coverage"], "aps_size": e["aps"]["mean_size"]})
        keys = ("accuracy", "lac_coverage", "lac_size", "aps_coverage", "aps_size")
        mean = {k: float(np.mean([r[k] for r in runs])) for k in keys}
        mean["average_size"] = (mean["lac_size"] + mean["aps_size"]) / 2
        out[model] = {**mean, "runs": runs, "temperatures": [r["temperature"] for r in runs]}
    return out


def fitted(model, prompt, z, y, cal) -> float:
    """Maximum-likelihood temperature on the calibration half (fitted in float64)."""
    from standarderror.uncertainty.scaling import fit_temperature

    return fit_temperature(np.asarray(z, dtype=np.float64)[cal], y[cal])


def start(argv: list[str]) -> dict:
    """What every script's ``main`` begins with: the release named on the command line, read
    (:func:`load`), and its header printed; returns the data."""
    root = release_dir(argv)
    data = load(root)
    header(root, data)
    return data


def header(root: Path, data: dict) -> None:
    print(f"# Ye et al. (2024) recomputed from the release at {root}")
    print(f"# alpha={ALPHA}; demonstrations {sorted(DEMONSTRATIONS)} removed; 50/50 split, "
          f"random_state={SPLIT_SEED}; sets as released (float32, np.quantile "
          "method='higher', empty sets get the top option)")
    for task, d in data.items():
        print(f"# task {task}: questions={len(d['ids'])} calibration={int(d['calibration'].sum())} "
              f"test={int((~d['calibration']).sum())} models={len(d['logits'])}")
