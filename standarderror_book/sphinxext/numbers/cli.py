"""Command line: list a page's numbers without executing it (a throwaway Sphinx read with
execution off; a code cell's figure caption and alt text are rendered through a placeholder
image). ``python -m standarderror_book.sphinxext.numbers PAGE ...``; see
:mod:`standarderror_book.sphinxext.numbers`."""

from __future__ import annotations

from pathlib import Path

from .scanner import Finding, counts, place
from .settings import read_settings

_PNG = (  # a 1x1 transparent PNG: the placeholder output that carries a cell's figure options
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII="
)


def _placeholder_outputs(notebook):
    """No execution: drop per-page execution settings, give figure cells a placeholder image."""
    import nbformat

    meta = notebook.metadata.get("mystnb")
    if isinstance(meta, dict):
        for key in list(meta):
            if key.startswith("execution"):
                meta.pop(key)
    for cell in notebook.cells:
        if cell.cell_type != "code":
            continue
        opts = cell.metadata.get("mystnb") or {}
        if isinstance(opts, dict) and ("figure" in opts or "image" in opts):
            if not any(o.get("output_type") == "display_data" for o in cell.get("outputs", [])):
                cell.outputs = [nbformat.v4.new_output(
                    "display_data", data={"image/png": _PNG, "text/plain": "<Figure>"})]
    return notebook


def _read_pages(pages: list[Path], root: Path) -> dict:
    """Read ``pages`` in a throwaway Sphinx project with execution off; findings per page."""
    import io
    import shutil
    import tempfile

    import myst_nb.core.read as nb_read
    from jupyter_book.config import get_final_config
    from jupyter_book.utils import init_myst_file  # noqa: F401  (jupyter-book is present)
    from sphinx.application import Sphinx
    from sphinx.util.docutils import docutils_namespace, patch_docutils

    from standarderror_book import sphinxext

    original_md, original_ipynb = nb_read.read_myst_markdown_notebook, nb_read.standard_nb_read

    def read_md(*args, **kwargs):
        return _placeholder_outputs(original_md(*args, **kwargs))

    def read_ipynb(text):
        return _placeholder_outputs(original_ipynb(text))

    results = {}
    with tempfile.TemporaryDirectory(prefix="se-numbers-") as tmp:
        src = Path(tmp) / "src"
        src.mkdir()
        shutil.copy(root / "_config.yml", src / "_config.yml")
        bib = root / "book" / "references.bib"
        if bib.is_file():
            (src / "book").mkdir()
            shutil.copy(bib, src / "book" / "references.bib")
        docnames = []
        for page in pages:
            rel = page.resolve().relative_to(root)
            (src / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(page, src / rel)
            docnames.append(str(rel.with_suffix("")))
        toc = "format: jb-book\nroot: " + docnames[0] + "\n"
        if len(docnames) > 1:
            toc += "chapters:\n" + "".join(f"  - file: {d}\n" for d in docnames[1:])
        (src / "_toc.yml").write_text(toc)
        config, _ = get_final_config(
            user_yaml=src / "_config.yml",
            cli_config={"latex_individualpages": False},
            sourcedir=src, use_external_toc=True)
        config.update(nb_execution_mode="off", html_static_path=[], html_extra_path=[])
        nb_read.read_myst_markdown_notebook = read_md
        nb_read.standard_nb_read = read_ipynb
        warnings = io.StringIO()
        try:
            with patch_docutils(src), docutils_namespace():
                app = Sphinx(srcdir=src, confdir=None, outdir=Path(tmp) / "out",
                             doctreedir=Path(tmp) / "doctrees", buildername="dummy",
                             confoverrides=config, status=None, warning=warnings,
                             freshenv=True)
                # no execution, so no computed values: a {pin} quote is only marked as pinned
                app.add_role("pin", sphinxext.scan_only_pin_role, override=True)
                app.builder.read()
                state = sphinxext._state(app.env)
                for page, doc in zip(pages, docnames):
                    rec = state.get(doc, {})
                    results[page] = {"findings": rec.get("numbers", []),
                                     "problems": rec.get("setting_problems", [])
                                     + rec.get("code_problems", []),
                                     "unused": rec.get("unused_settings", []),
                                     "inferred": rec.get("inferred_settings", []),
                                     "redundant": rec.get("redundant_settings", []),
                                     "settings": len(read_settings(page)[0])}
        finally:
            nb_read.read_myst_markdown_notebook = original_md
            nb_read.standard_nb_read = original_ipynb
    return results


def main(argv: list[str] | None = None) -> int:
    import argparse
    import sys
    import time

    parser = argparse.ArgumentParser(
        prog="python -m standarderror_book.sphinxext.numbers",
        description="List the numbers of book pages that are neither pinned nor declared "
                    "(no execution).")
    parser.add_argument("pages", nargs="+", type=Path, help="page sources (.md or .ipynb)")
    parser.add_argument("--all", action="store_true",
                        help="list every number found, not only the bare ones")
    parser.add_argument("--redundant", action="store_true",
                        help="list the front matter's setting phrases that the inference "
                             "covers (each can be deleted: every number it declares is "
                             "declared without it)")
    args = parser.parse_args(argv)
    from . import settings

    settings.WANT_REDUNDANT = args.redundant
    t0 = time.time()
    pages = [p for p in args.pages]
    for p in pages:
        if not p.is_file():
            parser.error(f"no such page: {p}")
    root = _book_root(pages[0])
    results = _read_pages(pages, root)
    total = {"found": 0, "pinned": 0, "declared": 0, "quoted": 0, "recorded": 0,
             "computed": 0, "bare": 0, "settings": 0, "refused": 0}
    failed = False
    for page in pages:
        res = results[page]
        rel = page.resolve().relative_to(root)
        findings = [Finding(**f) for f in res["findings"]]
        for problem in res["problems"]:
            print(f"{rel}: refused: {problem}")
        for f in findings:
            if f.cls == "bare" or args.all:
                tag = "" if f.cls == "bare" else f" [{f.cls}]"
                rule = f" [rule: {f.rule}]" if f.rule else ""
                what = f" {f.why}" if f.why else ""
                print(f"{place(str(rel), f.line)}: {f.number}{tag} ({f.kind}){rule}{what} "
                      f"\"{f.context}\"")
        inferred = {}
        for f in findings:
            if f.phrase in res["inferred"]:
                inferred[f.phrase] = inferred.get(f.phrase, 0) + 1
        if inferred:
            print(f"{rel}: inferred: " + ", ".join(
                f"{p!r} x{n}" if p != settings.LABEL else f"labels x{n}"
                for p, n in sorted(inferred.items())))
        if args.redundant:
            for phrase in res["redundant"]:
                print(f"{rel}: redundant: setting {phrase!r} (the inference declares what it "
                      "declares)")
            print(f"{rel}: {len(res['redundant'])} of {res['settings']} declared setting "
                  "phrases redundant")
        for phrase in res["unused"]:
            print(f"{rel}: note: setting {phrase!r} declares nothing the page's checked text "
                  "shows (its occurrences, if any, are in maths, code or outputs)")
        c = counts(findings)
        c["settings"], c["refused"] = res["settings"], len(res["problems"])
        for k in total:
            total[k] += c[k]
        failed |= c["bare"] > 0 or c["refused"] > 0
        print(f"{rel}: {_summary(c)}")
    if len(pages) > 1:
        print(f"total: {_summary(total)}")
    sys.stdout.flush()
    print(f"({time.time() - t0:.1f} s, nothing executed)", file=sys.stderr)
    return 1 if failed else 0


def _summary(c: dict) -> str:
    return (f"{c['found']} numbers: {c['pinned']} pinned, {c['declared']} declared, "
            f"{c['quoted']} quoted, {c['recorded']} recorded, {c['computed']} computed, "
            f"{c['bare']} bare; {c['settings']} settings, {c['refused']} refused")


def _book_root(page: Path) -> Path:
    for parent in page.resolve().parents:
        if (parent / "_config.yml").is_file():
            return parent
    raise SystemExit(f"no _config.yml above {page}")
