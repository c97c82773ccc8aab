"""The front matter of a MyST Markdown notebook page (jupytext's header and the kernel), shared
by the tests that write throwaway pages and books."""

_HEADER = """---
jupytext:
  text_representation:
    extension: .md
    format_name: myst
kernelspec:
  display_name: Python 3
  language: python
  name: python3
"""


def front(extra: str = "") -> str:
    """The front matter, with the YAML lines ``extra`` (each ending in a newline) before its
    closing ``---``."""
    return _HEADER + extra + "---\n"
