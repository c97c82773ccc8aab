"""The optional progress bar of every loop that offers one (tqdm, imported only when shown)."""

from __future__ import annotations


def bar(iterable, label, total: int | None = None):
    """``iterable`` itself when ``label`` is falsy (``False``, ``None``, ``""``); otherwise a
    tqdm bar over it, described by ``str(label)``, that leaves no line behind. It changes
    nothing the loop computes."""
    if not label:
        return iterable
    from tqdm.auto import tqdm

    return tqdm(iterable, total=total, desc=str(label), leave=False)
