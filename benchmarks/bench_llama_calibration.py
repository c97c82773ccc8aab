"""The calibration measurement's tokens per second on a random Llama, against a plain loop.

    .venv/bin/python benchmarks/bench_llama_calibration.py [--quick] [--count 10] [--repeats 3]

The model is the tests' stand-in for "your model": a randomly initialised Llama-style network
with a byte-level BPE tokenizer trained on the validation plays (``export.random_llama``, the
fixture of tests/test_measure.py: vocabulary 1,024, window 128), loaded through
``interface.HFModel``. Three ways over the same ``count * 16`` held-out windows of 64 tokens
(``predictions.windows`` on the test plays, seed 0), each timed as the best of ``--repeats``:

* **plain loop**: ``transformers`` as a reader would call it, one window at a time:
  ``AutoModelForCausalLM`` in float32, ``model(input_ids=window).logits``, ``log_softmax`` in
  float64, and the three numbers of a calibration table at T = 1 (argmax, its probability,
  the label's log-loss);
* **forward, batched**: the measurement's own forward path alone
  (``HFModel.window_logprobs`` on blocks of 16 windows);
* **measurement**: all of ``measure.calibration`` (the table at seven temperatures, the
  abstention scores, the 25-point temperature fit, the bootstrap intervals, per-byte loss).

Tokens per second count predictions (one per position of a window). The ratio printed is the
measurement's against the plain loop's; it checks first that the plain loop's accuracy and
log-loss at T = 1 are the measurement's (to 1e-9). The measurement's time includes
tokenising the test plays (a fixed cost, about half a second here, that weighs most in
``--quick``); the loops are given the token ids. ``--quick``: 2 batches, one repeat.
"""

from __future__ import annotations

import argparse
import tempfile
import time

import numpy as np
import torch


def plain_loop(model, x, y):
    """One window per forward call; returns (argmax, confidence, nll) per prediction."""
    pred, conf, nll = [], [], []
    with torch.no_grad():
        for window, target in zip(x, y):
            z = model(input_ids=torch.as_tensor(window[None])).logits[0]
            lp = torch.log_softmax(z.double(), dim=-1).numpy()
            pred.append(lp.argmax(axis=1))
            conf.append(np.exp(lp.max(axis=1)))
            nll.append(-lp[np.arange(len(target)), target])
    return np.concatenate(pred), np.concatenate(conf), np.concatenate(nll)


def best_of(fn, repeats):
    best, out = float("inf"), None
    for _ in range(repeats):
        t = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t)
    return best, out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="2 batches, one repeat")
    ap.add_argument("--count", type=int, default=10, help="batches of 16 windows (default 10)")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    count, repeats = (2, 1) if args.quick else (args.count, args.repeats)
    size, block, seed = 16, 64, 0

    from transformers import AutoModelForCausalLM
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()   # no shard-writing or weight-loading bars in the output
    from standarderror.experiments import measure
    from standarderror.llm import export, interface, tiny
    from standarderror.llm.windows import windows

    with tempfile.TemporaryDirectory() as tmp:
        d = export.random_llama(tmp, vocab_size=1024, text=tiny.split("val"), window=128)
        lm = interface.HFModel(d, device="cpu")
        plain = AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32,
                                                     local_files_only=True).eval()
    ids = lm.encode(tiny.split("test"))
    batches = list(windows(ids, count, size, seed, block=block))
    x = np.concatenate([b[0] for b in batches])
    y = np.concatenate([b[1] for b in batches])
    rows = x.size

    t_plain, (pred, conf, nll) = best_of(lambda: plain_loop(plain, x, y), repeats)
    t_fwd, _ = best_of(lambda: [lm.window_logprobs(b[0]) for b in batches], repeats)
    t_meas, r = best_of(lambda: measure.calibration(lm, count=count, size=size, seed=seed,
                                                    block=block, progress=False), repeats)
    one = next(row for row in r["table"] if row["temperature"] == 1.0)
    assert r["rows"] == rows
    acc, mean_nll = float((pred == y.ravel()).mean()), float(nll.mean())
    assert abs(acc - one["accuracy"]) < 1e-9 and abs(mean_nll - one["nll"]) < 1e-9, (
        acc, one["accuracy"], mean_nll, one["nll"])

    print(f"random Llama ({lm.parameters:,} parameters, vocabulary {lm.vocab_size:,}), "
          f"{rows:,} predictions ({count} x {size} windows of {block}), "
          f"torch threads {torch.get_num_threads()}, best of {repeats}")
    for name, t in (("plain transformers loop, window by window", t_plain),
                    ("forward, batched (HFModel.window_logprobs)", t_fwd),
                    ("measure.calibration (everything)", t_meas)):
        print(f"  {name:<46} {t:8.3f} s  {rows / t:10,.0f} tokens/s")
    print(f"ratio (measurement / plain loop, tokens per second): {t_plain / t_meas:.2f}")
    print(f"ratio (batched forward / plain loop): {t_plain / t_fwd:.2f}")
    print(f"same T = 1 accuracy ({acc:.4f}) and NLL ({mean_nll:.4f}) as the measurement")


if __name__ == "__main__":
    main()
