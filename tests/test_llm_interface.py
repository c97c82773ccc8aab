"""The model interface (standarderror.llm.interface) on our tiny model, and the moved
held-out predictions (standarderror.llm.predictions)."""

import numpy as np
import pytest
import torch

from standarderror.llm import interface, semantic, tiny
from standarderror.llm.predictions import predictions


@pytest.fixture(scope="module")
def lm():
    return interface.TinyLM()


def _old_predictions(count, size, seed):
    """The held-out predictions computed by hand: tiny.batches through the model."""
    m = tiny.load()
    net = m["model"]
    logps, ys = [], []
    for x, y in tiny.batches("test", count, size, seed, block=net.cfg.block, stoi=m["stoi"]):
        logps.append(tiny.log_probabilities(net, x))
        ys.append(y.numpy())
    logp = np.concatenate(logps).reshape(-1, m["vocab"])
    return {"p": np.exp(logp), "logp": logp, "y": np.concatenate(ys).reshape(-1)}


@pytest.mark.slow  # the model over 160 windows twice, once by hand
def test_predictions_are_the_model_over_the_held_out_windows_to_the_bit():
    new = predictions(count=10, size=16, seed=0)
    old = _old_predictions(10, 16, 0)
    for key in ("p", "logp", "y"):
        assert np.array_equal(new[key], old[key]), key


def test_next_token_and_continuation_agree_with_windows(lm):
    text = tiny.split("test")[1000:1064]
    ids = lm.encode(text)
    full = lm.window_logprobs(ids[None])[0]                      # (64, V)
    ctx = [ids[:10], ids[:33], ids[:64]]
    nt = lm.next_token_logprobs(ctx)                             # mixed lengths, padded
    np.testing.assert_allclose(nt[0], full[9], atol=1e-5)
    np.testing.assert_allclose(nt[1], full[32], atol=1e-5)
    np.testing.assert_allclose(nt[2], full[63], atol=1e-5)
    r = lm.continuation_logprob([text[:40]], [text[40:52]])
    want = full[39:51][np.arange(12), ids[40:52]].sum()
    assert r["tokens"][0] == 12 and r["truncated"] == 0 and r["merged"] == 0
    assert abs(r["logprob"][0] - want) < 1e-4


@pytest.mark.slow  # the model over 240 option pairs twice, once by the generic padded path (2-3 s)
def test_shared_option_pass_matches_the_generic_path(lm):
    """TinyLM.option_logprobs (context run once, options after its keys and values) against
    the base implementation on the same model (each pair run whole, padded batches): the
    same quantity by different float32 arithmetic, so equal to 1e-4, not bit for bit."""
    from standarderror.experiments import multiple_choice as mc

    qs = mc.questions(40, seed=3)                    # 40 x 6 = 240 pairs: one generic block
    fast = lm.option_logprobs(qs["context"], qs["options"], chunk=7)
    slow = interface.LanguageModel.option_logprobs(lm, qs["context"], qs["options"])
    np.testing.assert_allclose(fast["logprob"], slow["logprob"], atol=1e-4)
    assert np.array_equal(fast["tokens"], np.vectorize(len)(qs["options"]))
    assert np.array_equal(slow["tokens"], fast["tokens"])
    assert fast["truncated"] == slow["truncated"] == 0 and fast["merged"] == slow["merged"] == 0
    # the generic path is continuation_logprob on the flattened pairs (one block: exactly)
    n, k = qs["options"].shape
    r = lm.continuation_logprob([c for c in qs["context"] for _ in range(k)],
                                list(qs["options"].ravel()))
    assert np.array_equal(slow["logprob"].ravel(), r["logprob"])
    # option_logits is the override, and its whole-word term is the `ends` column
    assert np.array_equal(mc.option_logits(lm.loaded, qs, chunk=7), fast["logprob"])
    ends = mc.boundary_ids(lm.loaded["stoi"])
    w = lm.option_logprobs(qs["context"], qs["options"], chunk=7, ends=ends)
    assert np.array_equal(w["logprob"], fast["logprob"])
    assert np.array_equal(mc.option_logits(lm.loaded, qs, chunk=7, whole_words=True),
                          w["logprob"] + w["ends"])


def test_option_scores_refuse_what_they_cannot_score(lm):
    ctx, opts = ["the king and "] * 2, np.array([["lord", "lady"], ["duke", "earl"]])
    with pytest.raises(ValueError, match="ends"):
        interface.LanguageModel.option_logprobs(lm, ctx, opts, ends=[0])
    with pytest.raises(ValueError, match="options must be"):
        lm.option_logprobs(ctx, opts[0])
    with pytest.raises(ValueError, match="options must be"):
        interface.LanguageModel.option_logprobs(lm, ctx[:1], opts)
    with pytest.raises(ValueError, match="equal lengths"):
        lm.option_logprobs(ctx, np.array([["lord", "la"], ["duke", "earl"]]))
    with pytest.raises(ValueError, match="one length"):
        lm.option_logprobs(["the king and ", "a "], opts)
    with pytest.raises(ValueError, match="exceeds"):
        lm.option_logprobs(["x" * 62] * 2, opts)
    with pytest.raises(ValueError, match="chunk"):
        lm.option_logprobs(ctx, opts, chunk=0)


def test_long_context_is_cut_and_counted(lm):
    text = tiny.split("test")[:200]
    r = lm.continuation_logprob([text[:150]], [text[150:160]])
    assert r["truncated"] == 1
    direct = lm.continuation_logprob([text[150 - 54:150]], [text[150:160]])
    assert r["logprob"][0] == pytest.approx(direct["logprob"][0], abs=1e-9)
    with pytest.raises(ValueError, match="no room"):
        lm.continuation_logprob(["ab"], [text[:64]])
    with pytest.raises(ValueError, match="window"):
        lm.window_logprobs(np.zeros((1, 65), dtype=np.int64))


def test_unknown_characters_are_refused(lm):
    with pytest.raises(ValueError, match="outside the vocabulary"):
        lm.continuation_logprob(["caf"], ["\u00e9"])


@pytest.mark.slow  # samples 120 answers twice, once by re-running every prefix through the interface
def test_sampling_is_semantic_sample_for_a_character_model(lm):
    """One sampler (prefix_tree), two backends: the tiny model's logits through its key/value
    cache, and the interface's log-probabilities of each prefix run again. Their draws agree."""
    qs = semantic.questions(12, seed=5)
    ours = lm.sample(qs["context"], 10, temperature=0.5, seed=3, greedy=True)
    ref, greedy = semantic.sample(lm.loaded, qs["context"], 10, temperature=0.5, seed=3,
                                  greedy=True)
    assert ours["answers"] == ref and ours["greedy"] == greedy
    assert ours["truncated"] == 0


def test_unterminated_answers_are_counted(lm):
    qs = semantic.questions(6, seed=1)
    r = lm.sample(qs["context"], 5, temperature=1.0, max_tokens=1, seed=0)
    # one character rarely ends a word: most samples are cut, and every cut one is counted
    words = [w for a in r["answers"] for w in a]
    assert 0 < r["unterminated"] <= len(words)


def test_logits_last_rows(lm):
    x = torch.from_numpy(lm.encode(tiny.split("test")[:64])[None].repeat(2, 0))
    z = lm.logits(x, torch.tensor([5, 63]))
    full = lm.logits(x)
    assert torch.equal(z[0], full[0, 5]) and torch.equal(z[1], full[1, 63])
