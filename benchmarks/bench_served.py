"""The served backend against the in-process one, and what the top-k approximation changes.

    .venv/bin/python benchmarks/bench_served.py [--windows 64] [--pairs 96] [--no-topk]

Needs ``pip install standarderror[serve]``. One run prints, as ratios:

* **tokens/s, served / in-process**: the calibration task's window rows
  (``labelled_window_logprobs`` on ``--windows`` windows of 64 tokens of the test plays) for the
  random Llama of scripts/make_gguf.py (vocabulary 384), through ``HFModel`` in this process
  and through llama-cpp-python's server on its float32 GGUF (top 20 log-probabilities, 4
  requests in flight);
* **requests/s at concurrency 1, 4 and 16**: ``--pairs`` option scores
  (``continuation_logprob``, one request each) against the same server, relative to
  concurrency 1;
* **the top-k approximation** (unless ``--no-topk``): the calibration task (10 x 16 windows)
  on whole rows and on rows cut to their top k (``served.TopK``: what a server returning k
  log-probabilities gives), for the book's tiny model exported to GPT-2 (trained) and the
  random Llama: the largest change over the table's temperatures of accuracy, NLL and ECE,
  the fitted temperature, the largest change of an AURC, and the mean probability left
  outside the top k.
"""

from __future__ import annotations

import argparse
import importlib.util
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def _script():
    spec = importlib.util.spec_from_file_location("make_gguf", ROOT / "scripts" / "make_gguf.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def topk_table(lm, ks=(1, 5, 20, 100)):
    from standarderror.experiments import measure
    from standarderror.llm.interface import served

    kw = dict(count=10, size=16, progress=False)
    full = measure.calibration(lm, **kw)
    rows = {r["temperature"]: r for r in full["table"]}
    ab = {(a["score"], a["temperature"]): a["aurc"] for a in full["abstention"]}
    print(f"  {'k':>4} {'left':>7} {'|d acc|':>8} {'|d NLL|':>8} {'|d ECE|':>8} "
          f"{'fitted T':>17} {'|d AURC|':>9}")
    for k in ks:
        t = served.TopK(lm, k)
        r = measure.calibration(t, **kw)
        d = np.array([[abs(o[q] - rows[o["temperature"]][q]) for q in ("accuracy", "nll", "ece")]
                      for o in r["table"]]).max(axis=0)
        dab = max(abs(a["aurc"] - ab[(a["score"], a["temperature"])]) for a in r["abstention"])
        print(f"  {k:4d} {np.concatenate(t.left).mean():7.4f} {d[0]:8.4f} {d[1]:8.4f} "
              f"{d[2]:8.4f} {full['fitted']['temperature']:7.4f} -> "
              f"{r['fitted']['temperature']:6.4f} {dab:9.4f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--windows", type=int, default=64)
    ap.add_argument("--pairs", type=int, default=96)
    ap.add_argument("--no-topk", action="store_true")
    args = ap.parse_args()
    from standarderror.llm import export, interface, tiny
    from standarderror.llm.interface import served

    script = _script()
    with tempfile.TemporaryDirectory() as d:
        hf, gguf = script.make(d, vocab=384, window=128)
        local = interface.HFModel(hf, device="cpu")
        ids = local.encode(tiny.split("test"))
        x, y = next(tiny.windows(ids, 1, args.windows, 0, block=64))
        with script.serve(gguf, n_ctx=128) as (url, name):
            remote = served.ServedModel(url, name, tokenizer=hf, top_logprobs=20, window=128)
            t = time.perf_counter()
            for lo in range(0, len(x), 16):
                local.labelled_window_logprobs(x[lo:lo + 16], y[lo:lo + 16])
            t_local = time.perf_counter() - t
            t = time.perf_counter()
            remote.labelled_window_logprobs(x, y)
            t_served = time.perf_counter() - t
            n = x.size
            print(f"window rows, {n:,} predictions: in-process {n / t_local:,.0f} tokens/s, "
                  f"served {n / t_served:,.0f} tokens/s: served / in-process "
                  f"{t_local / t_served:.3f}")
            ctx = [tiny.split("test")[i * 50:i * 50 + 48] for i in range(args.pairs)]
            opts = [" the"] * args.pairs
            rates = {}
            for c in (1, 4, 16):
                lm = served.ServedModel(url, name, tokenizer=hf, window=128, concurrency=c)
                t = time.perf_counter()
                lm.continuation_logprob(ctx, opts)
                rates[c] = args.pairs / (time.perf_counter() - t)
                lm.close()
            print("requests/s relative to concurrency 1: " + ", ".join(
                f"{c}: {rates[c] / rates[1]:.2f}" for c in rates)
                + f" ({rates[1]:.1f} requests/s at 1)")
            remote.close()
        if not args.no_topk:
            gpt2 = interface.HFModel(export.to_gpt2(Path(d) / "gpt2"), device="cpu")
            print("top-k approximation, the book's tiny model (exported, vocabulary 77):")
            topk_table(gpt2)
            print("top-k approximation, the random Llama (vocabulary 384):")
            topk_table(local)


if __name__ == "__main__":
    main()
