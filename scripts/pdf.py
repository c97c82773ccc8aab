"""Command line of :mod:`standarderror_book.pdf` (its docstring says what it does and how)."""

import sys

from standarderror_book.pdf import main

sys.exit(main(sys.argv[1:]))
