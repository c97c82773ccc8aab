"""The number scan's boxes, pictures and outputs: a Record box that holds results, a Quoted
box that holds our numbers in prose, a picture the build did not draw, a number an output
shows that the code typed, and rarer forms of showing a number. Each is refused, first by the
rule alone (fast), then in the real build of a throwaway book (slow)."""

import pytest
from test_pins import PNG, _doctree, _problems, build

from standarderror_book.sphinxext.numbers import scan, tokens
from standarderror_book.sphinxext.numbers.boxes import ours_problem, record_problem


def _tok(text, number):
    return next(t for t in tokens(text) if t.text == number)


# ------------------------------------------------------------------------------------------
# Boxes
# ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, number", [
    ("The ECE was 0.012 on this machine.", "0.012"),
    ("AUROC 0.87 at 12 s per run.", "0.87"),
    ("a fitted temperature of 1.35", "1.35"),
    ("coverage 90.1% on the test half", "90.1%"),
    ("ratio 0.70, every output the same", "0.70"),
    ("one pin failed (quoted 4.91, computed 4.904)", "4.904"),
    ("the ECE was 3 times the baseline's", "3"),
    ("2013 correct answers", "2013"),
])
def test_a_record_box_refuses_results(text, number):
    assert record_problem(text, _tok(text, number))


@pytest.mark.parametrize("text, number", [
    ("Episode 5 68.1 s; own model 19.8 s", "68.1"),
    ("21.2, 15.1, 16.5 s before", "15.1"),
    ("58.9 to 59.9 s", "58.9"),
    ("tracemalloc peak 0.276 GiB", "0.276"),
    ("about 1.9 times slower", "1.9"),
    ("the batched forward 4.44 times it", "4.44"),
    ("about 1.85 cores now", "1.85"),
    ("the plain loop 42,823 tokens/s", "42,823"),
    ("0.224 s per step", "0.224"),
    ("1,590 passed, 708 tests on 2 workers", "1,590"),
    ("305 of 752 pins moved", "752"),
    ("on 2026-12-03 at 14:00", "14"),
    ("auroc_difference at 1,700 questions: 0.08 s against 0.56 s", "0.08"),
])
def test_a_record_box_holds_times_memory_rates_ratios_counts_and_dates(text, number):
    assert record_problem(text, _tok(text, number)) == ""


@pytest.mark.parametrize("sentence, number, refused", [
    ("They report 0.8, and we measure 0.3.", "0.3", True),
    ("Our model reaches 0.61 on it.", "0.61", True),
    ("On this page the ECE is 0.02.", "0.02", True),
    ("They report 0.8 on their Table 2.", "0.8", False),
    ("As in Episode 3 of ours.", "3", False),        # a label
])
def test_a_quoted_box_refuses_our_numbers_in_prose(sentence, number, refused):
    assert bool(ours_problem(sentence, _tok(sentence, number))) is refused


def test_boxes_in_a_page():
    tree = _doctree("""
.. admonition:: Quoted from a paper [Guo2017]_

   They report 0.8. We measure 0.3 on our model.

   ====================  ========  ========
   quantity              theirs    ours
   ====================  ========  ========
   ECE                   0.05      0.02
   ====================  ========  ========

.. admonition:: Record of a 2-core machine, 2026-12-01

   The build took 388 s and 0.5 GiB; the ECE was 0.012 and the accuracy 0.61.

.. [Guo2017] Guo et al., ICML.
""")
    got = {(f.number, f.cls, f.rule) for f in scan(tree, [])}
    assert ("0.8", "quoted", "") in got                     # theirs
    assert ("0.3", "bare", "boxes") in got                  # ours, in the box's prose
    assert ("0.05", "quoted", "") in got
    assert ("0.02", "bare", "boxes") in got                 # a column headed "ours", unpinned
    assert ("388", "recorded", "") in got and ("0.5", "recorded", "") in got
    assert ("0.012", "bare", "boxes") in got and ("0.61", "bare", "boxes") in got


# ------------------------------------------------------------------------------------------
# Pictures
# ------------------------------------------------------------------------------------------

def test_a_picture_the_build_did_not_draw_needs_a_cited_source():
    tree = _doctree("""
.. figure:: committed.png

   ECE at T = 1, as drawn.

.. figure:: theirs.png

   Their reliability diagram [Guo2017]_.

.. image:: plain.png

.. raw:: html

   <img src="fig.png" alt="a figure">

.. [Guo2017] Guo et al., ICML.
""")
    pictures = [f.number for f in scan(tree, []) if f.rule == "pictures"]
    assert pictures == ["committed.png", "plain.png", "<img>"]


def test_code_that_shows_a_picture_it_did_not_draw_is_refused():
    from standarderror_book.sphinxext.numbers import code_picture_problems

    assert code_picture_problems(["from IPython.display import Image\n"
                                  "Image(filename='figures/ece.png')"])
    assert code_picture_problems(["Image(data=base64.b64decode('iVBORw0KGgo'))"])
    assert code_picture_problems(["path = 'out/ece.svg'\ndisplay(SVG(open(path).read()))"])
    assert not code_picture_problems(["fig.savefig('ece.png')\nImage(data=buf.getvalue())"])


# ------------------------------------------------------------------------------------------
# Outputs: numbers the code typed
# ------------------------------------------------------------------------------------------

def test_numbers_a_cell_shows_from_literals_are_typed():
    from standarderror_book.sphinxext.numbers import is_typed, typed_by_cell

    cells = {0: 's = "ECE 0.012 at T = 1"\nacc = 0.81\nrows = [(0.93, 0.92)]\n'
                'd = {"AUROC": 0.87}\nece = model.ece()',
             1: "display(Markdown(s))",
             2: "print(acc)",
             3: "table(rows, ['a', 'b'])",
             4: "display(HTML(pd.DataFrame(d).to_html()))",
             5: 'print(f"{0.81061:.4f}")',
             6: "print(ece)",
             7: "table([(0.77, 0.66)], ['a', 'b'])"}
    typed = typed_by_cell(cells)
    assert {"0.012", "1"} <= typed[1]
    assert "0.81" in typed[2]
    assert {"0.93", "0.92"} <= typed[3]
    assert "0.87" in typed[4]
    assert is_typed("0.8106", typed[5]) and is_typed("81.06%", typed[5])
    assert not is_typed("0.5", typed[6])                  # ece is computed
    assert {"0.77", "0.66"} <= typed[7]                   # a table of numeric literals
    assert not is_typed("1.00", {"1"})                    # the same number padded, not typed


def test_numbers_drawn_into_a_figure_from_literals_are_refused():
    from standarderror_book.sphinxext.numbers import drawn_problems

    code = ['ece = 0.012\nax.set_title(f"ECE {ece:.3f} at T = 1")\n'
            'ax.plot(x, y, label="AUROC 0.87")\nax.legend()\nplt.title(f"ECE {computed:.3f}")\n'
            'ax.set_xlabel("1 - alpha")\nax.text(0, 0, f"{0.81061:.2f}")']
    problems = drawn_problems(code, [])
    drawn = sorted(p.split()[3] for p in problems)
    assert drawn == ["0.012", "0.81", "0.87"], problems
    assert not drawn_problems(['ax.set_title("coverage at 90% nominal")'], ["90% nominal"])


# ------------------------------------------------------------------------------------------
# Rarer forms
# ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("text, found", [
    ("ECE \u2080.\u2080\u2081\u2082", ["\u2080", "\u2080\u2081\u2082"]),   # subscripts
    ("\u216b runs and \u2460 and \u2473", ["\u216b", "\u2460", "\u2473"]),  # roman, circled
    ("\u2079\u2070 at the start", ["\u2079\u2070"]),
    ("x\u2081 and R\u00b2", []),                                      # an index, an exponent
])
def test_subscript_roman_and_circled_numerals_are_numbers(text, found):
    assert [t.text for t in tokens(text)] == found


def test_rarer_forms_in_a_page_are_scanned():
    tree = _doctree(r"""
.. role:: fake
   :class: pin

Maths :math:`0{.}91` and :math:`0{,}92` and :math:`95\,\%`.

A link `0.93 <https://example.org/0.93>`_ and https://example.org/v0.5 as itself.

A fake pin :fake:`0.94`, a real one :pin:`0.95`.

.. parsed-literal::

   accuracy **0.96**

Reference [R1]_.

.. [R1] A report that measured 0.97.
""")
    got = {(f.number, f.cls) for f in scan(tree, [])}
    assert {("0.91", "bare"), ("0.92", "bare"), ("95%", "bare"), ("0.93", "bare"),
            ("0.94", "bare"), ("0.95", "pinned"), ("0.96", "bare"), ("0.97", "bare")} <= got
    assert not any(n == "0.5" for n, _ in got)        # an address shown as its own link text


def test_a_literalinclude_of_a_results_file_is_read_and_of_code_is_not():
    from docutils import nodes
    from docutils.frontend import get_default_settings
    from docutils.parsers.rst import Parser
    from docutils.utils import new_document

    doc = new_document("page", get_default_settings(Parser))
    doc += nodes.literal_block("ECE 0.012", "ECE 0.012", source="results/ece.json")
    doc += nodes.literal_block("x = 0.5", "x = 0.5", source="standarderror_book/page.py")
    assert [f.number for f in scan(doc, [])] == ["0.012"]


# ------------------------------------------------------------------------------------------
# The real build: each of these built before; each fails it now, named.
# ------------------------------------------------------------------------------------------

ROUND4B = """---
jupytext:
  text_representation:
    format_name: myst
kernelspec:
  display_name: Python 3
  name: python3
mystnb:
  execution_timeout: 60
---
# Round four, the rest

```{code-cell} ipython3
import matplotlib.pyplot as plt
from IPython.display import HTML, Markdown, display
from standarderror_book.page import table
s = "The ECE is 0.0123 here."
acc = 0.8222
d = {"AUROC": [0.8333]}
```

```{code-cell} ipython3
:tags: [remove-input]
print(f"accuracy {0.81061:.4f}")
print(acc)
display(Markdown(s))
table([(0.8444, 0.8555)], ["a", "b"])
display(HTML("<table>" + "".join(f"<tr><td>{k}</td><td>{v[0]}</td></tr>"
                                  for k, v in d.items()) + "</table>"))
```

```{code-cell} ipython3
:tags: [hide-input]
:mystnb:
:  code_prompt_show: "Show how we got 0.8666"
fig, ax = plt.subplots()
ax.plot([0, 1], [0, 1], label="AUROC 0.8777")
ax.set_title("ECE 0.0188 at the fit")
plt.show()
```

```{code-cell} ipython3
import base64
from IPython.display import Image
with open("committed.png", "wb") as f:       # a picture committed beside the page
    f.write(base64.b64decode("PNG"))
Image(filename="committed.png")
```

```{figure} committed.png
ECE at the fit, drawn once.
```

```{admonition} Quoted from a paper, with our number beside it
They report 0.555 {cite}`guo2017calibration`. We measure 0.8999 on our model.
```

Maths $0{.}91$, $0{,}92$ and $95\\,\\%$; press {kbd}`0.93`, type {samp}`score 0.94`, open
{file}`runs/0.95.json`; a [0.96](https://example.org/0.96) link.

```{eval-rst}
.. role:: fake
   :class: pin

A fake pin :fake:`0.97`.

.. parsed-literal::

   accuracy **0.98**
```
"""

ROUND4B = ROUND4B.replace("PNG", PNG)

RECORD = """
```{admonition} Record of a 2-core machine, 2026-12-01
The build took 388 s; the ECE was 0.0321 and the accuracy 0.6543.
```
"""


@pytest.mark.slow
def test_the_fourth_rounds_remaining_holes_fail_the_build(tmp_path):
    r = build(tmp_path, strict=False, pages={"round4b.md": ROUND4B}, syllabus_extra=RECORD)
    assert r.returncode != 0
    problems = _problems(r)
    expected = [
        # 6: boxes
        "0.0321 stands in a clause that names a result ('ECE')",
        "0.6543 stands in a clause that names a result ('accuracy')",
        "a sentence of a Quoted box that speaks of us ('We') holds 0.8999",
        # 4: pictures the build did not draw
        "committed.png",
        "Image(...) shows a picture from a literal of the code",
        "the code names the picture file 'committed.png'",
        # 3: numbers an output shows that the code typed
        "bare number 0.8106 in a code output shown as prose",
        "bare number 0.8222 in a code output shown as prose",
        "bare number 0.0123 in a code output shown as prose",
        "bare number 0.8444 in a code output shown as prose",
        "bare number 0.8333 in a code output shown as prose",
        "the code draws 0.8777 into a figure",
        "the code draws 0.0188 into a figure",
        # 10: rarer forms
        "bare number 0.8666",               # a hidden cell's toggle label
        "bare number 0.91 in maths", "bare number 0.92 in maths", "bare number 95% in maths",
        "bare number 0.93", "bare number 0.94", "bare number 0.95", "bare number 0.96",
        "bare number 0.97", "bare number 0.98",
    ]
    missing = [e for e in expected if e not in problems]
    assert not missing, (missing, problems[-8000:])
    assert "0.555" not in problems                      # the source's number, quoted
