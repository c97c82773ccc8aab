"""The committed checkpoints: trust anchors, the card, its checks, and the hash-verified loader.

* :data:`ANCHORS` holds the SHA-256 of each committed directory's card, in this file: the trust
  anchor of every load. The card lists each checkpoint file's SHA-256, the configuration and the
  vocabulary, so the anchor vouches for all of them (``scripts/train_tiny.py`` rewrites it).
* :func:`card` reads a directory's ``card.json``; :func:`verified_card` checks it against its
  anchor (or the caller's word, ``trust_card=True``) and checks its fields.
* :func:`load` verifies a checkpoint's size, safetensors header and SHA-256 before any weight is
  built, and loads it through ``safetensors`` (tensors only; nothing is unpickled) into a
  :class:`~standarderror.llm.gpt.GPT`.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
from pathlib import Path

import torch

from standarderror import _checks

from .gpt import GPT, Config, parameter_count

CHECKPOINT_DIR = Path(__file__).with_name("checkpoints")


# --------------------------------------------------------------------------------------
# Checkpoints
# --------------------------------------------------------------------------------------


#: Trust anchors: the SHA-256 of each committed checkpoint directory's card, in canonical JSON
#: (:func:`card_digest`), keyed by the directory's path under :data:`CHECKPOINT_DIR` ("" is the
#: directory itself). The card lists every file's SHA-256, the configuration and the vocabulary,
#: so these constants vouch for all of them. ``scripts/train_tiny.py`` rewrites the entry of a
#: directory it trains into.
ANCHORS = {
    "": "1a3a12686b53cfd162dc4d2afa3900e0424acf5f151994fe1d99a958155d52c6",
    "overfit": "30f45ddcd0495a6e7a49b963c8f991dc5b6a396e226c7ecb0d8340c51214ee1a",
    "overfit-wd": "85aed32cae584310ef459034d6eee613226bfb823e05752dacce390ffba8e9f9",
}
_FILE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*\.safetensors")
_SHA256 = re.compile(r"[0-9a-f]{64}")
#: Size caps, checked before anything is read into memory: a card (the committed one is
#: 5 kB) and a checkpoint (the committed ones are 1.6 MB; 1 GiB holds 268 million float32
#: weights). A card whose configuration implies more than the checkpoint cap is refused
#: before any model is built.
MAX_CARD_BYTES = 1 << 20
MAX_CHECKPOINT_BYTES = 1 << 30
_MAX_HEADER_BYTES = 1 << 20
#: Tensor dtypes a checkpoint may store (safetensors names and bytes per element); they are
#: cast to float32 on loading. Integers, booleans and complex numbers are not weights.
WEIGHT_DTYPES = {"F16": 2, "BF16": 2, "F32": 4, "F64": 8}


def _regular_file(path: Path, what: str) -> None:
    if path.is_symlink():
        raise ValueError(f"{what} {path} is a symbolic link; copy the file in instead")
    if path.exists() and not path.is_file():
        raise ValueError(f"{what} {path} is not a regular file")


def _expected_shapes(cfg: Config) -> dict[str, tuple[int, ...]]:
    """The state dict's tensor shapes for ``cfg``, from a model built on the meta device
    (shapes only: no memory is allocated for its weights).

    It is built with ``init=False``: meta tensors hold no values, and torch's meta
    ``normal_`` would import its compiler stack on first use (about 2 s, once per process, on a
    page that otherwise never needs it).
    """
    with torch.device("meta"):
        model = GPT(cfg, init=False)
    return {k: tuple(v.shape) for k, v in model.state_dict().items()}


def _checked_header(head: bytes, path: Path, size: int, shapes: dict) -> None:
    """Compare a safetensors header with the shapes the card's config implies, and the file's
    size with the one the header implies, before the tensors are read."""
    try:
        header = json.loads(head.decode("utf-8"))
    except (ValueError, RecursionError):
        raise ValueError(f"checkpoint {path} has no valid safetensors header") from None
    if not isinstance(header, dict):
        raise ValueError(f"checkpoint {path} has no valid safetensors header")
    header.pop("__metadata__", None)
    if set(header) != set(shapes):
        missing, extra = sorted(set(shapes) - set(header)), sorted(set(header) - set(shapes))
        raise ValueError(f"checkpoint {path} does not hold the tensors of the card's config "
                         f"(missing {missing[:3]}, unexpected {[k[:40] for k in extra[:3]]})")
    end = 0
    for name, want in shapes.items():
        t = header[name]
        dtype = t.get("dtype") if isinstance(t, dict) else None
        shape = t.get("shape") if isinstance(t, dict) else None
        offsets = t.get("data_offsets") if isinstance(t, dict) else None
        if dtype not in WEIGHT_DTYPES:
            raise ValueError(f"checkpoint {path}: tensor {name} has dtype {str(dtype)[:12]!r}; "
                             f"weights must be one of {sorted(WEIGHT_DTYPES)}")
        if (not isinstance(shape, list) or tuple(shape) != want
                or not all(type(d) is int for d in shape)):
            raise ValueError(f"checkpoint {path}: tensor {name} has shape {str(shape)[:40]}, "
                             f"but the card's config implies {list(want)}")
        if (not isinstance(offsets, list) or len(offsets) != 2
                or not all(type(o) is int for o in offsets)
                or offsets[1] - offsets[0] != math.prod(want) * WEIGHT_DTYPES[dtype]):
            raise ValueError(f"checkpoint {path}: tensor {name} has inconsistent data offsets")
        end = max(end, offsets[1])
    if size != 8 + len(head) + end:
        raise ValueError(f"checkpoint {path} is {size:,} bytes, but its header describes "
                         f"{8 + len(head) + end:,}")


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def card_digest(info: dict) -> str:
    """SHA-256 of a card in canonical JSON (sorted keys, no spaces, ASCII): independent of how
    the file was indented or of its line endings."""
    text = json.dumps(info, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode("ascii")).hexdigest()


def anchor_key(directory: Path | str) -> str | None:
    """The key of ``directory`` in :data:`ANCHORS`, or ``None`` if it is not anchored."""
    try:
        rel = Path(directory).resolve().relative_to(Path(CHECKPOINT_DIR).resolve())
    except ValueError:
        return None
    key = rel.as_posix()
    key = "" if key == "." else key
    return key if key in ANCHORS else None


def card(directory: Path | None = None) -> dict:
    """The training card written by ``scripts/train_tiny.py`` (JSON)."""
    path = Path(directory or CHECKPOINT_DIR) / "card.json"
    if not path.exists():
        raise FileNotFoundError(
            f"no model card at {path}; train the model with `python scripts/train_tiny.py` "
            "or reinstall standarderror so its package data is present"
        )
    _regular_file(path, "card")
    raw = _checks.read_regular(path, "card", max_bytes=MAX_CARD_BYTES,
                               setting="standarderror.llm.weights.MAX_CARD_BYTES")
    try:
        return json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError) as exc:
        raise ValueError(f"card {path} is not valid JSON ({type(exc).__name__})") from None


def verified_card(directory: Path, trust_card: bool = False) -> dict:
    """The card of ``directory``, vouched for by :data:`ANCHORS` (or by the caller)."""
    info = card(directory)
    key = anchor_key(directory)
    if key is not None:
        digest = card_digest(info)
        if digest != ANCHORS[key]:
            raise RuntimeError(
                f"{Path(directory) / 'card.json'} has canonical SHA-256 {digest}, but "
                f"standarderror.llm.weights.ANCHORS[{key!r}] records {ANCHORS[key]}: the card or "
                "its checkpoints were changed; reinstall standarderror (or `git checkout` the "
                "directory), or retrain with scripts/train_tiny.py, which updates the anchor"
            )
    elif not trust_card:
        raise ValueError(
            f"directory {str(directory)!r} is not a committed checkpoint directory, so nothing "
            "vouches for its card.json; pass trust_card=True to load your own model (its files "
            "are then checked against the SHA-256 values that card records)"
        )
    if not isinstance(info, dict):
        raise ValueError(f"{Path(directory) / 'card.json'} must hold a JSON object")
    cfg = info.get("config")
    fields = {"block", "layers", "heads", "width"}
    if (not isinstance(cfg, dict) or not set(cfg) <= fields
            or not all(type(v) is int and 0 < v <= 1 << 16 for v in cfg.values())):
        raise ValueError(f"card config must map {sorted(fields)} to positive integers, got {cfg!r}")
    chars = info.get("vocabulary")
    if (not isinstance(chars, list) or len(chars) < 2 or len(set(chars)) != len(chars)
            or not all(isinstance(c, str) and len(c) == 1 for c in chars)):
        raise ValueError("card vocabulary must be a list of distinct single characters")
    if len(chars) != info.get("vocab_size", len(chars)):
        raise ValueError("card vocabulary and vocab_size disagree")
    entries = info.get("checkpoints")
    if not isinstance(entries, list) or not entries or not all(
            isinstance(c, dict) and type(c.get("step")) is int
            and isinstance(c.get("sha256"), str) and _SHA256.fullmatch(c["sha256"])
            for c in entries):
        raise ValueError("card checkpoints must be a non-empty list of {'step': int, 'file': "
                         "name, 'sha256': 64 hex digits}")
    seen: set[int] = set()
    for c in entries:
        if c["step"] in seen:
            raise ValueError(f"card lists step {c['step']} twice; each saved step must appear "
                             "once (which file would load is otherwise the card's order)")
        seen.add(c["step"])
    if type(info.get("final_step")) is not int or info["final_step"] not in seen:
        raise ValueError("card final_step must be one of the steps its checkpoints list")
    return info


def load(step: int | None = None, *, directory: Path | str | None = None,
         trust_card: bool = False) -> dict:
    """Load a committed checkpoint after verifying its SHA-256.

    The card of a committed directory (the package's ``checkpoints`` and its ``overfit`` and
    ``overfit-wd`` runs) must match the trust anchor held in this file (:data:`ANCHORS`); the
    card then vouches for each checkpoint's SHA-256, its configuration and its vocabulary. File
    entries must be plain names of ``.safetensors`` files inside the directory (no paths, no
    symbolic links), and the tensors are parsed from the very bytes that were hashed.

    Before anything is allocated, the card (at most :data:`MAX_CARD_BYTES`) must list each
    step once, its configuration must fit :data:`MAX_CHECKPOINT_BYTES`, and the checkpoint's
    safetensors header must name exactly the tensors of that configuration, with its shapes,
    a dtype of :data:`WEIGHT_DTYPES` and the file's size; every weight must be finite.

    Parameters
    ----------
    step : int, optional
        Training step of one of the checkpoints saved along the run; ``None`` loads the final one.
    directory : path, optional
        Where the checkpoints and ``card.json`` live (default: the package's ``checkpoints``).
    trust_card : bool, default False
        Required for any other directory (a model you retrained yourself): you vouch for its
        ``card.json``, and each file is checked against the SHA-256 that card records.

    Returns
    -------
    dict
        ``model`` (a :class:`~standarderror.llm.gpt.GPT` in eval mode, float32), ``chars``
        (the vocabulary, a list), ``stoi`` (char -> index), ``vocab`` (its size), ``parameters``
        (count), ``step``, ``sha256`` (verified), ``path``, ``card`` and ``anchored`` (True when
        the card matched :data:`ANCHORS`).
    """
    from safetensors.torch import load as load_bytes

    directory = Path(directory or CHECKPOINT_DIR)
    info = verified_card(directory, trust_card)
    entries = {c["step"]: c for c in info["checkpoints"]}
    if step is None:
        step = info["final_step"]
    if step not in entries:
        raise ValueError(f"step must be one of {sorted(entries)} (the saved checkpoints), got {step}")
    entry = entries[step]
    name = entry.get("file")
    if not isinstance(name, str) or not _FILE_NAME.fullmatch(name):
        raise ValueError(
            f"card.json names the checkpoint file {name!r}: entries must be plain file names "
            "ending in .safetensors, inside the checkpoint directory"
        )
    path = directory / name
    _regular_file(path, "checkpoint")
    if not path.exists():
        raise FileNotFoundError(
            f"checkpoint {path} is missing; reinstall standarderror or retrain with "
            "`python scripts/train_tiny.py`"
        )
    chars = info["vocabulary"]
    cfg = Config(vocab=len(chars), **info["config"])
    if cfg.width % cfg.heads:
        raise ValueError(f"card config: width {cfg.width} is not a multiple of heads {cfg.heads}")
    # the card's config, checked against the caps and then the file, before any weight exists
    weights = (cfg.vocab + cfg.block) * cfg.width + cfg.layers * 12 * cfg.width ** 2
    if 2 * weights > MAX_CHECKPOINT_BYTES:
        raise ValueError(f"card config {info['config']} implies about {weights:,} weights, more "
                         "than a checkpoint of MAX_CHECKPOINT_BYTES can hold")
    shapes = _expected_shapes(cfg)
    with _checks.open_regular(path, "checkpoint", max_bytes=MAX_CHECKPOINT_BYTES,
                              setting="standarderror.llm.weights.MAX_CHECKPOINT_BYTES") as fh:
        size = os.fstat(fh.fileno()).st_size
        prefix = fh.read(8)
        n = int.from_bytes(prefix, "little") if len(prefix) == 8 else -1
        if not 0 < n <= min(_MAX_HEADER_BYTES, size - 8):
            raise ValueError(f"checkpoint {path} is not a safetensors file")
        head = fh.read(n)
        _checked_header(head, path, size, shapes)
        data = prefix + head + fh.read(size - 8 - n + 1)
    if len(data) != size:
        raise ValueError(f"checkpoint {path} changed while it was read")
    digest = hashlib.sha256(data).hexdigest()
    if digest != entry["sha256"]:
        raise RuntimeError(
            f"checkpoint {path} has SHA-256 {digest}, but card.json records {entry['sha256']}: "
            "the file is corrupted or was replaced; restore it with `git checkout` or retrain"
        )
    state = load_bytes(data)
    for k, v in state.items():
        if not torch.isfinite(v).all():
            raise ValueError(f"checkpoint {path}: tensor {k} holds NaN or infinite weights")
    model = GPT(cfg)
    model.load_state_dict({k: v.float() for k, v in state.items()})
    model.eval()
    return {
        "model": model,
        "chars": list(chars),
        "stoi": {c: i for i, c in enumerate(chars)},
        "vocab": len(chars),
        "parameters": parameter_count(model),
        "step": step,
        "sha256": digest,
        "path": str(path),
        "card": info,
        "anchored": anchor_key(directory) is not None,
    }
