"""scripts/glue.py: the bit-identity check of speed and restructuring work."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # each test runs scripts/glue.py 5-7 times, each in a fresh interpreter

ROOT = Path(__file__).resolve().parent.parent
GLUE = ROOT / "scripts" / "glue.py"


def _page(folder: Path, pins: dict, printed, table: str, timed: str = "0.31 s\n") -> None:
    """One executed page: a cell printing ``printed`` (a string, or the pieces Jupyter
    delivered it in) then showing ``table``, and a cell marked ``NBVAL_IGNORE_OUTPUT`` that
    prints ``timed``."""
    folder.mkdir(parents=True, exist_ok=True)
    pieces = [printed] if isinstance(printed, str) else printed
    nb = {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
        {"cell_type": "code", "metadata": {}, "source": "", "execution_count": 1, "outputs": [
            *({"output_type": "stream", "name": "stdout", "text": t} for t in pieces),
            {"output_type": "display_data", "metadata": {}, "data": {
                "text/markdown": table, "text/plain": "<Markdown object>"}}]},
        {"cell_type": "code", "metadata": {}, "source": ["# NBVAL_IGNORE_OUTPUT\n", "timed()"],
         "execution_count": 2,
         "outputs": [{"output_type": "stream", "name": "stdout", "text": timed}]}]}
    (folder / "page.ipynb").write_text(json.dumps(nb))
    (folder / "page.glue.json").write_text(json.dumps({name: {
        "output_type": "display_data", "metadata": {"scrapbook": {"name": name}},
        "data": {"text/plain": value}} for name, value in pins.items()}))


def _run(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(GLUE), *map(str, args)],
                          capture_output=True, text=True, timeout=60)


def _dump(tmp_path, name, **kw) -> Path:
    _page(tmp_path / name / "lectures", **kw)
    r = _run("dump", tmp_path / name)
    assert r.returncode == 0, r.stderr
    out = tmp_path / f"{name}.json"
    out.write_text(r.stdout)
    return out


def test_identical_builds_pass_and_a_last_bit_change_fails(tmp_path):
    base = dict(pins={"acc": "0.5466", "n": "300"}, printed="T = 0.89\n", table="| a |")
    before = _dump(tmp_path, "before", **base)
    same = _dump(tmp_path, "same", **base)
    r = _run("diff", before, same)
    assert r.returncode == 0 and "2 pins bit-identical" in r.stdout, r.stdout
    bit = _dump(tmp_path, "bit", **{**base, "pins": {"acc": "0.5466000000000001", "n": "300"}})
    r = _run("diff", before, bit)
    assert r.returncode == 1 and "pin acc changed 0.5466 -> 0.5466000000000001" in r.stdout


def test_a_vanished_pin_or_a_changed_table_fails_and_a_new_pin_does_not(tmp_path):
    base = dict(pins={"acc": "0.5"}, printed="x\n", table="| 0.12 |")
    before = _dump(tmp_path, "before", **base)
    gone = _dump(tmp_path, "gone", **{**base, "pins": {}})
    assert _run("diff", before, gone).returncode == 1
    table = _dump(tmp_path, "table", **{**base, "table": "| 0.13 |"})
    r = _run("diff", before, table)
    assert r.returncode == 1 and "printed outputs differ" in r.stdout
    new = _dump(tmp_path, "new", **{**base, "pins": {"acc": "0.5", "extra": "1"}})
    r = _run("diff", before, new)
    assert r.returncode == 0 and "pin extra new" in r.stdout


def test_how_a_stream_was_split_and_ignored_cells_change_nothing(tmp_path):
    base = dict(pins={"acc": "0.5"}, printed="line one\nline two\n", table="| 0.12 |")
    before = _dump(tmp_path, "before", **base)
    split = _dump(tmp_path, "split", **{**base, "printed": ["line one\n", "line two\n"]})
    timed = _dump(tmp_path, "timed", **{**base, "timed": "0.35 s\n"})
    for other in (split, timed):
        r = _run("diff", before, other)
        assert r.returncode == 0 and "no pin or output changed" in r.stdout, r.stdout
    # the same pieces with other text still fail
    text = _dump(tmp_path, "text", **{**base, "printed": ["line one\n", "line 2\n"]})
    r = _run("diff", before, text)
    assert r.returncode == 1 and "printed outputs differ" in r.stdout
