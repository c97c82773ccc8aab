"""Settings the number scan infers by itself: labels (case-insensitive) and the literals the
page's code binds to a name or passes as a named argument, written beside that name. The trust
rule holds: a computed value, a literal passed by position, a plot's style keyword and a
literal written without its name declare nothing."""

import pytest

from standarderror_book.sphinxext.numbers import inferred_settings, scan
from standarderror_book.sphinxext.numbers.settings import redundant_settings

CODE = """
import numpy as np
from standarderror.uncertainty import coverage as cv
bins = 15
B, C = 8, 5
K, D = 3, len(x)                   # D is computed: declares nothing
size = 16
size = len(x)                      # bound to something computed too: declares nothing
sets = cv.conformal_sets(scores, alpha=0.1, seed=0, temperatures=(0.5, 2.0))
pairs = compare(T=((1.0, 1.3), (1.12, 1.15)), draws=(200, len(x)))  # draws: one is computed
acc = float(np.mean(ok))           # computed
plt.plot(x, y, alpha=0.5, lw=2)    # style: declares nothing
np.quantile(x, 0.9)                # by position: declares nothing
"""


def _doctree(rst):
    from docutils.core import publish_doctree
    from docutils.parsers.rst import roles

    from standarderror_book.sphinxext.pins import scan_only_pin_role

    roles.register_local_role("pin", scan_only_pin_role)
    return publish_doctree(rst, settings_overrides={"report_level": 5})


def _classes(text, phrases=()):
    findings = scan(_doctree(text), list(phrases) + inferred_settings([CODE]), None)
    return {f.number: f.cls for f in findings}


def test_names_and_named_arguments_declare_their_literals_beside_the_name():
    phrases = set(inferred_settings([CODE]))
    assert {"bins = 15", "15 bins", "alpha = 0.1", "seed 0", "seed = 0",
            "temperatures = 0.5", "temperatures 2"} <= phrases
    assert {"B = 8", "C = 5", "K = 3"} <= phrases
    assert {"T = 1.0", "T = 1.3", "T = 1.12", "T = 1.15"} <= phrases
    assert not any("200" in p for p in phrases)
    assert not any(p.startswith("D") for p in phrases)
    assert not any("16" in p for p in phrases)            # size is bound to len(x) too
    assert not any(p.startswith(("lw", "0.5 alpha", "alpha = 0.5")) for p in phrases)
    assert not any("0.9" in p for p in phrases)           # a positional literal


@pytest.mark.parametrize("text, number, cls", [
    ("The ECE with 15 bins is small.", "15", "declared"),
    ("We set bins = 15 here.", "15", "declared"),
    ("At alpha = 0.1 the sets cover.", "0.1", "declared"),
    ("Seed 0 draws the windows.", "0", "declared"),       # a sentence may start with the name
    ("SEED 0 draws the windows.", "0", "bare"),           # otherwise the case is kept
    ("With bins 15 counted.", "15", "declared"),
    ("With seed 0 the windows are drawn.", "0", "declared"),
    ("The accuracy is about 0.5.", "0.5", "bare"),        # the plot's alpha declares nothing
    ("Accuracy 15 in all.", "15", "bare"),                # the literal without its name
    ("The quantile 0.9 is drawn.", "0.9", "bare"),        # passed by position
    ("There are 16 windows.", "16", "bare"),              # a name bound to a computed value
])
def test_a_literal_declares_only_beside_its_name(text, number, cls):
    assert _classes(text)[number] == cls


@pytest.mark.parametrize("text, number", [
    ("As Table 3 shows.", "3"), ("as table 3 shows.", "3"), ("In Episode 2 we saw it.", "2"),
    ("in episode 2 we saw it.", "2"), ("Rows 3 and 9 differ.", "9"), ("See row 1.", "1"),
    ("Lamb et al. (2025) measured it.", "2025"),
])
def test_labels_declare_themselves_in_any_case(text, number):
    assert _classes(text)[number] == "declared"


@pytest.mark.parametrize("text, number", [
    ("Table 0.93 is not a label.", "0.93"), ("The model made 2013 correct answers.", "2013"),
    ("Row 41% is not one.", "41%"),
])
def test_a_measured_number_after_a_label_word_is_no_label(text, number):
    assert _classes(text)[number] == "bare"


def test_a_declared_phrase_the_inference_covers_is_redundant():
    text = "As Table 3 shows, with 15 bins at T = 2 the gap is 0.012."
    page = ["Table 3", "15 bins", "T = 2", "gap is 0.012"]
    code = CODE + "\nT = 2\n"
    inferred = inferred_settings([code])
    tree = _doctree(text)
    with_page = scan(tree, page + inferred, None)
    without = scan(tree, inferred, None)
    # "gap is 0.012" is no literal's: only the page's phrase declares it (and the build
    # refuses that declaration: declaration_problems)
    assert redundant_settings(page, with_page, without, [code]) == ["Table 3", "15 bins", "T = 2"]
    # a phrase that a pin of a typed literal needs stays
    pinned = code + "\npin(t_used=T)\n"
    assert "T = 2" not in redundant_settings(page, with_page, without, [pinned])
