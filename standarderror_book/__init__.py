"""The book's toolkit, apart from the library :mod:`standarderror`.

- :mod:`standarderror_book.page`: what a lecture page imports (``pin``, ``table``,
  ``with_se``, ``reproducibility``); importing it prepares the page's kernel
  (:mod:`standarderror_book.kernel`: codec, warnings filter, allocator, garbage collector).
- :mod:`standarderror_book.sphinxext`: the Sphinx extension (the ``{pin}`` role and its check,
  the number scan, per-page numbering, the site's scripts, the execution status page, the
  notebook downloads), and the number scan's command line
  (``python -m standarderror_book.sphinxext.numbers PAGE.md``).
- :mod:`standarderror_book.glue`, :mod:`standarderror_book.fragility`,
  :mod:`standarderror_book.pdf` and :mod:`standarderror_book.browser`: the bit-identity dump,
  the re-execution of the pages under other CPUs' kernels, the PDF printer and the headless
  browser they share (``scripts/glue.py``, ``scripts/fragility.py``, ``scripts/pdf.py`` run them).

The library never imports this package; this package imports the library.
"""
