"""The lock file (lock.txt): exact versions that satisfy pyproject.toml, installed by setup."""

import os
import re
import tomllib
from importlib.metadata import PackageNotFoundError, version
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
    # setup.sh installs torch first from the lock's line; the floor is set by torch's CVEs.
    assert locked["torch"] >= Version("2.10")
    assert not any(n.startswith("nvidia-") for n in locked), "a CUDA package is locked"


@pytest.mark.skipif(os.environ.get("LOCK") == "0", reason="installed with LOCK=0: the newest")
def test_the_installed_environment_is_the_lock():
    """setup installs the lock (LOCK=1, its default): every locked package installed here has
    its locked version (torch's local label, +cpu, aside)."""
    differ = {}
    for name, locked in lock().items():
        try:
            installed = Version(version(name))
        except PackageNotFoundError:
            continue  # a platform's package (pywin32 ...) or an extra not installed
        if installed.public != locked.public:
            differ[name] = (str(locked), str(installed))
    assert differ == {}, f"installed versions differ from lock.txt (locked, installed): {differ}"
