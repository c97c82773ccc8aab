"""Checks on an untrusted model source, run before anything of it is loaded.

The file policies (:data:`PICKLED` weights are never opened, :data:`HUB_FILES` is all a hub
download fetches, :data:`TOKENIZER_FILES`, :data:`MAX_LAYERS`, the size caps), the torch
device (:func:`check_device`), a hub name looked up with huggingface_hub offline
(:func:`hub_offline`, :func:`resolve`), the weight files transformers will load
(:func:`weight_files`), their safetensors headers read and checked without loading a tensor
(:func:`safetensors_header`, :func:`safetensors_parameters`) and the directory itself
(:func:`check_directory`). Every file is opened only when it is a regular file
(:func:`standarderror._checks.open_regular`: a FIFO or a device in its place is refused,
never waited on). Nothing here imports ``transformers`` or ``huggingface_hub`` at import
time.
"""

from __future__ import annotations

import fnmatch
import json
import math
import os
import threading
from contextlib import contextmanager
from pathlib import Path

import torch

from standarderror import _checks

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
#: The largest ``config.json`` read (real ones are a few kB; 4 MiB admits any with long
#: label maps).
MAX_CONFIG_BYTES = 4 << 20
#: The largest of every other file transformers may read from the directory besides the
#: weights (:data:`READ_FILES`: tokenizer files, the weights' index, generation config):
#: 64 MiB admits the largest tokenizers published (a ``tokenizer.json`` of a 262,000-token
#: vocabulary is about 33 MB; 100,000-token vocabularies take 5 to 20 MB) and the index of
#: a checkpoint of 90,000 tensors (9 MB).
MAX_FILE_BYTES = 64 << 20
#: The largest safetensors header read (about 160 bytes a tensor: 16 MiB describes 100,000).
MAX_HEADER_BYTES = 16 << 20
#: The most tensors one safetensors file may describe (a shard of the largest published
#: checkpoints holds a few thousand).
MAX_TENSORS = 100_000
#: Bits per element of each safetensors dtype (the format's own table).
SAFETENSORS_BITS = {"BOOL": 8, "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6, "U8": 8, "I8": 8,
                    "F8_E5M2": 8, "F8_E4M3": 8, "F8_E8M0": 8, "I16": 16, "U16": 16, "F16": 16,
                    "BF16": 16, "I32": 32, "U32": 32, "F32": 32, "C64": 64, "F64": 64,
                    "I64": 64, "U64": 64}
#: The files of a model directory transformers may read besides the weights (configs,
#: tokenizer files, chat templates, the weights' index): each must be a regular file of at
#: most :data:`MAX_FILE_BYTES` (``config.json``: :data:`MAX_CONFIG_BYTES`).
READ_FILES = (*[g for g in HUB_FILES if g != "*.safetensors"], "*.jinja")
#: The single-file weights and the index of sharded weights, as transformers names them.
SAFE_WEIGHTS, SAFE_INDEX = "model.safetensors", "model.safetensors.index.json"


def _one_line(exc: BaseException) -> str:
    """The first non-empty line of an exception's message."""
    lines = [s.strip() for s in str(exc).splitlines() if s.strip()]
    return lines[0] if lines else type(exc).__name__


def rust_panic(exc: BaseException) -> bool:
    """Whether ``exc`` is a panic of a Rust extension (pyo3's ``PanicException``, e.g. the
    tokenizers library's regex engine giving up): a ``BaseException``, which ``except
    Exception`` does not catch, raised for input the library could not handle."""
    return type(exc).__name__ == "PanicException"


_OFFLINE_LOCK = threading.Lock()
_OFFLINE: dict = {"depth": 0, "saved": None}
#: What :func:`hub_offline` sets for its duration: huggingface_hub's and transformers'
#: offline switches. :func:`hub_offline` with ``quiet=True`` also hides the hub's progress
#: bars.
OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


@contextmanager
def hub_offline(on: bool = True, *, quiet: bool = False):
    """Switch huggingface_hub's offline mode on for the duration (no request leaves the
    process: not even the host name is resolved). ``on=False`` changes nothing.

    The variables of :data:`OFFLINE_ENV` (and ``HF_HUB_DISABLE_PROGRESS_BARS`` with
    ``quiet``) and ``huggingface_hub.constants.HF_HUB_OFFLINE`` hold their offline values
    while any thread is inside; when the last one leaves, each is what it was before the
    first entered (a variable that was unset is unset again)."""
    if not on:
        yield
        return
    from huggingface_hub import constants

    env = dict(OFFLINE_ENV, **({"HF_HUB_DISABLE_PROGRESS_BARS": "1"} if quiet else {}))
    with _OFFLINE_LOCK:
        if _OFFLINE["depth"] == 0:
            _OFFLINE["saved"] = (constants.HF_HUB_OFFLINE, {})
        saved = _OFFLINE["saved"][1]
        for key, value in env.items():
            if key not in saved:
                saved[key] = os.environ.get(key)
                os.environ[key] = value
        constants.HF_HUB_OFFLINE = True
        _OFFLINE["depth"] += 1
    try:
        yield
    finally:
        with _OFFLINE_LOCK:
            _OFFLINE["depth"] -= 1
            if _OFFLINE["depth"] == 0:
                old, saved = _OFFLINE["saved"]
                constants.HF_HUB_OFFLINE = old
                for key, value in saved.items():
                    if value is None:
                        os.environ.pop(key, None)
                    else:
                        os.environ[key] = value
                _OFFLINE["saved"] = None


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


def _natural(v) -> bool:
    return type(v) is int and v >= 0


def safetensors_header(path) -> dict:
    """The tensors one ``.safetensors`` file describes, ``{name: (dtype, shape)}``, read from
    its header (no tensor is loaded) and checked as the safetensors format requires.

    Raises ``ValueError`` (one line, naming the file and the tensor) unless: the file is a
    regular file; its header is at most :data:`MAX_HEADER_BYTES` and describes at most
    :data:`MAX_TENSORS` tensors; every tensor has a known dtype
    (:data:`SAFETENSORS_BITS`), a shape of non-negative integers and integer
    ``data_offsets`` whose length is the shape's elements times the dtype's size; and the
    tensors' bytes tile the data that follows the header exactly, in order, with nothing
    missing, overlapping or left over."""
    path = Path(path)
    bad = f"{path} is not a valid safetensors file"
    with _checks.open_regular(path) as f:
        size = os.fstat(f.fileno()).st_size
        head = f.read(8)
        if len(head) < 8:
            raise ValueError(f"{bad}: {size} bytes, shorter than its header")
        n = int.from_bytes(head, "little")
        if n > MAX_HEADER_BYTES:
            raise ValueError(f"{bad}: its header claims {n:,} bytes, more than the "
                             f"{MAX_HEADER_BYTES:,} this loader reads (MAX_HEADER_BYTES)")
        if n > size - 8:
            raise ValueError(f"{bad}: its header claims {n:,} bytes, the file holds {size:,}")
        raw = f.read(n)
    try:
        header = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError) as exc:
        raise ValueError(f"{bad}: unreadable header ({_one_line(exc)})") from None
    if not isinstance(header, dict):
        raise ValueError(f"{bad}: its header is not a JSON object")
    meta = header.pop("__metadata__", None)
    if meta is not None and not (isinstance(meta, dict)
                                 and all(isinstance(v, str) for v in meta.values())):
        raise ValueError(f"{bad}: __metadata__ must map names to strings")
    if len(header) > MAX_TENSORS:
        raise ValueError(f"{bad}: its header describes {len(header):,} tensors, more than the "
                         f"{MAX_TENSORS:,} this loader reads (MAX_TENSORS)")
    out, spans = {}, []
    for name, v in header.items():
        what = f"{bad}: tensor {name[:60]!r}"
        dtype = v.get("dtype") if isinstance(v, dict) else None
        shape = v.get("shape") if isinstance(v, dict) else None
        offsets = v.get("data_offsets") if isinstance(v, dict) else None
        if not isinstance(dtype, str) or dtype not in SAFETENSORS_BITS:
            raise ValueError(f"{what} has dtype {str(dtype)[:12]!r}, which safetensors does "
                             "not define")
        if not isinstance(shape, list) or not all(_natural(d) for d in shape):
            raise ValueError(f"{what} has shape {str(shape)[:40]}: a shape is a list of "
                             "non-negative integers")
        if (not isinstance(offsets, list) or len(offsets) != 2
                or not all(_natural(o) for o in offsets) or offsets[0] > offsets[1]):
            raise ValueError(f"{what} has data_offsets {str(offsets)[:40]}: two integers, "
                             "begin <= end")
        bits = math.prod(shape) * SAFETENSORS_BITS[dtype]
        if bits != 8 * (offsets[1] - offsets[0]):
            raise ValueError(f"{what} has data_offsets {offsets}, "
                             f"{offsets[1] - offsets[0]:,} bytes, where its shape and dtype "
                             f"need {bits / 8:,.0f}")
        out[name] = (dtype, tuple(shape))
        spans.append((offsets[0], offsets[1], name))
    end = 0
    for begin, stop, name in sorted(spans):
        if begin != end:
            raise ValueError(f"{bad}: tensor {name[:60]!r} starts at byte {begin:,} of the "
                             f"data, where the tensors before it end at {end:,} (the data "
                             "must be tiled exactly)")
        end = stop
    if 8 + n + end != size:
        raise ValueError(f"{bad}: the header describes {8 + n + end:,} bytes, the file holds "
                         f"{size:,} (truncated or corrupt; save the model again)")
    return out


def safetensors_parameters(path) -> int:
    """Elements stored in one ``.safetensors`` file, read from its checked header
    (:func:`safetensors_header`; no tensor is loaded)."""
    return sum(math.prod(shape) for _, shape in safetensors_header(path).values())


def _finite(text: str) -> float:
    """A JSON number as a float, refused unless finite (``NaN``, ``Infinity``, ``1e400``)."""
    v = float(text)
    if not math.isfinite(v):
        raise ValueError(f"the number {text[:20]} is not finite")
    return v


def _json(path: Path, max_bytes: int = MAX_CONFIG_BYTES,
          setting: str = "MAX_CONFIG_BYTES") -> dict:
    """A JSON object read from a regular file of at most ``max_bytes``; every number in it
    finite."""
    raw = _checks.read_regular(path, max_bytes=max_bytes,
                               setting=f"standarderror.llm.interface.directory.{setting}")
    try:
        out = json.loads(raw.decode("utf-8"), parse_float=_finite, parse_constant=_finite)
    except (ValueError, RecursionError) as exc:
        raise ValueError(f"{path} is not valid JSON: {_one_line(exc)}") from None
    if not isinstance(out, dict):
        raise ValueError(f"{path} must hold a JSON object")
    return out


def _plain_name(name) -> bool:
    """A file name inside the directory: no separator, no parent, not hidden."""
    return (isinstance(name, str) and name == os.path.basename(name) and "\\" not in name
            and name not in ("", ".", "..") and not name.startswith("."))


def weight_files(path, cfg: dict | None = None) -> list[Path]:
    """The safetensors files transformers loads from the directory, chosen as it chooses
    them: the file config.json names (``transformers_weights``), else ``model.safetensors``,
    else the shards that ``model.safetensors.index.json`` maps the tensors to. Other
    ``*.safetensors`` files are never read, by transformers or here. Raises ``ValueError``
    when the index or the config names a file outside the directory or not in safetensors
    format, ``FileNotFoundError`` when there are no such weights (naming pickled or other
    formats found instead)."""
    path = Path(path)
    cfg = _json(path / "config.json") if cfg is None else cfg
    explicit = cfg.get("transformers_weights")
    index = None
    if explicit is not None:
        if not _plain_name(explicit) or not explicit.endswith(
                (".safetensors", ".safetensors.index.json")):
            raise ValueError(f"{path}/config.json names the weights {str(explicit)[:60]!r} "
                             "(transformers_weights): it must be the name of a .safetensors "
                             "file or index in the directory")
        if explicit.endswith(".safetensors"):
            return [path / explicit]
        index = path / explicit
    elif os.path.lexists(path / SAFE_WEIGHTS):
        return [path / SAFE_WEIGHTS]
    elif os.path.lexists(path / SAFE_INDEX):
        index = path / SAFE_INDEX
    if index is not None:
        m = _json(index, MAX_FILE_BYTES, "MAX_FILE_BYTES").get("weight_map")
        if not isinstance(m, dict) or not m:
            raise ValueError(f"{index} holds no weight_map of tensor names to files")
        shards = sorted(set(m.values()), key=str)
        for s in shards:
            if not _plain_name(s) or not s.endswith(".safetensors"):
                raise ValueError(f"{index} maps tensors to {str(s)[:60]!r}: shards must be "
                                 ".safetensors files in the directory")
        return [path / s for s in shards]
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
    loose = sorted(p.name for p in path.glob("*.safetensors"))
    raise FileNotFoundError(
        f"{path} holds no weights transformers loads (no {SAFE_WEIGHTS} or {SAFE_INDEX}"
        + (f"; {', '.join(loose[:3])} would not be read" if loose else "")
        + "); save the model with save_pretrained() first")


def weight_tensors(path, cfg: dict | None = None) -> dict:
    """``{name: (dtype, shape)}`` over every file of :func:`weight_files`, each header
    checked (:func:`safetensors_header`); a tensor stored twice is refused."""
    out: dict = {}
    for w in weight_files(path, cfg):
        if not os.path.lexists(w):
            raise FileNotFoundError(f"{w} is missing: {Path(path).name}'s weights name it")
        for name, v in safetensors_header(w).items():
            if name in out:
                raise ValueError(f"{w}: tensor {name[:60]!r} is stored in two weight files")
            out[name] = v
    return out


def _check_read_files(path: Path) -> None:
    """Every file of :data:`READ_FILES` in the directory is a regular file within its cap."""
    for entry in sorted(os.listdir(path)):
        if not any(fnmatch.fnmatchcase(entry, g) for g in READ_FILES):
            continue
        cap, setting = ((MAX_CONFIG_BYTES, "MAX_CONFIG_BYTES") if entry == "config.json"
                        else (MAX_FILE_BYTES, "MAX_FILE_BYTES"))
        _checks.open_regular(path / entry, max_bytes=cap,
                             setting=f"standarderror.llm.interface.directory.{setting}"
                             ).close()


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
    or one that is not JSON; a file transformers may read (:data:`READ_FILES`, the weights)
    that is not a regular file (a FIFO, a device) or is larger than its cap; no safetensors
    weights that transformers loads (:func:`weight_files`; pickled ``*.bin``/``*.pt`` are
    never unpickled: unpickling can run code); a truncated, corrupt or inconsistent
    safetensors file among them (:func:`safetensors_header`); a ``model_type``
    transformers does not know (its code would come from the directory, ``auto_map``:
    never run); a quantization config or a flash-attention implementation
    (this loader runs plain float weights with transformers' default attention); more than
    :data:`MAX_LAYERS` layers; no tokenizer files.
    """
    path = Path(path)
    if not os.path.lexists(path / "config.json"):
        raise FileNotFoundError(f"{path} holds no config.json: not a transformers model "
                                "directory")
    cfg = _json(path / "config.json")
    _check_read_files(path)
    weight_tensors(path, cfg)
    from transformers import CONFIG_MAPPING

    kind = cfg.get("model_type")
    if not isinstance(kind, str) or kind not in CONFIG_MAPPING:
        code = (" and asks to run code from the directory (auto_map)" if "auto_map" in cfg
                else "")
        raise ValueError(f"{path}/config.json names model_type {kind!r}, which transformers "
                         f"does not know{code}; this loader never runs a model directory's "
                         "code (trust_remote_code=False)")
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
