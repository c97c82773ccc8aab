"""Importing the library changes nothing in the process: warnings filters, environment,
allocator, garbage collector and codec lookup are as they were. The set-up the book's pages run
under comes with the book toolkit (standarderror_book.page), and only with it."""

import json
import platform
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: Every module of the library: the package, its four subpackages and their modules, and the
#: command line (not the book toolkit, standarderror_book, nor the figure style, plots).
LIBRARY = ("standarderror",
           "standarderror.uncertainty", "standarderror.spectral", "standarderror.llm",
           "standarderror.experiments", "standarderror.cli")

_PROBE = r"""
import atexit, codecs, ctypes, gc, importlib, json, os, pkgutil, sys, warnings

def allocator():
    # glibc maps a 64 MiB block on its own (above its largest mmap threshold) unless mallopt
    # said otherwise (M_MMAP_MAX = 0): the mapped-block count tells whether it was changed
    try:
        libc = ctypes.CDLL(None)
        info = libc.mallinfo2
    except (OSError, AttributeError):
        return None
    class Info(ctypes.Structure):
        _fields_ = [(n, ctypes.c_size_t) for n in ("arena", "ordblks", "smblks", "hblks",
                    "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]
    info.restype = Info
    libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, (ctypes.c_size_t,)
    libc.free.argtypes = (ctypes.c_void_p,)
    before = info().hblks
    block = libc.malloc(64 << 20)
    mapped = info().hblks - before
    libc.free(block)
    return mapped

def codec_lookup():
    try:
        codecs.lookup("no-such-codec-anywhere")
        return "answered"
    except LookupError:
        return "LookupError"

def state():
    return {"environ": dict(os.environ), "allocator": allocator(),
            "gc": [gc.isenabled(), list(gc.get_threshold()), gc.get_freeze_count()],
            "codec": codec_lookup()}

# Dependencies (numpy, scipy, torch) add warnings filters and exit handlers of their own when
# imported: what counts is who called, so each call is recorded with its caller's file.
OURS = tuple(os.path.join(os.getcwd(), d) + os.sep for d in ("standarderror", "standarderror_book"))
calls = []

def recorded(module, name):
    original = getattr(module, name)
    def call(*args, **kwargs):
        caller = sys._getframe(1).f_code.co_filename
        if caller.startswith(OURS):
            calls.append(f"{module.__name__}.{name} from {caller}")
        return original(*args, **kwargs)
    setattr(module, name, call)

for module, name in ((warnings, "filterwarnings"), (warnings, "simplefilter"),
                     (atexit, "register"), (gc, "freeze"), (gc, "disable"),
                     (gc, "set_threshold"), (codecs, "register"), (codecs, "unregister"),
                     (os, "putenv"), (os, "unsetenv")):
    recorded(module, name)
filters = list(warnings.filters)
before = state()
names = []
for name in json.loads(sys.argv[1]):
    module = importlib.import_module(name)
    names.append(name)
    if hasattr(module, "__path__") and name != "standarderror" and sys.argv[2] == "walk":
        for info in pkgutil.walk_packages(module.__path__, name + "."):
            if ".checkpoints" not in info.name:
                importlib.import_module(info.name)
                names.append(info.name)
print(json.dumps({"before": before, "after": state(), "imported": names, "calls": calls,
                  "filters": [repr(f) for f in warnings.filters if f not in filters]}))
"""


def _probe(modules, walk=True) -> dict:
    run = subprocess.run([sys.executable, "-c", _PROBE, json.dumps(list(modules)),
                          "walk" if walk else "top"],
                         capture_output=True, text=True, cwd=ROOT, check=True)
    return json.loads(run.stdout)


def test_importing_the_library_changes_nothing_in_the_process():
    got = _probe(LIBRARY)
    assert {"standarderror.llm.semantic", "standarderror.experiments.measure.report",
            "standarderror.uncertainty.calibration", "standarderror.spectral._gram"
            } <= set(got["imported"])
    assert not any(n.startswith(("standarderror_book.page", "standarderror_book.sphinxext",
                                 "standarderror_book.kernel", "standarderror_book.memory"))
                   for n in got["imported"])
    before, after = got["before"], got["after"]
    assert got["calls"] == []    # no warnings filter, exit handler, gc or codec call of ours
    assert not any("IProgress" in f for f in got["filters"])
    assert after["environ"] == before["environ"]
    assert after["allocator"] == before["allocator"]
    assert after["gc"] == before["gc"]
    assert after["codec"] == before["codec"]


@pytest.mark.skipif(platform.system() != "Linux" or platform.libc_ver()[0] != "glibc",
                    reason="mallopt is glibc's")
def test_the_book_toolkit_prepares_the_pages_kernel():
    """The control of the test above: the probe sees each change the book's set-up makes."""
    got = _probe(["standarderror_book.page"], walk=False)
    before, after = got["before"], got["after"]
    assert any("IProgress not found" in f for f in got["filters"])
    assert any(c.startswith("warnings.filterwarnings from") for c in got["calls"])
    assert any(c.startswith("atexit.register from") for c in got["calls"])
    if before["allocator"] is not None:   # glibc 2.33 and later (mallinfo2)
        assert before["allocator"] == 1 and after["allocator"] == 0
    assert after["environ"] == before["environ"]
    assert after["codec"] == "LookupError"   # normal codec lookup, whatever it was before
