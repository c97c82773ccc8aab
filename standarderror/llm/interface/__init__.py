r"""One model interface: what a measurement needs from a language model.

Every measurement of the book talks to a language model through :class:`.LanguageModel`:

* ``encode`` / ``decode`` -- text to token ids and back (no special tokens added);
* :meth:`~.LanguageModel.window_logprobs` -- log-probabilities of the next token at every
  position of a batch of equal-length windows (held-out text);
* :meth:`~.LanguageModel.next_token_logprobs` -- the next-token distribution after each of a
  batch of contexts of any lengths;
* :meth:`~.LanguageModel.continuation_logprob` -- :math:`\log p(\text{continuation} \mid
  \text{context})`, the sum of the continuation's token log-probabilities;
* :meth:`~.LanguageModel.option_logprobs` -- the one entry point for scoring ``k`` options
  after each context (n x k); :class:`.TinyLM` overrides it with a shared-context pass;
* :meth:`~.LanguageModel.sample` -- ``m`` continuations per context at a temperature, cut by a
  stop rule (by default: one word, :func:`.one_word`).

A backend implements only :meth:`~.LanguageModel.logits` (a forward pass) and the
tokenizer; everything else is written once here, so the two backends measure the same way:

* :class:`.TinyLM` -- the committed character model (:mod:`standarderror.llm.tiny`), whose
  log-probabilities are exactly those the lectures measure;
* :class:`.HFModel` -- any ``transformers`` causal LM with its tokenizer
  (``AutoModelForCausalLM`` / ``AutoTokenizer``, from a local directory or a hub name;
  ``pip install standarderror[hf]``).

* :class:`.served.ServedModel` -- a model behind an OpenAI-compatible ``/v1/completions``
  server (llama.cpp's, vLLM's), measured through its echoed log-probabilities: labels and
  option scores exactly, the rest of each row from its top k (imported on use:
  ``standarderror.llm.interface.served``).

**Bad input is never silently measured.** A context longer than the model's window is cut
from the left and *counted* (``truncated`` in every result); a continuation that alone does
not fit raises; a tokenizer that maps characters of the text to its unknown token raises and
names them; an answer that has not ended within ``max_tokens`` is cut there and counted
(``unterminated``).
"""

from __future__ import annotations

from .base import MAX_ELEMENTS, OPTION_BLOCK, WORD, LanguageModel, first_word, one_word
from .directory import (
    HUB_FILES,
    MAX_CONFIG_BYTES,
    MAX_FILE_BYTES,
    MAX_HEADER_BYTES,
    MAX_LAYERS,
    MAX_TENSORS,
    OTHER_WEIGHTS,
    PICKLED,
    READ_FILES,
    TOKENIZER_FILES,
    _one_line,  # noqa: F401  (the command line's one-line errors import it from here)
    check_device,
    check_directory,
    hub_offline,
    resolve,
    safetensors_header,
    safetensors_parameters,
    weight_files,
)
from .hf import HFModel, load_model
from .tiny_lm import TinyLM

__all__ = ["WORD", "MAX_ELEMENTS", "OPTION_BLOCK", "one_word", "first_word", "LanguageModel", "TinyLM",
           "PICKLED", "OTHER_WEIGHTS", "TOKENIZER_FILES", "HUB_FILES", "READ_FILES",
           "MAX_LAYERS", "MAX_CONFIG_BYTES", "MAX_FILE_BYTES", "MAX_HEADER_BYTES",
           "MAX_TENSORS", "hub_offline", "check_device", "safetensors_header",
           "safetensors_parameters", "weight_files", "resolve", "check_directory",
           "HFModel", "load_model"]
