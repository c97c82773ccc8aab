"""The question/answer/embedding pipeline of Episode 5 (standarderror.llm.semantic)."""

import numpy as np
import pytest
import torch

from standarderror._immutable import immutable
from standarderror.llm import semantic as se
from standarderror.llm import tiny


@pytest.fixture(scope="module")
def loaded():
    return tiny.load()


def test_questions_are_disjoint_held_out_words():
    text = tiny.split("test")
    a = se.questions(50, seed=3)
    b = se.questions(50, seed=3, skip=50)
    assert set(a["position"]).isdisjoint(b["position"])
    pos = np.sort(np.concatenate([a["position"], b["position"]]))
    assert np.all(np.diff(pos) >= se.CONTEXT + se.STEPS)  # no context overlaps another answer
    for ctx, truth, p in zip(a["context"], a["truth"], a["position"]):
        assert len(ctx) == se.CONTEXT and text[p - se.CONTEXT:p] == ctx
        assert ctx[-1] in " \n" and se.WORD.fullmatch(truth)
        assert text[p:p + len(truth)] == truth and not se.WORD.match(text[p + len(truth)])
    again = se.questions(50, seed=3)
    assert again["truth"] == a["truth"]


def test_questions_bad_arguments():
    with pytest.raises(ValueError, match="count"):
        se.questions(0)
    with pytest.raises(ValueError, match="context"):
        se.questions(5, context=60)
    with pytest.raises(ValueError, match="exceeds"):
        se.questions(10**6)


def test_first_word_cuts_at_the_boundary():
    assert se.first_word("thee, witch") == "thee"
    assert se.first_word("o'er the") == "o'er"
    assert se.first_word("\nMACBETH") == ""
    assert se.first_word("--and") == "-"


def test_exact_match_agrees_with_rouge_l_on_single_words():
    rouge_scorer = pytest.importorskip("rouge_score.rouge_scorer")
    scorer = rouge_scorer.RougeScorer(["rougeL"])
    words = ["the", "The", "lord", "lords", "king", "and", "Macbeth", "macbeth", "thee", "thou"]
    pred = [w for w in words for _ in words]
    truth = [w for _ in words for w in words]
    ours = se.correct(pred, truth)
    ref = np.array([scorer.score(t, p)["rougeL"].fmeasure == 1.0 for p, t in zip(pred, truth)])
    assert np.array_equal(ours, ref)


def test_hash_embedder_is_deterministic_unit_and_spelling_only():
    e = se.hash_embed(["lord", "lords", "king", "", "Lord"])
    np.testing.assert_allclose(np.linalg.norm(e, axis=1), 1.0)
    assert e[0] @ e[1] > e[0] @ e[2]
    np.testing.assert_array_equal(e[0], e[4])  # lower-cased
    np.testing.assert_array_equal(e, se.hash_embed(["lord", "lords", "king", "", "Lord"]))


def test_greedy_sampler_matches_tiny_generate(loaded):
    q = se.questions(40, seed=1)
    got = [a[0] for a in se.sample(loaded, q["context"], 1, temperature=0.0)]
    ids = torch.from_numpy(np.stack([tiny.encode(c, loaded["stoi"]) for c in q["context"]]))
    out = tiny.generate(loaded["model"], ids, se.STEPS, temperature=0)
    ref = [se.first_word(tiny.decode(r, loaded["chars"])) for r in out]
    assert got == ref
    _, shared = se.sample(loaded, q["context"], 3, greedy=True)  # greedy from the shared context pass
    assert shared == ref


def _word_probability(loaded, context, word, temperature):
    """Exact probability, under softmax(logits / T), that the continuation's first word is
    ``word`` (its letters, then a non-word character)."""
    ids = tiny.encode(context + word, loaded["stoi"])
    x = torch.from_numpy(ids[None])
    with torch.no_grad():
        logits = loaded["model"](x)[0].double() / temperature
    logp = torch.log_softmax(logits, -1).numpy()
    n = len(context)
    lp = sum(logp[n - 1 + i, ids[n + i]] for i in range(len(word)))
    wordy = np.array([bool(se.WORD.fullmatch(c)) for c in loaded["chars"]])
    end = np.log(np.exp(logp[n - 1 + len(word)])[~wordy].sum())
    return float(np.exp(lp + end))


@pytest.mark.slow  # a simulation: 4,000 sampled answers per context against exact probabilities
def test_tree_sampler_has_the_model_word_distribution(loaded):
    q = se.questions(2, seed=5)
    m = 4000
    got = se.sample(loaded, q["context"], m, temperature=0.5, seed=0)
    for ctx, answers in zip(q["context"], got):
        assert len(answers) == m
        words, counts = np.unique(answers, return_counts=True)
        top = np.argsort(-counts)[:4]
        for k in top:
            p = _word_probability(loaded, ctx, words[k], 0.5)
            se_ = np.sqrt(p * (1 - p) / m)
            assert abs(counts[k] / m - p) < 5 * se_ + 1e-3, (words[k], counts[k] / m, p)


def test_sampler_is_seeded_and_counts_m(loaded):
    q = se.questions(6, seed=2)
    a = se.sample(loaded, q["context"], 7, seed=11)
    b = se.sample(loaded, q["context"], 7, seed=11)
    c = se.sample(loaded, q["context"], 7, seed=12)
    assert a == b and a != c
    assert all(len(x) == 7 for x in a)
    with pytest.raises(ValueError, match="m must"):
        se.sample(loaded, q["context"], 0)
    with pytest.raises(ValueError, match="temperature"):
        se.sample(loaded, q["context"], 2, temperature=-1)


@pytest.mark.slow  # loads sentence-transformers (tens of seconds on two busy cores)
def test_attach_embeds_each_string_once_and_indexes_back(loaded):
    pytest.importorskip("sentence_transformers")
    q = se.questions(8, seed=4)
    data = {}
    block = se.attach(data, se.answer(loaded, q, 5, seed=0))
    assert len(data["strings"]) == len(set(data["strings"]))
    assert data["embeddings"].shape == (len(data["strings"]), 384)
    np.testing.assert_allclose(np.linalg.norm(data["embeddings"], axis=1), 1.0, atol=1e-12)
    answers, targets = se.arrays(data, block)
    assert answers.shape == (8, 5, 384) and targets.shape == (8, 384)
    for i in range(8):
        for j in range(5):
            assert data["strings"][block["answer_index"][i, j]] == block["answers"][i][j]
    # the same string always gets the same vector, and re-embedding reproduces it
    again = se.embed([data["strings"][0]])
    np.testing.assert_allclose(again[0], data["embeddings"][0], atol=1e-6)
    size = len(data["strings"])
    se.attach(data, block)  # nothing new to embed
    assert len(data["strings"]) == size


def test_answer_runs_are_the_single_answers(loaded):
    """A search over sampling temperatures shares the context pass (semantic.answer_runs): each
    run must equal se.answer at its temperature and seed, bit for bit."""
    q = se.questions(12, seed=3)
    temps, seeds = [0.1, 0.5, 3.0], [7, 8, 9]
    runs = se.answer_runs(loaded, q, 5, temperatures=temps, seeds=seeds)
    for t, s, r in zip(temps, seeds, runs):
        alone = se.answer(loaded, q, 5, temperature=t, seed=s)
        assert r.keys() == alone.keys()
        for k in r:
            same = (np.array_equal(r[k], alone[k]) if isinstance(r[k], np.ndarray)
                    else r[k] == alone[k])
            assert same, k
    with pytest.raises(ValueError, match="one seed per temperature"):
        se.answer_runs(loaded, q, 5, temperatures=temps, seeds=seeds[:2])
    with pytest.raises(ValueError, match="temperature"):
        se.answer_runs(loaded, q, 5, temperatures=[0.5, -1.0], seeds=[1, 2])


@pytest.mark.slow  # loads sentence-transformers
def test_prefetched_embedder_is_the_one_embed_uses(monkeypatch):
    """prefetch_embedder loads in a thread; embedder() waits on the same lock, so the model is
    loaded once, and a failed background load surfaces in the caller."""
    monkeypatch.setattr(se, "_EMBEDDER", {})
    thread = se.prefetch_embedder()
    first = se.embedder()  # waits for the background load if it is still running
    thread.join()
    assert se.embedder() is first and list(se._EMBEDDER) == ["minilm"]
    np.testing.assert_array_equal(se.embed(["lord", "king"]), se.embed(["lord", "king"]))

    def broken():
        raise RuntimeError("no embedder here")

    monkeypatch.setattr(se, "_EMBEDDER", {})
    monkeypatch.setattr(se, "_embedder", broken)
    se.prefetch_embedder().join()  # swallowed in the thread ...
    with pytest.raises(RuntimeError, match="no embedder here"):
        se.embedder()  # ... raised where the embedder is needed


@pytest.mark.slow  # loads sentence-transformers
def test_the_embedder_leaves_no_environment_variable_set(monkeypatch):
    """The tokenizer's thread switch and the hub's offline switches hold for the embedder's
    load and its encoding only; a reader's own value is kept."""
    import os

    switches = ("TOKENIZERS_PARALLELISM", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE",
                "HF_HUB_DISABLE_PROGRESS_BARS")
    for name in switches:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(se, "_EMBEDDER", {})
    se.embed(["lord", "king"])
    assert not any(name in os.environ for name in switches)
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "true")
    se.embed(["lord"])
    assert os.environ["TOKENIZERS_PARALLELISM"] == "true"


def test_the_sampler_runs_a_float64_copy_of_the_model(loaded):
    """The draws follow the last bits of the logits, so the sampler computes them in float64
    (semantic._float64): an exact widening of the committed weights, made once per model,
    the float32 model untouched."""
    model = loaded["model"]
    wide = se._float64(model)
    assert se._float64(model) is wide and se._float64(wide) is wide
    assert all(p.dtype == torch.float32 for p in model.parameters())
    for (name, p), (name64, p64) in zip(model.named_parameters(), wide.named_parameters()):
        assert name == name64 and p64.dtype == torch.float64
        assert torch.equal(p64, p.double())  # float32 -> float64 is exact
    q = se.questions(3, seed=4)
    seen = []
    original = type(wide).forward

    def spy(self, *args, **kwargs):
        out = original(self, *args, **kwargs)
        seen.append((self is wide, out.dtype))
        return out

    type(wide).forward = spy
    try:
        se.sample(loaded, q["context"], 2, seed=0)
    finally:
        type(wide).forward = original
    assert seen and all(s == (True, torch.float64) for s in seen)


@pytest.mark.slow  # two fresh interpreters, each loading torch and sampling one block
def test_sampled_answers_do_not_depend_on_the_cpu_kernels():
    """Episode 5's test split, its first 64 questions (one block of the tree), m = 20 at
    T = 0.5, sampled under torch's portable kernels and under the CPU's best: the same
    answers (with float32 logits they differ on an AVX-512 CPU: torch's default kernels round
    the logits differently)."""
    import json
    import os
    import subprocess
    import sys

    code = ("import json; from standarderror.llm import semantic as se, tiny; "
            "q = {k: v[:64] for k, v in se.questions(1700, seed=0, skip=300).items()}; "
            "r = se.answer(tiny.load(), q, 20, temperature=0.5, seed=2); "
            "print(json.dumps({k: r[k] for k in ('answers', 'greedy')}))")
    runs = []
    for cap in ("default", None):
        env = dict(os.environ, OMP_NUM_THREADS="1")
        env.pop("ATEN_CPU_CAPABILITY", None)
        if cap:
            env["ATEN_CPU_CAPABILITY"] = cap
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                             text=True, check=True, timeout=300).stdout
        runs.append(json.loads(out))
    assert runs[0]["answers"] == runs[1]["answers"]
    assert runs[0]["greedy"] == runs[1]["greedy"]


def test_arrays_are_immutable_copies_of_the_embeddings():
    rng = np.random.default_rng(0)
    data = {"embeddings": rng.normal(size=(7, 5))}
    block = {"answer_index": rng.integers(0, 7, size=(3, 4)), "truth_index": np.array([0, 6, 2])}
    answers, targets = se.arrays(data, block)
    assert np.array_equal(answers, data["embeddings"][block["answer_index"]])
    assert np.array_equal(targets, data["embeddings"][[0, 6, 2]])
    for x in (answers, targets):
        assert immutable(x)
        with pytest.raises(ValueError):
            x[0] = 0.0
    data["embeddings"][:] = 0.0  # the caller's embeddings stay theirs to change
    assert answers.any()
