"""standarderror_book.memory: glibc keeps freed memory for the next allocation (fewer page faults,
the same numbers), and the reader can switch it off."""

import json
import os
import platform
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow  # each test starts fresh interpreters

glibc = pytest.mark.skipif(platform.system() != "Linux" or platform.libc_ver()[0] != "glibc",
                           reason="mallopt is glibc's")

# Allocate, touch and free arrays of changing sizes (40 to 100 MB, above the largest size glibc
# would otherwise take from its heap), as the 100-answer sampler's caches do, and count the
# page faults of that loop alone (torch tensors: numpy asks for huge pages, which fault less).
CHURN = """
import json, resource, sys
import torch
import standarderror_book.memory as mem  # what importing the book toolkit applies
applied = mem.keep_freed_memory()  # idempotent: True where they are in force
x = torch.ones(1)
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for i in range(60):
    x = torch.ones((40 + 7 * i % 61) << 18)  # 4-byte floats: 40 to 100 MB
    del x
after = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
print(json.dumps({"applied": applied, "faults": after - before}))
"""


def _churn(mode: str, **env) -> dict:
    run_env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    run_env.update(env)
    if mode == "off":
        run_env["STANDARDERROR_KEEP_MEMORY"] = "0"
    out = subprocess.run([sys.executable, "-c", CHURN], env=run_env, check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out)


@glibc
def test_kept_memory_removes_the_page_faults_of_repeated_allocations():
    on, off = _churn("on"), _churn("off")
    assert on["applied"] is True and off["applied"] is False
    # without the settings every page of every array faults (~4 GB of pages touched: about a
    # million faults); with them the heap is mostly reused
    assert off["faults"] > 500_000
    assert on["faults"] < off["faults"] / 4, (on, off)  # measured: 0.13 against 1.07 million


@glibc
def test_the_reader_can_switch_it_off_or_set_glibc_themselves():
    assert _churn("on", STANDARDERROR_KEEP_MEMORY="0")["applied"] is False
    assert _churn("on", MALLOC_TOP_PAD_="0")["applied"] is False


def test_importing_the_book_toolkit_applies_it_where_it_can():
    code = ("import standarderror_book.page, standarderror_book.memory as m, json; "
            "print(json.dumps(m.keep_freed_memory()))")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    env.pop("STANDARDERROR_KEEP_MEMORY", None)
    out = subprocess.run([sys.executable, "-c", code], env=env, check=True,
                         capture_output=True, text=True).stdout
    is_glibc = platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"
    assert json.loads(out) is is_glibc


def test_the_final_collection_is_skipped_at_exit_unless_switched_off(tmp_path):
    """skip_final_collection freezes the collector's objects at exit: a reference cycle that is
    garbage when the interpreter exits is then not collected (its __del__ does not run), and
    with STANDARDERROR_KEEP_MEMORY=0 it is (the interpreter's own last collection)."""
    code = f"""
import standarderror_book.page
class Cycle:
    def __del__(self):
        open({str(tmp_path / "collected")!r}, "w").write("yes")
c = Cycle(); c.me = c; del c  # garbage, held only by its own cycle
"""
    env = {k: v for k, v in os.environ.items() if k != "STANDARDERROR_KEEP_MEMORY"}
    subprocess.run([sys.executable, "-c", code], env=env, check=True)
    assert not (tmp_path / "collected").exists()
    env["STANDARDERROR_KEEP_MEMORY"] = "0"
    subprocess.run([sys.executable, "-c", code], env=env, check=True)
    assert (tmp_path / "collected").exists()
