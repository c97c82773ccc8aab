"""Every page in the table of contents that is a notebook executes top to bottom, as a reader's
Jupyter would run it: converted to .ipynb by jupytext and executed by nbclient, outside the book
build (so the pins are not checked here; the book build does that)."""

import re
import time
from pathlib import Path

import jupytext
import nbclient
import pytest

ROOT = Path(__file__).resolve().parents[1]


def notebook_pages():
    toc = (ROOT / "_toc.yml").read_text()
    pages = []
    for name in re.findall(r"(?:root|file):\s*(\S+)", toc):
        path = ROOT / f"{name}.md"
        if path.exists() and path.read_text().startswith("---\njupytext:"):
            pages.append(path.relative_to(ROOT).as_posix())
    return pages


def test_there_are_notebook_pages():
    assert "book/model.md" in notebook_pages()


@pytest.mark.slow
@pytest.mark.parametrize("page", notebook_pages())
def test_page_executes_as_a_notebook(page, tmp_path):
    nb = jupytext.read(ROOT / page)
    timeout = nb.metadata.get("mystnb", {}).get("execution_timeout", 120)
    start = time.perf_counter()
    nbclient.NotebookClient(nb, timeout=timeout, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    elapsed = time.perf_counter() - start
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
              if o.get("output_type") == "error"]
    assert not errors
    (tmp_path / "executed.ipynb").write_text(jupytext.writes(nb, fmt="ipynb"))
    print(f"{page}: executed in {elapsed:.1f} s")
