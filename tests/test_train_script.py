"""scripts/train_tiny.py: a short run is seeded (bit-identical weights twice) and loadable."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from standarderror.llm import tiny

ROOT = Path(__file__).resolve().parents[1]


def run(out):
    subprocess.run([sys.executable, str(ROOT / "scripts" / "train_tiny.py"), "--steps", "3", "--saves", "1",
                    "--eval-windows", "128", "--out", str(out)], check=True, capture_output=True, timeout=600)
    return json.loads((out / "card.json").read_text())


@pytest.mark.slow
def test_training_is_seeded_and_writes_a_loadable_card(tmp_path):
    a, b = run(tmp_path / "a"), run(tmp_path / "b")
    context = ("cpu_capability", "threads", "torch", "wall_seconds")
    assert a["checkpoints"][0]["sha256"] == b["checkpoints"][0]["sha256"], (
        "two seeded runs wrote different weights: " + "; ".join(
            f"{k} {a.get(k)!r} vs {b.get(k)!r}" for k in context))
    # the card names the kernels that this process, in the same environment, would choose
    assert a["cpu_capability"] == b["cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    for key in ("parameters", "steps", "batch", "schedule", "train_loss", "val_loss", "vocabulary",
                "corpus", "wall_seconds", "torch", "uniform_loss"):
        assert key in a
    assert a["corpus"]["sha256"] == tiny.CORPUS_SHA256
    m = tiny.load(directory=tmp_path / "a", trust_card=True)
    assert m["step"] == 3 and m["parameters"] == a["parameters"]
