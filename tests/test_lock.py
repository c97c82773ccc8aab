"""The lock file (lock.txt): exact versions that satisfy pyproject.toml, installed by setup."""

import re
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
LINE = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)$")


def lock() -> dict[str, Version]:
    out = {}
    for line in (ROOT / "lock.txt").read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        m = LINE.match(line)
        assert m, f"lock.txt: not an exact name==version line: {line!r}"
        name = canonicalize_name(m.group(1))
        assert name not in out, f"lock.txt: {name} locked twice"
        out[name] = Version(m.group(2))
    return out


def requirements() -> list[tuple[str, Requirement]]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = [("dependencies", r) for r in project["dependencies"]]
    # The extras setup.sh installs, and [hf], which [test] includes anyway.
    for extra in ("book", "test", "hf"):
        reqs += [(f"[{extra}]", r) for r in project["optional-dependencies"][extra]]
    return [(where, Requirement(r)) for where, r in reqs]


@pytest.mark.parametrize("where, req", requirements(), ids=lambda x: str(x))
def test_lock_satisfies_pyproject(where, req):
    if req.marker is not None and not req.marker.evaluate():
        pytest.skip(f"{req} does not apply here")
    locked = lock()
    name = canonicalize_name(req.name)
    assert name in locked, f"{where}: {req} is not in lock.txt"
    assert req.specifier.contains(locked[name], prereleases=True), (
        f"{where}: lock.txt has {req.name}=={locked[name]}, outside {req}")


def test_lock_has_no_local_versions_and_torch_is_the_cpu_release():
    locked = lock()
    assert all(v.local is None for v in locked.values()), "a local label (+cpu) in lock.txt"
    # setup.sh installs torch first from the lock's line; the floor of issue 22 (CVEs).
    assert locked["torch"] >= Version("2.10")
    assert not any(n.startswith("nvidia-") for n in locked), "a CUDA package is locked"


def test_setup_installs_from_the_lock_by_default():
    setup = (ROOT / "scripts" / "setup.sh").read_text()
    assert 'LOCK=${LOCK:-1}' in setup
    # both installers, uv and the pip it falls back to, install the lock's versions
    assert setup.count('-c "$LOCKFILE" -e ".[$EXTRAS]"') == 2 and 'EXTRAS=${EXTRAS:-book,test,serve}' in setup
    assert 'uv pip install -q --compile-bytecode --python .venv/bin/python' in setup
    assert "LOCKFILE=lock.txt" in setup
