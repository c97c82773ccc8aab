"""standarderror: uncertainty for language models, measured on a model you hold.

Importing the package, or any of its library subpackages (``uncertainty``, ``spectral``,
``llm``, ``experiments``), changes nothing in the process: no warnings filter, no environment
variable, no allocator or garbage-collector setting, no codec. The set-up the book's pages
run under is the book toolkit's (:mod:`standarderror_book.kernel`, applied by
:mod:`standarderror_book.page`).
"""
__version__ = "0.1.0"
