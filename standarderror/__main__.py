"""``python -m standarderror``: see :mod:`standarderror.cli`."""

import sys

from standarderror.cli import main

sys.exit(main())
