"""Pins: a quote is checked against the computed value at the precision written, and a
drifted, unknown, unquoted or malformed pin fails the real `jupyter-book build`."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from standarderror.book import check_quote, parse_quote, pin, render

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


PAGE = """---
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
---

# A page

```{{code-cell}} ipython3
from standarderror.book import pin
pin("share", 0.2254)
pin("count", 24576)
pin("gap", -0.00012)
```

The share is {{pin}}`share={share}`, of {{pin}}`count={count}` predictions; the gap {{pin}}`gap=-0.0001`.
{extra}
"""


def build(tmp_path, **fmt):
    book = tmp_path / "book"
    (book / "book").mkdir(parents=True)
    (book / "_config.yml").write_text((ROOT / "_config.yml").read_text())
    (book / "book" / "references.bib").write_text((ROOT / "book" / "references.bib").read_text())
    shutil.copytree(ROOT / "book" / "_static", book / "book" / "_static")   # html_static_path
    (book / "_toc.yml").write_text("format: jb-book\nroot: page\n")
    (book / "page.md").write_text(PAGE.format(**{"share": "22.5%", "count": "24,576", "extra": "", **fmt}))
    jb = Path(sys.executable).with_name("jupyter-book")
    return subprocess.run([str(jb), "build", str(book), "--all", "-W", "--keep-going"],
                          capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_unchanged_quotes_build(tmp_path):
    r = build(tmp_path)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    html = (tmp_path / "book" / "_build" / "html" / "page.html").read_text()
    assert '<span class="pin">22.5%</span>' in html


@pytest.mark.slow
def test_drifted_unknown_unquoted_and_malformed_pins_fail_the_build(tmp_path):
    r = build(tmp_path, share="22.6%", count="24,576",
              extra="And {pin}`nothing=0.5`, and {pin}`broken`.")
    out = r.stdout + r.stderr
    assert r.returncode != 0
    assert "quantity 'share': quoted 22.6%, computed 22.5%" in out
    assert "page:" in out                                   # names the page
    assert "unknown pinned name 'nothing'" in out
    assert "malformed pin 'broken'" in out


@pytest.mark.slow
def test_a_pinned_value_nobody_quotes_fails_the_build(tmp_path):
    r = build(tmp_path, extra="```{code-cell} ipython3\npin('orphan', 1.5)\n```\n")
    out = r.stdout + r.stderr
    assert r.returncode != 0
    assert "the code pinned 'orphan' but the prose never quotes it" in out
