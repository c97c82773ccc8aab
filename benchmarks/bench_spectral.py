"""Gram-space spectral toolkit against a plain dense d x d implementation, at d = 768, m = 20.

    .venv/bin/python benchmarks/bench_spectral.py [--questions 8] [--repeats 3]

Both sides compute, for every question, the temperature-scaled eigenvalues, the von Neumann
entropy and the matrix log score of the target, and the n x n Frobenius similarity of the
predicted matrices. The dense side forms each d x d density matrix and calls ``numpy.linalg.eigh``
on it; the toolkit works in the m x m Gram space. Prints the times, the speed ratio and the
largest disagreement. The dense side runs once (it takes seconds), the toolkit is timed as the
best of ``--repeats`` runs. Exits non-zero if the ratio is below 50 or the answers disagree.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from standarderror import spectral

ZERO = spectral.ZERO


def dense(answers, targets, t, eps=1e-10):
    e = answers / np.linalg.norm(answers, axis=2, keepdims=True)
    y = targets / np.linalg.norm(targets, axis=1, keepdims=True)
    n, m, d = e.shape
    mats, top, ent, score = [], [], [], []
    for i in range(n):
        w, u = np.linalg.eigh(e[i].T @ e[i] / m)
        pos = w > ZERO
        mu = np.where(pos, np.where(pos, w, 1.0) ** (1.0 / t), 0.0)
        mu /= mu.sum()
        mats.append((u * mu) @ u.T)
        top.append(mu.max())
        ent.append(-np.sum(mu[pos] * np.log(mu[pos])))
        logm = np.log(np.where(mu > 0, mu, eps))
        score.append(-(y[i] @ u) ** 2 @ logm)
    sim = np.empty((n, n))
    norms = [np.linalg.norm(x) for x in mats]
    for i in range(n):
        for j in range(n):
            sim[i, j] = np.sum(mats[i] * mats[j]) / (norms[i] * norms[j])
    return np.array(top), np.array(ent), np.array(score), sim


def gram(answers, targets, t):
    return (spectral.eigenvalues(answers, t)[:, 0], spectral.entropy(answers, t),
            spectral.log_score(answers, targets, t), spectral.similarity(answers, t))


def best_of(fn, repeats):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return min(times), out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--questions", type=int, default=8)
    ap.add_argument("--dimension", type=int, default=768)
    ap.add_argument("--answers", type=int, default=20)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--temperature", type=float, default=1.7)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    n, m, d = args.questions, args.answers, args.dimension
    modes = rng.normal(size=(n, 4, d))
    answers = modes[np.arange(n)[:, None], rng.integers(0, 4, (n, m))] + 0.5 * rng.normal(size=(n, m, d))
    targets = modes[:, 0] + 0.5 * rng.normal(size=(n, d))
    t_dense, ref = best_of(lambda: dense(answers, targets, args.temperature), 1)
    t_gram, got = best_of(lambda: gram(answers, targets, args.temperature), args.repeats)
    err = max(float(np.max(np.abs(a - b))) for a, b in zip(got, ref))
    ratio = t_dense / t_gram
    print(f"n={n} questions, m={m} answers, d={d}, T={args.temperature}")
    print(f"dense d x d reference : {t_dense * 1e3:9.1f} ms")
    print(f"Gram-space toolkit    : {t_gram * 1e3:9.1f} ms")
    print(f"speed ratio           : {ratio:9.0f}x   (required >= 50x)")
    print(f"largest disagreement  : {err:.2e}   (required <= 1e-8)")
    ok = ratio >= 50 and err <= 1e-8
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
