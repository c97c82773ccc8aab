"""The model, its loader and its generation: shapes, size, determinism, safe loading."""

import json
import math
import pickle
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from standarderror.llm import tiny, weights


@pytest.fixture(scope="module")
def m():
    return tiny.load()


def expected_parameters(vocab, width=128, block=64, layers=4):
    # per block: two LayerNorms (2 x 2w), qkv (w x 3w + 3w), proj (w x w + w),
    # MLP (w x 4w + 4w, 4w x w + w); plus token and position embeddings and the final LayerNorm.
    per_block = 4 * width + (3 * width * width + 3 * width) + (width * width + width) \
        + (4 * width * width + 4 * width) + (4 * width * width + width)
    return layers * per_block + vocab * width + block * width + 2 * width


def test_parameter_count_matches_the_architecture(m):
    assert m["parameters"] == expected_parameters(m["vocab"])
    assert m["parameters"] == m["card"]["parameters"]
    assert 0.75e6 < m["parameters"] < 0.85e6


def test_vocabulary_is_the_corpus_characters(m):
    assert m["chars"] == tiny.vocabulary()
    assert m["vocab"] == len(m["chars"]) == len(m["stoi"])


def test_forward_shapes_and_determinism(m):
    x, _ = next(tiny.batches("test", count=1, size=4, seed=3, stoi=m["stoi"]))
    a = tiny.log_probabilities(m["model"], x)
    b = tiny.log_probabilities(m["model"], x)
    assert a.shape == (4, 64, m["vocab"]) and a.dtype == np.float64
    assert np.array_equal(a, b)
    assert np.allclose(np.exp(a).sum(-1), 1.0, atol=1e-12)


def test_held_out_loss_is_well_below_uniform(m):
    card = m["card"]
    assert card["uniform_loss"] == pytest.approx(math.log(m["vocab"]))
    assert card["val_loss"] < 0.45 * card["uniform_loss"]


def test_batches_are_disjoint_windows_of_held_out_text(m):
    xs = [x for x, _ in tiny.batches("test", count=3, size=8, seed=1, stoi=m["stoi"])]
    rows = torch.cat(xs).numpy()
    assert rows.shape == (24, 64)
    text = tiny.encode(tiny.split("test"), m["stoi"])
    starts = []
    for r in rows:
        hits = np.flatnonzero(np.all(np.lib.stride_tricks.sliding_window_view(text, 64) == r, axis=1))
        starts.append(hits[0])
    starts = np.sort(starts)
    assert np.all(np.diff(starts) >= 65)
    again = torch.cat([x for x, _ in tiny.batches("test", count=3, size=8, seed=1, stoi=m["stoi"])])
    assert torch.equal(again, torch.cat(xs))


def test_windows_are_disjoint_slots_of_the_sequence():
    # ids 0..n-1: a window's ids are its own positions, so the rule can be read off directly
    ids = np.arange(7 * 11 + 5)
    got = list(tiny.windows(ids, 2, 3, 4, block=10))
    assert len(got) == 2
    x = np.concatenate([a for a, _ in got])
    y = np.concatenate([b for _, b in got])
    assert x.shape == y.shape == (6, 10) and x.dtype == y.dtype == np.int64
    np.testing.assert_array_equal(y, x + 1)                    # next token of each position
    starts = x[:, 0]
    assert np.all(starts % 11 == 0) and np.all(starts // 11 < 7)   # whole 11-token slots
    np.testing.assert_array_equal(x, starts[:, None] + np.arange(10))
    assert len(set(starts.tolist())) == 6                        # drawn without replacement
    # the draw is numpy's permutation of the 7 slots under the seed: the first six of it
    np.testing.assert_array_equal(starts // 11, np.random.default_rng(4).permutation(7)[:6])
    with pytest.raises(ValueError, match="exceed"):
        next(tiny.windows(ids, 2, 4, 0, block=10))
    with pytest.raises(ValueError, match="block must be a positive integer"):
        next(tiny.windows(ids, 1, 1, 0, block=True))


def test_batches_are_the_windows_of_a_split_as_tensors():
    m = tiny.load()
    ref = tiny.windows(tiny.encode(tiny.split("test"), m["stoi"]), 3, 4, 7, block=64)
    for (x, y), (xr, yr) in zip(tiny.batches("test", 3, 4, 7, stoi=m["stoi"]), ref):
        assert isinstance(x, torch.Tensor)
        np.testing.assert_array_equal(x.numpy(), xr)
        np.testing.assert_array_equal(y.numpy(), yr)


def test_batches_reject_bad_arguments():
    with pytest.raises(ValueError, match="count"):
        next(tiny.batches("test", count=0))
    with pytest.raises(ValueError, match="exceed"):
        next(tiny.batches("test", count=10_000, size=100))


def test_cached_generation_equals_full_recomputation(m):
    model = m["model"]
    ctx = torch.from_numpy(tiny.encode("HAMLET:\nTo be, or not to be", m["stoi"]))[None].repeat(2, 1)
    out = tiny.generate(model, ctx, steps=20, temperature=0)
    seq = ctx.clone()
    with torch.no_grad():
        for _ in range(20):
            nxt = model(seq)[:, -1].argmax(-1, keepdim=True)
            seq = torch.cat([seq, nxt], dim=1)
    assert torch.equal(out, seq[:, ctx.shape[1]:])


def test_a_tree_cache_gives_the_concatenated_cache():
    # gpt.tree_cache keeps the contexts' keys and values apart and gathers only the positions
    # after them; each row must get the logits of the plain cache (the context's keys and
    # values, then its own, concatenated row by row), up to the order of summation (float64)
    from standarderror.llm import gpt

    net, g = _random_gpt(1)
    net = net.double()
    ctx = torch.randint(0, 13, (3, 7), generator=g)
    with torch.no_grad():
        plain, tree = [{} for _ in net.blocks], [{} for _ in net.blocks]
        net(ctx, plain, 0), net(ctx, tree, 0)
        group = torch.arange(3)
        # two steps; rows repeat, skip a context, and are not sorted by context
        for step, parent in enumerate([torch.tensor([2, 0, 0, 1, 2, 2]),
                                       torch.tensor([3, 5, 1, 1, 0])]):
            group = group[parent]
            plain = [{"k": c["k"][parent], "v": c["v"][parent]} for c in plain]
            layout = gpt.tree_layout(group, 3, 2)
            tree = [gpt.tree_cache(c, parent, group, layout) for c in tree]
            assert all(c["k"].shape[2] == step + 1 and c["filled"] == step for c in tree)
            nxt = torch.randint(0, 13, (len(parent), 1), generator=g)
            want, got = net(nxt, plain, 7 + step), net(nxt, tree, 7 + step)
            assert want.abs().max() > 1  # logits far from zero: a real comparison
            torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
            for p_, t_ in zip(plain, tree):  # the context's keys, then the row's own
                context = (t_["context"][0].transpose(-1, -2), t_["context"][1])
                for name, i in (("k", 0), ("v", 1)):
                    whole = torch.cat([context[i][group], t_[name]], dim=2)
                    torch.testing.assert_close(whole, p_[name], rtol=1e-12, atol=1e-12)
                assert "filled" not in t_
        # a row's attention ignores the other contexts: changing context 1 leaves rows of 0
        other = [dict(c, context=(c["context"][0].clone(), c["context"][1].clone()))
                 for c in tree]
        for c in other:
            c["context"][0][1] += 3.0  # its keys (transposed in a tree cache)
        parent = torch.arange(len(group))
        layout = gpt.tree_layout(group, 3, 2)
        nxt = torch.randint(0, 13, (len(group), 1), generator=g)
        a = net(nxt, [gpt.tree_cache(c, parent, group, layout) for c in tree], 9)
        b = net(nxt, [gpt.tree_cache(c, parent, group, layout) for c in other], 9)
        assert torch.equal(a[group != 1], b[group != 1]) and not torch.equal(a, b)
        with pytest.raises(ValueError, match="room for 1 position\\(s\\), not 2"):
            net(torch.zeros(len(group), 2, dtype=torch.long),
                [gpt.tree_cache(c, parent, group, layout) for c in tree], 9)
    with pytest.raises(ValueError, match="context indices in \\[0, 3\\)"):
        gpt.tree_layout(torch.tensor([0, 3]), 3, 2)


def _random_gpt(seed=0):
    """A small random model with weights large enough that attention is far from uniform
    (at the default 0.02 initialisation every attention pattern looks alike)."""
    g = torch.Generator().manual_seed(seed)
    net = tiny.GPT(tiny.Config(vocab=13, block=16, layers=2, heads=2, width=8)).eval()
    with torch.no_grad():
        for p in net.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * 0.7)
    return net, g


def _continuations(lengths, s):
    """Positions and the block-diagonal causal mask of continuations laid end to end."""
    pos = torch.cat([torch.arange(s, s + n) for n in lengths])
    which = torch.cat([torch.full((n,), i) for i, n in enumerate(lengths)])
    mask = (which[:, None] == which[None, :]) & (pos[None, :] <= pos[:, None])
    return pos, mask


def test_attention_after_a_prefix_equals_the_full_sequence():
    # continuations of unequal lengths laid end to end after one prefix, each scored against
    # the prefix's cached keys and values, against GPT.forward on every prefix + continuation
    # string. The prefix pass writes its softmax as matrix products, GPT.forward uses
    # scaled_dot_product_attention: the same quantity, different float32 arithmetic, so
    # equal to float32 rounding (1e-5), not bit for bit.
    net, g = _random_gpt()
    b, s, lengths = 3, 5, (2, 4, 3)
    ctx = torch.randint(0, 13, (b, s), generator=g)
    conts = [torch.randint(0, 13, (b, n), generator=g) for n in lengths]
    pos, mask = _continuations(lengths, s)
    with torch.no_grad():
        caches = [{} for _ in net.blocks]
        first = net.head(net.hidden(ctx, caches))
        prefixes = [(c["k"], c["v"]) for c in caches]
        out = net.head(net.hidden(torch.cat(conts, 1), prefixes=prefixes, positions=pos,
                                  mask=mask))
        wrong = net.head(net.hidden(torch.cat(conts, 1), prefixes=prefixes, positions=pos,
                                    mask=pos[None, :] <= pos[:, None]))  # options see each other
        np.testing.assert_allclose(first, net(ctx), rtol=0, atol=1e-5)
        at = 0
        for cont, n in zip(conts, lengths):
            full = net(torch.cat([ctx, cont], 1))[:, s:]
            np.testing.assert_allclose(out[:, at:at + n], full, rtol=0, atol=1e-5)
            at += n
        assert (wrong - out).abs().max() > 1e-2          # the mask matters: the test can fail


def test_attention_after_a_prefix_refuses_bad_input():
    net, g = _random_gpt()
    s, lengths = 5, (2, 3)
    ctx = torch.randint(0, 13, (2, s), generator=g)
    x = torch.randint(0, 13, (2, 5), generator=g)
    pos, mask = _continuations(lengths, s)
    with torch.no_grad():
        caches = [{} for _ in net.blocks]
        net.hidden(ctx, caches)
        prefixes = [(c["k"], c["v"]) for c in caches]

        def run(**kw):
            args = {"prefixes": prefixes, "positions": pos, "mask": mask} | kw
            return net.hidden(x, **args)

        run()                                                  # the good call runs
        with pytest.raises(ValueError, match="mask must be a boolean tensor of shape"):
            run(mask=mask[:4, :4])
        with pytest.raises(ValueError, match="mask must be a boolean tensor"):
            run(mask=mask.int())
        with pytest.raises(ValueError, match="mask must be a boolean tensor"):
            run(mask=None)
        with pytest.raises(ValueError, match="prefix keys must have shape"):
            run(prefixes=[(k[:1], v[:1]) for k, v in prefixes])      # wrong batch
        with pytest.raises(ValueError, match="prefix keys must have shape"):
            run(prefixes=[(k[..., :2], v[..., :2]) for k, v in prefixes])  # wrong head width
        with pytest.raises(ValueError, match="prefix values must have the keys' shape"):
            run(prefixes=[(k, v[:, :, :2]) for k, v in prefixes])
        with pytest.raises(ValueError, match="prefix must be a pair"):
            run(prefixes=[k for k, _ in prefixes])
        with pytest.raises(ValueError, match="prefixes must hold one"):
            run(prefixes=prefixes[:1])
        with pytest.raises(ValueError, match="prefixes must hold one"):
            run(prefixes=[prefixes[0], None])
        with pytest.raises(ValueError, match="positions must be a 1-D integer tensor"):
            run(positions=None)
        with pytest.raises(ValueError, match="positions must be a 1-D integer tensor"):
            run(positions=pos[:3])
        with pytest.raises(ValueError, match="positions must be a 1-D integer tensor"):
            run(positions=pos.double())
        with pytest.raises(ValueError, match="positions must lie in"):
            run(positions=pos + 20)
        with pytest.raises(ValueError, match="positions and mask are used only"):
            net.hidden(x, mask=mask)
        with pytest.raises(ValueError, match="mask is used only with a prefix"):
            net.blocks[0].attn(torch.zeros(2, 5, 8), mask=mask)
        with pytest.raises(ValueError, match="prefixes cannot be combined"):
            net.hidden(x, [{} for _ in net.blocks], prefixes=prefixes, positions=pos, mask=mask)


def test_sampling_is_seeded(m):
    ctx = torch.from_numpy(tiny.encode("KING:\n", m["stoi"]))[None]
    a = tiny.generate(m["model"], ctx, 30, temperature=1.0, generator=torch.Generator().manual_seed(5))
    b = tiny.generate(m["model"], ctx, 30, temperature=1.0, generator=torch.Generator().manual_seed(5))
    assert torch.equal(a, b)


def test_every_checkpoint_loads_and_steps_are_listed():
    steps = [c["step"] for c in tiny.card()["checkpoints"]]
    assert 6 <= len(steps) <= 8 and steps == sorted(steps)
    assert tiny.load(steps[0])["step"] == steps[0]
    with pytest.raises(ValueError, match="step must be one of"):
        tiny.load(steps[0] + 1)


def _copy(tmp_path):
    dst = tmp_path / "ckpt"
    shutil.copytree(tiny.CHECKPOINT_DIR, dst)
    return dst


def test_corrupted_checkpoint_is_refused(tmp_path):
    d = _copy(tmp_path)
    card = json.loads((d / "card.json").read_text())
    f = d / card["checkpoints"][-1]["file"]
    data = bytearray(f.read_bytes())
    data[-10] ^= 0xFF
    f.write_bytes(bytes(data))
    with pytest.raises(RuntimeError, match="SHA-256"):
        tiny.load(directory=d, trust_card=True)


def test_missing_checkpoint_names_the_file_and_the_fix(tmp_path):
    d = _copy(tmp_path)
    card = json.loads((d / "card.json").read_text())
    (d / card["checkpoints"][-1]["file"]).unlink()
    with pytest.raises(FileNotFoundError, match="train_tiny.py"):
        tiny.load(directory=d, trust_card=True)
    (d / "card.json").unlink()
    with pytest.raises(FileNotFoundError, match="card"):
        tiny.load(directory=d, trust_card=True)


class _Boom:
    def __reduce__(self):
        return (exec, ("raise SystemExit('unpickled!')",))


def test_a_pickle_is_never_unpickled(tmp_path):
    """Even with a matching hash in the card, a pickle file is not executed: safetensors only."""
    d = _copy(tmp_path)
    card = json.loads((d / "card.json").read_text())
    f = d / card["checkpoints"][-1]["file"]
    f.write_bytes(pickle.dumps({"tok.weight": _Boom()}))
    card["checkpoints"][-1]["sha256"] = tiny._sha256(f)
    (d / "card.json").write_text(json.dumps(card))
    with pytest.raises(Exception) as info:
        tiny.load(directory=d, trust_card=True)
    assert not isinstance(info.value, SystemExit)


# --- trust anchors -------------------------------------------------------------------------


def test_every_committed_directory_is_anchored():
    for key in ("", "overfit", "overfit-wd"):
        d = tiny.CHECKPOINT_DIR / key
        assert tiny.anchor_key(d) == key
        assert tiny.card_digest(tiny.card(d)) == tiny.ANCHORS[key]
        info = tiny.card(d)
        assert tiny.load(info["final_step"], directory=d)["anchored"]


def _zero_a_tensor_and_rehash(d):
    from safetensors.torch import load_file, save_file

    card = json.loads((d / "card.json").read_text())
    entry = card["checkpoints"][-1]
    f = d / entry["file"]
    state = load_file(str(f))
    state["tok.weight"] = torch.zeros_like(state["tok.weight"])
    save_file(state, str(f))
    entry["sha256"] = tiny._sha256(f)
    (d / "card.json").write_text(json.dumps(card))
    return card


def test_a_tampered_checkpoint_with_a_rehashed_card_is_refused(tmp_path, monkeypatch):
    d = _copy(tmp_path)
    _zero_a_tensor_and_rehash(d)
    # in place of the committed directory: the anchor catches it
    monkeypatch.setattr(weights, "CHECKPOINT_DIR", d)  # read there
    with pytest.raises(RuntimeError, match="ANCHORS"):
        tiny.load()
    # anywhere else: refused unless the caller vouches for the card
    monkeypatch.undo()
    with pytest.raises(ValueError, match="trust_card=True"):
        tiny.load(directory=d)
    assert not tiny.load(directory=d, trust_card=True)["anchored"]


def test_a_changed_config_or_vocabulary_breaks_the_anchor(tmp_path, monkeypatch):
    d = _copy(tmp_path)
    monkeypatch.setattr(weights, "CHECKPOINT_DIR", d)  # read there
    card = json.loads((d / "card.json").read_text())
    card["config"]["heads"] = 8
    (d / "card.json").write_text(json.dumps(card))
    with pytest.raises(RuntimeError, match="ANCHORS"):
        tiny.load()
    card["config"]["heads"] = 4
    card["vocabulary"][30], card["vocabulary"][31] = card["vocabulary"][31], card["vocabulary"][30]
    (d / "card.json").write_text(json.dumps(card))
    with pytest.raises(RuntimeError, match="ANCHORS"):
        tiny.load()
    card["vocabulary"][30], card["vocabulary"][31] = card["vocabulary"][31], card["vocabulary"][30]
    (d / "card.json").write_text(json.dumps(card, indent=4))   # layout does not matter
    assert tiny.load()["anchored"]


@pytest.mark.parametrize("name", ["../x.safetensors", "/etc/passwd", "sub/step.safetensors",
                                  ".hidden.safetensors", "card.json", 7])
def test_file_entries_must_be_plain_names(tmp_path, name):
    d = _copy(tmp_path)
    card = json.loads((d / "card.json").read_text())
    card["checkpoints"][-1]["file"] = name
    (d / "card.json").write_text(json.dumps(card))
    with pytest.raises(ValueError, match="plain file names"):
        tiny.load(directory=d, trust_card=True)


def test_a_symlinked_checkpoint_is_refused(tmp_path):
    d = _copy(tmp_path)
    card = json.loads((d / "card.json").read_text())
    f = d / card["checkpoints"][-1]["file"]
    target = tmp_path / "elsewhere.safetensors"
    f.rename(target)
    f.symlink_to(target)
    with pytest.raises(ValueError, match="symbolic link"):
        tiny.load(directory=d, trust_card=True)


def test_a_bad_config_in_a_trusted_card_is_refused(tmp_path):
    d = _copy(tmp_path)
    card = json.loads((d / "card.json").read_text())
    card["config"]["heads"] = "4; rm -rf /"
    (d / "card.json").write_text(json.dumps(card))
    with pytest.raises(ValueError, match="config"):
        tiny.load(directory=d, trust_card=True)


def test_tensors_come_from_the_hashed_bytes(tmp_path, monkeypatch):
    """The file is read once: swapping it after the hash cannot change what is loaded."""
    d = _copy(tmp_path)
    card = json.loads((d / "card.json").read_text())
    f = d / card["checkpoints"][-1]["file"]
    reads = []
    from standarderror import _checks

    real = _checks.open_regular

    def opened(path, *args, **kwargs):
        reads.append(Path(path).name)
        return real(path, *args, **kwargs)

    monkeypatch.setattr(_checks, "open_regular", opened)
    monkeypatch.setattr(type(f), "open", lambda *a, **k: pytest.fail("opened past the check"))
    import safetensors.torch as st
    monkeypatch.setattr(st, "load_file", lambda *a, **k: pytest.fail("reopened the file"))
    tiny.load(directory=d, trust_card=True)
    assert reads.count(f.name) == 1


def test_decode_refuses_ids_outside_the_vocabulary(m):
    assert tiny.decode([0, 1], m["chars"]) == m["chars"][0] + m["chars"][1]
    for bad in ([-1], [m["vocab"]], [1.5]):
        with pytest.raises(ValueError, match="ids"):
            tiny.decode(bad, m["chars"])


def test_train_script_rewrites_the_anchor(tmp_path):
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "train_tiny", Path(__file__).resolve().parents[1] / "scripts" / "train_tiny.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    src = tmp_path / "weights.py"  # the module that holds ANCHORS
    src.write_text(Path(weights.__file__).read_text())
    mod.update_anchor("overfit", "ab" * 32, src)
    mod.update_anchor("new-run", "cd" * 32, src)
    ns = {}
    text = src.read_text()
    block = text[text.index("ANCHORS = {"):text.index("\n}\n", text.index("ANCHORS = {")) + 2]
    exec(block, ns)
    assert ns["ANCHORS"] == {**tiny.ANCHORS, "overfit": "ab" * 32, "new-run": "cd" * 32}
    assert mod.anchor_key(tiny.CHECKPOINT_DIR / "overfit") == "overfit"
    assert mod.anchor_key(tmp_path) is None
