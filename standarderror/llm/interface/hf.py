"""Any ``transformers`` causal LM behind the interface.

:class:`HFModel` loads a directory only after :func:`~.directory.check_directory` has
passed it, with ``trust_remote_code=False`` and ``use_safetensors=True``, and only when
every weight the architecture needs is in the checkpoint (none is left at its random
initialisation); :class:`_Head` computes its output projection in float32;
:func:`load_model` picks the backend by name. ``transformers`` is imported inside the
calls, never at import time.
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import torch

from .base import LanguageModel
from .directory import (
    _json,
    _one_line,
    check_device,
    check_directory,
    hub_offline,
    resolve,
    rust_panic,
    weight_tensors,
)
from .tiny_lm import TinyLM


@contextmanager
def _tokenizer_errors(name: str):
    """Turn a panic of the tokenizers library (a ``BaseException``, e.g. its regex engine
    giving up on a pre-tokenizer pattern that backtracks) into a one-line ``ValueError``."""
    try:
        yield
    except BaseException as exc:
        if not rust_panic(exc):
            raise
        raise ValueError(f"the tokenizer of {name} failed inside the tokenizers library: "
                         f"{_one_line(exc)}") from None


def _declared_parameters(path: Path) -> int:
    """Parameters of the model config.json describes, built on the meta device (no memory)."""
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(str(path), local_files_only=True,
                                        trust_remote_code=False)
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config, trust_remote_code=False)
    return int(sum(p.numel() for p in model.parameters()))


class _Head(torch.nn.Module):
    """The model's output head, run in float32 on only the positions asked for.

    It replaces the head inside the model, so the model's own forward runs unchanged around
    it (Granite's division by ``logits_scaling``, Cohere's ``logit_scale``, Gemma-2's
    soft-capping all apply), while the projection is computed in float32 from the final
    hidden states whatever the model's dtype, and with :attr:`rows` set only one position
    per sequence reaches it (never a batch x time x vocabulary tensor for ``last``).
    """

    def __init__(self, head: torch.nn.Module):
        super().__init__()
        self.head = head
        self.rows = None
        w = getattr(head, "weight", None)
        linear = isinstance(head, torch.nn.Linear)
        self.linear = linear
        if linear and w.dtype != torch.float32:
            self.register_buffer("w32", w.detach().float(), persistent=False)
            b = head.bias
            self.register_buffer("b32", None if b is None else b.detach().float(),
                                 persistent=False)
        else:
            self.w32 = self.b32 = None

    def forward(self, h):
        if self.rows is not None:
            h = h[torch.arange(h.shape[0], device=h.device), self.rows][:, None]
        if not self.linear:
            return self.head(h).float()
        if self.w32 is None:
            return torch.nn.functional.linear(h.float(), self.head.weight, self.head.bias)
        return torch.nn.functional.linear(h.float(), self.w32, self.b32)


class HFModel(LanguageModel):
    """A ``transformers`` causal LM and its tokenizer behind the interface.

    Parameters
    ----------
    source : str or path
        A local directory (``config.json``, safetensors weights, tokenizer files) or a hub
        name (from the local hub cache, or downloaded with ``local_only=False``). The
        directory is checked before anything loads (:func:`.check_directory`).
    device : str
        ``"cpu"``, ``"cuda"``, ... (``"auto"``: CUDA when available); checked first.
    dtype : str
        ``"float32"`` (default), ``"bfloat16"`` or ``"float16"``: the dtype of the network.
        The output projection is computed in float32 whatever it is, and the
        log-probabilities in float64 from those logits.
    local_only : bool
        Never reach the network (default True: huggingface_hub's offline mode is on for the
        whole call). Set False to download a hub model.

    Safety: ``trust_remote_code=False`` and ``use_safetensors=True`` on every load, so no
    code from the directory runs and no pickle is opened.
    """

    def __init__(self, source, *, device: str = "auto", dtype: str = "float32",
                 local_only: bool = True):
        try:
            from transformers import AutoModelForCausalLM, AutoTokenizer
        except ImportError as exc:  # pragma: no cover - exercised only without the extra
            raise RuntimeError("the transformers backend needs `pip install "
                               "standarderror[hf]` (transformers and tokenizers)") from exc
        dtypes = {"float32": torch.float32, "bfloat16": torch.bfloat16,
                  "float16": torch.float16}
        if dtype not in dtypes:
            raise ValueError(f"dtype must be one of {sorted(dtypes)}, got {dtype!r}")
        device = check_device(device)
        path = resolve(source, local_only=local_only)
        cfg = check_directory(path)
        from transformers.utils import logging as hf_logging

        bars = hf_logging.is_progress_bar_enabled()
        hf_logging.disable_progress_bar()  # no loading bars in notebooks and logs
        verbosity = hf_logging.get_verbosity()
        # transformers' load report is a table of many lines; what it reports (a missing
        # weight) is refused below in one line
        hf_logging.set_verbosity_error()
        try:
            with hub_offline(True):  # the files are local now: nothing needs the network
                stored = sum(math.prod(shape) for _, shape in weight_tensors(path, cfg).values())
                declared = _declared_parameters(path)
                if declared > stored:
                    raise ValueError(
                        f"{path}/config.json describes a model of {declared:,} parameters; "
                        f"its weights hold {stored:,}: the rest would be random (is the "
                        "config right?)")
                self.tokenizer = AutoTokenizer.from_pretrained(
                    str(path), local_files_only=True, trust_remote_code=False)
                model, loading = AutoModelForCausalLM.from_pretrained(
                    str(path), dtype=dtypes[dtype], local_files_only=True,
                    trust_remote_code=False, use_safetensors=True, output_loading_info=True)
            missing = sorted(loading.get("missing_keys") or ())
            if missing:
                raise ValueError(
                    f"{path}: the weights lack {len(missing)} tensor(s) the architecture "
                    f"needs ({', '.join(k[:60] for k in missing[:3])}"
                    f"{', ...' if len(missing) > 3 else ''}): transformers would initialise "
                    "them at random (is the checkpoint complete, and the config its own?)")
        except ValueError as exc:
            if str(exc).startswith(str(path)):
                raise
            raise ValueError(f"{path}: transformers could not load it: {_one_line(exc)}"
                             ) from None
        except Exception as exc:  # untrusted files: any failure is a one-line refusal
            raise ValueError(f"{path}: transformers could not load it: "
                             f"{type(exc).__name__}: {_one_line(exc)}") from None
        except BaseException as exc:  # a Rust extension's panic is a refusal too
            if not rust_panic(exc):
                raise
            raise ValueError(f"{path}: transformers could not load it: "
                             f"{type(exc).__name__}: {_one_line(exc)}") from None
        finally:
            if bars:
                hf_logging.enable_progress_bar()
            hf_logging.set_verbosity(verbosity)
        self.model = model.to(device).eval()
        self.device = device
        config = model.config
        window = None
        for key in ("max_position_embeddings", "n_positions", "n_ctx", "seq_length"):
            window = window or getattr(config, key, None)
        if not window:
            raise ValueError(f"{path}: the config names no context window "
                             "(max_position_embeddings or n_positions)")
        tok = self.tokenizer
        if len(tok) < 2:
            raise ValueError(f"{path}: the tokenizer holds {len(tok)} token(s); save the "
                             "model's tokenizer beside it")
        head = model.get_output_embeddings()
        vocab = head.weight.shape[0]
        parameters = int(sum(p.numel() for p in model.parameters()))
        self._head = _Head(head).to(device)
        for name, child in model.named_children():
            if child is head:
                setattr(model, name, self._head)
                break
        else:  # the head is deeper inside: full logits, cast to float32 after
            self._head = None
        with _tokenizer_errors(str(source)):
            pieces = tok.convert_ids_to_tokens(list(range(min(len(tok), 4096))))
            character_level = all(len(tok.convert_tokens_to_string([p])) <= 1 for p in pieces
                                  if p is not None and p not in tok.all_special_tokens)
            probe = tok("a")["input_ids"]
        prefix = [tok.bos_token_id] if (tok.bos_token_id is not None and probe
                                        and probe[0] == tok.bos_token_id) else []
        super().__init__(name=str(source), tokenizer_name=type(tok).__name__,
                         vocab_size=int(vocab), window=int(window),
                         character_level=character_level, prefix=prefix,
                         parameters=parameters)
        marker = path / "standarderror.json"
        self.export_of_tiny = False
        if marker.exists():
            try:
                self.export_of_tiny = _json(marker).get("source") == "standarderror.llm.tiny"
            except ValueError:
                pass
        #: how summaries and figures name the model: a local directory by its last component
        self.label = Path(str(source)).name if Path(str(source)).exists() else str(source)
        self.model_type = cfg.get("model_type")

    def info(self) -> dict:
        return {**super().info(), "model_type": self.model.config.model_type,
                "dtype": str(next(self.model.parameters()).dtype).replace("torch.", ""),
                "head": "float32", "device": self.device}

    def logits(self, ids, last=None):
        ids = ids.to(self.device)
        top = int(ids.max()) if ids.numel() else 0
        if top >= self.vocab_size or (ids.numel() and int(ids.min()) < 0):
            raise ValueError(f"token id {top} is outside the model's vocabulary of "
                             f"{self.vocab_size}")
        if last is None:
            return self.model(input_ids=ids, use_cache=False).logits.float()
        last = last.to(self.device)
        if self._head is None:
            z = self.model(input_ids=ids, use_cache=False).logits
            return z[torch.arange(z.shape[0], device=z.device), last].float()
        self._head.rows = last  # the model's own forward, one position per row at the head
        try:
            return self.model(input_ids=ids, use_cache=False).logits[:, 0].float()
        finally:
            self._head.rows = None

    def encode(self, text: str) -> np.ndarray:
        with _tokenizer_errors(self.name):
            ids = self.tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"]
        return np.asarray(ids, dtype=np.int64)

    def encode_many(self, texts) -> list[np.ndarray]:
        """:meth:`encode` of each text, the batch in one tokenizer call (no padding, no
        truncation: the same ids as one call per text, tested)."""
        texts = list(texts)
        if not texts:
            return []
        with _tokenizer_errors(self.name):
            batch = self.tokenizer(texts, add_special_tokens=False,
                                   verbose=False)["input_ids"]
        return [np.asarray(ids, dtype=np.int64) for ids in batch]

    def decode(self, ids) -> str:
        with _tokenizer_errors(self.name):
            return self.tokenizer.decode([int(i) for i in ids], skip_special_tokens=False,
                                         clean_up_tokenization_spaces=False)

    def check_text(self, text: str, ids=None) -> None:
        """Raise if the tokenizer maps characters of ``text`` to its unknown token (naming
        them) or gives ids the model has no row for (a tokenizer larger than the model)."""
        ids = self.encode(text) if ids is None else np.asarray(ids)
        unk = self.tokenizer.unk_token_id
        if unk is not None and np.any(ids == unk):
            with _tokenizer_errors(self.name):
                vocab = self.tokenizer.get_vocab()
            missing = sorted({ch for ch in set(text) if ch not in vocab
                              and unk in self.encode(ch)})
            raise ValueError(f"the tokenizer of {self.name} maps characters of the text to its "
                             f"unknown token {self.tokenizer.unk_token!r}: {missing!r}; use "
                             "text it covers or a tokenizer with byte fallback")
        if ids.size and int(ids.max()) >= self.vocab_size:
            bad = ids[ids >= self.vocab_size]
            raise ValueError(f"the tokenizer of {self.name} gives token ids up to "
                             f"{int(bad.max())}, beyond the model's vocabulary of "
                             f"{self.vocab_size} ({bad.size} tokens of the text): the "
                             "tokenizer does not belong to this model")


def load_model(source=None, **kwargs) -> LanguageModel:
    """``None`` or ``"tiny"``: our committed model (:class:`.TinyLM`); anything else: a
    ``transformers`` directory or hub name (:class:`HFModel`)."""
    if source is None or str(source) == "tiny":
        return TinyLM(step=kwargs.get("step"))
    kwargs.pop("step", None)
    return HFModel(source, **kwargs)
