"""Benchmark: peak memory of every public array function at a million rows.

Each case builds its inputs first (synthetic, seeded: 10^6 predictions over 10 classes in
windows of 64, confidences, labels, sets), then calls one public function with
``tracemalloc`` tracing (numpy reports its buffers to it), and records the peak of what the
call allocated on top of its inputs. ``coverage.inversions`` runs on 10^5 models (it compares
pairs). The budget (ARCHITECTURE.md) is 1 GB per function; the script exits non-zero if a case
exceeds it. ``--isolate`` runs every case in its own subprocess and also reports the
subprocess's peak resident memory (``resource.getrusage``), inputs and interpreter included.

Not covered here: ``standarderror.spectral`` (its own benchmark, ``bench_spectral.py``), and
the functions that run the model (``temperature_table`` without ``data``, ``trajectory``,
``multiple_choice``, ``semantic``), whose memory is the model's.

Run: ``python benchmarks/bench_memory.py [--rows 1000000] [--only NAME] [--isolate]``

Each case's peak is printed beside the budget (ARCHITECTURE.md, "Budgets": 1 GB at 10^6 rows);
past measurements are in CHANGELOG.md.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
import tracemalloc

import numpy as np

BUDGET = 1 << 30  # bytes
K, WINDOW = 10, 64


def inputs(rows: int, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    z = rng.normal(0, 2, (rows, K))
    z[np.arange(rows), rng.integers(0, K, rows)] += 2.0
    logp = z - np.logaddexp.reduce(z, axis=1, keepdims=True)
    p = np.exp(logp)
    y = np.where(rng.random(rows) < 0.6, logp.argmax(axis=1), rng.integers(0, K, rows))
    conf = p.max(axis=1)
    correct = p.argmax(axis=1) == y
    seq = np.arange(rows) // WINDOW
    sets = p >= 0.1
    cal = np.zeros(rows, dtype=bool)
    cal[: rows // 2] = True
    return {"z": z, "logp": logp, "p": p, "y": y, "conf": conf, "correct": correct,
            "seq": seq, "sets": sets, "cal": cal, "rng": rng}


def cases(d: dict, rows: int) -> dict:
    """name -> zero-argument callable. Heavy resampling counts are modest (the memory of the
    batched functions is bounded per chunk, not by the number of draws)."""
    from standarderror.uncertainty import binning as bn
    from standarderror.uncertainty import calibration as cb
    from standarderror.uncertainty import coverage as cv
    from standarderror.uncertainty import exchangeability as ex
    from standarderror.uncertainty import training as tr

    z, logp, p, y = d["z"], d["logp"], d["p"], d["y"]
    conf, ok, seq, sets, cal = d["conf"], d["correct"], d["seq"], d["sets"], d["cal"]
    small = 10 ** 5
    acc_models = np.random.default_rng(1).random(small)
    size_models = np.random.default_rng(2).random(small)
    scores = cv.label_scores(p)[np.arange(rows), y]
    return {
        # calibration
        "calibration.scale": lambda: cb.scale(z, 2.0),
        "calibration.confidence_scores": lambda: cb.confidence_scores(logp, 1.5),
        "calibration.ece": lambda: cb.ece(conf, ok),
        "calibration.ece(adaptive)": lambda: cb.ece(conf, ok, adaptive=True),
        "calibration.bin_index": lambda: cb.bin_index(conf, 15, adaptive=True),
        "calibration.nll": lambda: cb.nll(p, y),
        "calibration.brier": lambda: cb.brier(p, y),
        "calibration.risk_coverage": lambda: cb.risk_coverage(conf, ok),
        "calibration.aurc": lambda: cb.aurc(conf, ok),
        "calibration.kendall_tau": lambda: cb.kendall_tau(conf, logp[:, 0]),
        "calibration.temperature_table": lambda: cb.temperature_table(
            (0.5, 2.0), data={"logp": logp, "y": y}),
        "calibration.reordering": lambda: cb.reordering(
            {"logp": logp, "temperatures": (0.5, 2.0)}),
        "calibration.shared_shape": lambda: cb.shared_shape(logp),
        "calibration.abstention": lambda: cb.abstention(p, y, seq, (0.5, 2.0), draws=20),
        "calibration.fit_temperature": lambda: cb.fit_temperature(z, y),
        "calibration.fitted_temperature": lambda: cb.fitted_temperature(p, y, seq, halves=2),
        "calibration.best_temperature": lambda: cb.best_temperature(
            p, y, "max probability", (0.5, 1.0, 2.0)),
        # coverage
        "coverage.label_scores(aps)": lambda: cv.label_scores(p, score="aps"),
        "coverage.conformal_quantile": lambda: cv.conformal_quantile(scores),
        "coverage.conformal_sets(lac)": lambda: cv.conformal_sets(p[cal], y[cal], p[~cal]),
        "coverage.conformal_sets(aps)": lambda: cv.conformal_sets(
            p[cal], y[cal], p[~cal], score="aps", randomized=True, seed=0),
        "coverage.set_summary": lambda: cv.set_summary(sets, y),
        "coverage.by_confidence": lambda: cv.by_confidence(sets, y, conf),
        "coverage.spearman": lambda: cv.spearman(conf, logp[:, 0]),
        "coverage.ranking": lambda: cv.ranking(conf),
        "coverage.inversions (1e5)": lambda: cv.inversions(acc_models, size_models),
        "coverage.softmax_logits": lambda: cv.softmax_logits(z, 2.0),
        "coverage.evaluate": lambda: cv.evaluate(p, y, cal),
        # binning
        "binning.calibrated_labels": lambda: bn.calibrated_labels(conf, draws=50),
        "binning.ece_batch": lambda: bn.ece_batch(conf, bn.calibrated_labels(conf, draws=50)),
        "binning.ece_batch(1000 bins)": lambda: bn.ece_batch(
            conf, bn.calibrated_labels(conf, draws=50), bins=1000),
        "binning.l2_batch": lambda: bn.l2_batch(conf, bn.calibrated_labels(conf, draws=50)),
        "binning.subsample": lambda: bn.subsample(rows, 100, draws=200),
        "binning.ece_floor": lambda: bn.ece_floor(conf, (100, 1000), (5, 15), draws=200),
        "binning.predicted_constant": lambda: bn.predicted_constant(conf, 15, adaptive=True),
        "binning.consistency_test": lambda: bn.consistency_test(conf, ok, draws=50),
        "binning.subset_p_values": lambda: bn.subset_p_values(
            conf, ok, seq, min(64, rows // WINDOW // 2), subsets=10, draws=50),
        "binning.p_values": lambda: bn.p_values(conf[:1000], conf),
        "binning.verdicts": lambda: bn.verdicts(logp, y, seq, sizes=(4, 16), draws=50),
        # exchangeability
        "exchangeability.calibration_masks": lambda: ex.calibration_masks(seq, splits=200),
        "exchangeability.split_coverage": lambda: ex.split_coverage(
            scores, ex.calibration_masks(seq, splits=20)),
        "exchangeability.spread_interval": lambda: ex.spread_interval(conf),
        "exchangeability.shuffle_groups": lambda: ex.shuffle_groups(seq),
        "exchangeability.escalation": lambda: ex.escalation(sets, y),
        # training
        "training.checkpoint_metrics": lambda: tr.checkpoint_metrics(logp, y, seq, halves=2),
    }


def measure(name: str, rows: int) -> dict:
    d = inputs(rows)
    fn = cases(d, rows)[name]
    tracemalloc.start()
    tracemalloc.reset_peak()
    start = time.perf_counter()
    fn()
    seconds = time.perf_counter() - start
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux: kilobytes
    return {"name": name, "peak_bytes": peak, "rss_bytes": rss, "seconds": round(seconds, 2)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=10 ** 6)
    ap.add_argument("--only", default=None, help="run the cases whose name contains this")
    ap.add_argument("--isolate", action="store_true", help="one subprocess per case")
    ap.add_argument("--one", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.one is not None:
        print(json.dumps(measure(args.one, args.rows)))
        return 0
    names = [n for n in cases(inputs(8 * WINDOW), 8 * WINDOW) if args.only is None or args.only in n]
    print(f"peak memory per call, {args.rows:,} rows x {K} classes (budget {BUDGET / 2**30:.0f} GiB)")
    worst, shared = 0, None
    for name in names:
        if args.isolate:
            out = subprocess.run([sys.executable, __file__, "--rows", str(args.rows), "--one", name],
                                 capture_output=True, text=True, check=True).stdout
            r = json.loads(out.splitlines()[-1])
        else:
            if shared is None:
                shared = inputs(args.rows)
                table = cases(shared, args.rows)
            tracemalloc.start()
            tracemalloc.reset_peak()
            start = time.perf_counter()
            table[name]()
            r = {"name": name, "peak_bytes": tracemalloc.get_traced_memory()[1],
                 "seconds": round(time.perf_counter() - start, 2)}
            tracemalloc.stop()
        worst = max(worst, r["peak_bytes"])
        flag = "" if r["peak_bytes"] <= BUDGET else "   OVER BUDGET"
        rss = f"  (process rss {r['rss_bytes'] / 2**20:7.0f} MiB)" if "rss_bytes" in r else ""
        print(f"{name:40s} {r['peak_bytes'] / 2**20:8.1f} MiB {r['seconds']:7.2f} s{rss}{flag}",
              flush=True)
    print(f"largest: {worst / 2**20:.1f} MiB")
    return 0 if worst <= BUDGET else 1


if __name__ == "__main__":
    raise SystemExit(main())
