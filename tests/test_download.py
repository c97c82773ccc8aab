"""The pieces of the site's presentation that need no build: the notebook download's rewriting
(standarderror_book/sphinxext/download.py), the PDF placeholders and list (site.py), and the words
a pinned number's note gives its rule in (pins.py)."""

from __future__ import annotations

import types

import nbformat
import pytest

from standarderror_book.sphinxext import download, site
from standarderror_book.sphinxext.pins import pin_rule

LOOK = dict(
    docname="lectures/ep9",
    titles={"lectures/ep1": "Episode 1: Sets", "lectures/ep9": "Episode 9"},
    sections={"sec-risk": "Where the risk lies"},
    numbered={"thm-a": ("Theorem", "4", ""), "ex-a": ("Exercise", "2", "First try"),
              "ex-b": ("Exercise", "3", "Second try")},
    equations={"eq-a": "7"},
    citations={"guo2017": ("Guo et al.", "2017", "Guo, C. (2017). On Calibration."),
               "vovk2005": ("Vovk et al.", "2005", "Vovk, V. (2005). Algorithmic Learning.")},
)

PAGE = [
    ("markdown", "# Episode 9\n\n(sec-top)=\nAccuracy is {pin}`acc=0.5412`, as {cite:t}`guo2017` "
                 "saw and others did {cite:p}`guo2017,vovk2005`; see {doc}`ep1`, "
                 "{ref}`sec-risk`, {prf:ref}`thm-a`, {eq}`eq-a` and {math}`x^2`.\n"
                 "% a comment\n\n"
                 "````{prf:theorem} Keeps the argmax\n:label: thm-a\n\nBody with\n\n"
                 "```{math}\n:label: eq-a\n\ny = x\n```\n````\n\n"
                 "```{prf:proof}\nBecause.\n```\n\n"
                 "```{admonition} Quoted from a paper\n| a | b |\n|---|---|\n| 1 | 2 |\n```"),
    ("code", "acc = 0.5412\nprint(acc)"),
    ("markdown", "## Exercises\n\n```{exercise} First try\n:label: ex-a\n\nDo it.\n```\n\n"
                 "```{solution-start} ex-a\n:class: dropdown\n```\n\nThe first answer."),
    ("code", "print('solution one')"),
    ("markdown", "Done: {pin}`ep1:cov=90.1%`.\n\n```{solution-end}\n```\n\n"
                 "```{exercise} Second try\n:label: ex-b\n\nAgain.\n```\n\n"
                 "```{solution-start} ex-b\n:class: dropdown\n```\n\nThe second answer.\n\n"
                 "```{solution-end}\n```\n\n## Next\n\nOn to Episode 10."),
    ("code", "print('after')"),
]


def _notebook(page=PAGE):
    nb = nbformat.v4.new_notebook()
    for kind, text in page:
        cell = (nbformat.v4.new_markdown_cell if kind == "markdown" else nbformat.v4.new_code_cell)(text)
        if kind == "code":
            cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=text[-6:] + "\n")]
        nb.cells.append(cell)
    return nb


def test_the_download_is_plain_markdown_with_the_code_unchanged():
    nb = _notebook()
    out = download.plain_notebook(nb, download.Lookup(**LOOK), "How to install: pip.")
    nbformat.validate(out)
    md = [c.source for c in out.cells if c.cell_type == "markdown"]
    text = "\n\n".join(md)
    assert md[0] == "How to install: pip."
    assert "{" + "pin}" not in text and "```{" not in text and "{cite" not in text
    assert "Accuracy is 0.5412, as Guo et al. (2017) saw and others did (Guo et al., 2017; " \
           "Vovk et al., 2005); see *Episode 1: Sets*, Where the risk lies, Theorem 4, (7) and " \
           "$x^2$." in text
    assert "% a comment" not in text and '<a id="sec-top"></a>' in text
    assert "**Theorem 4 (Keeps the argmax).** Body with" in text
    assert "$$\ny = x\n\\tag{7}\n$$" in text
    assert "*Proof.* Because. $\\square$" in text
    assert "> **Quoted from a paper**\n>\n> | a | b |" in text
    assert "Done: 90.1%." in text
    assert text.rstrip().endswith("- Vovk, V. (2005). Algorithmic Learning.")
    # the code cells and their outputs, unchanged, in order
    assert [(c.source, c.outputs) for c in out.cells if c.cell_type == "code"] == [
        (c.source, c.outputs) for c in nb.cells if c.cell_type == "code"]
    # every solution after the last exercise, before what follows the exercises
    order = [i for i, m in enumerate(md) for key in ("**Exercise 2", "**Exercise 3", "## Solutions",
             "**Solution to Exercise 2 (First try).**", "**Solution to Exercise 3 (Second try).**",
             "## Next") if key in m]
    assert order == sorted(order) and len(order) == 6, md
    assert nb.cells[0].source == PAGE[0][1], "the executed notebook was changed"


def test_solutions_stay_in_place_when_code_lies_between_them():
    page = list(PAGE)
    page.insert(4, ("code", "print('between')"))   # between the two solutions, in the open
    page[3] = ("code", "print('solution one')")
    page[4] = ("markdown", "Done.\n\n```{solution-end}\n```\n\nSome prose.")
    page.insert(5, ("code", "print('open code')"))
    page.insert(6, ("markdown", "```{exercise} Second try\n:label: ex-b\n\nAgain.\n```\n\n"
                                "```{solution-start} ex-b\n```\n\nThe second answer.\n\n"
                                "```{solution-end}\n```"))
    page = page[:7]
    out = download.plain_notebook(_notebook(page), download.Lookup(**LOOK), "first")
    text = "\n\n".join(c.source for c in out.cells if c.cell_type == "markdown")
    assert "## Solutions" not in text
    assert text.index("**Solution to Exercise 2") < text.index("**Exercise 3")
    assert [c.source for c in out.cells if c.cell_type == "code"] == [
        t for k, t in page if k == "code"]


def test_the_first_cell_says_how_to_install_from_the_repository():
    cell = download.first_cell("The Book", "Episode 9", "https://example.org/team/repo")
    assert "git clone https://example.org/team/repo\ncd repo\nbash scripts/setup.sh" in cell
    assert ".venv/bin/jupyter lab" in cell and "*Episode 9*" in cell


def test_pdf_links_become_placeholders_and_the_list_names_the_printed_files(tmp_path):
    app = types.SimpleNamespace(builder=types.SimpleNamespace(format="html"))
    body = ('<p><a class="pdf-book-link" href="../pdf/book.pdf" download>book.pdf</a> '
            '<a href="../lectures/ep1.html">ep1</a> <a href="https://x.org/pdf/a.pdf">out</a></p>')
    context = {"body": body}
    site.unlink_pdfs(app, "book/intro", "page.html", context, None)
    assert context["body"] == (
        '<p><a class="pdf-book-link" data-se-href="../pdf/book.pdf" data-se-pdf="book.pdf" '
        'download>book.pdf</a> <a href="../lectures/ep1.html">ep1</a> '
        '<a href="https://x.org/pdf/a.pdf">out</a></p>')
    assert site.write_pdf_manifest(tmp_path) == []
    assert site.read_pdf_manifest(tmp_path) == []
    (tmp_path / "pdf" / "lectures").mkdir(parents=True)
    (tmp_path / "pdf" / "book.pdf").write_bytes(b"%PDF")
    (tmp_path / "pdf" / "lectures" / "ep1.pdf").write_bytes(b"%PDF")
    assert site.write_pdf_manifest(tmp_path) == ["book.pdf", "lectures/ep1.pdf"]
    assert site.read_pdf_manifest(tmp_path) == ["book.pdf", "lectures/ep1.pdf"]


@pytest.mark.parametrize("quoted, raw, words", [
    ("0.5466", "0.54661", "written to 4 decimals, is the quote; the quote keeps a significant "
                          "digit of its distance to 1"),
    ("22.5%", "0.2251", "written as a percentage to 1 decimal, is the quote"),
    ("0.0366", "0.036652", "within 0.05 of a unit of the quote's last digit"),
    ("24,576", "24576", "written to 0 decimals, is the quote"),
])
def test_a_pins_note_names_the_rule_it_was_checked_by(quoted, raw, words):
    assert words in pin_rule(quoted, raw)
