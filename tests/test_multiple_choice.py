"""The six-option next-word task over the checkpoint family (standarderror.experiments.multiple_choice)."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

from standarderror.experiments import multiple_choice as mc
from standarderror.llm import tiny
from standarderror.uncertainty import coverage as cv
from standarderror.uncertainty.ranks import kendall_tau


@pytest.fixture(scope="module")
def qs():
    return mc.questions(60, seed=5)


@pytest.fixture(scope="module")
def final():
    return tiny.load()


def test_questions_are_well_formed(qs):
    test_text = mc._text("test")
    pool = mc.distractor_pool()
    frequent = {w for ws in pool.values() for w in ws}
    assert len(qs["context"]) == 60 and qs["options"].shape == (60, 6)
    for ctx, opts, y, word, start in zip(qs["context"], qs["options"], qs["y"], qs["word"], qs["start"]):
        assert len(ctx) == mc.CONTEXT and ctx[-1] in " \n"
        assert opts[y] == word
        assert test_text[start - mc.CONTEXT:start] == ctx            # held-out text, verbatim
        assert test_text[start:start + len(word)] == word
        assert not re.match(r"[A-Za-z'\-]", test_text[start + len(word)])
        assert len(set(o.lower() for o in opts)) == 6                 # six distinct options
        assert all(len(o) == len(word) for o in opts)                 # equal lengths
        assert all(o.lower() in frequent for o in opts)               # all from the frequent pool
        assert all(o[0].isupper() == word[0].isupper() for o in opts)  # same capitalisation


def test_questions_are_seeded_and_positions_shuffled():
    a, b = mc.questions(200, seed=1), mc.questions(200, seed=1)
    np.testing.assert_array_equal(a["options"], b["options"])
    assert a["context"] == b["context"]
    c = mc.questions(200, seed=2)
    assert a["context"] != c["context"]
    counts = np.bincount(a["y"], minlength=6)
    assert counts.min() >= 15                                        # every position used


@pytest.mark.slow  # the reference: the model over all 360 context + option strings (2 s)
def test_option_logits_equal_full_forward(qs, final):
    z = mc.option_logits(final, qs, chunk=7)
    w = mc.option_logits(final, qs, chunk=7, whole_words=True)
    # reference: every context + option string through the model's own forward pass, in one
    # batch (right-padding with spaces cannot affect earlier positions of a causal model)
    strings = [qs["context"][i] + qs["options"][i][j] for i in range(len(qs["context"])) for j in range(6)]
    width = max(map(len, strings)) + 1
    ids = torch.from_numpy(np.stack([tiny.encode(s.ljust(width), final["stoi"]) for s in strings]))
    lp = tiny.log_probabilities(final["model"], ids[:, :-1])
    # a word ends where the next character is not a letter, an apostrophe or a hyphen
    ends = [i for c, i in final["stoi"].items() if not (c.isascii() and c.isalpha()) and c not in "'-"]
    ref = np.empty(len(strings))
    ref_end = np.empty(len(strings))
    for r, s in enumerate(strings):
        pos = np.arange(mc.CONTEXT - 1, len(s) - 1)
        ref[r] = lp[r, pos, ids[r, pos + 1].numpy()].sum()
        ref_end[r] = np.logaddexp.reduce(np.asarray(lp[r, len(s) - 1, ends], dtype=float))
    ref = ref.reshape(z.shape)
    np.testing.assert_allclose(z, ref, atol=5e-4)
    np.testing.assert_allclose(w, ref + ref_end.reshape(z.shape), atol=5e-4)
    assert np.all(z < 0) and np.all(w < z)            # a whole word is rarer than its prefix


def test_boundary_characters(final):
    ends = {c for c, i in final["stoi"].items() if i in set(mc.boundary_ids(final["stoi"]))}
    assert {" ", "\n", ",", "."} & set(final["stoi"]) <= ends
    assert not ends & set("abcxyzABCXYZ'-")


@pytest.fixture(scope="module")
def small_family():
    steps = [c["step"] for c in tiny.card()["checkpoints"]]
    return mc.family(60, seed=5, steps=[steps[0], steps[-1], steps[3]])


@pytest.mark.slow  # the `small_family` fixture runs three checkpoints over 60 questions
def test_analysis_on_two_checkpoints(qs, small_family):
    fam = small_family
    np.testing.assert_array_equal(fam["y"], qs["y"])
    assert fam["logits"].shape == (3, 60, 6) and fam["calibration"].sum() == 30
    a = mc.analysis(fam)
    # temperature never changes an answer: accuracy identical at every T, exactly
    for table in a["at"].values():
        np.testing.assert_array_equal(table["accuracy"], a["at"][1.0]["accuracy"])
    np.testing.assert_array_equal(a["fitted"]["accuracy"], a["at"][1.0]["accuracy"])
    acc = (fam["logits"].argmax(2)[:, ~fam["calibration"]] == fam["y"][~fam["calibration"]]).mean(1)
    np.testing.assert_allclose(a["at"][1.0]["accuracy"], acc)
    assert a["tau_lac_aps"]["pairs"] == 3
    ctrl = mc.split_control(fam, splits=3)
    assert ctrl["within"].shape == (3,) and ctrl["across_lac"].shape == (2,)
    # whole words by default; the prefixes come along from the same pass
    assert fam["whole_words"] and np.all(fam["logits"] < fam["prefix_logits"])
    prefix = mc.family(60, seed=5, steps=fam["steps"], whole_words=False)
    np.testing.assert_array_equal(prefix["logits"], fam["prefix_logits"])


@pytest.mark.slow  # the `small_family` fixture runs three checkpoints over 60 questions
def test_overshoot_steps_and_the_fallback_identity(small_family):
    fam = small_family
    o = mc.overshoot(fam, splits=4, seed=0)
    assert o["coverage"]["aps"]["ye"].shape == (5, 3)
    cal, y = fam["calibration"], fam["y"]
    for j, z in enumerate(fam["logits"]):
        p32 = cv.ye_softmax(z.astype(np.float32))
        e = cv.evaluate(p32, y, cal, rule="ye", answers=z.argmax(1))
        p = cv.softmax_logits(z)
        tb = cv.evaluate(p, y, cal)
        for s in cv.SCORES:                              # row 0 is the family's own split
            assert o["coverage"][s]["ye"][0, j] == e[s]["coverage"]
            assert o["coverage"][s]["textbook"][0, j] == tb[s]["coverage"]
    for s in cv.SCORES:
        # the fallback puts one option into each empty set: coverage rises by the share of
        # empty sets whose top option is right, exactly, and no set stays empty
        gain = o["coverage"][s]["ye"] - o["coverage"][s]["ye_no_fallback"]
        np.testing.assert_allclose(gain, o["empty_top_right"][s], rtol=0, atol=1e-12)
        assert np.all(o["empty"][s]["ye"] == 0)
        assert np.all(o["empty_top_right"][s] <= o["empty"][s]["ye_no_fallback"])
    assert np.all((o["tied_at_one"] >= 0) & (o["tied_at_one"] <= 1))


def test_bad_arguments():
    with pytest.raises(ValueError, match="count"):
        mc.questions(0)
    with pytest.raises(ValueError, match="context"):
        mc.questions(10, context=60)


@pytest.mark.slow  # runs three checkpoints twice (one thread, then three)
def test_family_scores_do_not_depend_on_how_many_checkpoints_run_side_by_side(monkeypatch):
    from standarderror.experiments import multiple_choice as mc

    got = {}
    for workers in (1, 3):
        monkeypatch.setattr(mc, "_WORKERS", workers)
        fam = mc.family(count=24, steps=[400, 1600, 3200])
        got[workers] = (fam["logits"].tobytes(), fam["prefix_logits"].tobytes(), fam["sha256"])
    assert got[1] == got[3]


def test_split_control_averages_and_halves():
    # a synthetic family: checkpoint j's logits sharpen with j, so both scores shrink with j
    rng = np.random.default_rng(0)
    n, k = 200, 6
    y = rng.integers(0, k, n)
    base = rng.normal(size=(n, k))
    base[np.arange(n), y] += 1.0
    fam = {"logits": np.stack([base * (0.5 + j) for j in range(4)]), "y": y}
    ctrl = mc.split_control(fam, splits=6, seed=1)
    assert ctrl["sizes"]["lac"].shape == ctrl["sizes"]["aps"].shape == (6, 4)
    for i in range(6):   # each split's own tau is the tau of that split's sizes
        assert ctrl["within"][i] == kendall_tau(ctrl["sizes"]["lac"][i],
                                                ctrl["sizes"]["aps"][i])["tau"]
    mean = {s: v.mean(axis=0) for s, v in ctrl["sizes"].items()}
    assert ctrl["averaged"] == kendall_tau(mean["lac"], mean["aps"])
    for s, v in ctrl["sizes"].items():
        assert ctrl["halves"][s] == kendall_tau(v[:3].mean(axis=0), v[3:].mean(axis=0))
    # seeded: the same seed draws the same halvings and gives the same sizes
    again = mc.split_control(fam, splits=6, seed=1)
    np.testing.assert_array_equal(again["sizes"]["aps"], ctrl["sizes"]["aps"])
