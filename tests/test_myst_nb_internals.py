"""The MyST-NB internals the Sphinx extension replaces or reads at run time exist, in the one
MyST-NB release they were checked against (ARCHITECTURE.md, "MyST-NB internals")."""

import importlib
from importlib.metadata import version

from standarderror_book import sphinxext


def test_myst_nb_is_the_release_the_replacements_were_checked_against():
    installed = version("myst-nb")
    assert installed == sphinxext.MYST_NB_CHECKED, (
        f"myst-nb {installed} is installed, the run-time replacements of "
        f"standarderror_book.sphinxext were checked against {sphinxext.MYST_NB_CHECKED}: read each "
        "one (MYST_NB_REPLACED, MYST_NB_READ) against the new release, then update it")


def test_every_replaced_or_read_internal_exists():
    for module, name, *_ in sphinxext.MYST_NB_REPLACED + sphinxext.MYST_NB_READ:
        target = getattr(importlib.import_module(module), name)
        # a replaced function is either MyST-NB's own or our wrapper of it
        assert callable(target), (module, name)

