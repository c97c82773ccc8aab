"""The one prefix-tree sampler (standarderror.llm.prefix_tree), on a toy model whose law of
the first word is known by hand: a first-order Markov chain over four characters."""

import itertools

import numpy as np
import pytest
from scipy import stats

from standarderror.llm import prefix_tree as pt

CHARS = ["a", "b", " ", "."]
#: P[x][y]: probability that character y follows character x.
P = {"a": [0.5, 0.2, 0.2, 0.1], "b": [0.3, 0.3, 0.3, 0.1],
     " ": [0.4, 0.35, 0.05, 0.2], ".": [0.1, 0.1, 0.7, 0.1]}


class Chain:
    """Live prefixes of the chain (a :class:`prefix_tree.Prefixes`): each row is a context
    (whose last character starts the chain) and the characters sampled after it."""

    def __init__(self, contexts, rows=None):
        self.contexts = contexts
        self.rows = rows if rows is not None else [(q, "") for q in range(len(contexts))]
        self.evaluations = 0
        self.scores = np.log(np.array([P[(contexts[q] + t)[-1]] for q, t in self.rows]))

    def texts(self, parent, tokens, question):
        return [self.rows[p][1] + CHARS[k] for p, k in zip(parent, tokens)]

    def extend(self, parent, tokens, question):
        assert [self.rows[p][0] for p in parent] == list(question)
        return Chain(self.contexts, [(q, t) for q, t in
                                     zip(question, self.texts(parent, tokens, question))])


def counting(extends: list, independent: bool | None = None) -> type:
    """A :class:`Chain` whose every ``extend`` (the model evaluation of a depth) appends its
    number of rows to ``extends``; ``independent``, when given, is the class's declaration of
    independent rows (left absent otherwise, as a Prefixes may leave it)."""

    class Counted(Chain):
        def extend(self, parent, tokens, question):
            extends.append(len(parent))
            child = super().extend(parent, tokens, question)
            child.__class__ = Counted
            return child

    if independent is not None:
        Counted.independent = independent
    return Counted


def exact_law(last: str, steps: int, temperature: float = 1.0) -> dict:
    """Law of the first word after a context ending in ``last``, by enumeration: a
    non-letter first character is the answer itself (a space gives ""); otherwise the
    letters up to the first non-letter, or the first ``steps`` letters if none came."""
    q = {x: np.array(p) ** (1 / temperature) for x, p in P.items()}
    q = {x: p / p.sum() for x, p in q.items()}
    idx = {c: i for i, c in enumerate(CHARS)}
    law = {"": q[last][idx[" "]], ".": q[last][idx["."]]}
    for k in range(1, steps + 1):
        for word in itertools.product("ab", repeat=k):
            p, prev = 1.0, last
            for c in word:
                p, prev = p * q[prev][idx[c]], c
            if k < steps:  # the word ends at the next non-letter
                p *= q[prev][idx[" "]] + q[prev][idx["."]]
            law["".join(word)] = law.get("".join(word), 0.0) + p
    assert abs(sum(law.values()) - 1) < 1e-12
    return law


@pytest.mark.parametrize("temperature", [1.0, 0.5])
def test_first_word_has_the_exact_law(temperature):
    contexts, m, steps = ["xa", "x ", "x."], 20_000, 3
    r = pt.sample(lambda lo, hi: Chain(contexts[lo:hi]), len(contexts), m,
                  temperature=temperature, steps=steps, seed=0)
    cut = 0
    for ctx, answers in zip(contexts, r["answers"]):
        assert len(answers) == m
        law = exact_law(ctx[-1], steps, temperature)
        assert set(answers) <= set(law)
        words = sorted(law)
        seen = np.array([answers.count(w) for w in words])
        expected = m * np.array([law[w] for w in words])
        # a fixed seed: the p-value is one number; a wrong law at 20,000 samples gives ~0
        assert stats.chisquare(seen, expected).pvalue > 1e-3, (ctx, dict(zip(words, seen)))
        cut += sum(len(w) == steps for w in answers)
    # every answer of `steps` letters was cut before a character could end it, and no other
    assert r["unterminated"] == cut > 0


def test_temperature_zero_follows_the_argmax():
    # argmax after "a" is "a" (0.5); after " " it is "a" (0.4); after "." it is " " (0.7)
    contexts, steps = ["xa", "x ", "x."], 5
    r = pt.sample(lambda lo, hi: Chain(contexts[lo:hi]), 3, 4, temperature=0.0,
                  steps=steps, seed=0, greedy=True)
    assert r["answers"] == [["aaaaa"] * 4, ["aaaaa"] * 4, [""] * 4]
    assert r["greedy"] == ["aaaaa", "aaaaa", ""]
    assert r["unterminated"] == 8  # the greedy trees are not counted
    # a sampled run carries the same greedy answers, and its draws do not move them
    s = pt.sample(lambda lo, hi: Chain(contexts[lo:hi]), 3, 4, temperature=1.0,
                  steps=steps, seed=1, greedy=True)
    assert s["greedy"] == r["greedy"]


def test_draws_do_not_depend_on_the_block_of_rows():
    contexts = ["xa", "x ", "x.", "xb"] * 5
    ref = pt.sample(lambda lo, hi: Chain(contexts[lo:hi]), len(contexts), 50,
                    temperature=0.8, steps=4, seed=7, greedy=True)
    for rows in (1, 3, 1000):
        got = pt.sample(lambda lo, hi: Chain(contexts[lo:hi]), len(contexts), 50,
                        temperature=0.8, steps=4, seed=7, greedy=True, rows=rows)
        assert got == ref
    # and a 2-D multinomial draws row by row: the same stream as one row at a time
    rng = np.random.default_rng(3)
    p = rng.dirichlet(np.ones(6), size=9)
    n = rng.integers(0, 30, size=9)
    a, b = np.random.default_rng(5), np.random.default_rng(5)
    whole = a.multinomial(n, p)
    rows = np.stack([b.multinomial(n[i], p[i]) for i in range(9)])
    assert np.array_equal(whole, rows) and a.random() == b.random()


def test_blocks_of_contexts_and_the_permutation():
    # 70 contexts with m = 16 go in blocks of 1024 // 16 = 64: two roots
    contexts = ["xa", "x ", "x.", "xb", "xa"] * 14
    calls = []

    def roots(lo, hi):
        calls.append((lo, hi))
        return Chain(contexts[lo:hi])

    r = pt.sample(roots, len(contexts), 16, temperature=1.0, steps=3, seed=2)
    assert calls == [(0, 64), (64, 70)]
    assert len(r["answers"]) == 70 and all(len(a) == 16 for a in r["answers"])
    # answers come shuffled: the tree's order (shortest words first) is not kept
    unsorted = sum(a != sorted(a, key=len) for a in r["answers"])
    assert unsorted > 35


def test_stop_rule():
    assert pt.one_word("king") is None and pt.one_word("") is None
    assert pt.one_word("king,") == "king" and pt.one_word("o'er ") == "o'er"
    assert pt.one_word("\nX") == "" and pt.one_word(",") == ","
    assert pt.first_word("kin") == "kin" and pt.first_word("--and") == "-"


@pytest.mark.parametrize("independent", [False, True])
def test_greedy_tree_shares_the_runs_evaluations_only_when_rows_are_independent(independent):
    """sample_runs grows the greedy tree in the same evaluations as the sampled ones only for
    prefixes that declare ``independent`` rows; either way the greedy answers are those of a
    tree of one sample at temperature 0 grown alone, and the sampled runs do not change."""
    contexts = ["xa", "x ", "x.", "xb"] * 3
    extends = []
    Counted = counting(extends, independent)

    def roots(lo, hi):
        return Counted(contexts[lo:hi])

    runs = [(1.0, 4), (0.5, 9)]
    plain = pt.sample_runs(roots, len(contexts), 6, runs, steps=4)
    n_plain, rows_plain = len(extends), sum(extends)
    extends.clear()
    alone = [w[0] for w in pt.tree(roots(0, len(contexts)), 1, 0.0, None, 4)[0]]
    n_alone, rows_alone = len(extends), sum(extends)
    extends.clear()
    got = pt.sample_runs(roots, len(contexts), 6, runs, steps=4, greedy=True)
    for r, p in zip(got, plain):
        assert r["greedy"] == alone and {k: v for k, v in r.items() if k != "greedy"} == p
    assert sum(extends) == rows_plain + rows_alone  # the same live prefixes either way
    assert n_alone > 0
    if independent:
        assert len(extends) == max(n_plain, n_alone)  # one evaluation per depth
    else:
        assert len(extends) == n_plain + n_alone


@pytest.mark.parametrize("together", [1, 2, 4])
def test_runs_from_shared_roots_are_the_single_runs(monkeypatch, together):
    """sample_runs grows every run's trees from one evaluation of each block of contexts, and
    ``together`` runs' trees in one evaluation per depth (pt.trees); each run must be exactly
    what sample returns alone with the same temperature and seed (its own generator draws in
    sample's order), greedy answers included."""
    contexts = ["xa", "x ", "x.", "xb"] * 3
    runs = [(1.0, 4), (0.5, 9), (0.0, 1), (2.0, 4)]
    calls, extends = [], []
    Counted = counting(extends)

    def roots(lo, hi):
        calls.append((lo, hi))
        return Counted(contexts[lo:hi])

    monkeypatch.setattr(pt, "TOGETHER", together * len(contexts) * 6)
    got = pt.sample_runs(roots, len(contexts), 6, runs, steps=3)
    shared, evaluations, rows = len(calls), len(extends), sum(extends)
    alone = []
    for (t, seed), r in zip(runs, got):
        extends.clear()
        alone.append(pt.sample(roots, len(contexts), 6, temperature=t, steps=3, seed=seed))
        assert r == alone[-1]
        rows -= sum(extends)
    assert rows == 0  # the same live prefixes, evaluated in fewer calls
    assert 0 < evaluations <= 2 * -(-len(runs) // together)  # steps - 1 per group of runs
    assert shared == len(range(0, len(contexts), pt.ROWS // 6))  # once per block, not per run
    with_greedy = pt.sample_runs(roots, len(contexts), 6, runs, steps=3, greedy=True)
    for (t, seed), r, a in zip(runs, with_greedy, alone):
        g = pt.sample(roots, len(contexts), 6, temperature=t, steps=3, seed=seed, greedy=True)
        assert r == g and {k: v for k, v in g.items() if k != "greedy"} == a
    with pytest.raises(ValueError, match="at least one"):
        pt.sample_runs(roots, len(contexts), 6, [], steps=3)
