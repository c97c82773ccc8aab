"""The front end of the three measurements: run one by name, convert a result to JSON,
draw its figures, write it to a folder, print a short table."""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np

from standarderror import _checks
from standarderror.llm.interface import LanguageModel

from .calibration_task import calibration
from .conformal_task import conformal
from .spectral_task import spectral

TASKS = ("calibration", "conformal", "spectral")


def run(task: str, lm: LanguageModel, **kwargs) -> dict:
    """Run one of :data:`TASKS` on ``lm``."""
    if task not in TASKS:
        raise ValueError(f"task must be one of {TASKS}, got {task!r}")
    return {"calibration": calibration, "conformal": conformal, "spectral": spectral}[task](
        lm, **kwargs)


def _plain(v):
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, np.ndarray):
        return _plain(v.tolist())
    if isinstance(v, (np.bool_,)):
        return bool(v)
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, (float, np.floating)):
        return float(v) if math.isfinite(v) else None  # JSON has no NaN or infinity
    return v


def to_json(result: dict) -> dict:
    """The result as JSON-ready Python (numpy values converted; large arrays dropped)."""
    return _plain({k: v for k, v in result.items() if k not in ("logits",)})


def figures(result: dict) -> dict:
    """The result's figures in the book's style: ``{file stem: matplotlib figure}``."""
    import matplotlib

    matplotlib.use("Agg") if matplotlib.get_backend() == "" else None
    import matplotlib.pyplot as plt

    from standarderror import plots

    plots.style()
    task = result["task"]
    name = result["model"].get("label", result["model"]["name"])
    figs = {}
    if task == "calibration":
        fig, ax = plt.subplots(figsize=(6.4, 3.6))
        ts = [r["temperature"] for r in result["table"]]
        ax.axhline(0, color=plots.GREY, lw=1)
        ax.plot(ts, [r["ece"] for r in result["table"]], "o-", color=plots.BLUE, label="ECE")
        ax.plot(ts, [r["gap"] for r in result["table"]], "s--", color=plots.ORANGE,
                label="mean confidence − accuracy")
        ax.set_xlabel("temperature T")
        ax.set_ylabel("probability")
        ax.set_title(f"{name}: accuracy {result['table'][0]['accuracy']:.4f} at every T")
        ax.legend(loc="upper right")
        figs["calibration_temperature"] = fig
        fig, ax = plt.subplots(figsize=(6.4, 3.6))
        for s, colour in plots.SCORE_COLOURS.items():
            rows = [r for r in result["abstention"] if r["score"] == s]
            ax.plot([r["temperature"] for r in rows], [r["aurc"] for r in rows], "o-",
                    color=colour, label=s)
        ax.axhline(result["oracle"], color=plots.GREY, ls=":", lw=1, label="oracle")
        ax.set_xlabel("temperature T")
        ax.set_ylabel("AURC (lower is better)")
        ax.legend()
        figs["calibration_aurc"] = fig
    elif task == "conformal":
        fig, ax = plt.subplots(figsize=(6.4, 3.4))
        k = result["settings"]["options"]
        edges = np.arange(k + 2) - 0.5
        for s, colour, off in (("lac", plots.BLUE, -0.2), ("aps", plots.ORANGE, 0.2)):
            h = np.histogram(result["sizes"][s], bins=edges)[0]
            ax.bar(np.arange(k + 1) + off, h, width=0.4, color=colour,
                   label=f"{s.upper()}: coverage {result[s]['coverage']:.3f}, "
                         f"mean size {result[s]['mean_size']:.2f}")
        ax.set_xlabel("set size (options)")
        ax.set_ylabel("test questions")
        ax.set_title(f"{name}: alpha = {result['settings']['alpha']}")
        ax.legend()
        figs["conformal_sizes"] = fig
    elif task == "spectral":
        fig, ax = plt.subplots(figsize=(4.8, 4.2))
        ax.plot([0, 1], [0, 1], color=plots.GREY, lw=1, ls="--")
        for key, colour, label in (("1", plots.BLUE, "T = 1"),
                                   ("fitted", plots.VERMILLION,
                                    f"fitted T = {result['temperature']:.2f}")):
            r = result["reliability"][key]
            ax.plot(r["predicted"], r["target"], "o-", color=colour,
                    label=f"{label} (ECE {r['ece']:.3f})")
        ax.set_xlabel("predicted top eigenvalue (bin mean)")
        ax.set_ylabel("target mass (bin mean)")
        ax.set_title(f"{name}: reliability")
        ax.legend()
        figs["spectral_reliability"] = fig
    return figs


def write(result: dict, out) -> dict:
    """Write ``<task>.json`` and the PNG figures into ``out``; returns ``{kind: path}``.

    The whole result set is written into a temporary directory inside ``out`` first, then
    each file is renamed into place (the figures, then the JSON); if any step fails, the
    files already renamed are removed and the versions they replaced are put back, so
    ``out`` holds either the complete new set or what it held before, never new figures
    without their JSON or beside an old one. The files are created with the permissions
    the user's umask gives (as any other tool's output). ``out`` must name a directory (an
    empty name is refused: it would mean the working directory). The JSON holds no NaN or
    infinity (``null`` instead)."""
    import matplotlib.pyplot as plt

    if not str(out).strip():
        raise ValueError(f"out must name a directory, got {str(out)!r}")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    task = result["task"]
    text = json.dumps(to_json(result), indent=1, allow_nan=False)
    stage = Path(tempfile.mkdtemp(prefix=f".{task}.", suffix=".part", dir=out))
    try:
        figs = figures(result)
        try:
            for stem, fig in figs.items():
                fig.savefig(stage / f"{stem}.png", format="png")
        finally:
            for fig in figs.values():
                plt.close(fig)
        with open(stage / f"{task}.json", "w", encoding="utf-8") as fh:
            fh.write(text)
        names = {"json": f"{task}.json", **{stem: f"{stem}.png" for stem in figs}}
        _install(stage, out, [names[k] for k in list(names)[1:] + ["json"]])
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    return {k: out / v for k, v in names.items()}


def _install(stage: Path, out: Path, names: list) -> None:
    """Rename ``stage/name`` to ``out/name`` for each name, in order, all or none: a file
    that is replaced is kept in ``stage`` until every rename has succeeded, and on a failure
    the renamed files are removed and the replaced ones put back."""
    done = []  # (name, whether an old file was moved aside)
    try:
        for name in names:
            old = os.path.lexists(out / name)
            if old:
                os.replace(out / name, stage / f"{name}.old")
            done.append((name, old))
            os.replace(stage / name, out / name)
    except BaseException:
        for name, old in reversed(done):
            try:
                if (out / name).exists() and not (stage / name).exists():
                    os.unlink(out / name)
                if old:
                    os.replace(stage / f"{name}.old", out / name)
            except OSError:
                pass
        raise


def summary(result: dict, width: int | None = None) -> str:
    """A short plain-text table of the result; with ``width``, lines longer than ``width``
    characters are wrapped at spaces, continuations indented (a page's column).
    """
    if width is not None:
        _checks.positive_int(width, "width")
        import textwrap

        return "\n".join(
            "\n".join(textwrap.wrap(line, width, subsequent_indent="    ",
                                    break_long_words=False, break_on_hyphens=False))
            or line for line in summary(result).split("\n"))
    m = result["model"]
    lines = [f"{result['task']} -- {m.get('label', m['name'])}: {m['parameters']:,} parameters, "
             f"vocabulary {m['vocab']:,}", f"tokenizer {m['tokenizer']}"]
    if result["task"] == "calibration":
        lines.append(f"{result['rows']:,} predictions from {result['sequences']} windows; "
                     f"accuracy identical at every T: {result['accuracy_identical']}")
        lines.append(f"{'T':>6} {'accuracy':>9} {'NLL':>8} {'ECE':>7} {'conf-acc':>9}")
        for r in result["table"]:
            lines.append(f"{r['temperature']:6.2f} {r['accuracy']:9.4f} {r['nll']:8.4f} "
                         f"{r['ece']:7.4f} {r['gap']:+9.4f}")
        f = result["fitted"]
        lines.append(f"fitted temperature {f['temperature']:.3f} (NLL {f['nll']:.4f})")
        iv, fl = result["intervals"], result["ece_floor"]
        t1 = next(r for r in result["table"] if r["temperature"] == 1.0)
        lines.append(f"at T=1, 95% intervals over resampled windows: accuracy "
                     f"{t1['accuracy']:.4f} [{iv['accuracy'][0]:.4f}, {iv['accuracy'][1]:.4f}]"
                     f", ECE {t1['ece']:.4f} [{iv['ece'][0]:.4f}, {iv['ece'][1]:.4f}] "
                     f"(floor at this size {fl['mean']:.4f})")
        pb = result["per_byte"]
        lines.append(f"log-loss {pb['bits_per_byte']:.4f} bits per byte "
                     f"[{pb['interval'][0]:.4f}, {pb['interval'][1]:.4f}], "
                     f"{pb['bits_per_char']:.4f} per character (comparable across "
                     "tokenizers)")
        for b in result["positions"]:
            lines.append(f"positions {b['band'][0]:>2}-{b['band'][1]:<2} {b['rows']:>6,} "
                         f"predictions: accuracy {b['accuracy']:.4f}, NLL {b['nll']:.4f}, "
                         f"ECE {b['ece']:.4f} (floor {b['ece_floor']['mean']:.4f})")
        for score in dict.fromkeys(r["score"] for r in result["abstention"]):
            lines.append(f"AURC, {score:15s} " + "  ".join(
                f"T={r['temperature']:g}: {r['aurc']:.4f}" for r in result["abstention"]
                if r["score"] == score and r["temperature"] in (1.0, 2.0)))
        lines.extend(f"note: {c}" for c in result["caveats"])
    elif result["task"] == "conformal":
        lines.append(f"{result['questions']} questions ({result['calibration']} calibrate); "
                     f"accuracy {result['accuracy']:.3f}; options take "
                     f"{result['option_tokens']['mean']:.2f} tokens on average")
        for s in ("lac", "aps"):
            r = result[s]
            lines.append(f"{s.upper()}: coverage {r['coverage']:.3f}  mean size "
                         f"{r['mean_size']:.3f}  singletons {r['singleton']:.3f}")
        w = result["word_calibration"]
        lines.append(f"whole-word choice (comparable across tokenizers): accuracy "
                     f"{w['accuracy']:.3f} [{w['intervals']['accuracy'][0]:.3f}, "
                     f"{w['intervals']['accuracy'][1]:.3f}], ECE {w['ece']:.3f} "
                     f"[{w['intervals']['ece'][0]:.3f}, {w['intervals']['ece'][1]:.3f}] "
                     f"(floor at {w['questions']} questions {w['ece_floor']['mean']:.3f})")
        lines.append(f"contexts truncated {result['truncated']}, boundary merges "
                     f"{result['merged']}")
    else:
        au = result["auroc"]
        ti = result["temperature_interval"]
        lines.append(f"fitted matrix T {result['temperature']:.3f} [{ti[0]:.3f}, {ti[1]:.3f}]"
                     f" at {result['settings']['answers']} answers; greedy accuracy "
                     f"{result['accuracy']:.3f}; {result['distinct']:.1f} distinct answers "
                     "per question")
        lines.append(f"risk {result['risk']['1']:.3f} -> {result['risk']['fitted']:.3f}, "
                     f"entropy {result['entropy']['1']:.3f} -> "
                     f"{result['entropy']['fitted']:.3f}, eigenvalue ECE "
                     f"{result['reliability']['1']['ece']:.3f} -> "
                     f"{result['reliability']['fitted']['ece']:.3f}")
        lines.append("AUROC of the top eigenvalue: " + (f"{au['auroc']:.3f} ± {au['se']:.3f}"
                                                       if au else result["auroc_note"]))
        lines.append(f"answers cut at max_tokens {result['unterminated']}, contexts "
                     f"truncated {result['truncated']}")
    return "\n".join(lines)
