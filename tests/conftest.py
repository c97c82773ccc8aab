import os
from pathlib import Path

# Tests run on the CPU with a fixed thread count so timings and reductions are comparable. The
# kernels that execute the notebooks inherit it; scripts/book.sh sets the same default for the
# book build, so that a strict re-execution reduces in the same order as the build did.
os.environ.setdefault("OMP_NUM_THREADS", "2")
# numpy's BLAS on one thread, as in scripts/book.sh (the build's arithmetic); set before the
# test process or any kernel loads numpy.
os.environ["OPENBLAS_NUM_THREADS"] = "1"
# Two workers run two notebook kernels at once, each on OMP_NUM_THREADS threads: OpenMP's idle
# threads then sleep instead of spinning (it changes no sum; two spinning kernels fight over
# two cores: CHANGELOG.md). standarderror_book/sphinxext/ahead.py sets the same for the build's kernels.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import nbval_pages  # noqa: E402  (tests/nbval_pages.py: the notebook tests through nbval)

# Per-cell ceiling for notebook cells (nbval's default is 2000 s): the largest per-cell timeout a
# page sets in its front matter (mystnb.execution_timeout), else _config.yml's 300 s.
DEFAULT_CELL_TIMEOUT = 300


def _share_the_threads():
    """Under pytest-xdist with several workers, each worker's own torch gets its share of
    OMP_NUM_THREADS (two workers on two threads: one each), so the workers do not fight over
    the cores. The environment is left as it is: the notebooks' kernels and the subprocesses
    the tests start keep OMP_NUM_THREADS, so a strict re-execution still reduces as the build
    did (tests/nbval_pages.py)."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
    if workers > 1:
        import torch

        torch.set_num_threads(max(1, int(os.environ["OMP_NUM_THREADS"]) // workers))


def pytest_configure(config):
    _share_the_threads()
    config.addinivalue_line("markers", "notebook: a cell of a notebook page, executed by nbval "
                            "(select them alone with -m notebook)")
    if getattr(config.option, "nbval_cell_timeout", None) == 2000:  # nbval's default: not set
        import re

        timeouts = [int(t) for page in nbval_pages.notebook_pages() for t in re.findall(
            r"execution_timeout:\s*(\d+)", (nbval_pages.ROOT / page).read_text()[:2000])]
        config.option.nbval_cell_timeout = max(timeouts, default=DEFAULT_CELL_TIMEOUT)


def pytest_collect_file(file_path: Path, parent):
    """Next to tests/test_lectures.py's own tests: one nbval notebook per notebook page."""
    if file_path.name == "test_lectures.py" and file_path.parent.name == "tests":
        return nbval_pages.NotebookPages.from_parent(parent, name="notebooks", path=file_path)
    return None


def pytest_report_header(config):
    if not any(Path(a).name.startswith("test_lectures") or Path(a).name in ("tests", ".")
               for a in (config.args or ["."])):
        return None
    try:
        plan = nbval_pages.plan()
    except Exception as exc:  # noqa: BLE001  (the header must not break the run)
        return f"notebooks: {exc}"
    strict = [p for p, (how, _, _) in plan.items() if how == "strict"]
    lax = [p for p, (how, _, _) in plan.items() if how == "lax"]
    lines = [f"notebooks (NOTEBOOKS_FROM={nbval_pages.mode()}): {len(strict)} re-executed strictly "
             f"from {nbval_pages.built_dir()}, {len(lax)} executed from source (lax)"]
    if strict and lax:
        lines.append("  from source: " + ", ".join(lax))
    if strict:
        build, rerun = nbval_pages.arithmetics()
        how = ("exact comparison" if nbval_pages.same_arithmetic() else
               "another arithmetic: pins against their quotes, printed numbers like pins, "
               "figures by size")
        lines.append(f"  arithmetic (torch kernels/threads): build {build or 'not recorded'}, "
                     f"re-execution {rerun}: {how}")
    return lines


def pytest_unconfigure(config):
    nbval_pages.cleanup(config)
    # The run is over: move every object out of the garbage collector's reach, so that the
    # interpreter's exit does not walk torch's (measured: the fast tier's last 4.2 s -> 1.4 s).
    import gc

    gc.freeze()
