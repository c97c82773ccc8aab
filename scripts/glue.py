"""Command line of :mod:`standarderror_book.glue` (its docstring says what it does and how)."""

import sys

from standarderror_book.glue import main

sys.exit(main(sys.argv[1:]))
