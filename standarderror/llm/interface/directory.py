"""Checks on an untrusted model source, run before anything of it is loaded.

The file policies (:data:`PICKLED` weights are never opened, :data:`HUB_FILES` is all a hub
download fetches, :data:`TOKENIZER_FILES`, :data:`MAX_LAYERS`), the torch device
(:func:`check_device`), a hub name looked up with huggingface_hub offline
(:func:`hub_offline`, :func:`resolve`), safetensors headers read without loading a tensor
(:func:`safetensors_parameters`) and the directory itself (:func:`check_directory`). Nothing
here imports ``transformers`` or ``huggingface_hub`` at import time.
"""

from __future__ import annotations

import json
import os
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import torch

#: Weight files that are pickles: unpickling can run code, so they are never loaded.
PICKLED = ("*.bin", "*.pt", "*.pth", "*.ckpt", "*.pkl", "*.pickle")
#: Other weight formats this loader does not read.
OTHER_WEIGHTS = ("*.msgpack", "*.h5", "*.gguf", "*.onnx")
#: Files a tokenizer is saved in (``save_pretrained`` writes at least one of them).
TOKENIZER_FILES = ("tokenizer.json", "tokenizer.model", "vocab.json", "vocab.txt",
                   "spiece.model", "sentencepiece.bpe.model", "tekken.json")
#: What a hub download fetches: configs, safetensors and tokenizer files; never code or pickles.
HUB_FILES = ["*.json", "*.safetensors", "*.model", "*.txt", "*.tiktoken"]
#: The most transformer layers a config may declare (a guard against absurd configs).
MAX_LAYERS = 1024
_LAYER_KEYS = ("num_hidden_layers", "n_layer", "num_layers", "n_layers")


def _one_line(exc: BaseException) -> str:
    """The first non-empty line of an exception's message."""
    lines = [s.strip() for s in str(exc).splitlines() if s.strip()]
    return lines[0] if lines else type(exc).__name__


@contextmanager
def hub_offline(on: bool = True):
    """Switch huggingface_hub's offline mode on for the duration (no request leaves the
    process: not even the host name is resolved). ``on=False`` changes nothing."""
    from huggingface_hub import constants

    old, env = constants.HF_HUB_OFFLINE, os.environ.get("HF_HUB_OFFLINE")
    if on:
        constants.HF_HUB_OFFLINE = True
        os.environ["HF_HUB_OFFLINE"] = "1"
    try:
        yield
    finally:
        constants.HF_HUB_OFFLINE = old
        if env is None:
            os.environ.pop("HF_HUB_OFFLINE", None)
        else:
            os.environ["HF_HUB_OFFLINE"] = env


def check_device(device: str) -> str:
    """The torch device to run on (``"auto"``: CUDA when available); raises ``ValueError``
    when this torch build cannot use it (``cuda`` on a CPU build, a misspelt name)."""
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    try:
        torch.empty(1, device=torch.device(device))
    except Exception as exc:  # RuntimeError, AssertionError ("not compiled with CUDA"), ...
        raise ValueError(f"device {device!r} is not usable with this torch build "
                         f"(torch {torch.__version__}): {_one_line(exc)}; use --device cpu"
                         ) from None
    return device


def safetensors_parameters(path) -> int:
    """Elements stored in one ``.safetensors`` file, read from its header (no tensor is
    loaded); raises ``ValueError`` when the file is truncated or its header is corrupt."""
    path = Path(path)
    size = path.stat().st_size
    bad = f"{path} is not a valid safetensors file"
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise ValueError(f"{bad}: {size} bytes, shorter than its header")
        n = int.from_bytes(head, "little")
        if n > min(size - 8, 100 << 20):
            raise ValueError(f"{bad}: its header claims {n:,} bytes, the file holds {size:,}")
        try:
            header = json.loads(f.read(n))
            total, end = 0, 0
            for key, v in header.items():
                if key == "__metadata__":
                    continue
                total += int(np.prod(v["shape"], dtype=np.int64))
                end = max(end, int(v["data_offsets"][1]))
        except (ValueError, TypeError, KeyError, IndexError, AttributeError) as exc:
            raise ValueError(f"{bad}: unreadable header ({_one_line(exc)})") from None
    if 8 + n + end != size:
        raise ValueError(f"{bad}: the header describes {8 + n + end:,} bytes, the file holds "
                         f"{size:,} (truncated or corrupt; save the model again)")
    return total


def _json(path: Path) -> dict:
    try:
        out = json.loads(path.read_text("utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path} is not valid JSON: {_one_line(exc)}") from None
    if not isinstance(out, dict):
        raise ValueError(f"{path} must hold a JSON object")
    return out


def _layers(cfg: dict) -> int:
    """The largest layer count anywhere in a config (nested text/vision configs included)."""
    best = 0
    for k, v in cfg.items():
        if k in _LAYER_KEYS and isinstance(v, int):
            best = max(best, v)
        elif isinstance(v, dict):
            best = max(best, _layers(v))
    return best


def resolve(source, *, local_only: bool = True) -> Path:
    """The local directory of a model: ``source`` itself, or a hub name's snapshot.

    A hub name is looked up in the local hub cache with huggingface_hub's offline mode on
    (nothing reaches the network); with ``local_only=False`` it is downloaded, fetching
    only :data:`HUB_FILES` (configs, safetensors, tokenizer files: never code, never pickles).
    """
    src = str(source)
    path = Path(src).expanduser()
    if path.exists():
        if not path.is_dir():
            raise FileNotFoundError(f"{src} is not a directory; pass the directory that "
                                    "holds config.json and the weights")
        return path
    if path.is_absolute() or src.startswith((".", "~")) or src.count("/") > 1 \
            or src.endswith(("/", "\\")) or "\\" in src:
        raise FileNotFoundError(f"model directory {src} does not exist")
    from huggingface_hub import snapshot_download

    try:
        with hub_offline(local_only):
            return Path(snapshot_download(src, allow_patterns=HUB_FILES,
                                          local_files_only=local_only))
    except Exception as exc:
        if local_only:
            raise FileNotFoundError(
                f"{src} is neither a model directory here nor a model in the local hub "
                "cache; check the path, or pass --allow-download (Python: local_only=False) "
                "to fetch it from the hub") from None
        raise ValueError(f"{src}: the hub download failed: {_one_line(exc)}") from None


def check_directory(path) -> dict:
    """Check a model directory before anything is loaded from it; returns its config.

    Refused, each with a one-line ``ValueError`` or ``FileNotFoundError``: no config.json
    or one that is not JSON; a ``model_type`` transformers does not know (its code would
    come from the directory, ``auto_map``: never run); no safetensors weights (pickled
    ``*.bin``/``*.pt`` are never unpickled: unpickling can run code); a truncated or
    corrupt safetensors file; a quantization config or a flash-attention implementation
    (this loader runs plain float weights with transformers' default attention); more than
    :data:`MAX_LAYERS` layers; no tokenizer files.
    """
    path = Path(path)
    if not (path / "config.json").exists():
        raise FileNotFoundError(f"{path} holds no config.json: not a transformers model "
                                "directory")
    cfg = _json(path / "config.json")
    weights = sorted(path.glob("*.safetensors"))
    if not weights:
        pickled = sorted(p.name for g in PICKLED for p in path.glob(g))
        if pickled:
            raise ValueError(
                f"{path} holds pickled weights only ({', '.join(pickled)}), which are never "
                "loaded (unpickling can run code); convert them once where you trust the "
                "file: AutoModelForCausalLM.from_pretrained(DIR, use_safetensors=False)"
                ".save_pretrained(NEW_DIR) writes model.safetensors")
        other = sorted(p.name for g in OTHER_WEIGHTS for p in path.glob(g))
        if other:
            raise ValueError(f"{path} holds weights only in formats this loader does not "
                             f"read ({', '.join(other)}); save them as safetensors")
        raise FileNotFoundError(f"{path} holds no weights (no *.safetensors); save the model "
                                "with save_pretrained() first")
    from transformers import CONFIG_MAPPING

    kind = cfg.get("model_type")
    if not isinstance(kind, str) or kind not in CONFIG_MAPPING:
        code = (" and asks to run code from the directory (auto_map)" if "auto_map" in cfg
                else "")
        raise ValueError(f"{path}/config.json names model_type {kind!r}, which transformers "
                         f"does not know{code}; this loader never runs a model directory's "
                         "code (trust_remote_code=False)")
    for w in weights:
        safetensors_parameters(w)
    if cfg.get("quantization_config"):
        method = cfg["quantization_config"]
        method = method.get("quant_method", "?") if isinstance(method, dict) else method
        raise ValueError(f"{path}/config.json asks for quantized weights ({method}); this "
                         "loader measures plain float weights: use an unquantized copy")
    for key in ("_attn_implementation", "attn_implementation"):
        impl = cfg.get(key)
        if impl not in (None, "eager", "sdpa"):
            raise ValueError(f"{path}/config.json asks for attention {impl!r} ({key}); this "
                             "loader uses transformers' default attention: remove the key")
    layers = _layers(cfg)
    if layers > MAX_LAYERS:
        raise ValueError(f"{path}/config.json declares {layers:,} layers, more than any "
                         f"model this loader accepts ({MAX_LAYERS:,}); is the config right?")
    if not any((path / f).exists() for f in TOKENIZER_FILES):
        raise FileNotFoundError(f"{path} holds no tokenizer (none of {', '.join(TOKENIZER_FILES)}"
                                "); save the model's tokenizer beside it with save_pretrained()")
    return cfg
