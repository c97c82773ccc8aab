"""Pins and numbers: a quote is checked against the computed value at the precision written;
every number a reader sees is pinned or declared; and each kind of problem (drifted, unknown,
unquoted, malformed, duplicated, glue-only, stale or cross-page pin; a bare number in prose, a
caption or alt text) fails the real `jupyter-book build` without -W."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from standarderror.book import check_quote, parse_quote, pin, render
from standarderror.sphinxext.numbers import counts, phrase_spans, scan, tokens

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("quoted, value, ok", [
    ("0.5466", 0.54661, True),
    ("0.5466", 0.54656, True),        # rounds to 0.5466
    ("0.5466", 0.54666, False),       # rounds to 0.5467
    ("0.55", 0.5466, True),           # equal at the quoted precision
    ("0.54", 0.5466, False),
    ("+0.0003", 0.00031, True),
    ("+0.0003", -0.00031, False),
    ("-0.0001", -0.00012, True),
    ("+0.0000", -0.000001, True),     # no signed zero
    ("22.5%", 0.2251, True),
    ("22.5%", 0.2256, False),
    ("24,576", 24576, True),
    ("24,576", 24577, False),
    ("384", 384.0, True),
    ("1.10", 1.1024, True),
])
def test_check_quote(quoted, value, ok):
    assert check_quote(quoted, value)[0] is ok


def test_render_uses_the_quoted_form():
    assert render(0.22549, parse_quote("22.5%")) == "22.5%"
    assert render(24576.2, parse_quote("24,576")) == "24,576"
    assert render(0.0133, parse_quote("+0.013")) == "+0.013"


@pytest.mark.parametrize("bad", ["0.5.4", "abc", "1e-5", "", "12,34", "0,5", "%5"])
def test_malformed_quotes_are_errors(bad):
    with pytest.raises(ValueError, match="malformed"):
        parse_quote(bad)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), "0.3", True, None])
def test_pin_refuses_non_numbers(value):
    with pytest.raises(ValueError, match="pin"):
        pin("x", value)


def test_pin_refuses_bad_names():
    with pytest.raises(ValueError, match="name"):
        pin("two words", 1.0)



# ------------------------------------------------------------------------------------------
# The numbers scan (fast: no Sphinx build)
# ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, found", [
    ("float32 L2 2D 1st GPT-2 SHA-256 x86-64 top-1 d×d v1.2", []),
    ("a 21.5x gap, 3× more", ["21.5x", "3×"]),
    ("pages 10-20, -0.5, −0.3, +1,200 and 22.5%",
     ["10", "20", "-0.5", "−0.3", "+1,200", "22.5%"]),
    ("T=2, (0.1,0.2), n = 500.", ["2", "0.1", "0.2", "500"]),
    ("a 64-character window, 1e-5", ["64", "1e-5"]),
])
def test_number_tokens(text, found):
    assert [t.text for t in tokens(text)] == found


def test_setting_phrases_are_whitespace_insensitive_and_whole():
    text = "At T =\n2 and at T = 25, alpha=0.1"
    spans = phrase_spans(text, ["T = 2", "alpha = 0.1"])
    covered = [t.text for t in tokens(text) if any(a <= t.start and t.end <= b for a, b in spans)]
    assert covered == ["2", "0.1"]            # not the 25 that starts with "T = 2"
    assert phrase_spans(text, ["t = 2"]) == []  # case-sensitive


def _doctree(rst):
    from docutils.core import publish_doctree
    return publish_doctree(rst, settings_overrides={"report_level": 5})


def test_scan_sees_prose_titles_tables_captions_and_alt_but_not_code_or_display_math():
    tree = _doctree("""
Title 1
=======

Prose 0.25 and ``code 0.5`` and :math:`x_1 + 2 = 0.75`.

.. math:: 0.125

::

    literal 0.5

.. note:: admonition 7

* item 8

=====  =====
cell   9
=====  =====

.. figure:: x.png
   :alt: alt 10

   caption 11
""")
    found = {(f.number, f.kind) for f in scan(tree, ["Title 1"])}
    assert found == {("1", "prose"), ("0.25", "prose"), ("0.75", "math"), ("7", "prose"),
                     ("8", "prose"), ("9", "prose"), ("10", "alt"), ("11", "caption")}
    c = counts(scan(tree, ["Title 1"]))
    assert c == {"found": 8, "pinned": 0, "declared": 1, "quoted": 0, "bare": 7}


def test_a_box_titled_quoted_holds_another_works_numbers_and_only_that_box():
    tree = _doctree("""
.. admonition:: Quoted from the published episode

   They measured 22.5% and 0.4.

.. admonition:: Not quoted

   We measured 0.3.

After the box, 0.6.
""")
    found = {(f.number, f.cls) for f in scan(tree, [])}
    assert found == {("22.5%", "quoted"), ("0.4", "quoted"), ("0.3", "bare"), ("0.6", "bare")}


# ------------------------------------------------------------------------------------------
# The real build, on throwaway books
# ------------------------------------------------------------------------------------------

FRONT = """---
jupytext:
  text_representation:
    extension: .md
    format_name: myst
kernelspec:
  display_name: Python 3
  language: python
  name: python3
mystnb:
  execution_timeout: 60
settings:
  - "T = 2"
  - "ICML 2017"
---
"""

PNG = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5"
       "CYII=")

PAGE = FRONT + """
# A page

```{code-cell} ipython3
from standarderror.book import pin
pin(share=0.2254, count=24576)
pin("gap", -0.00012)
```

The share is {pin}`share=SHARE`, of {pin}`count=24,576` predictions; the gap {pin}`gap=-0.0001`.
At T = 2, as in ICML 2017, nothing moves; `float32 0.3`, GPT-2 and $x_1$ are no numbers.

```{code-cell} ipython3
:mystnb:
:  image:
:    alt: "ALT"
:  figure:
:    caption: "CAPTION"
:    name: fig-share
import base64
from IPython.display import Image
Image(data=base64.b64decode("PNG"))
```
EXTRA
""".replace("PNG", PNG)

SYLLABUS = """# Syllabus

The page finds {pin}`page:share=SHARE` of {pin}`lectures/page:count=24,576` predictions.
EXTRA
"""


def stale_notebook(value: float) -> str:
    """A stored .ipynb that turns execution off and carries a pin() output from another build."""
    glue = {"output_type": "display_data", "data": {
        "application/papermill.record/text/plain": repr(value)},
        "metadata": {"scrapbook": {"name": "old", "mime_prefix": "application/papermill.record/"},
                     "standarderror": {"nonce": "0" * 32, "count": 1}}}
    return json.dumps({"nbformat": 4, "nbformat_minor": 5, "metadata": {
        "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
        "mystnb": {"execution_mode": "off"}}, "cells": [
        {"cell_type": "markdown", "id": "a", "metadata": {}, "source": "# Stale"},
        {"cell_type": "code", "id": "b", "metadata": {}, "execution_count": 1,
         "source": "pin('old', 0.5)", "outputs": [glue]},
        {"cell_type": "markdown", "id": "c", "metadata": {},
         "source": "The old value is {pin}`old=0.5`."}]})


def build(tmp_path, *, share="22.5%", alt="A flat line; the grid stops at T = 2.",
          caption="The share, {pin}`share=22.5%`, at T = 2.", extra="", syllabus_share="22.5%",
          syllabus_extra="", stale=False, strict=True):
    book = tmp_path / "book"
    (book / "book").mkdir(parents=True)
    (book / "lectures").mkdir()
    (book / "_config.yml").write_text((ROOT / "_config.yml").read_text())
    (book / "book" / "references.bib").write_text((ROOT / "book" / "references.bib").read_text())
    shutil.copytree(ROOT / "book" / "_static", book / "book" / "_static")   # html_static_path
    toc = "format: jb-book\nroot: lectures/page\nchapters:\n  - file: book/syllabus\n"
    page = (PAGE.replace("SHARE", share).replace("ALT", alt).replace("CAPTION", caption)
            .replace("EXTRA", extra))
    (book / "lectures" / "page.md").write_text(page)
    (book / "book" / "syllabus.md").write_text(
        SYLLABUS.replace("SHARE", syllabus_share).replace("EXTRA", syllabus_extra))
    if stale:
        (book / "lectures" / "stale.ipynb").write_text(stale_notebook(0.5))
        toc += "  - file: lectures/stale\n"
    (book / "_toc.yml").write_text(toc)
    jb = Path(sys.executable).with_name("jupyter-book")
    args = [str(jb), "build", str(book), "--all"] + (["-W", "--keep-going"] if strict else [])
    return subprocess.run(args, capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_pinned_declared_and_cross_page_quotes_build(tmp_path):
    """Pins in prose and in a caption, declared settings in prose and alt text, and quotes of
    another page's pins: the build passes with -W."""
    r = build(tmp_path)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    html = (tmp_path / "book" / "_build" / "html" / "lectures" / "page.html").read_text()
    assert '<span class="pin">22.5%</span>' in html
    assert "The share, <span class=\"pin\">22.5%</span>, at T = 2." in html   # the caption
    syllabus = (tmp_path / "book" / "_build" / "html" / "book" / "syllabus.html").read_text()
    assert '<span class="pin">24,576</span>' in syllabus


def _problems(r) -> str:
    """The text of the error that fails the build (raised from build-finished)."""
    out = r.stdout + r.stderr
    assert "pin problem(s)" in out, out[-3000:]
    return out[out.index("pin problem(s)"):]


@pytest.mark.slow
def test_every_kind_of_problem_fails_the_build_without_W(tmp_path):
    extra = "\n".join([
        "Our model scores 0.7 on the test.",                            # bare, in prose
        "And {pin}`nothing=0.5`, and {pin}`broken`.",                   # unknown, malformed
        "```{code-cell} ipython3",
        "pin('orphan', 1.5)",                                           # never quoted
        "pin('dup', 1.0)",
        "from myst_nb import glue",
        "glue('plain', 0.5, display=False)",                            # not pin()
        "```",
        "```{code-cell} ipython3",
        "pin('dup', 1.0)",                                              # pinned twice
        "```",
        "Twice {pin}`dup=1.0`; glued {pin}`plain=0.5`.",
        "```{code-cell} ipython3",
        "from IPython.display import display",                          # a stored value:
        "display({'application/papermill.record/text/plain': '0.5'}, raw=True, metadata={",
        "    'scrapbook': {'name': 'cached', 'mime_prefix': 'application/papermill.record/'},",
        "    'standarderror': {'nonce': '0' * 32, 'count': 1}})",          # another build's nonce
        "```",
        "From a cache {pin}`cached=0.5`.",
    ])
    r = build(tmp_path, share="22.6%", alt="A line ending near 0.9.",
              caption="A share of 0.42.", extra=extra, syllabus_share="22.7%",
              syllabus_extra="And {pin}`nowhere:x=1`.", stale=True, strict=False)
    assert r.returncode != 0
    problems = _problems(r)
    expected = [
        "quantity 'share': quoted 22.6%, computed 22.5%",               # drift
        "lectures/page:",                                               # names the page
        "unknown pinned name 'nothing'",
        "malformed pin 'broken'",
        "the code pinned 'orphan' but the prose never quotes it",
        "'dup' was pinned 2 times",
        "'plain' was glued by something other than pin()",
        "the value of 'cached' was not computed by an execution in this build",  # old nonce
        "quote old=0.5: this page was not executed in this build",     # execution_mode off
        "lectures/page.md:",                                            # path:line of numbers
        "bare number 0.7: \"Our model scores 0.7 on the test.\" --",
        "bare number 0.42 in a figure caption",
        "bare number 0.9 in alt text",
        "page:share: quantity 'share': quoted 22.7%, computed 22.5%",  # cross-page drift
        "unknown page 'nowhere'",
    ]
    missing = [e for e in expected if e not in problems]
    assert not missing, (missing, problems[-4000:])
    for fine in ("bare number 2 ", "bare number 2017", "bare number 32", "bare number 1 "):
        assert fine not in problems                                     # declared / not numbers


@pytest.mark.slow
def test_the_command_line_lists_a_pages_bare_numbers(tmp_path):
    page = tmp_path / "lectures" / "page.md"
    page.parent.mkdir()
    (tmp_path / "_config.yml").write_text((ROOT / "_config.yml").read_text())
    page.write_text(PAGE.replace("SHARE", "22.5%").replace("ALT", "Ends near 0.9.")
                    .replace("CAPTION", "Share {pin}`share=22.5%` at T = 2.")
                    .replace("EXTRA", "A bare 0.7."))
    r = subprocess.run([sys.executable, "-m", "standarderror.sphinxext.numbers", str(page)],
                       capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "0.9 (alt)" in r.stdout and "0.7 (prose)" in r.stdout
    assert "lectures/page.md: 9 numbers: 4 pinned, 3 declared, 0 quoted, 2 bare" in r.stdout, r.stdout


def test_the_template_has_no_bare_number():
    """The template shows the conventions; it must pass its own check (fast: no execution)."""
    from standarderror.sphinxext.numbers import _read_pages

    res = _read_pages([ROOT / "lectures" / "_template.md"], ROOT)
    (result,) = res.values()
    findings = result["findings"]
    assert not result["problems"] and not result["unused"], result
    assert findings and not [f for f in findings if f["cls"] == "bare"], findings


def test_scan_reads_the_text_of_raw_html_but_not_its_tags_or_scripts():
    tree = _doctree("""
.. raw:: html

   <p style="width: 300px">measured 0.36</p><script>var x = 0.5;</script>
""")
    assert [f.number for f in scan(tree, [])] == ["0.36"]


def test_api_docstrings_are_skipped_and_table_rows_have_their_lines(tmp_path):
    """Autodoc text comes from the package, not the page; a table's numbers point at their row
    (fast: a throwaway Sphinx read, nothing executed)."""
    from standarderror.sphinxext.numbers import _read_pages

    (tmp_path / "_config.yml").write_text((ROOT / "_config.yml").read_text())
    page = tmp_path / "api.md"
    page.write_text("# API\n\n```{eval-rst}\n.. automodule:: standarderror.book\n"
                    "   :members: check_quote\n```\n\n| a | b |\n|---|---|\n| x | 0.5 |\n")
    (result,) = _read_pages([page], tmp_path).values()
    assert [(f["number"], f["line"]) for f in result["findings"]] == [("0.5", 10)]
