"""The GitHub Actions workflow (``.github/workflows/book.yml``): it runs the README's two
commands, exactly, keeps the site and the PDF, publishes the site from main only, and is a valid
workflow by GitHub's schema (checked offline by ``check-jsonschema``'s vendored copy)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
WORKFLOW = ROOT / ".github" / "workflows" / "book.yml"
#: Commands a workflow step may run besides the README's two: installing what the README says
#: the site test and the PDF need (Debian's browser and poppler-utils).
PREREQUISITES = ("bash scripts/setup_browser.sh",)


def readme_commands() -> list[str]:
    """The commands of the README's "Two commands" block, without their comments."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = re.search(r"^## Two commands\n(.*?)^## ", text, re.S | re.M)
    assert section, "README.md has no '## Two commands' section"
    block = re.search(r"```bash\n(.*?)```", section.group(1), re.S)
    assert block, "the README's 'Two commands' section has no bash block"
    commands = [line.split("#", 1)[0].strip() for line in block.group(1).splitlines()]
    return [c for c in commands if c]


def workflow() -> dict:
    data = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    # YAML 1.1 reads the key `on` as True
    if True in data and "on" not in data:
        data["on"] = data.pop(True)
    return data


def _runs(job: dict) -> list[str]:
    return [" ".join(step["run"].split()) for step in job.get("steps", []) if "run" in step]


def test_the_readme_names_two_commands():
    assert readme_commands() == ["bash scripts/book.sh", "bash scripts/test.sh"]


def test_the_workflow_runs_exactly_the_readme_commands():
    """Every command the workflow runs is one of the README's two, in the README's order, each
    once and as written (no argument, no environment of the step's or the job's), or the
    browser's installation the README names; the build job runs both."""
    wf = workflow()
    commands = readme_commands()
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for prerequisite in PREREQUISITES:
        assert prerequisite in readme, f"the README does not name {prerequisite!r}"
    ran = []
    for name, job in wf["jobs"].items():
        runs = _runs(job)
        others = [r for r in runs if r not in commands and r not in PREREQUISITES]
        assert not others, f"job {name!r} runs commands the README does not: {others}"
        assert "env" not in job, f"job {name!r} sets an environment: {job['env']}"
        for step in job.get("steps", []):
            if step.get("run") is not None and " ".join(step["run"].split()) in commands:
                assert "env" not in step, f"step {step.get('name')!r} sets {step['env']}"
        ran += [r for r in runs if r in commands]
    assert "env" not in wf, f"the workflow sets an environment: {wf['env']}"
    assert ran == commands, f"the workflow runs {ran}; the README's commands are {commands}"


def test_the_workflow_runs_on_push_and_pull_request_and_publishes_from_main_only():
    wf = workflow()
    assert {"push", "pull_request"} <= set(wf["on"]), f"triggers: {wf['on']}"
    deploys = {name: job for name, job in wf["jobs"].items()
               if any("deploy-pages" in step.get("uses", "") for step in job.get("steps", []))}
    assert deploys, "no job publishes to GitHub Pages (actions/deploy-pages)"
    main_only = "github.event_name == 'push' && github.ref == 'refs/heads/main'"
    for name, job in deploys.items():
        assert job.get("if") == main_only, f"job {name!r} publishes when: {job.get('if')!r}"
        assert job.get("permissions") == {"pages": "write", "id-token": "write"}, name
    build = next(job for job in wf["jobs"].values() if "bash scripts/book.sh" in _runs(job))
    steps = build["steps"]
    pages = [s for s in steps if "upload-pages-artifact" in s.get("uses", "")]
    assert pages and pages[0].get("if") == main_only and pages[0]["with"]["path"] == "_build/html"
    assert wf.get("permissions") == {"contents": "read"}


def test_the_workflow_caches_the_venv_and_keeps_the_site_and_the_pdf():
    build = next(job for job in workflow()["jobs"].values()
                 if "bash scripts/book.sh" in _runs(job))
    steps = build["steps"]
    cache = [s for s in steps if s.get("uses", "").startswith("actions/cache@")]
    assert cache, "no actions/cache step"
    paths = cache[0]["with"]["path"].split()
    assert ".venv" in paths and "~/.cache/pip" in paths, paths
    assert "hashFiles('lock.txt'" in cache[0]["with"]["key"], cache[0]["with"]["key"]
    order = [s.get("run", s.get("uses", "")) for s in steps]
    assert order.index(cache and cache[0]["uses"]) < order.index("bash scripts/book.sh")
    kept = {s["with"]["path"]: s["with"].get("if-no-files-found") for s in steps
            if s.get("uses", "").startswith("actions/upload-artifact@")}
    assert kept == {"_build/html": "error", "_build/pdf": "error"}, kept
    book = order.index("bash scripts/book.sh")
    browser = order.index("bash scripts/setup_browser.sh")
    assert browser < book, "the browser is installed after the book: no PDF would be printed"


def _check_jsonschema(path: Path) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).with_name("check-jsonschema")
    if not exe.is_file():
        pytest.fail("check-jsonschema is not installed (it is in the test extra; scripts/setup.sh "
                    "installs it at lock.txt's version)")
    return subprocess.run([str(exe), "--builtin-schema", "vendor.github-workflows", str(path)],
                          capture_output=True, text=True, timeout=120)


@pytest.mark.slow  # a fresh interpreter (check-jsonschema)
def test_the_workflow_is_valid_by_githubs_schema(tmp_path):
    """``check-jsonschema --builtin-schema vendor.github-workflows``: the schema ships inside
    the package, so nothing is fetched. The same check refuses a broken copy (a step that both
    runs a command and uses an action), so a pass is a real check."""
    good = _check_jsonschema(WORKFLOW)
    assert good.returncode == 0, good.stdout + good.stderr
    broken = tmp_path / "broken.yml"
    broken.write_text(WORKFLOW.read_text(encoding="utf-8").replace(
        "        run: bash scripts/book.sh\n",
        "        run: bash scripts/book.sh\n        uses: actions/checkout@v4\n", 1))
    assert broken.read_text() != WORKFLOW.read_text()
    bad = _check_jsonschema(broken)
    assert bad.returncode != 0, "check-jsonschema accepted a step with both run and uses"
