"""Benchmark: the vectorised sequence bootstrap of ``calibration.abstention`` against a plain
reference that loops over bootstrap draws.

The workload is Episode 3's: 24,576 predictions in 384 windows of 64, 3 confidence scores,
6 temperatures, 300 bootstrap draws. The data are synthetic (same shape as the model's
predictions, 65 classes) so the benchmark runs without the checkpoint. The reference builds
each resampled dataset explicitly (rows repeated by how often their window was drawn) and
calls the public ``aurc`` on it, for every score and temperature; it runs on fewer draws and
its time is scaled linearly to 300 (its cost is linear in draws). Both produce the same
intervals on the same draws (``tests/test_calibration.py`` checks that).

Run: ``python benchmarks/bench_abstention.py [--reference-draws 10]``
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from standarderror.uncertainty import calibration as cb
from standarderror.uncertainty import selective

ROWS_PER_SEQUENCE, SEQUENCES, CLASSES = 64, 384, 65
TEMPERATURES = cb.ABSTENTION_TEMPERATURES
DRAWS = 300


def workload(seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    n = ROWS_PER_SEQUENCE * SEQUENCES
    z = rng.normal(size=(n, CLASSES)) * rng.gamma(2.0, 1.0, size=(n, 1))
    logp = cb.scale(z, 1.0)
    q = np.exp(logp)
    y = (q.cumsum(axis=1) > rng.random((n, 1))).argmax(axis=1)  # labels drawn from the model
    return {"p": q, "y": y, "sequence": np.repeat(np.arange(SEQUENCES), ROWS_PER_SEQUENCE)}


def reference(p, y, sequence, temperatures, draws, seed=0) -> dict:
    """Plain bootstrap: one explicit resampled dataset per draw, public aurc on each."""
    logp = np.log(p)
    ok = logp.argmax(axis=1) == y
    scores = {t: cb.confidence_scores(logp, t) for t in set(temperatures) | {1.0}}
    counts = selective._draw_counts(int(sequence.max()) + 1, draws, seed)
    diffs = {(s, t): [] for s in cb.CONFIDENCE_SCORES for t in temperatures}
    for c in counts:  # the loop over draws this benchmark measures
        rows = np.repeat(np.arange(y.size), c[sequence])
        for s in cb.CONFIDENCE_SCORES:
            base = cb.aurc(scores[1.0][s][rows], ok[rows])
            for t in temperatures:
                diffs[(s, t)].append(cb.aurc(scores[t][s][rows], ok[rows]) - base)
    return {k: np.percentile(v, [2.5, 97.5]) for k, v in diffs.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reference-draws", type=int, default=10)
    args = ap.parse_args()
    d = workload()
    t0 = time.perf_counter()
    fast = cb.abstention(d["p"], d["y"], d["sequence"], temperatures=TEMPERATURES, draws=DRAWS)
    t_fast = time.perf_counter() - t0

    t0 = time.perf_counter()
    ref = reference(d["p"], d["y"], d["sequence"], TEMPERATURES, args.reference_draws)
    t_ref = (time.perf_counter() - t0) * DRAWS / args.reference_draws

    # the same computation: on the reference's draws, the vectorised path gives the same interval
    check = cb.abstention(d["p"], d["y"], d["sequence"], temperatures=TEMPERATURES,
                          draws=args.reference_draws)
    worst = max(abs(check["table"][k]["low"] - v[0]) + abs(check["table"][k]["high"] - v[1])
                for k, v in ref.items())
    n = d["y"].size
    print(f"workload: {n:,} rows, {SEQUENCES} sequences, {len(cb.CONFIDENCE_SCORES)} scores x "
          f"{len(TEMPERATURES)} temperatures, {DRAWS} draws")
    print(f"vectorised abstention():     {t_fast:8.2f} s")
    print(f"plain loop over draws:       {t_ref:8.2f} s  (measured on {args.reference_draws} draws, "
          f"scaled x{DRAWS / args.reference_draws:g})")
    print(f"ratio (reference / ours):    {t_ref / t_fast:8.1f}x")
    print(f"largest interval disagreement on {args.reference_draws} shared draws: {worst:.2e}")
    del fast


if __name__ == "__main__":
    main()
