"""The release reader of the Ye et al. (2024) recomputation scripts: their logits files are
pickles, read without ever calling what a file names (see ``_ye.py``'s "Pickle" paragraph for
what is admitted and what is refused). ``_ye`` re-exports :func:`read_logits`; the caps
(``MAX_BYTES``, ``MAX_OPCODES``, ``MAX_DEPTH``) are read here."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np

#: The option letters of a release question (six options).
LETTERS = "ABCDEF"


# ------------------------------------------------------------------ the release reader
#
# Nothing numpy (or any other library) defines is ever called on the file's data. The bytes
# are first scanned opcode by opcode (pickletools.genops, which builds nothing) against the
# release layout: allowed opcodes and globals only, caps on the size, the number of opcodes,
# the nesting depth and the memo, dict keys that are strings, no second reference to a list,
# a dict or an unfinished object. Only then does pickle's own unpickler build the structure,
# with find_class returning plain-Python stand-ins for numpy's three names; the stand-ins
# merely record their arguments. The structure is then checked field by field against the
# exact form numpy writes for a float32 array of 6, and each array is built here with
# np.frombuffer from the checked 24 raw bytes.

MAX_BYTES = 16 << 20          # a release file holds ~65 bytes a record: 10,000 records ~0.65 MB
MAX_OPCODES = 2_000_000       # ~29 opcodes a record: ~69,000 records; each builds <= 1 object
MAX_DEPTH = 16                # the release nests 6 deep (list, dict, array, state, dtype, state)
MAX_ID = 1 << 63
_N = len(LETTERS)
_ALLOWED_PROTOCOLS = (2, 3, 4, 5)


class _Refused(Exception):
    """A file outside the release layout (the message is ours, never the file's)."""


class _Name:
    """Stand-in for ``numpy.ndarray``: a name, not callable."""

    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name


class _Stub:
    """Stand-in for what ``_reconstruct(...)`` or ``dtype(...)`` would have built: the arguments
    of the call and the state a later BUILD gives it, recorded as they are."""

    __slots__ = ("kind", "args", "state")
    _UNSET = object()

    def __init__(self, kind, args):
        self.kind, self.args, self.state = kind, args, _Stub._UNSET

    def __setstate__(self, state):
        if self.state is not _Stub._UNSET:
            raise pickle.UnpicklingError("an object is given its state twice")
        self.state = state


_NDARRAY = _Name("numpy.ndarray")


def _reconstruct_stand_in(*args):
    return _Stub("ndarray", args)


def _dtype_stand_in(*args):
    return _Stub("dtype", args)


_STAND_INS = {
    ("numpy.core.multiarray", "_reconstruct"): _reconstruct_stand_in,   # written by numpy 1.x
    ("numpy._core.multiarray", "_reconstruct"): _reconstruct_stand_in,  # written by numpy 2.x
    ("numpy", "ndarray"): _NDARRAY,
    ("numpy", "dtype"): _dtype_stand_in,
}
_CALLABLE = {("numpy.core.multiarray", "_reconstruct"),
             ("numpy._core.multiarray", "_reconstruct"), ("numpy", "dtype")}


class _ReleaseUnpickler(pickle.Unpickler):
    """Resolves only numpy's three names, each to a plain-Python stand-in; nothing else."""

    def find_class(self, module, name):
        try:
            return _STAND_INS[(module, name)]
        except (KeyError, TypeError):
            raise pickle.UnpicklingError("a global outside the release layout") from None

    def persistent_load(self, pid):
        raise pickle.UnpicklingError("persistent ids are not allowed")


def _excerpt(value, limit: int = 32) -> str:
    """A short, escaped (ASCII-only, one-line) excerpt of file-controlled text or bytes."""
    text = ascii(value[:limit])
    return text + ("..." if len(value) > limit else "")


def _shown(path: Path) -> str:
    s = str(path)
    return s if s.isprintable() else ascii(s)


# opcode -> (action, bytes of fixed argument, bytes of the length prefix of a counted argument)
(_ATOM, _STR, _MEMOIZE, _PUT, _GET, _MARK, _TUPLE_N, _TUPLE, _EMPTY_LIST, _EMPTY_DICT, _LIST,
 _DICT, _APPEND, _APPENDS, _SETITEM, _SETITEMS, _STACK_GLOBAL, _GLOBAL, _REDUCE, _BUILD, _POP,
 _POP_MARK, _FRAME, _STOP) = range(24)
_OPS = {
    b"N"[0]: (_ATOM, 0, 0), 0x88: (_ATOM, 0, 0), 0x89: (_ATOM, 0, 0),      # None, True, False
    b"J"[0]: (_ATOM, 4, 0), b"K"[0]: (_ATOM, 1, 0), b"M"[0]: (_ATOM, 2, 0),  # BININT, 1, 2
    b"G"[0]: (_ATOM, 8, 0), 0x8A: (_ATOM, 0, 1), 0x8B: (_ATOM, 0, 4),       # BINFLOAT, LONG1/4
    b"C"[0]: (_ATOM, 0, 1), b"B"[0]: (_ATOM, 0, 4), 0x8E: (_ATOM, 0, 8),    # bytes
    0x8C: (_STR, 0, 1), b"X"[0]: (_STR, 0, 4), 0x8D: (_STR, 0, 8),          # str
    0x94: (_MEMOIZE, 0, 0), b"q"[0]: (_PUT, 1, 0), b"r"[0]: (_PUT, 4, 0),
    b"h"[0]: (_GET, 1, 0), b"j"[0]: (_GET, 4, 0),
    b"("[0]: (_MARK, 0, 0), b")"[0]: (_TUPLE_N, 0, 0), 0x85: (_TUPLE_N, 0, 0),
    0x86: (_TUPLE_N, 0, 0), 0x87: (_TUPLE_N, 0, 0), b"t"[0]: (_TUPLE, 0, 0),
    b"]"[0]: (_EMPTY_LIST, 0, 0), b"}"[0]: (_EMPTY_DICT, 0, 0), b"l"[0]: (_LIST, 0, 0),
    b"d"[0]: (_DICT, 0, 0), b"a"[0]: (_APPEND, 0, 0), b"e"[0]: (_APPENDS, 0, 0),
    b"s"[0]: (_SETITEM, 0, 0), b"u"[0]: (_SETITEMS, 0, 0), 0x93: (_STACK_GLOBAL, 0, 0),
    b"c"[0]: (_GLOBAL, 0, 0), b"R"[0]: (_REDUCE, 0, 0), b"b"[0]: (_BUILD, 0, 0),
    b"0"[0]: (_POP, 0, 0), b"1"[0]: (_POP_MARK, 0, 0), 0x95: (_FRAME, 8, 0),
    b"."[0]: (_STOP, 0, 0),
}
_TUPLE_SIZE = {b")"[0]: 0, 0x85: 1, 0x86: 2, 0x87: 3}
_LONG4 = 0x8B


def _scan(data: bytes) -> None:
    """Walk the opcodes without building anything and refuse whatever the release layout never
    needs: other opcodes or globals, more than :data:`MAX_OPCODES` opcodes (each builds at most
    one object), nesting deeper than :data:`MAX_DEPTH`, a memo index beyond those stored, a
    length beyond the file, dict keys that are not strings, a second reference to a list, a
    dict or an object not yet given its state (so nothing is changed after it is nested, the
    depths below are exact, and there are no cycles), BUILD twice or on anything but a call.

    Each stack entry is ``[kind, depth, extra]``: kind ``a`` an atom, ``s`` a string (extra:
    the string), ``g`` an allowed global (extra: its name), ``t`` a tuple, ``l`` a list, ``d``
    a dict, ``o`` the result of a call (extra: whether BUILD gave it its state). The memo holds
    the same entries, so a depth raised later is seen through every reference."""
    stack: list = []
    marks: list[int] = []
    memo: dict[int, list] = {}
    atom = ["a", 0, None]
    n = len(data)
    i = pos = 0
    count = 0

    def refuse(why):
        raise _Refused(f"{why} (opcode at byte {pos}: {_excerpt(data[pos:pos + 12])})")

    def fence():
        return marks[-1] if marks else 0

    def pop(k):
        if len(stack) - fence() < k:
            refuse("the pickle takes more items than it pushed")
        items = stack[len(stack) - k:]
        del stack[len(stack) - k:]
        return items

    def pop_mark():
        if not marks:
            refuse("the pickle closes a MARK it never opened")
        start = marks.pop()
        items = stack[start:]
        del stack[start:]
        return items

    def nested(kind, items, extra=None):
        depth = 1 + max([it[1] for it in items], default=0)
        if depth > MAX_DEPTH:
            refuse(f"nesting deeper than {MAX_DEPTH} levels")
        return [kind, depth, extra]

    def into(kind, items, what):
        if len(stack) <= fence() or stack[-1][0] != kind:
            refuse(f"{what} something that is not a {'list' if kind == 'l' else 'dict'}")
        if kind == "d" and (len(items) % 2 or any(k[0] != "s" for k in items[::2])):
            refuse("a dict whose keys are not all strings")
        target = stack[-1]
        if items:
            target[1] = max(target[1], nested(kind, items)[1])

    while True:
        if i >= n:
            refuse("the pickle ends without its STOP opcode")
        pos = i
        code = data[i]
        i += 1
        count += 1
        if count > MAX_OPCODES:
            refuse(f"more than {MAX_OPCODES:,} opcodes")
        if count == 1:
            if code != 0x80 or i >= n or data[i] not in _ALLOWED_PROTOCOLS:
                refuse("not a pickle of protocol 2 to 5")
            i += 1
            continue
        spec = _OPS.get(code)
        if spec is None:
            import pickletools

            op = pickletools.code2op.get(chr(code))
            refuse(f"opcode {op.name if op else 'unknown'} is not used by the release layout")
        action, fixed, prefix = spec
        if prefix:
            if i + prefix > n:
                refuse("the file ends inside an opcode")
            length = int.from_bytes(data[i:i + prefix], "little", signed=code == _LONG4)
            i += prefix
            if not 0 <= length <= n - i:
                refuse(f"a length of {length:,} bytes, beyond the end of the file")
            arg = data[i:i + length] if action == _STR else None
            i += length
        elif fixed:
            if i + fixed > n:
                refuse("the file ends inside an opcode")
            arg = int.from_bytes(data[i:i + fixed], "little")
            i += fixed
        if action == _MEMOIZE or action == _PUT:
            idx = len(memo) if action == _MEMOIZE else arg
            if idx > len(memo):
                refuse(f"memo index {idx:,} skips past the {len(memo):,} entries stored")
            if len(stack) <= fence():
                refuse("memoizes with nothing on the stack")
            memo[idx] = stack[-1]
        elif action == _GET:
            entry = memo.get(arg)
            if entry is None:
                refuse(f"memo index {arg:,} was never stored")
            if entry[0] in "ld" or (entry[0] == "o" and not entry[2]):
                refuse("a second reference to a list, a dict or an unfinished object")
            stack.append(entry)
        elif action == _ATOM:
            stack.append(atom)
        elif action == _MARK:
            if len(marks) >= MAX_DEPTH:
                refuse(f"nesting deeper than {MAX_DEPTH} levels")
            marks.append(len(stack))
        elif action == _TUPLE_N:
            stack.append(nested("t", pop(_TUPLE_SIZE[code])))
        elif action == _TUPLE:
            stack.append(nested("t", pop_mark()))
        elif action == _REDUCE:
            f, args = pop(2)
            if f[0] != "g" or f[2] not in _CALLABLE or args[0] != "t":
                refuse("a call that is not numpy's _reconstruct or dtype on a tuple")
            stack.append(nested("o", [args], False))
        elif action == _BUILD:
            (state,) = pop(1)
            if len(stack) <= fence() or stack[-1][0] != "o" or stack[-1][2]:
                refuse("BUILD on something that is not a fresh call's result")
            target = stack[-1]
            target[1] = max(target[1], nested("o", [state])[1])
            target[2] = True
        elif action == _EMPTY_DICT:
            stack.append(["d", 1, None])
        elif action == _SETITEMS:
            into("d", pop_mark(), "sets items on")
        elif action == _SETITEM:
            into("d", pop(2), "sets an item on")
        elif action == _EMPTY_LIST:
            stack.append(["l", 1, None])
        elif action == _APPENDS:
            into("l", pop_mark(), "appends to")
        elif action == _APPEND:
            into("l", pop(1), "appends to")
        elif action == _LIST:
            stack.append(nested("l", pop_mark()))
        elif action == _DICT:
            items = pop_mark()
            if len(items) % 2 or any(k[0] != "s" for k in items[::2]):
                refuse("a dict whose keys are not all strings")
            stack.append(nested("d", items))
        elif action == _STR:
            try:
                text = arg.decode("utf-8", "surrogatepass") if len(arg) <= 256 else None
            except UnicodeDecodeError:
                refuse("a string that is not UTF-8")
            stack.append(["s", 0, text])
        elif action in (_STACK_GLOBAL, _GLOBAL):
            if action == _GLOBAL:
                parts = []
                for _ in range(2):
                    end = data.find(b"\n", i, min(n, i + 257))
                    if end < 0:
                        refuse("a GLOBAL whose name is not a short line")
                    parts.append(data[i:end].decode("ascii", "replace"))
                    i = end + 1
                where = tuple(parts)
            else:
                module, attr = pop(2)
                where = (module[2], attr[2]) if module[0] == attr[0] == "s" else ()
            if where not in _STAND_INS:
                shown = ".".join(_excerpt(w or "") for w in where) if where else "(not a name)"
                refuse(f"global {shown} is not allowed")
            stack.append(["g", 0, where])
        elif action == _POP:
            if marks and marks[-1] == len(stack):
                marks.pop()
            else:
                pop(1)
        elif action == _POP_MARK:
            pop_mark()
        elif action == _FRAME:
            if arg > n - i:
                refuse("a frame longer than the file")
        elif action == _STOP:
            if len(stack) != 1 or marks:
                refuse("the pickle ends with an unbalanced stack")
            return


_DTYPE_ARGS = ("f4", False, True)
_DTYPE_STATE = (3, "<", None, None, None, -1, -1, 0)


def _same(value, want) -> bool:
    """``value == want`` for a small tuple of atoms, comparing types first (never calling a
    comparison on anything else)."""
    return (type(value) is tuple and len(value) == len(want)
            and all(type(v) is type(w) and v == w for v, w in zip(value, want)))


def _float32_of_6(z, dtypes_seen: set) -> bytes | None:
    """The 24 raw bytes if ``z`` is exactly what numpy writes for a C-ordered float32 array of
    6 (``_reconstruct(ndarray, (0,), b'b')`` given the state ``(1, (6,), dtype('<f4'), False,
    raw)``), else None."""
    if type(z) is not _Stub or z.kind != "ndarray":
        return None
    a = z.args
    if not (type(a) is tuple and len(a) == 3 and a[0] is _NDARRAY and _same(a[1], (0,))
            and type(a[2]) is bytes and a[2] == b"b"):
        return None
    s = z.state
    if not (type(s) is tuple and len(s) == 5 and type(s[0]) is int and s[0] == 1
            and _same(s[1], (_N,)) and type(s[3]) is bool and s[3] is False
            and type(s[4]) is bytes and len(s[4]) == 4 * _N):
        return None
    dt = s[2]
    if id(dt) not in dtypes_seen:
        if not (type(dt) is _Stub and dt.kind == "dtype" and _same(dt.args, _DTYPE_ARGS)
                and _same(dt.state, _DTYPE_STATE)):
            return None
        dtypes_seen.add(id(dt))
    return s[4]


def read_logits(path: Path) -> list[dict]:
    """Read one ``outputs_base/*.pkl`` file without running anything the file names.

    The file must be a regular file of at most :data:`MAX_BYTES`; its opcodes are scanned
    (:data:`MAX_OPCODES`, :data:`MAX_DEPTH`, allowed opcodes and globals only) before pickle's
    unpickler builds it with stand-ins for numpy's names; every record must be exactly
    ``{"id": int, "logits_options": <float32 array of 6, as numpy pickles it>}`` with finite
    values, and no id may appear twice.

    Returns ``[{"id": int, "logits_options": float32 array of 6}, ...]`` in file order; raises
    ``SystemExit`` with a one-line message naming the file for anything else.
    """
    import io
    import os
    import stat

    path = Path(path)

    def refuse(why):
        raise SystemExit(f"{_shown(path)}: refused, not a release logits file: {why}")

    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            refuse("not a regular file")
        if st.st_size > MAX_BYTES:
            refuse(f"{st.st_size:,} bytes, more than the {MAX_BYTES:,} a release file needs")
        with open(path, "rb") as fh:
            data = fh.read(st.st_size + 1)
    except OSError as exc:
        refuse(f"cannot be read ({type(exc).__name__})")
    if len(data) != st.st_size:
        refuse("the file changed while it was read")
    try:
        _scan(data)
    except _Refused as exc:
        refuse(str(exc))
    try:
        records = _ReleaseUnpickler(io.BytesIO(data)).load()
    except Exception as exc:  # noqa: BLE001 - any failure: refuse the file, name it
        refuse(f"the unpickler stopped ({type(exc).__name__})")
    if type(records) is not list:
        refuse(f"expected a list of records, got {type(records).__name__}")
    raws, ids, first = [], [], {}
    dtypes_seen: set = set()
    layout = (f"each record must be {{'id': int, 'logits_options': float array of {_N}}} "
              f"(numpy float32 '<f4', shape ({_N},))")
    for k, r in enumerate(records):
        if type(r) is not dict or len(r) != 2 or set(r) != {"id", "logits_options"}:
            refuse(f"record {k}: {layout}; got a {type(r).__name__} that is not such a dict")
        i = r["id"]
        if type(i) is not int or not -MAX_ID <= i < MAX_ID:
            refuse(f"record {k}: {layout}; its id is not an int of at most 64 bits")
        raw = _float32_of_6(r["logits_options"], dtypes_seen)
        if raw is None:
            refuse(f"record {k} (id {i}): {layout}")
        if i in first:
            refuse(f"id {i} appears twice (records {first[i]} and {k}); a release file has "
                   "one record per question")
        first[i] = k
        ids.append(i)
        raws.append(raw)
    z = np.frombuffer(b"".join(raws), dtype="<f4").astype(np.float32).reshape(len(raws), _N)
    bad = ~np.isfinite(z).all(axis=1)
    if bad.any():
        k = int(np.argmax(bad))
        refuse(f"record {k} (id {ids[k]}) has a NaN or infinite logit")
    return [{"id": i, "logits_options": row.copy()} for i, row in zip(ids, z)]
