"""The spectral risk curve and fitted temperature at scale, streamed, against a plain dense
per-question implementation.

    .venv/bin/python benchmarks/bench_spectral_stream.py            # 10^5 x m=20 x d=768
    .venv/bin/python benchmarks/bench_spectral_stream.py --quick    # 10^4 questions

The answers of 10^5 questions x 20 answers x 768 dimensions are 12 GB in float64, so they never
exist at once: a seeded generator makes them ``--chunk`` questions at a time (semantic modes
plus noise, targets near one mode), and :func:`standarderror.spectral.spectrum` decomposes each
chunk in the m x m Gram space and keeps ``2 n m`` floats. From that spectrum
:func:`~standarderror.spectral.risk_curve` gives the risk and entropy at 41 temperatures and
:func:`~standarderror.spectral.fit_spectral_temperature` the continuous fit.

The reference is the plain computation a reader would write: per question, form the d x d
density matrix, ``numpy.linalg.eigh`` it, and keep its d eigenvalues and the target's d squared
projections; the curve and the fit then use those (the same objective, minimised the same
way). At ~0.1 s a question it would take hours on 10^5 questions, so it runs on the first
``--reference`` questions of the same stream, its time is extrapolated linearly to all of
them (say so when quoting the ratio), and its risk curve and fit are compared with the
toolkit's on that subsample.

Memory is measured with ``tracemalloc`` (numpy reports its buffers to it) around the whole
streamed computation, the generator's chunk included, and as the process's peak resident
size (``resource.getrusage``; interpreter and libraries included). The generator's own time
is measured and left out of the toolkit's time. Exits non-zero if the tracemalloc peak
exceeds 1 GiB, the ratio is below 50 or the two disagree by more than 1e-8.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
import tracemalloc

import numpy as np
from scipy import optimize

from standarderror import spectral

BUDGET = 1 << 30
ZERO = spectral.ZERO
EPS = spectral.EPS


def stream(n, m, d, chunk, seed, clock):
    """``(answers, targets)`` chunks of a seeded synthetic problem; time spent making them is
    added to ``clock[0]``."""
    rng = np.random.default_rng(seed)
    for s in range(0, n, chunk):
        t0 = time.perf_counter()
        c = min(chunk, n - s)
        modes = rng.standard_normal((c, 4, d))
        pick = rng.integers(0, 4, (c, m))
        a = modes[np.arange(c)[:, None], pick]
        a += 0.5 * rng.standard_normal((c, m, d))
        a[:, 1] = a[:, 0]  # a repeated answer in every question: singular Gram matrices
        y = modes[:, 0] + 0.5 * rng.standard_normal((c, d))
        del modes
        clock[0] += time.perf_counter() - t0
        yield a, y


def dense_reference(chunks, count):
    """Per question: the d x d density matrix, its eigenvalues (exact zeros at or below ZERO)
    and the target's squared projections on its eigenvectors; the first ``count`` questions."""
    lam, proj = [], []
    for a, y in chunks:
        for e, t in zip(a, y):
            if len(lam) == count:
                return np.array(lam), np.array(proj)
            e = e / np.linalg.norm(e, axis=1, keepdims=True)
            t = t / np.linalg.norm(t)
            w, u = np.linalg.eigh(e.T @ e / len(e))
            lam.append(np.where(w > ZERO, w, 0.0))
            proj.append((t @ u) ** 2)
    return np.array(lam), np.array(proj)


def dense_score(lam, proj, alpha):
    """Mean log score per question from full d-spectra; zero eigenvalues get EPS."""
    pos = lam > 0
    mu = np.where(pos, np.where(pos, lam, 1.0) ** alpha, 0.0)
    mu /= mu.sum(1, keepdims=True)
    return -np.sum(proj * np.log(np.where(mu > 0, mu, EPS)), axis=1)


def dense_entropy(lam, alpha):
    pos = lam > 0
    mu = np.where(pos, np.where(pos, lam, 1.0) ** alpha, 0.0)
    mu /= mu.sum(1, keepdims=True)
    return -np.sum(np.where(mu > 0, mu * np.log(np.where(mu > 0, mu, 1.0)), 0.0), axis=1)


def dense_curve_and_fit(lam, proj, ts, bounds=(0.05, 50.0)):
    risk = np.array([dense_score(lam, proj, 1 / t).mean() for t in ts])
    ent = np.array([dense_entropy(lam, 1 / t).mean() for t in ts])
    res = optimize.minimize_scalar(lambda lt: dense_score(lam, proj, np.exp(-lt)).mean(),
                                   bounds=np.log(bounds), method="bounded",
                                   options={"xatol": 1e-7})
    return risk, ent, float(np.exp(res.x))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--questions", type=int, default=100_000)
    ap.add_argument("--answers", type=int, default=20)
    ap.add_argument("--dimension", type=int, default=768)
    ap.add_argument("--chunk", type=int, default=500, help="questions per streamed chunk")
    ap.add_argument("--reference", type=int, default=40,
                    help="questions the dense reference runs on (then extrapolated)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true",
                    help="10^4 questions, 20 for the reference (a few seconds)")
    args = ap.parse_args(argv)
    if args.quick:
        args.questions, args.reference = min(args.questions, 10_000), min(args.reference, 20)
    n, m, d = args.questions, args.answers, args.dimension
    if not (n >= args.reference >= 2 and m >= 2 and d >= 2 and args.chunk >= 1):
        ap.error("need questions >= reference >= 2, answers >= 2, dimension >= 2, chunk >= 1")
    ts = np.exp(np.linspace(np.log(0.25), np.log(8), 41))

    # the toolkit, streamed, under tracemalloc
    clock = [0.0]
    tracemalloc.start()
    t0 = time.perf_counter()
    spec = spectral.spectrum(stream(n, m, d, args.chunk, args.seed, clock))
    spectral.risk_curve(spec, None, ts)  # timed and traced; checked below on a subsample
    fit = spectral.fit_spectral_temperature(spec, None)
    wall = time.perf_counter() - t0
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    t_gram = wall - clock[0]
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # kB on Linux

    # the dense reference on the first questions of the same stream
    k = args.reference
    t1 = time.perf_counter()
    lam, proj = dense_reference(stream(k, m, d, args.chunk, args.seed, [0.0]), k)
    r_risk, r_ent, r_t = dense_curve_and_fit(lam, proj, ts)
    t_ref = time.perf_counter() - t1
    t_ref_all = t_ref * n / k
    sub = spectral.spectrum(stream(k, m, d, args.chunk, args.seed, [0.0]))
    s_curve = spectral.risk_curve(sub, None, ts)
    s_fit = spectral.fit_spectral_temperature(sub, None)
    err = max(float(np.max(np.abs(s_curve["risk"] - r_risk))),
              float(np.max(np.abs(s_curve["entropy"] - r_ent))))
    t_err = abs(s_fit["temperature"] - r_t) / r_t

    ratio = t_ref_all / t_gram
    gib = 1 << 30
    print(f"n={n} questions, m={m} answers, d={d}; chunks of {args.chunk}; "
          f"{len(ts)} temperatures; OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', '-')}, "
          f"load average {os.getloadavg()[0]:.2f}")
    print(f"toolkit, streamed        : {t_gram:8.1f} s  (+ {clock[0]:.1f} s making the data, "
          "not counted)")
    print(f"  fitted T = {fit['temperature']:.4f}, risk there {fit['risk']:.4f}, "
          f"at T = 1 {fit['risk_at_one']:.4f}")
    print(f"  memory: tracemalloc peak {peak / gib:.3f} GiB (budget 1 GiB), "
          f"peak RSS {rss / gib:.3f} GiB (whole process)")
    print(f"dense d x d reference    : {t_ref:8.1f} s on {k} questions "
          f"-> {t_ref_all:,.0f} s extrapolated to {n}")
    print(f"speed ratio              : {ratio:8.0f}x   (reference extrapolated from {k} "
          "questions; required >= 50x)")
    print(f"agreement on the {k}     : curve {err:.1e} nats, fitted T {t_err:.1e} relative "
          "(required <= 1e-8 and <= 1e-5)")
    ok = peak <= BUDGET and ratio >= 50 and err <= 1e-8 and t_err <= 1e-5
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
