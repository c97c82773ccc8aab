"""llm.predictions.predictions: the held-out predictions every lecture measures."""

import numpy as np
import pytest

from standarderror.llm import tiny
from standarderror.llm.predictions import predictions


@pytest.fixture(scope="module")
def pred():
    return predictions(count=24, size=16, seed=1)


def test_shapes_match_the_published_contract(pred):
    n = 24 * 16 * 64
    assert pred["p"].shape == (n, len(pred["chars"]))
    assert pred["y"].shape == pred["sequence"].shape == pred["position"].shape == (n,)
    assert np.unique(pred["sequence"]).size == 384
    assert np.all(np.bincount(pred["sequence"]) == 64)


def test_probabilities_are_exact_exponentials_of_log_space(pred):
    assert pred["p"].dtype == np.float64
    assert np.array_equal(pred["p"], np.exp(pred["logp"]))
    assert np.abs(pred["p"].sum(1) - 1).max() < 1e-12
    assert pred["p"].min() > 0          # no underflow to zero: log(p) is finite everywhere


def test_labels_are_the_next_characters_of_the_same_windows(pred):
    m = tiny.load()
    ys = np.concatenate([y.numpy().ravel() for _, y in tiny.batches("test", 24, 16, 1, stoi=m["stoi"])])
    assert np.array_equal(ys, pred["y"])


def test_accuracy_is_far_above_chance(pred):
    acc = (pred["p"].argmax(1) == pred["y"]).mean()
    assert acc > 0.4 > 1 / len(pred["chars"])
