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


def test_standard_draws_reads_each_draw_once_and_names_its_fields(monkeypatch):
    from standarderror.llm import predictions as pr
    from standarderror.uncertainty import metrics, scaling

    rng = np.random.default_rng(0)
    calls = []

    def fake(count, size, seed):
        calls.append((count, size, seed))
        logp = np.log(rng.dirichlet(np.ones(5), size=count * size))
        y = np.array([rng.choice(5, p=row) for row in np.exp(logp)])   # calibrated labels
        return {"p": np.exp(logp), "logp": logp, "y": y,
                "sequence": np.repeat(np.arange(count), size)}

    monkeypatch.setattr(pr, "predictions", fake)
    d = pr.standard_draws()
    assert calls == [(10, 16, 0), (24, 16, 1)]
    assert d.ece_bins == 15
    assert (d.seed0_windows, d.seed0_rows, d.seed1_windows, d.seed1_rows) == (10, 160, 24, 384)
    rng = np.random.default_rng(0)
    first = fake(10, 16, 0)
    correct = first["p"].argmax(axis=1) == first["y"]
    assert d.seed0_acc == correct.mean()
    assert d.seed0_ece == metrics.ece(first["p"].max(axis=1), correct)
    assert d.seed0_t == scaling.fit_temperature(first["logp"], first["y"])
    import dataclasses
    with pytest.raises(dataclasses.FrozenInstanceError):
        d.seed0_acc = 0.0
