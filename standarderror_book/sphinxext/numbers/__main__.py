"""``python -m standarderror_book.sphinxext.numbers PAGE ...``: the command line of :mod:`.cli`."""

from .cli import main

if __name__ == "__main__":
    raise SystemExit(main())
