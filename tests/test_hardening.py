"""Hardening (issue 12): import side effects, silent wrong answers, one name one meaning."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest


def test_unknown_codec_raises_lookup_error_after_import():
    """``future-typing``'s .pth hook makes every codec name resolve; importing standarderror
    undoes it, in a fresh interpreter of this environment."""
    code = (
        "import codecs\n"
        "import standarderror\n"
        "try:\n"
        "    codecs.lookup('no-such-codec-xyz')\n"
        "except LookupError:\n"
        "    print('LookupError')\n"
        "else:\n"
        "    print('resolved')\n"
        "print(codecs.lookup('utf-8').name)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, check=True).stdout.split()
    assert out == ["LookupError", "utf-8"]
