"""The release reader of data/reviews/_ye_pickle.py (re-exported by _ye.py) against crafted files.

Every hostile file is built here, opcode by opcode or with a reducer, and each is refused by the
reader (a reader that unpickled with numpy's own ``_reconstruct`` and ``dtype`` would fail them):
the forged dtype state crashed the process (SIGSEGV), the memo and length bombs allocated
gigabytes, the wide structure hung in the refusal message's ``repr``, deep nesting escaped as a
``RecursionError`` traceback, and duplicate ids were silently merged. The files in the
release's own layout (numpy 1.x and 2.x names, protocols 3 and 4, with and without frames)
must load exactly as ``pickle.load`` would give them.
"""

from __future__ import annotations

import json
import os
import pickle
import pickletools
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from ye_scripts import SCRIPTS, ye_module

ROOT = Path(__file__).resolve().parents[1]


_ye = ye_module()
_reader = sys.modules["_ye_pickle"]  # where read_logits reads its caps
_RECONSTRUCT = np.ndarray((0,)).__reduce__()[0]


# ------------------------------------------------------------ building files


def _records(n=2500, seed=0):
    rng = np.random.default_rng(seed)
    ids = rng.permutation(np.arange(-5, n - 5) * 37)      # negative, > 65535: BININT, BININT2
    return [{"id": int(i), "logits_options": rng.normal(0, 3, 6).astype(np.float32)}
            for i in ids]


def _rewrite(data: bytes, *, rename=None, frames=True) -> bytes:
    """Re-emit a pickle opcode by opcode: ``rename`` maps one SHORT_BINUNICODE string to
    another (numpy 2 -> numpy 1 module names), ``frames=False`` drops the FRAME opcodes
    (optional in protocol 4) so that the lengths stay right."""
    ops = list(pickletools.genops(data))
    out = bytearray()
    for (op, arg, pos), nxt in zip(ops, [o[2] for o in ops[1:]] + [len(data)]):
        if op.name == "FRAME" and (rename or not frames):
            continue
        if rename and op.name == "SHORT_BINUNICODE" and arg in rename:
            new = rename[arg].encode()
            out += b"\x8c" + bytes([len(new)]) + new
            continue
        out += data[pos:nxt]
    return bytes(out)


def _numpy1(data: bytes) -> bytes:
    out = _rewrite(data, rename={"numpy._core.multiarray": "numpy.core.multiarray"})
    names = [a for op, a, _ in pickletools.genops(out) if op.name == "SHORT_BINUNICODE"]
    assert "numpy.core.multiarray" in names and "numpy._core.multiarray" not in names
    return out


class _Dtype:
    """Pickles as ``numpy.dtype(*args)`` given ``state``: any dtype state, forged or not."""

    def __init__(self, args, state):
        self.args, self.state = args, state

    def __reduce__(self):
        return (np.dtype, self.args, self.state)


class _Array:
    """Pickles as numpy's ``_reconstruct(ndarray, (0,), b'b')`` given ``state``."""

    def __init__(self, state):
        self.state = state

    def __reduce__(self):
        return (_RECONSTRUCT, (np.ndarray, (0,), b"b"), self.state)


def _forged_pointer() -> bytes:
    """230 bytes that make numpy's dtype take the array's 8 raw bytes for an object pointer:
    a void dtype whose field is an object, with the flags that would make numpy treat its
    contents as references forged to zero."""
    obj = _Dtype(("O8", False, True), (3, "|", None, None, None, -1, -1, 63))
    void = _Dtype(("V8", False, True), (3, "|", None, ("a",), {"a": (obj, 0)}, 8, 1, 0))
    arr = _Array((1, (1,), void, False, (0x4141414141414141).to_bytes(8, "little")))
    return pickle.dumps([{"id": 0, "logits_options": arr}], protocol=4)


def _forged_size() -> bytes:
    """A float32 dtype whose state claims 4,096-byte elements over 24 bytes of data."""
    f4 = _Dtype(("f4", False, True), (3, "<", None, None, None, 4096, 4, 0))
    arr = _Array((1, (6,), f4, False, b"\x00" * 24))
    return pickle.dumps([{"id": 0, "logits_options": arr}], protocol=4)


def _header(body: bytes) -> bytes:
    return b"\x80\x04" + body + b"."


def _wide(levels=5, width=200) -> bytes:
    """A structure of 6 atoms whose repr has ``width ** levels`` parts: each level is a tuple
    of ``width`` memo references to the level below."""
    body = bytearray(b"]}(\x8c\x02idK\x00\x8c\x0elogits_options")
    body += b"\x8c\x01x\x940"                              # memo 0: 'x' (popped)
    for level in range(levels):                             # memo level + 1
        body += b"(" + (b"h" + bytes([level])) * width + b"t\x94"
        body += b"0" if level < levels - 1 else b""
    body += b"ua"
    return _header(bytes(body))


def _write(tmp_path, data: bytes, name="m_t_base_icl1.pkl") -> Path:
    f = tmp_path / name
    f.write_bytes(data)
    return f


def _refused(f, match):
    with pytest.raises(SystemExit) as info:
        _ye.read_logits(f)
    msg = str(info.value)
    assert msg.startswith(f"{f}: refused"), msg
    assert "\n" not in msg and msg.isprintable() and len(msg) < 400, msg
    assert match in msg, msg
    return msg


# ------------------------------------------------------------ the release layout loads


@pytest.mark.parametrize("variant", ["numpy2 protocol 4", "numpy1 protocol 4",
                                     "protocol 4 unframed", "protocol 3"])
def test_release_layout_loads_as_pickle_would(tmp_path, variant):
    recs = _records()
    recs[3]["logits_options"] = np.arange(12, dtype=np.float32)[::2]   # a view pickles as a copy
    data = pickle.dumps(recs, protocol=3 if variant == "protocol 3" else 4)
    if variant == "numpy1 protocol 4":
        data = _numpy1(data)
    elif variant == "protocol 4 unframed":
        data = _rewrite(data, frames=False)
    want = pickle.loads(data)       # the test's own bytes: trusted here
    got = _ye.read_logits(_write(tmp_path, data))
    assert [r["id"] for r in got] == [r["id"] for r in want]
    assert all(type(r["id"]) is int and set(r) == {"id", "logits_options"} for r in got)
    for g, w in zip(got, want):
        z = g["logits_options"]
        assert z.dtype == np.float32 and z.shape == (6,) and z.flags.writeable
        assert z.tobytes() == w["logits_options"].tobytes()


def test_every_opcode_the_release_uses_is_covered():
    """The layout test above exercises the opcodes a long release file needs."""
    used = {op.name for op, _, _ in pickletools.genops(_numpy1(pickle.dumps(_records(), 4)))}
    assert {"BININT", "BININT2", "APPENDS", "SETITEMS", "STACK_GLOBAL",
            "REDUCE", "BUILD", "SHORT_BINBYTES"} <= used


# ------------------------------------------------------------ forged numpy state


def _run(code: str, *args, timeout=120):
    env = {**os.environ, "PYTHONPATH": f"{SCRIPTS}{os.pathsep}{ROOT}"}
    return subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True,
                          text=True, timeout=timeout, cwd=ROOT, env=env)


def _one_line_refusal(r, f):
    assert r.returncode == 1, (r.returncode, r.stderr[-2000:])
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"{f}: refused"), r.stderr[-2000:]
    assert "Traceback" not in r.stderr
    return lines[0]


@pytest.mark.slow  # a fresh interpreter per case (the probe imports numpy and the reader)
def test_forged_dtype_state_is_refused_without_a_crash(tmp_path):
    data = _forged_pointer()
    assert len(data) == 230
    f = _write(tmp_path, data)
    r = _run("import sys, _ye; _ye.read_logits(sys.argv[1])", f)
    assert r.returncode != -11                  # it was SIGSEGV
    msg = _one_line_refusal(r, f)
    assert "float array of 6" in msg and "AAAA" not in msg


@pytest.mark.slow  # runs data/reviews/ye_table1.py as a script, in a fresh interpreter
def test_forged_file_in_a_release_stops_the_script_cleanly(tmp_path):
    root = tmp_path / "release"
    (root / "data").mkdir(parents=True)
    (root / "outputs_base").mkdir()
    (root / "data" / "t.json").write_text(json.dumps(
        [{"id": i, "answer": "ABCDEF"[i % 6]} for i in range(20)]))
    f = _write(root / "outputs_base", _forged_pointer(), "m_t_base_icl1.pkl")
    r = subprocess.run([sys.executable, str(SCRIPTS / "ye_table1.py"), str(root)],
                       capture_output=True, text=True, timeout=300, cwd=ROOT,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode != -11
    _one_line_refusal(r, f)


def test_forged_element_size_is_refused_and_nothing_leaks(tmp_path):
    f = _write(tmp_path, _forged_size())
    msg = _refused(f, "float array of 6")
    assert "array(" not in msg and "\\x" not in msg


def test_a_pickle_that_names_another_global_is_refused_with_an_escaped_name(tmp_path):
    name = "os\n\x1b[31m" + "y" * 500
    g = name.encode()
    data = _header(b"X" + len(g).to_bytes(4, "little") + g + b"\x8c\x06system\x93")
    msg = _refused(_write(tmp_path, data), "is not allowed")
    assert "\x1b" not in msg and "y" * 40 not in msg


# ------------------------------------------------------------ resources


_MEMORY_PROBE = """
import resource, sys, tracemalloc
resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))   # 1 GiB of address space
import _ye
tracemalloc.start()
try:
    _ye.read_logits(sys.argv[1])
finally:
    peak = tracemalloc.get_traced_memory()[1]
    print(f"peak={peak}", file=sys.stdout, flush=True)
"""


@pytest.mark.parametrize("what, body, match", [
    # LONG_BINPUT at index 2**28: pickle's memo would grow to 2**29 slots (4 GiB)
    ("memo", b"N" + b"r" + (1 << 28).to_bytes(4, "little"), "memo index"),
    # BINBYTES8 announcing 3.5 GB: reading it from a file allocates the whole length
    ("length", b"\x8e" + (3_500_000_000).to_bytes(8, "little"), "beyond the end"),
    # a FRAME announcing 3.5 GB
    ("frame", b"\x95" + (3_500_000_000).to_bytes(8, "little") + b"N", "frame longer"),
])
@pytest.mark.slow  # a fresh interpreter per case (the probe imports numpy and the reader)
def test_tiny_files_cannot_exhaust_memory(tmp_path, what, body, match):
    data = _header(body)
    assert len(data) < 64
    f = _write(tmp_path, data)
    r = _run(_MEMORY_PROBE, f)
    line = _one_line_refusal(r, f)
    assert match in line and "MemoryError" not in line
    assert int(r.stdout.split("peak=")[1]) < 16 << 20


@pytest.mark.slow  # a fresh interpreter per case (the probe imports numpy and the reader)
def test_a_structure_with_an_exponential_repr_is_refused_at_once(tmp_path):
    data = _wide()
    assert len(data) < 2100
    f = _write(tmp_path, data)
    start = time.perf_counter()
    try:
        r = _run("import sys, _ye; _ye.read_logits(sys.argv[1])", f, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("reading a 2 kB file did not finish in 60 s")
    _one_line_refusal(r, f)
    assert time.perf_counter() - start < 30


@pytest.mark.slow  # a fresh interpreter per case (the probe imports numpy and the reader)
@pytest.mark.parametrize("shape", ["lists", "tuples", "dicts", "marks"])
def test_deep_nesting_is_one_line_not_a_recursion_error(tmp_path, shape):
    n = 200_000
    inner = {"lists": b"]" * n + b"a" * (n - 1),
             "tuples": b"N" + b"\x85" * n,
             "dicts": b"}\x8c\x01k" * n + b"N" + b"s" * n,
             "marks": b"(" * n + b"l" * n}[shape]
    f = _write(tmp_path, _header(b"]" + inner + b"a"))     # a list of one deep record
    r = _run("import sys, _ye; _ye.read_logits(sys.argv[1])", f)
    line = _one_line_refusal(r, f)
    assert "RecursionError" not in r.stderr and "deeper than" in line


def test_caps_on_size_and_opcodes(tmp_path, monkeypatch):
    data = pickle.dumps(_records(40), protocol=4)
    f = _write(tmp_path, data)
    assert len(_ye.read_logits(f)) == 40
    monkeypatch.setattr(_reader, "MAX_BYTES", len(data) - 1)
    _refused(f, "bytes")
    monkeypatch.setattr(_reader, "MAX_BYTES", len(data))
    ops = sum(1 for _ in pickletools.genops(data))
    monkeypatch.setattr(_reader, "MAX_OPCODES", ops - 1)
    _refused(f, "opcodes")
    monkeypatch.setattr(_reader, "MAX_OPCODES", ops)
    assert len(_ye.read_logits(f)) == 40


def test_only_regular_files_are_read(tmp_path):
    d = tmp_path / "dir_t_base_icl1.pkl"
    d.mkdir()
    _refused(d, "not a regular file")
    fifo = tmp_path / "fifo_t_base_icl1.pkl"
    os.mkfifo(fifo)                               # opening it would block forever
    _refused(fifo, "not a regular file")


# ------------------------------------------------------------ content


def test_duplicate_ids_are_refused_naming_the_id(tmp_path):
    recs = _records(30)
    recs.append({"id": recs[7]["id"], "logits_options": np.zeros(6, np.float32)})
    _refused(_write(tmp_path, pickle.dumps(recs, protocol=4)),
             f"id {recs[7]['id']} appears twice (records 7 and 30)")


def test_non_finite_logits_are_refused_naming_the_id(tmp_path):
    recs = _records(10)
    recs[4]["logits_options"][2] = np.nan
    _refused(_write(tmp_path, pickle.dumps(recs, protocol=4)), f"id {recs[4]['id']}")


@pytest.mark.parametrize("bad", [
    {"id": True, "logits_options": np.zeros(6, np.float32)},            # a bool is not an id
    {"id": 1 << 70, "logits_options": np.zeros(6, np.float32)},
    {"id": 1, "logits_options": np.zeros(6, np.float64)},               # not float32
    {"id": 1, "logits_options": np.zeros(6, ">f4")},                    # not little-endian
    {"id": 1, "logits_options": np.zeros((2, 3), np.float32)},
    {"id": 1, "logits_options": np.zeros(7, np.float32)},
    {"id": 1, "logits_options": [0.0] * 6},
    {"id": 1, "logits_options": np.zeros(6, np.float32), "extra": 0},
    {"id": 1},
])
def test_records_outside_the_layout_are_refused(tmp_path, bad):
    data = pickle.dumps([{"id": 0, "logits_options": np.ones(6, np.float32)}, bad], 4)
    _refused(_write(tmp_path, data), "record 1")


def test_random_corruptions_are_loaded_or_refused_in_one_line(tmp_path):
    """Bit flips, byte overwrites and truncations of a valid file: every one is either read
    (and then holds the layout) or refused with a one-line SystemExit; nothing else escapes."""
    data = pickle.dumps(_records(12), protocol=4)
    rng = np.random.default_rng(23)
    f = tmp_path / "m_t_base_icl1.pkl"
    outcomes = {"read": 0, "refused": 0}
    for trial in range(400):
        b = bytearray(data)
        kind = trial % 3
        if kind == 0:
            i = int(rng.integers(len(b)))
            b[i] ^= 1 << int(rng.integers(8))
        elif kind == 1:
            for i in rng.integers(0, len(b), 3):
                b[int(i)] = int(rng.integers(256))
        else:
            b = b[: int(rng.integers(1, len(b)))]
        f.write_bytes(bytes(b))
        try:
            got = _ye.read_logits(f)
        except SystemExit as exc:
            msg = str(exc)
            assert msg.startswith(f"{f}: refused") and "\n" not in msg and msg.isprintable()
            outcomes["refused"] += 1
        else:
            assert all(r["logits_options"].dtype == np.float32 for r in got)
            outcomes["read"] += 1
    assert outcomes["refused"] > 100 and outcomes["read"] > 10
