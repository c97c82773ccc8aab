"""Turn ``pip freeze`` output into lock.txt (used by scripts/lock.sh).

Keeps ``name==version`` lines, sorted by name; drops a local version label (``+cpu``), so that
``torch==2.13.0`` is satisfied by the CPU build here and by the plain wheel on macOS (PEP 440:
a version without a label matches any label); heads the file with how it was made.
"""

import platform
import re
import sys

lines = []
for raw in open(sys.argv[1]):
    raw = raw.strip()
    m = re.fullmatch(r"([A-Za-z0-9_.\-]+)==([^\s;+]+)(\+[^\s;]+)?", raw)
    if m is None:
        if raw and not raw.startswith("#"):
            sys.exit(f"lock_format: not a name==version line: {raw!r}")
        continue
    lines.append(f"{m.group(1)}=={m.group(2)}")
print(f"""\
# The lock: the exact version of every package that standarderror[book,test,serve] installs, the
# versions the book's quoted numbers were measured with. A pip constraints file: scripts/setup.sh
# installs with `pip install -c lock.txt -e ".[book,test,serve]"` (LOCK=0: the newest releases
# instead). A constraint only limits a version and never installs a package by itself, so a
# line that another platform does not need is harmless. Written by scripts/lock.sh from a clean
# install (Python {platform.python_version()}, {platform.system()} {platform.machine()});
# do not edit by hand.""")
print("\n".join(sorted(lines, key=lambda s: s.lower())))
