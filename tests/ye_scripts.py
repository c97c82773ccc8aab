"""Where the Ye et al. recomputation scripts live (``data/reviews``), and their shared module
``_ye`` imported from there: used by tests/test_ye_reader.py and tests/test_ye_scripts.py."""

from __future__ import annotations

import sys
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parents[1] / "data" / "reviews"


def ye_module():
    """``data/reviews/_ye.py``, imported without leaving its folder on ``sys.path``."""
    sys.path.insert(0, str(SCRIPTS))
    try:
        import _ye
    finally:
        sys.path.remove(str(SCRIPTS))
    return _ye
