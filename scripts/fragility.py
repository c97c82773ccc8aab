"""Command line of :mod:`standarderror_book.fragility` (its docstring says what it does and how)."""

import sys

from standarderror_book.fragility import main

sys.exit(main(sys.argv[1:]))
