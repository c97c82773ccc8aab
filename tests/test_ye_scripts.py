"""The released-logits scripts (data/reviews/ye_*.py) on a fixture in the upstream format.

Nobody here has the upstream release, so this test writes a small one in exactly its layout
(data/<task>.json; outputs_base/<model>_<task>_<prompt>_icl1.pkl with float32 option logits,
in the data file's order; the pickle files are written by this test), runs each script as a
subprocess, and checks what it prints against values computed here with independent code:
Ye et al.'s computation restated row by row with float32 scalars and plain loops (rows
removed by position, the split, the quantile's order statistic, the fallback for empty
sets), scipy for Kendall and Spearman, and a separate temperature fit.
"""

from __future__ import annotations

import json
import math
import pickle
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import optimize, special, stats
from sklearn.model_selection import train_test_split
from ye_scripts import SCRIPTS, ye_module

ROOT = Path(__file__).resolve().parents[1]
TASKS = ("mmlu", "halu_dialogue")                 # an underscore inside a task name
MODELS = {"Yi-6B": (0.75, 3.0), "Qwen-14B": (0.85, 9.0), "Llama-2_7B": (0.55, 1.5),
          "mid-3B": (0.65, 2.5), "tiny_1B": (0.4, 1.0)}   # (accuracy target, sharpness)
PROMPTS = ("base", "shared", "task")
N_IDS = 86                                        # ids 0..85; 1,3,5,7,9 are demonstrations


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    root = tmp_path_factory.mktemp("release")
    (root / "data").mkdir()
    (root / "outputs_base").mkdir()
    rng = np.random.default_rng(2024)
    truth = {}
    for task in TASKS:
        answers = rng.integers(0, 6, N_IDS)
        # ids are not positions: removing ids 1, 3, 5, 7, 9 would drop other rows
        ids = rng.permutation(N_IDS) + 100 * (rng.random(N_IDS) < 0.5)
        rows = [{"id": int(i), "question": f"q{i}", "answer": "ABCDEF"[a]}
                for i, a in zip(ids, answers)]
        (root / "data" / f"{task}.json").write_text(json.dumps(rows))
        truth[task] = answers
        for model, (acc, sharp) in MODELS.items():
            for prompt in PROMPTS:
                z = rng.normal(0, 1, (N_IDS, 6))
                right = rng.random(N_IDS) < acc
                pick = np.where(right, answers, (answers + rng.integers(1, 6, N_IDS)) % 6)
                z[np.arange(N_IDS), pick] += rng.uniform(0.5, 2, N_IDS) * sharp
                recs = [{"id": int(ids[i]), "logits_options": z[i].astype(np.float32)}
                        for i in range(N_IDS)]                 # the data file's order
                with open(root / "outputs_base" / f"{model}_{task}_{prompt}_icl1.pkl", "wb") as f:
                    pickle.dump(recs, f, protocol=4)   # as the release was written
    return root, truth


_DRIVER = r"""
import contextlib, io, runpy, sys
scripts, root, bad = sys.argv[1], sys.argv[2], sys.argv[3]
for name in ("ye_table1.py", "ye_rankings.py", "ye_temperature.py"):
    sys.argv = [name, root]
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        runpy.run_path(f"{scripts}/{name}", run_name="__main__")
    print(f"=== {name} ===")
    print(buf.getvalue())
sys.argv = ["ye_table1.py", bad]
try:
    runpy.run_path(f"{scripts}/ye_table1.py", run_name="__main__")
except SystemExit as exc:
    print(f"=== bad ===\n{exc}")
"""


@pytest.fixture(scope="module")
def outputs(release, tmp_path_factory):
    """Run the three scripts as ``__main__`` with their command line, in one subprocess (one
    torch import instead of three: the import dominates their run time), plus one run on a
    directory that is not a release."""
    root, _ = release
    bad = tmp_path_factory.mktemp("not_a_release")
    sys_path = f"{SCRIPTS}"
    r = subprocess.run([sys.executable, "-c", f"import sys; sys.path.insert(0, {sys_path!r}); "
                        f"exec({_DRIVER!r})", str(SCRIPTS), str(root), str(bad)],
                       capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    parts = r.stdout.split("=== ")[1:]
    return {p.split(" ===\n", 1)[0]: p.split(" ===\n", 1)[1] for p in parts}


# ------------------------------------------------------------ independent reference


def _reference(root, truth, temperature=1.0):
    """Per task and model: prompt-averaged accuracy, coverage and size per score."""
    out = {}
    for task in TASKS:
        keep = [i for i in range(N_IDS) if i not in (1, 3, 5, 7, 9)]    # positions
        y = truth[task][keep]
        n = len(keep)
        cal_idx, test_idx = train_test_split(np.arange(n), train_size=0.5, random_state=42)
        out[task] = {}
        for model in MODELS:
            runs = []
            for prompt in PROMPTS:
                z = _logits(root, model, task, prompt)[keep]
                if callable(temperature):
                    t = temperature(z[cal_idx].astype(np.float64), y[cal_idx])
                else:
                    t = temperature
                runs.append(_one_run(z / np.float32(t), y, cal_idx, test_idx))
            mean = {k: float(np.mean([r[k] for r in runs])) for k in runs[0]}
            mean["avg_size"] = (mean["lac_size"] + mean["aps_size"]) / 2
            out[task][model] = mean
    return out


def _logits(root, model, task, prompt):
    with open(root / "outputs_base" / f"{model}_{task}_{prompt}_icl1.pkl", "rb") as f:
        return np.stack([r["logits_options"] for r in pickle.load(f)])


F32 = np.float32


def _softmax32(z_row):
    top = max(F32(v) for v in z_row)
    e = [F32(np.exp(F32(F32(v) - top))) for v in z_row]
    total = F32(0)
    for v in e:
        total = F32(total + v)
    return [F32(v / total) for v in e]


def _order(p):
    """Ye et al.'s order: numpy's ascending argsort of the float32 row, reversed."""
    return [int(j) for j in np.argsort(np.array(p, dtype=F32))[::-1]]


def _running(p):
    total, out = F32(0), {}
    for j in _order(p):
        total = F32(total + p[j])          # a float32 running sum, never capped
        out[j] = total
    return out


def _one_run(z, y, cal_idx, test_idx):
    p = [_softmax32(row) for row in z]
    res = {"accuracy": float(np.mean([int(np.argmax(z[i])) == y[i] for i in test_idx]))}
    n = len(cal_idx)
    k = math.ceil((n + 1) * 0.9)
    for kind in ("lac", "aps"):
        if kind == "lac":
            cal = sorted(F32(1) - p[i][y[i]] for i in cal_idx)
        else:
            cal = sorted(_running(p[i])[y[i]] for i in cal_idx)
        q = cal[k] if k < n else cal[n - 1]   # the order statistic np.quantile(..., "higher") takes
        sets, empty = [], 0
        for i in test_idx:
            if kind == "lac":
                keep = [j for j in range(6) if p[i][j] >= F32(1) - q]
                top = int(np.argmax(p[i]))
            else:
                run = _running(p[i])
                keep = []
                for j in _order(p[i]):
                    if run[j] > q:
                        break
                    keep.append(j)
                top = _order(p[i])[0]
            if not keep:                      # an empty set receives the top option
                keep, empty = [top], empty + 1
            sets.append(keep)
        res[f"{kind}_cov"] = float(np.mean([y[i] in s for s, i in zip(sets, test_idx)]))
        res[f"{kind}_size"] = float(np.mean([len(s) for s in sets]))
        res[f"{kind}_empty"] = empty
    return res


def _fit_t(z, y):
    def nll(t):
        return -special.log_softmax(z / t, axis=1)[np.arange(len(y)), y].mean()
    return optimize.minimize_scalar(nll, bounds=(0.05, 20), method="bounded",
                                    options={"xatol": 1e-7}).x


def _table(out, task):
    block = out.split(f"## {task}\n")[1].split("\n\n")[0].strip().splitlines()
    return {line.split()[0]: [float(v) for v in line.split()[1:]] for line in block[1:]
            if not line.startswith(task + " ")}


def _kv(out, prefix):
    line = next(s for s in out.splitlines() if s.startswith((prefix + " ", prefix + "=")))
    return {k: float(v) for k, v in re.findall(r"([\w()=.,\-]+?)=(-?[\d.]+)(?=\s|$)", line)}


# ------------------------------------------------------------ the scripts


@pytest.mark.slow  # the `outputs` fixture runs three scripts in a fresh interpreter (2-3 s)
def test_table1(release, outputs):
    root, truth = release
    out = outputs["ye_table1.py"]
    ref = _reference(root, truth)
    assert "questions=81 calibration=40 test=41 models=5" in out
    for task in TASKS:
        block = out.split(f"## {task}\n")[1].split("\n\n")[0].strip().splitlines()
        lines = {line.split()[0]: line.split()[1:] for line in block[1:]}
        assert set(lines) == set(MODELS)
        for model, r in ref[task].items():
            want = [r["accuracy"], r["lac_cov"], r["lac_size"], r["aps_cov"], r["aps_size"], r["avg_size"]]
            assert lines[model] == [f"{v:.4f}" for v in want]      # to the last printed digit
    # the fixture exercises the fallback: some sets are empty before it
    empties = sum(r[f"{s}_empty"] for task in TASKS for model in MODELS
                  for prompt in PROMPTS for s in ("lac", "aps")
                  for r in [_one_run(_logits(root, model, task, prompt)[_KEEP],
                                     truth[task][_KEEP], *_SPLIT)])
    assert empties > 0


_KEEP = [i for i in range(N_IDS) if i not in (1, 3, 5, 7, 9)]
_SPLIT = train_test_split(np.arange(len(_KEEP)), train_size=0.5, random_state=42)


def test_rows_are_matched_by_position_and_must_carry_the_data_ids(release, tmp_path):
    root, _ = release
    _ye = ye_module()
    import shutil
    copy = tmp_path / "release"
    shutil.copytree(root, copy)
    f = next((copy / "outputs_base").glob("*.pkl"))
    with open(f, "rb") as fh:
        recs = pickle.load(fh)
    recs[20], recs[30] = recs[30], recs[20]            # two rows out of the data file's order
    with open(f, "wb") as fh:
        pickle.dump(recs, fh, protocol=4)
    with pytest.raises(SystemExit, match=f"{f.name}.*same order.*row 15"):
        _ye.load(copy)


@pytest.mark.slow  # the `outputs` fixture runs three scripts in a fresh interpreter (2-3 s)
def test_rankings(release, outputs):
    root, truth = release
    out = outputs["ye_rankings.py"]
    ref = _reference(root, truth)
    total = {"lac": 0, "aps": 0, "avg": 0}
    for task in TASKS:
        models = list(MODELS)
        acc = np.array([ref[task][m]["accuracy"] for m in models])
        size = {s: np.array([ref[task][m][f"{s}_size"] for m in models]) for s in ("lac", "aps", "avg")}
        kv = _kv(out, f"{task} tau(lac,aps)")
        tau = stats.kendalltau(size["lac"], size["aps"]).statistic
        assert kv["tau(lac,aps)"] == pytest.approx(tau, abs=1e-4)
        disc = sum((size["lac"][i] - size["lac"][j]) * (size["aps"][i] - size["aps"][j]) < 0
                   for i in range(5) for j in range(i + 1, 5))
        assert kv["discordant"] == disc and kv["pairs"] == 10
        sp = _kv(out, f"{task} spearman(acc,size)")
        for s in ("lac", "aps", "avg"):
            assert sp[s] == pytest.approx(stats.spearmanr(acc, size[s]).statistic, abs=1e-4)
        inv = _kv(out, f"{task} inversions")
        for s in total:
            count = sum(acc[i] > acc[j] and size[s][i] > size[s][j] for i in range(5) for j in range(5))
            assert inv[s] == count
            total[s] += count
    allv = _kv(out, "all inversions")
    assert all(allv[s] == total[s] for s in total) and allv["pairs"] == 20


@pytest.mark.slow  # the `outputs` fixture runs three scripts in a fresh interpreter (2-3 s)
def test_coverage_range(release, outputs):
    root, truth = release
    out = outputs["ye_rankings.py"]
    # per-prompt coverage: recompute every run and compare the extremes
    for task in TASKS:
        keep = [i for i in range(N_IDS) if i not in (1, 3, 5, 7, 9)]
        y = truth[task][keep]
        cal_idx, test_idx = train_test_split(np.arange(len(keep)), train_size=0.5, random_state=42)
        covs = {"lac": [], "aps": []}
        for model in MODELS:
            for prompt in PROMPTS:
                run = _one_run(_logits(root, model, task, prompt)[keep], y, cal_idx, test_idx)
                for s in covs:
                    covs[s].append(run[f"{s}_cov"])
        for s in covs:
            kv = _kv(out, f"{task} coverage({s})")
            assert kv["min"] == float(f"{min(covs[s]):.4f}")
            assert kv["max"] == float(f"{max(covs[s]):.4f}")


@pytest.mark.slow  # the `outputs` fixture runs three scripts in a fresh interpreter (2-3 s)
def test_temperature(release, outputs):
    root, truth = release
    out = outputs["ye_temperature.py"]
    at = {t: _reference(root, truth, t) for t in (0.5, 1.0, 2.0)}
    # Float32 sets are discontinuous in T (a running sum crosses the threshold), and two
    # optimisers agree on T only to ~1e-6; so the fitted T is checked against the
    # independent fit to 1e-4 below, and the sets are recomputed at the package's T.
    from standarderror.uncertainty import calibration as cb
    fit = _reference(root, truth, cb.fit_temperature)
    fit_t = {task: {m: np.mean([_fit_t(_logits(root, m, task, pr)[_KEEP][_SPLIT[0]]
                                       .astype(np.float64), truth[task][_KEEP][_SPLIT[0]])
                                for pr in PROMPTS]) for m in MODELS} for task in TASKS}
    for task in TASKS:
        assert _kv(out, f"{task} accuracy_unchanged")["accuracy_unchanged"] == 1
        models = list(MODELS)
        for label, first, second in (("T=0.5_vs_T=2", at[0.5], at[2.0]), ("fitted_vs_T=1", at[1.0], fit)):
            kv = _kv(out, f"{task} {label}")
            for s in ("lac", "aps", "avg"):
                a = np.array([first[task][m][f"{s}_size"] for m in models])
                b = np.array([second[task][m][f"{s}_size"] for m in models])
                assert kv[f"tau_{s}"] == pytest.approx(stats.kendalltau(a, b).statistic, abs=1e-4)
                assert kv[f"changed_{s}"] == int((stats.rankdata(a) != stats.rankdata(b)).sum())
        rows = _table(out, task)
        for m in models:
            assert rows[m][6] == float(f"{fit[task][m]['avg_size']:.4f}")
            assert rows[m][7] == pytest.approx(fit_t[task][m], abs=1e-4)


@pytest.mark.slow  # the `outputs` fixture runs three scripts in a fresh interpreter (2-3 s)
def test_bad_directory(outputs):
    assert "is not a directory" in outputs["bad"]


def _numpy1_pickle(records) -> bytes:
    """Protocol 4 bytes exactly as numpy 1.x writes them: ``numpy.core.multiarray`` (numpy 2
    writes ``numpy._core.multiarray``); the FRAME length is fixed up after the rename."""
    import pickletools

    data = pickle.dumps(records, protocol=4)
    new = b"numpy.core.multiarray"
    if b"numpy._core.multiarray" in data:
        old = b"numpy._core.multiarray"
        data = data.replace(b"\x8c" + bytes([len(old)]) + old, b"\x8c" + bytes([len(new)]) + new)
        assert data[2:3] == b"\x95"  # one FRAME holding everything after the 11-byte header
        data = data[:3] + (len(data) - 11).to_bytes(8, "little") + data[11:]
    names = [a for op, a, _ in pickletools.genops(data) if op.name == "SHORT_BINUNICODE"]
    assert "numpy.core.multiarray" in names and "_reconstruct" in names
    return data


def test_release_layout_from_numpy1_is_read(tmp_path):
    _ye = ye_module()
    recs = [{"id": i, "logits_options": np.arange(6, dtype=np.float32) * i} for i in range(4)]
    f = tmp_path / "m_t_base_icl1.pkl"
    f.write_bytes(_numpy1_pickle(recs))
    got = _ye.read_logits(f)
    assert [r["id"] for r in got] == [0, 1, 2, 3]
    for r, want in zip(got, recs):
        assert r["logits_options"].dtype == np.float32
        assert np.array_equal(r["logits_options"], want["logits_options"])


class _RunsACommand:
    def __reduce__(self):
        import os
        return (os.system, ("echo pwned > PWNED_MARKER",))


def test_a_pickle_that_runs_a_command_is_refused(tmp_path, monkeypatch):
    _ye = ye_module()
    monkeypatch.chdir(tmp_path)
    f = tmp_path / "evil_t_base_icl1.pkl"
    f.write_bytes(pickle.dumps([{"id": 0, "logits_options": _RunsACommand()}], protocol=4))
    with pytest.raises(SystemExit, match="evil_t_base_icl1.pkl.*not allowed"):
        _ye.read_logits(f)
    assert not (tmp_path / "PWNED_MARKER").exists()
    # the right globals but the wrong structure are refused as well
    f.write_bytes(pickle.dumps({"id": 0, "logits_options": np.zeros(6, np.float32)}, protocol=4))
    with pytest.raises(SystemExit, match="evil_t_base_icl1.pkl"):
        _ye.read_logits(f)
    f.write_bytes(pickle.dumps([{"id": 0, "logits_options": np.zeros(5, np.float32)}], protocol=4))
    with pytest.raises(SystemExit, match="float array of 6"):
        _ye.read_logits(f)


@pytest.mark.slow  # runs data/reviews/ye_fallback.py as a script, in a fresh interpreter
def test_fallback_script(release):
    """ye_fallback.py: the empty sets before the fallback, coverage without and with it."""
    root, truth = release
    r = subprocess.run([sys.executable, str(SCRIPTS / "ye_fallback.py"), str(root)],
                       capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    for task in TASKS:
        block = r.stdout.split(f"## {task}\n")[1].split("\n\n")[0].strip().splitlines()
        lines = {line.split()[0]: [float(v) for v in line.split()[1:]] for line in block[1:]}
        assert set(lines) == set(MODELS)
        y = truth[task][_KEEP]
        cal_idx, test_idx = _SPLIT
        for model in MODELS:
            runs = [_one_run(_logits(root, model, task, pr)[_KEEP], y, cal_idx, test_idx)
                    for pr in PROMPTS]
            lac_empty = np.mean([run["lac_empty"] for run in runs]) / len(test_idx)
            aps_empty = np.mean([run["aps_empty"] for run in runs]) / len(test_idx)
            aps_cov = np.mean([run["aps_cov"] for run in runs])
            got = lines[model]
            assert got[0] == float(f"{lac_empty:.4f}") and got[1] == float(f"{aps_empty:.4f}")
            assert got[3] == float(f"{aps_cov:.4f}")
            # the fallback adds an option to every empty set, so coverage rises by at most
            # the share of empty sets, and never falls
            assert got[3] - got[2] <= got[1] + 1e-4 and got[3] >= got[2]
            assert 0 <= got[4] <= 1 and 0 <= got[5] <= 1
