"""The built website, tested as a reader meets it: in a real (headless) browser, offline.

The book must be built first (``bash scripts/book.sh``, which writes ``_build/html``). A local
HTTP server serves that folder on 127.0.0.1 and Debian's Chromium, driven through Selenium and
the system chromedriver, visits every page with every route to the outside world closed (no
DNS, a proxy to nowhere). On every page it checks what a reader would notice:

* the browser console shows no errors, and no request for a local file fails;
* every image in the article has alt text and actually loaded;
* every formula is typeset by the vendored MathJax (no CDN) without a TeX error;
* every lecture page shows its executed outputs and its reproducibility block, and offers the
  executed notebook as an ``.ipynb`` download that is a valid notebook with outputs;
* notebook figures are opaque (a white card), so they stay legible in the dark theme;
* the search page finds pages;
* every solution (sphinx-exercise) is collapsed on load and opens on a click on its toggle;
* every exercise and theorem-like block (sphinx-proof) has a number, and every link that names
  one names that number; every cross-reference, followed as a reader does (a click within the
  page, an arrival with the #fragment from another), brings its target into view, visible and
  not under the sticky header;
* no code line and no printed output line runs past the column (``scrollWidth`` of each
  ``<pre>`` against its ``clientWidth``, every solution opened, at ``COLUMN_WINDOW``), and
  no page is wider than a phone's screen (``NARROW_WINDOW``);

A screenshot of every page lands in ``_build/screenshots/`` (plus a light and a dark one of a
lecture figure). Tests that need no browser check that every relative link and ``#anchor`` of
every page resolves, that the previous/next links walk the whole book, and that every public
module of the package has an API page. The last tests start ``jupyter lab`` on the repository
(127.0.0.1 only): it serves every lecture as a notebook through jupytext, and in Chromium a
double click on ``lectures/ep3_temperature.md`` opens a notebook whose Markdown (jupyterlab-myst
and the book's pin extension) shows each pinned number and whose first cells run from the UI;
the page's ``.ipynb`` download opens and runs the same way; a save keeps a lecture's content.

Where it runs: skipped, with the reason, when ``_build/html`` does not exist, or when the
browser or Selenium is missing (``bash scripts/setup_browser.sh`` installs the browser) -- except
with ``SITE_REQUIRED=1``, where each of these is a failure. ``.ci/run`` builds the book, installs
the browser, and then runs the README's test command with ``SITE_REQUIRED=1``.
``SITE_HTML=/path/to/html`` tests another build.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import time
import urllib.parse
import urllib.request
from html.parser import HTMLParser
from pathlib import Path

import pytest

from standarderror_book.browser import Unavailable, chromium, serve

ROOT = Path(__file__).resolve().parents[1]
SITE = Path(os.environ.get("SITE_HTML", ROOT / "_build" / "html"))
SHOTS = SITE.parent / "screenshots"
REQUIRED = os.environ.get("SITE_REQUIRED", "").strip().lower() not in ("", "0", "false", "no")

# Words a reader would search for; each must find at least one page.
SEARCH_WORDS = ("calibration", "temperature")


def _unavailable(reason: str):
    """Skip with the reason; fail when SITE_REQUIRED is set (CI's site step, after the build)."""
    if REQUIRED:
        pytest.fail(f"{reason} (SITE_REQUIRED is set, so this is a failure: .ci/run builds the "
                    "book and installs the browser before running tests/test_site.py)")
    pytest.skip(reason)


def _require_site():
    if not (SITE / "index.html").is_file():
        _unavailable(f"no built site at {SITE}: build it with `bash scripts/book.sh` first")


def site_pages() -> list[str]:
    """Every HTML page of the built site, relative to its root, in a stable order.

    Skipped: ``_static/`` (the theme's webpack template fragments, not pages) and ``_sources/``
    (copies of the sources, not HTML pages).
    """
    pages = []
    for p in sorted(SITE.rglob("*.html")):
        rel = p.relative_to(SITE).as_posix()
        if rel.startswith(("_static/", "_sources/", "_images/")):
            continue
        pages.append(rel)
    return pages


def is_lecture(page: str) -> bool:
    """Pages that are executed notebooks a reader runs: the lectures and the model page."""
    return page.startswith("lectures/") or page == "book/model.html"


# --------------------------------------------------------------------------------------------
# Links: no browser needed


class _Links(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.refs: list[tuple[str, str]] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        for key in ("id", "name") if tag == "a" else ("id",):
            if a.get(key):
                self.ids.add(a[key])
        for key in ("href", "src"):
            if a.get(key) is not None and tag in ("a", "link", "script", "img", "source", "iframe"):
                self.refs.append((tag, a[key]))


def _parse(path: Path) -> _Links:
    parser = _Links()
    parser.feed(path.read_text(encoding="utf-8", errors="replace"))
    return parser


def test_every_relative_link_and_anchor_resolves():
    """Every relative href/src of every page points to a file of the site, and every
    ``page.html#anchor`` to an id on that page (external links are not fetched: no network).
    A printed PDF is no exception: the build links none (its links wait as placeholders for
    ``bash scripts/pdf.sh``); links a page's scripts add are followed in the browser
    (``test_every_link_a_reader_can_follow_answers``)."""
    _require_site()
    pages = site_pages()
    parsed = {page: _parse(SITE / page) for page in pages}
    broken, checked = [], 0
    for page, links in parsed.items():
        for tag, ref in links.refs:
            url = urllib.parse.urlsplit(ref)
            if url.scheme or url.netloc or ref.startswith(("mailto:", "javascript:", "data:")):
                continue
            if not url.path and not url.fragment:
                continue
            checked += 1
            target = (SITE / page).parent / urllib.parse.unquote(url.path) if url.path else SITE / page
            target = Path(os.path.normpath(target))
            if url.path.endswith("/") or target.is_dir():
                target = target / "index.html"
            if SITE.resolve() not in target.resolve().parents and target.resolve() != SITE.resolve():
                broken.append(f"{page}: <{tag}> {ref} leaves the site")
                continue
            if not target.is_file():
                broken.append(f"{page}: <{tag}> {ref} -> missing {target.relative_to(SITE)}")
                continue
            frag = urllib.parse.unquote(url.fragment)
            if frag and target.suffix == ".html":
                rel = target.relative_to(SITE).as_posix()
                ids = parsed[rel].ids if rel in parsed else _parse(target).ids
                if frag not in ids:
                    broken.append(f"{page}: <{tag}> {ref} -> no id {frag!r} in {rel}")
    assert checked > 0, "no relative links found: is the site empty?"
    assert not broken, f"{len(broken)} broken link(s):\n  " + "\n  ".join(broken)


# Pages Sphinx writes that are not part of the reading order (and sphinx.ext.viewcode's pages
# of highlighted source, under _modules/).
# Generated indexes (Sphinx's, and sphinx-proof's index of theorems, prf-prf.html) are not
# chapters of the book.
NOT_IN_READING_ORDER = {"index.html", "genindex.html", "py-modindex.html", "search.html",
                        "prf-prf.html"}


def _prev_next(page: str) -> dict:
    html = (SITE / page).read_text(encoding="utf-8")
    found = {}
    for kind in ("left-prev", "right-next"):
        m = re.search(rf'<a class="{kind}"\s+href="([^"]+)"', html)
        if m:
            target = os.path.normpath((Path(page).parent / m.group(1).split("#")[0]).as_posix())
            found[kind] = Path(target).as_posix()
    return found


def test_previous_next_links_walk_the_whole_book():
    """From the landing page, the theme's "next" links visit every page of the book exactly once,
    and each page's "previous" link leads back: a reader can read the book front to back."""
    _require_site()
    pages = [p for p in site_pages() if p not in NOT_IN_READING_ORDER
             and not p.startswith("_modules/")]  # viewcode's highlighted source, not chapters
    start = "book/intro.html"
    assert start in pages, f"no landing page {start}"
    order, page = [], start
    while page is not None:
        assert page not in order, f"the next links loop back to {page}: {' -> '.join(order)}"
        order.append(page)
        links = _prev_next(page)
        nxt = links.get("right-next")
        if nxt is not None:
            assert _prev_next(nxt).get("left-prev") == page, (
                f"{nxt}: previous link does not lead back to {page}")
        page = nxt
    missed = sorted(set(pages) - set(order))
    assert not missed, f"pages the next links never reach: {missed} (reading order: {order})"


# Modules that are build machinery, not an API a lecture or a reader calls.
NOT_IN_API = {"standarderror_book.sphinxext", "standarderror_book.sphinxext.ahead",
              "standarderror_book.sphinxext.numbers", "standarderror_book.sphinxext.pins",
              "standarderror_book.sphinxext.site", "standarderror_book.sphinxext.download",
              "standarderror_book.sphinxext.status", "standarderror_book.sphinxext.numbering",
              *(f"standarderror_book.sphinxext.numbers.{m}"
                for m in ("tokenizer", "settings", "doctree", "scanner", "cli", "configtext",
                          "boxes", "pictures", "codetext"))}


def public_modules() -> list[str]:
    """Every public module of the package (no package ``__init__``s, nothing private)."""
    import pkgutil

    import standarderror

    names = []
    for info in pkgutil.walk_packages(standarderror.__path__, "standarderror."):
        if info.ispkg or any(part.startswith("_") for part in info.name.split(".")):
            continue
        if info.name not in NOT_IN_API:
            names.append(info.name)
    return sorted(names)


def test_every_public_module_has_an_api_page():
    """The API reference covers every public module of the package (so it cannot go stale
    when a module is added), and every page documents at least one function or class."""
    _require_site()
    documented = {}
    for path in sorted((SITE / "book" / "api").glob("*.html")):
        html = path.read_text(encoding="utf-8")
        for module in re.findall(r'id="module-([\w.]+)"', html):
            documented[module] = (path.relative_to(SITE).as_posix(), html.count('class="sig sig-object py"'))
    modules = public_modules()
    assert modules, "found no public module in the package"
    missing = [m for m in modules if m not in documented]
    empty = [f"{m} ({documented[m][0]})" for m in modules if m in documented and documented[m][1] == 0]
    assert not missing, ("public modules with no API page (add book/api/<name>.md and list it under "
                         "the API reference in _toc.yml): " + ", ".join(missing))
    assert not empty, "API pages that document no function or class: " + ", ".join(empty)


def test_api_pages_link_the_source_they_document():
    """sphinx.ext.viewcode: every API page links, beside what it documents, the highlighted
    source on the site (``_modules/``), at the object's own anchor; every such page exists."""
    _require_site()
    problems, links = [], 0
    for path in sorted((SITE / "book" / "api").glob("*.html")):
        html = path.read_text(encoding="utf-8")
        found = re.findall(r'<a [^>]*href="([^"]*_modules/[^"]+)"[^>]*><span class="viewcode-link">',
                           html)
        if not found:
            problems.append(f"{path.relative_to(SITE)}: no [source] link")
        for href in found:
            links += 1
            url = urllib.parse.urlsplit(href)
            target = Path(os.path.normpath(path.parent / urllib.parse.unquote(url.path)))
            if not target.is_file() or url.fragment not in _parse(target).ids:
                problems.append(f"{path.relative_to(SITE)}: {href} leads nowhere")
    assert links > 50, f"only {links} [source] links on the API pages"
    assert not problems, "\n".join(problems)


def _repository() -> dict:
    import yaml

    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    return config.get("repository") or {}


def test_the_repository_url_is_written_only_in_the_config():
    """The repository's URL has one home, ``repository.url`` in ``_config.yml``: no other file
    of the repository writes it (the theme's buttons and the notebook downloads read it)."""
    url = (_repository().get("url") or "").rstrip("/")
    assert url.startswith("https://"), f"_config.yml gives no repository url: {url!r}"
    suffixes = {".md", ".py", ".toml", ".yml", ".yaml", ".sh", ".txt", ".js", ".json", ".cfg",
                ".css", ".html", ".bib", ".ipynb"}
    found = []
    for folder, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if not d.startswith((".", "_build")) and d != "node_modules"
                   or d in (".github", ".ci")]
        for name in files:
            path = Path(folder) / name
            if path.suffix in suffixes or folder.endswith(".ci"):
                try:
                    text = path.read_text(encoding="utf-8")
                except (OSError, UnicodeDecodeError):
                    continue
                if url in text and path != ROOT / "_config.yml":
                    found.append(path.relative_to(ROOT).as_posix())
    assert not found, f"the repository URL is written outside _config.yml: {found}"


def test_the_theme_buttons_lead_to_the_repository():
    """The theme's repository, issue and edit buttons on a page lead to the repository of
    ``_config.yml``, the edit button to that page's own source on the configured branch."""
    _require_site()
    repo = _repository()
    url = repo["url"].rstrip("/")
    page = "lectures/ep3_temperature"
    html = (SITE / f"{page}.html").read_text(encoding="utf-8")

    def button(kind: str) -> str | None:
        m = re.search(rf'<a href="([^"]+)"[^>]*class="[^"]*btn-source-{kind}-button', html)
        return m.group(1) if m else None

    assert button("repository") == url, button("repository")
    assert (button("issues") or "").startswith(url + "/issues"), button("issues")
    folder = (repo.get("path_to_book") or "").strip("/")
    edit = f"{url}/edit/{repo.get('branch', 'main')}/{folder + '/' if folder else ''}{page}.md"
    assert button("edit") == edit, button("edit")


def test_the_execution_status_page_lists_every_notebook_page():
    """The build writes the execution-status page (``{se-execution-status}``): a Record box
    with the build's date and machine, and one row per notebook page of the site, each
    executed in this build with every pin checked, its time and its counts."""
    _require_site()
    html = (SITE / "book" / "execution.html").read_text(encoding="utf-8")
    assert "Record of this build&#8217;s execution" in html or \
        "Record of this build's execution" in html, "no Record box on the status page"
    assert "Machine: " in html and "OMP_NUM_THREADS=" in html
    executed = SITE.parent / "jupyter_execute"  # every notebook page the build executed
    notebooks = sorted(p.relative_to(executed).with_suffix("").as_posix()
                       for p in executed.rglob("*.ipynb"))
    assert notebooks, f"no executed notebook in {executed}"
    rows = {name: cls for cls, name in re.findall(r'<tr class="([^"]*)" id="status-([\w-]+)"', html)}
    assert sorted(rows) == sorted(Path(p).name for p in notebooks), rows
    failed = [name for name, cls in rows.items() if "se-status-ok" not in cls]
    assert not failed, f"pages not executed and checked in this build: {failed}"
    linked = {os.path.normpath(f"book/{href}") for href in re.findall(r'href="([^"#]+)"', html)}
    for page in notebooks:
        assert f"{page}.html" in linked, f"the status page does not link {page}"


def test_numbers_restart_with_each_page():
    """Figures, tables, equations, theorems and exercises are numbered per page (N.1, N.2, ...):
    every numbered object of a page carries the page's number N, each kind counts from N.1 in
    the page's order, and Episode k's number is k (the model page, the first page with a
    numbered object, is 0)."""
    _require_site()
    problems, chapters = [], {}
    for page in site_pages():
        html = (SITE / page).read_text(encoding="utf-8")
        found = re.findall(r'<span class="caption-number">([A-Z][a-z.]*) (\d+)\.(\d+) </span>',
                           html)
        found += [("equation", a, b) for a, b in re.findall(r'class="eqno">\((\d+)\.(\d+)\)',
                                                             html)]
        bare = re.findall(r'<span class="caption-number">[A-Z][a-z.]* \d+ </span>|'
                          r'class="eqno">\(\d+\)', html)
        if bare:
            problems.append(f"{page}: numbers without the page's number: {bare[:3]}")
        if not found:
            continue
        numbers = {int(a) for _, a, _ in found}
        if len(numbers) != 1:
            problems.append(f"{page}: numbered under several page numbers {sorted(numbers)}")
        chapters[page] = numbers.pop()
        for kind in {k for k, _, _ in found}:
            seq = [int(b) for k, _, b in found if k == kind]
            if sorted(seq) != list(range(1, len(seq) + 1)):
                problems.append(f"{page}: {kind} numbered {seq}, not 1, 2, ...")
    for k in range(1, 6):
        page = next((p for p in chapters if re.search(rf"lectures/ep{k}_", p)), None)
        if page is None or chapters[page] != k:
            problems.append(f"Episode {k} is numbered {chapters.get(page)}, not {k}")
    assert not problems, "\n".join(problems)
    ep3 = (SITE / next(p for p in chapters if "ep3_" in p)).read_text(encoding="utf-8")
    assert '<span class="caption-number">Theorem 3.1 </span>' in ep3


def test_every_notebook_download_reads_well_in_a_plain_renderer():
    """Each page's ``.ipynb`` download is its executed notebook, written for a renderer without
    the book's extensions: a first cell on how to install and run it; no MyST role or
    directive left; every pinned quote of the page's source shown as its number; citations as
    author-year text with a References cell; every solution after the last exercise; the code
    cells exactly the page's, in its order, with the build's outputs."""
    import jupytext
    import nbformat

    _require_site()
    problems = []
    pages = [p[:-5] for p in site_pages() if is_lecture(p)]
    assert pages, "no notebook page on the site"
    for page in pages:
        nb = nbformat.read(SITE / "_sources" / f"{page}.ipynb", as_version=4)
        nbformat.validate(nb)
        first = nb.cells[0]
        if first.cell_type != "markdown" or not all(
                w in first.source for w in ("git clone", "bash scripts/setup.sh", "jupyter lab")):
            problems.append(f"{page}: the first cell does not say how to install and run it")
        markdown = [c.source for c in nb.cells if c.cell_type == "markdown"]
        text = "\n\n".join(markdown)
        left = re.findall(r"\{[\w:-]+\}`[^`]*`|^\s*(?:`{3,}|:{3,})\{[\w:-]+\}.*$", text, re.M)
        if left:
            problems.append(f"{page}: MyST left in the Markdown: {left[:3]}")
        source = (ROOT / f"{page}.md").read_text(encoding="utf-8")
        for body in re.findall(r"\{pin\}`([^`]+)`", source):
            value = body.partition("=")[2].strip()
            if not re.search(r"(?<![\w.])" + re.escape(value) + r"(?![\w])", text):
                problems.append(f"{page}: the quote {body} is not shown as {value}")
        if re.search(r"\{cite(:\w+)?\}`", source) and not text.rstrip().count("## References"):
            problems.append(f"{page}: citations but no References cell")
        exercises = [i for i, m in enumerate(markdown) if re.search(r"\*\*Exercise \d+", m)]
        solutions = [i for i, m in enumerate(markdown) if "**Solution to Exercise" in m]
        wanted = source.count("```{solution-start}")
        if sum(m.count("**Solution to Exercise") for m in markdown) != wanted:
            problems.append(f"{page}: {wanted} solutions in the source, not all in the download")
        if solutions and exercises and min(solutions) < max(exercises):
            problems.append(f"{page}: a solution comes before the last exercise")
        code = [c.source for c in nb.cells if c.cell_type == "code"]
        if code != [c.source for c in jupytext.read(ROOT / f"{page}.md").cells
                    if c.cell_type == "code"]:
            problems.append(f"{page}: the code cells are not the page's, in its order")
        executed = SITE.parent / "jupyter_execute" / f"{page}.ipynb"
        if executed.is_file():
            built = nbformat.read(executed, as_version=4)
            if [c.outputs for c in nb.cells if c.cell_type == "code"] != [
                    c.outputs for c in built.cells if c.cell_type == "code"]:
                problems.append(f"{page}: the outputs are not the build's")
    assert not problems, "\n".join(problems)


def test_markdown_tables_in_outputs_render_as_tables():
    """The lectures' output tables (``standarderror_book.page.table``: Markdown) are HTML tables on
    the site, not lines of pipes: MyST-NB parses Markdown outputs as CommonMark unless told
    otherwise (``nb_render_markdown_format`` in ``_config.yml``), and CommonMark has no tables.
    Each page with a ``table(`` call has at least as many tables as calls."""
    _require_site()
    raw, short = [], []
    for page in site_pages():
        if not is_lecture(page):
            continue
        html = (SITE / page).read_text(encoding="utf-8")
        # the header rule of book.table's Markdown left as text ("|---|", or em dashes once
        # Sphinx's smart quotes have been at it)
        if re.search("\\|(?:-{3}|\u2014)\\|", html):
            raw.append(page)
        source = ROOT / (page[:-5] + ".md")
        calls = len(re.findall(r"(?<![\w.])table\(", source.read_text(encoding="utf-8")))
        if html.count("<table") < calls:
            short.append(f"{page}: {html.count('<table')} tables for {calls} table() calls")
    assert not raw, "Markdown tables printed as text: " + ", ".join(raw)
    assert not short, "; ".join(short)


def test_every_browser_test_is_in_the_slow_tier():
    """A test that starts the browser, the site's server or JupyterLab takes a minute: it must
    carry the slow marker, or the fast tier (-m "not slow") runs the whole visit wherever the
    book has been built (a decorator once slid onto the test inserted above it)."""
    import inspect

    heavy = {"server", "browser", "visits", "lab"}
    unmarked = [name for name, f in globals().items()
                if name.startswith("test_") and callable(f)
                and heavy & set(inspect.signature(f).parameters)
                and not any(m.name == "slow" for m in getattr(f, "pytestmark", []))]
    assert not unmarked, f"browser tests without @pytest.mark.slow: {unmarked}"


# --------------------------------------------------------------------------------------------
# The browser


@pytest.fixture(scope="module")
def server():
    _require_site()
    httpd = serve(SITE)
    try:
        yield httpd
    finally:
        httpd.shutdown()
        httpd.server_close()


def _chromium(profile: str, window: str = "1280,1000"):
    """Headless Chromium, offline (standarderror_book.browser); skipped or failed, by
    SITE_REQUIRED, with the reason when the browser is missing."""
    try:
        return chromium(profile, window=window)
    except Unavailable as exc:
        _unavailable(str(exc))


@pytest.fixture(scope="module")
def browser():
    _require_site()
    profile = tempfile.mkdtemp(prefix="site-test-chromium-")
    driver = _chromium(profile)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


# Runs in the page once it has loaded: waits for MathJax's first typeset, then reports.
_REPORT = r"""
const done = arguments[arguments.length - 1];
const report = () => {
  const article = document.querySelector('article.bd-article')
    || document.querySelector('main') || document.body;
  const math = Array.from(document.querySelectorAll('.math'));
  const scripts = Array.from(document.scripts).map(s => s.src).filter(s => /mathjax/i.test(s));
  const imgs = Array.from(article.querySelectorAll('img')).map(img => {
    let corner = null;
    if (img.closest('.cell_output') && img.complete && img.naturalWidth > 0) {
      try {
        const c = document.createElement('canvas');
        c.width = img.naturalWidth; c.height = img.naturalHeight;
        const ctx = c.getContext('2d');
        ctx.drawImage(img, 0, 0);
        corner = Array.from(ctx.getImageData(1, 1, 1, 1).data);
      } catch (e) { corner = String(e); }
    }
    return {src: img.getAttribute('src'), alt: (img.getAttribute('alt') || '').trim(),
            loaded: img.complete && img.naturalWidth > 0, corner: corner};
  });
  done({
    title: document.title,
    text: article.innerText,
    math: math.length,
    mathUntypeset: math.filter(m => !m.querySelector('mjx-container')).map(m => m.textContent.slice(0, 80)),
    mjx: document.querySelectorAll('mjx-container').length,
    mjxSvg: document.querySelectorAll('mjx-container svg').length,
    mjxErrors: Array.from(document.querySelectorAll('mjx-merror, [data-mjx-error]'))
                 .map(e => e.getAttribute('data-mjx-error') || e.textContent).slice(0, 5),
    mathjaxScripts: scripts,
    outputs: article.querySelectorAll('.cell_output').length,
    imgs: imgs,
    ipynb: Array.from(document.querySelectorAll('a[href$=".ipynb"]')).map(a => a.href),
    hrefs: Array.from(document.querySelectorAll('a[href]')).map(a => a.href),
    pins: Array.from(document.querySelectorAll('.pin')).map(pin => {
      const wrap = pin.closest('.se-pin-wrap');
      const note = wrap && document.getElementById(pin.getAttribute('aria-describedby') || '');
      const q = sel => (note && note.querySelector(sel)) ? note.querySelector(sel).textContent : null;
      const link = note && note.querySelector('a.se-pin-source');
      return {quoted: pin.textContent, wrapped: !!wrap, tabindex: pin.getAttribute('tabindex'),
              noteInWrap: !!(note && wrap.contains(note)), name: q('.se-pin-name'),
              value: q('.se-pin-value'), rule: q('.se-pin-rule'),
              link: link ? link.getAttribute('href') : null,
              hiddenOnLoad: note ? getComputedStyle(note).display === 'none' : null};
    }),
    resources: performance.getEntriesByType('resource').map(e => ({name: e.name, status: e.responseStatus})),
  });
};
if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
  MathJax.startup.promise.then(report, e => done({mathjaxFailed: String(e)}));
} else { report(); }
"""


def _console_errors(driver) -> list[str]:
    return [e["message"] for e in driver.get_log("browser") if e.get("level") == "SEVERE"]


# What a reader does on a page, after the report: open every solution, follow every
# cross-reference, measure every code block. Each piece is a small script run in the page.

# Numbered elements (sphinx-exercise, sphinx-proof) and the cross-references of the article.
_ELEMENTS = r"""
const article = document.querySelector('article.bd-article') || document.body;
const numbered = Array.from(article.querySelectorAll(
    '.exercise.admonition, .solution.admonition, .proof.admonition')).map(el => {
  const cap = el.querySelector(':scope > .admonition-title .caption-number');
  const title = el.querySelector(':scope > .admonition-title');
  return {id: el.id, classes: Array.from(el.classList),
          number: cap ? cap.textContent.trim() : null,
          title: title ? title.textContent.trim().slice(0, 120) : ''};
});
const xrefs = Array.from(article.querySelectorAll('a.reference.internal'))
  .filter(a => !a.classList.contains('headerlink') && (a.getAttribute('href') || '').includes('#'))
  .map(a => ({href: a.href, raw: a.getAttribute('href'), text: a.textContent.trim()}));
return {numbered: numbered, xrefs: xrefs};
"""

# A solution's body: everything after its title. Collapsed = nothing of it is visible.
_SOLUTION_STATE = r"""
const el = document.getElementById(arguments[0]);
const body = Array.from(el.children).filter(c => !c.classList.contains('admonition-title'));
const shown = body.some(c => getComputedStyle(c).visibility !== 'hidden' &&
                             c.getBoundingClientRect().height > 0);
return {shown: shown, hiddenClass: el.classList.contains('toggle-hidden'),
        button: !!el.querySelector(':scope > .admonition-title .toggle-button')};
"""

# Does the element with this id sit in view, visible, and not under the sticky header?
_LANDED = r"""
const frag = arguments[0];
const el = document.getElementById(frag);
if (!el) return 'no element with this id';
const style = getComputedStyle(el);
if (!el.getClientRects().length || style.visibility === 'hidden')
  return 'the target is hidden (inside a collapsed block?)';
const r = el.getBoundingClientRect();
const header = document.querySelector('header.bd-header') || document.querySelector('.bd-header');
const top = header ? Math.max(0, header.getBoundingClientRect().bottom) : 0;
if (r.top < top - 4 || r.top > innerHeight - 16)
  return `its top is at ${Math.round(r.top)} px; the reader sees ${Math.round(top)}-${innerHeight} px`;
const x = r.left + (r.width > 2 ? Math.min(20, r.width / 2) : 1);
const y = Math.max(r.top, top) + (r.height > 2 ? Math.min(6, r.height / 2) : 1);
const hit = document.elementFromPoint(x, y);
if (hit && hit.closest('header.bd-header, .bd-header')) return 'it lies under the header';
return null;
"""

# Go to each fragment of a list in turn and look where the reader lands (_LANDED, passed as
# the second argument) after two frames, polling for up to 3 s a fragment: one round trip for a
# page's fragments. Each item is {href, id}; the script starts with how to go there:
# ``go(item)``, which returns a problem (nothing to look at) or null.
_LOOK_AFTER = r"""
const items = arguments[0], landed = new Function(arguments[1]);
const done = arguments[arguments.length - 1];
const out = [];
const next = i => {
  if (i >= items.length) return done(out);
  const problem = go(items[i]);
  if (problem) { out.push(problem); return next(i + 1); }
  const t0 = performance.now();
  const poll = () => {
    const problem = landed(items[i].id);
    if (!problem || performance.now() - t0 > 3000) { out.push(problem); next(i + 1); }
    else setTimeout(poll, 100);
  };
  requestAnimationFrame(() => requestAnimationFrame(poll));
};
next(0);
"""

# Arrive from another page: the page's top with the fragment set in the address.
_ARRIVE = r"""
const go = item => {
  history.replaceState(null, '', location.pathname);
  window.scrollTo(0, 0);
  location.hash = item.href;
  return null;
};
"""

# The first visible link to a fragment of this page, scrolled to the middle of the window from
# the page's top with no fragment in the address (null when there is none): ready for a click.
# Shared by the first click of a page (a WebDriver click, _LINK_TO_CLICK) and the others (_CLICK).
_READY_LINK = r"""
const readyLink = href => {
  const link = Array.from(document.querySelectorAll('article a.reference.internal')).find(
    a => a.getAttribute('href') === '#' + href && a.getClientRects().length &&
         getComputedStyle(a).visibility !== 'hidden') || null;
  if (link) {
    history.replaceState(null, '', location.pathname);
    window.scrollTo(0, 0);
    link.scrollIntoView({block: 'center'});
  }
  return link;
};
"""

# Click a link on the page: the link made ready (_READY_LINK), hit-tested as a WebDriver click
# is (the point a click lands on, the middle of its first box, must be the link, not something
# drawn over it), then clicked through the element (the click event and the link's activation,
# without the pointer's input events, which cost a WebDriver round trip of 0.15 s each).
_CLICK = _READY_LINK + r"""
const go = item => {
  const link = readyLink(item.href);
  if (!link) return 'no visible link to click';
  const box = link.getClientRects()[0];
  const hit = document.elementFromPoint(box.left + box.width / 2, box.top + box.height / 2);
  if (!hit || !(hit === link || link.contains(hit)))
    return 'the link is covered by ' + (hit ? hit.outerHTML.slice(0, 80) : 'nothing (off screen)');
  link.click();
  return null;
};
"""


def _look_after(browser, how: str, items: list[dict]) -> list:
    """Each item's landing problem (None when it landed), going there by ``how``."""
    if not items:
        return []
    browser.set_script_timeout(30 + 4 * len(items))
    return browser.execute_async_script(how + _LOOK_AFTER, items, _LANDED)


# The link for a page's first click, made ready (_READY_LINK), or null.
_LINK_TO_CLICK = _READY_LINK + "return readyLink(arguments[0]);\n"

# Every code block and printed output after opening everything collapsible: is a line cut?
_OVERFLOW = r"""
document.querySelectorAll('details').forEach(d => d.open = true);
const article = document.querySelector('article.bd-article') || document.body;
return Array.from(article.querySelectorAll('pre')).filter(
    pre => pre.scrollWidth > pre.clientWidth + 1).map(pre => {
  const kind = pre.closest('.cell_output, .output') ? 'printed output'
             : pre.closest('.cell_input, .cell') ? 'code cell' : 'code block';
  const lines = pre.textContent.split('\n');
  const longest = lines.reduce((a, b) => b.length > a.length ? b : a, '');
  const cs = getComputedStyle(pre);
  const ctx = document.createElement('canvas').getContext('2d');
  ctx.font = `${cs.fontStyle} ${cs.fontWeight} ${cs.fontSize} ${cs.fontFamily}`;
  const inner = pre.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight);
  return {kind: kind, scroll: pre.scrollWidth, client: pre.clientWidth,
          chars: longest.length, line: longest.slice(0, 70),
          fits: Math.floor(inner / (ctx.measureText('0'.repeat(100)).width / 100)),
          boxed: !!pre.closest('.admonition')};
});
"""

# The window in which code lines are measured: 1280 px, a laptop's, where the page's own table
# of contents takes a column and the code is set smaller to hold the lectures' 88-character
# lines (book.css). NARROW_WINDOW: a phone's, where no page may be wider than the screen.
COLUMN_WINDOW = (1280, 900)
NARROW_WINDOW = (390, 844)
_PAGE_WIDTH = """
return {width: document.documentElement.scrollWidth, client: document.documentElement.clientWidth,
        wide: Array.from(document.querySelectorAll('.bd-article *')).filter(el => {
          const r = el.getBoundingClientRect();
          return r.width > 0 && r.right > document.documentElement.clientWidth + 1
                 && !el.closest('pre, table, mjx-container, .highlight, .output, .cell_output');
        }).slice(0, 3).map(el => el.tagName + '.' + el.className)};
"""

# Kinds of numbered element a link text may name ("Theorem 2", "Exercise 3.1").
_KINDS = ("Theorem|Lemma|Definition|Corollary|Proposition|Conjecture|Axiom|Remark|Example|"
          "Exercise|Algorithm|Criterion|Assumption|Observation|Property|Notation")
_NUMBERED_TEXT = re.compile(rf"\b({_KINDS})\s+(\d+(?:\.\d+)*)")


def _incoming_xrefs() -> dict[str, set[str]]:
    """{page: fragments that other pages' cross-references point to}: read from the HTML,
    so a page's visit can check every landing of a link that starts elsewhere."""
    class Article(HTMLParser):
        def __init__(self):
            super().__init__(convert_charrefs=True)
            self.depth, self.hrefs = 0, []

        def handle_starttag(self, tag, attrs):
            a = dict(attrs)
            if tag == "article" and "bd-article" in (a.get("class") or ""):
                self.depth += 1
            classes = (a.get("class") or "").split()
            if (self.depth and tag == "a" and "reference" in classes and "internal" in classes
                    and "headerlink" not in classes and "#" in (a.get("href") or "")):
                self.hrefs.append(a["href"])

        def handle_endtag(self, tag):
            if tag == "article" and self.depth:
                self.depth -= 1

    incoming: dict[str, set[str]] = {}
    for page in site_pages():
        parser = Article()
        parser.feed((SITE / page).read_text(encoding="utf-8", errors="replace"))
        for href in parser.hrefs:
            url = urllib.parse.urlsplit(href)
            if url.scheme or not url.path or not url.fragment:
                continue  # external, or a link within the page (clicked during the visit)
            target = os.path.normpath((Path(page).parent / urllib.parse.unquote(url.path)).as_posix())
            incoming.setdefault(Path(target).as_posix(), set()).add(urllib.parse.unquote(url.fragment))
    return incoming


def _wait_for(check, timeout: float = 3.0, step: float = 0.1):
    """Poll ``check()`` until it returns a falsy value (success) or time runs out; returns the
    last value (None on success)."""
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if not result or time.monotonic() > deadline:
            return result
        time.sleep(step)


def _landings(browser, xrefs: list[dict], incoming: set[str]) -> list[dict]:
    """Follow every cross-reference of the loaded page (``xrefs``, from _ELEMENTS) and arrive
    with every fragment that other pages link to (``incoming``); each landing's problem, or
    None."""
    from selenium.common.exceptions import WebDriverException

    # Cross-references that stay on the page: click each, then look. The first is a
    # reader's click (WebDriver's input events); the others are clicked through the page
    # after the same hit test, in one round trip.
    landings = []
    in_page = sorted({x["raw"].split("#", 1)[1] for x in xrefs if x["raw"].startswith("#")})
    if in_page:
        raw = in_page[0]
        frag = urllib.parse.unquote(raw)
        link = browser.execute_script(_LINK_TO_CLICK, raw)
        if link is None:
            problem = "no visible link to click"
        else:
            try:
                link.click()
                problem = _wait_for(lambda: browser.execute_script(_LANDED, frag))
            except WebDriverException as exc:  # e.g. intercepted: something lies over the link
                problem = f"the click failed: {(exc.msg or type(exc).__name__)[:120]}"
        landings.append({"from": "this page", "fragment": frag, "problem": problem})
    clicked = [{"href": raw, "id": urllib.parse.unquote(raw)} for raw in in_page[1:]]
    landings.extend({"from": "this page", "fragment": x["id"], "problem": problem}
                    for x, problem in zip(clicked, _look_after(browser, _CLICK, clicked), strict=True))
    # Cross-references from other pages: arrive at this page with the fragment.
    arriving = [{"href": frag, "id": frag} for frag in sorted(incoming)]
    landings.extend({"from": "another page", "fragment": x["id"], "problem": problem}
                    for x, problem in zip(arriving, _look_after(browser, _ARRIVE, arriving),
                                          strict=True))
    return landings


def _read_like_a_reader(browser, page: str, incoming: set[str]) -> dict:
    """On the loaded page: open every solution, follow every cross-reference, measure every
    code block; return what was found (each test below reads its part)."""
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.common.by import By

    found = browser.execute_script(_ELEMENTS)
    # Solutions: collapsed on load; a click on their toggle opens them.
    found["solutions"] = []
    for el in found["numbered"]:
        if "solution" not in el["classes"]:
            continue
        state = {"id": el["id"], "title": el["title"], "onload": browser.execute_script(
            _SOLUTION_STATE, el["id"])}
        try:
            button = browser.find_element(
                By.CSS_SELECTOR, f'[id="{el["id"]}"] > .admonition-title .toggle-button')
            browser.execute_script("arguments[0].scrollIntoView({block: 'center'});", button)
            button.click()
            state["opened"] = not _wait_for(lambda el=el: not browser.execute_script(
                _SOLUTION_STATE, el["id"])["shown"])
        except WebDriverException as exc:
            state["opened"], state["error"] = False, exc.msg or type(exc).__name__
        found["solutions"].append(state)
    found["landings"] = _landings(browser, found["xrefs"], incoming)
    # what the reader's clicks (solutions opened, links followed) logged as errors
    found["errors_while_reading"] = _console_errors(browser)
    # Code lines are measured where the column is at its full width (see COLUMN_WINDOW).
    size = browser.get_window_size()
    browser.set_window_size(*COLUMN_WINDOW)
    try:
        found["overflow"] = browser.execute_script(_OVERFLOW)
        browser.set_window_size(*NARROW_WINDOW)
        found["narrow"] = browser.execute_script(_PAGE_WIDTH)
    finally:
        browser.set_window_size(size["width"], size["height"])
    return found


@pytest.fixture(scope="module")
def visits(server, browser):
    """Visit every page once, in a fresh profile (so a first-time reader's console is what we
    see); return {page: report}, which every browser test below reads."""
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.support.ui import WebDriverWait

    base = f"http://127.0.0.1:{server.server_port}/"
    pages = site_pages()
    SHOTS.mkdir(parents=True, exist_ok=True)
    out, start = {}, time.perf_counter()
    incoming = _incoming_xrefs()
    for page in pages:
        first = len(server.requests)
        browser.get(base + page)
        if browser.execute_script("return !!document.querySelector('meta[http-equiv=refresh]');"):
            # index.html redirects to the landing page: test the page the reader lands on.
            WebDriverWait(browser, 30).until(
                lambda d, page=page: d.current_url != base + page and d.execute_script(
                "return document.readyState === 'complete' && "
                "!document.querySelector('meta[http-equiv=refresh]');"))
        report = browser.execute_async_script(_REPORT)
        report["console"] = _console_errors(browser)
        report["failed"] = sorted({f"{status} {path}" for status, path in server.requests[first:]
                                   if status >= 400})
        report["url"], report["base"] = base + page, base
        browser.save_screenshot(str(SHOTS / (page[:-5].replace("/", "__") + ".png")))
        if "mathjaxFailed" not in report:
            try:
                report["reader"] = _read_like_a_reader(browser, page, incoming.get(page, set()))
            except WebDriverException as exc:  # reported by the landing test, not a crash here
                report["reader"] = {"numbered": [], "xrefs": [], "solutions": [], "overflow": [],
                                    "narrow": {"width": 0, "client": 0, "wide": []},
                                    "landings": [{"from": "-", "fragment": "-", "problem":
                                                  f"the reader's checks broke: {exc.msg}"}]}
        out[page] = report
    print(f"site: visited {len(pages)} pages in {time.perf_counter() - start:.1f} s; "
          f"screenshots in {SHOTS}")
    return out


def _problems(visits, check) -> list[str]:
    found = []
    for page, report in visits.items():
        for problem in check(page, report):
            found.append(f"{page}: {problem}")
    return found


@pytest.mark.slow
def test_no_console_errors_and_no_failed_requests(visits):
    def check(page, r):
        if "mathjaxFailed" in r:
            yield f"MathJax failed to start: {r['mathjaxFailed']}"
        for msg in r["console"]:
            yield f"console error: {msg}"
        for msg in r.get("reader", {}).get("errors_while_reading", []):
            yield f"console error after a reader's clicks: {msg}"
        for failed in r["failed"]:
            yield f"request failed: {failed}"
        for res in r.get("resources", []):
            if not res["name"].startswith(r["base"]):
                yield f"requested a resource outside the site: {res['name']}"
            elif res["status"] and res["status"] >= 400:
                yield f"resource {res['name']} answered {res['status']}"

    problems = _problems(visits, check)
    assert not problems, "\n".join(problems)


@pytest.mark.slow
def test_images_have_alt_text_and_load(visits):
    def check(page, r):
        for img in r["imgs"]:
            if not img["alt"]:
                yield f"<img src={img['src']!r}> has no alt text"
            if not img["loaded"]:
                yield f"<img src={img['src']!r}> did not load"

    problems = _problems(visits, check)
    assert not problems, "\n".join(problems)


@pytest.mark.slow
def test_figures_are_opaque_for_the_dark_theme(visits):
    """A notebook figure must carry its own opaque background: a transparent PNG puts black
    axes and text straight onto the dark theme's near-black page."""
    def check(page, r):
        for img in r["imgs"]:
            corner = img["corner"]
            if isinstance(corner, str):
                yield f"could not read {img['src']}: {corner}"
            elif corner is not None and corner[3] < 250:
                yield f"figure {img['src']} is transparent at its corner (RGBA {corner})"

    assert any(img["corner"] is not None for r in visits.values() for img in r["imgs"]) or not any(
        is_lecture(p) for p in visits), "no notebook figure found on any lecture page"
    problems = _problems(visits, check)
    assert not problems, "\n".join(problems)


@pytest.mark.slow
def test_maths_is_typeset_offline_by_the_vendored_mathjax(visits):
    def check(page, r):
        if not r["math"]:
            return
        if not r["mathjaxScripts"]:
            yield f"{r['math']} formula(s) but no MathJax script"
        for src in r["mathjaxScripts"]:
            if not src.startswith(r["base"]):
                yield f"MathJax is loaded from outside the site: {src}"
        for tex in r["mathUntypeset"]:
            yield f"formula not typeset: {tex!r}"
        for err in r["mjxErrors"]:
            yield f"TeX error: {err}"
        if r["mjxSvg"] < r["math"]:
            yield f"{r['math']} formulas but only {r['mjxSvg']} rendered as SVG"

    assert sum(r["math"] for r in visits.values()) > 0, "no page has maths: nothing to test"
    problems = _problems(visits, check)
    assert not problems, "\n".join(problems)


def _reader(visits) -> dict:
    return {page: r["reader"] for page, r in visits.items() if "reader" in r}


def _proof_kind(classes: list[str]) -> str | None:
    """The sphinx-proof kind of an admonition (theorem, lemma, ...); None for a bare proof."""
    kinds = [c for c in classes if c not in ("proof", "admonition", "dropdown", "toggle",
                                             "toggle-hidden")]
    return kinds[0] if "proof" in classes and kinds else None


@pytest.mark.slow
def test_solutions_are_collapsed_on_load_and_open_on_click(visits):
    """Every solution (sphinx-exercise) is collapsed when the page loads, so a reader tries the
    exercise first, and a click on its toggle opens it. The site must have at least one."""
    pages = _reader(visits)
    solutions = [(page, s) for page, r in pages.items() for s in r["solutions"]]
    assert solutions, "no solution (sphinx-exercise `solution`) on any page of the site"
    problems = []
    for page, s in solutions:
        name = f"{page}: solution {s['id']!r} ({s['title']})"
        if s["onload"]["shown"] or not s["onload"]["hiddenClass"]:
            problems.append(f"{name} is open on load (give it `:class: dropdown`)")
        if not s["onload"]["button"]:
            problems.append(f"{name} has no toggle button")
        elif not s["opened"]:
            problems.append(f"{name} did not open on click {s.get('error', '')}".rstrip())
    assert not problems, "\n".join(problems)


@pytest.mark.slow
def test_theorem_and_exercise_numbers_resolve(visits):
    """Every exercise and every theorem-like block (sphinx-proof) carries a number, unique on
    its page; every link that names one ("Theorem 2", "Exercise 1") names the number its target
    carries; no link text is left unresolved. The site must have at least one exercise and one
    theorem-like block, and at least one link to one of them."""
    pages = _reader(visits)
    targets, problems = {}, []
    exercises = theorems = 0
    for page, r in pages.items():
        seen = {}
        for el in r["numbered"]:
            kind = "exercise" if "exercise" in el["classes"] else _proof_kind(el["classes"])
            if kind is None:
                continue
            exercises += kind == "exercise"
            theorems += kind != "exercise"
            number = el["number"]
            where = f"{page}: {kind} {el['id']!r} ({el['title'][:60]})"
            if not number or not _NUMBERED_TEXT.fullmatch(number):
                problems.append(f"{where} has no resolved number (caption {number!r})")
                continue
            if number in seen:
                problems.append(f"{where}: number {number!r} also used by {seen[number]!r}")
            seen[number] = el["id"]
            targets[f"{page}#{el['id']}"] = number
    assert exercises, "no exercise (sphinx-exercise) on any page of the site"
    assert theorems, "no theorem, lemma or definition (sphinx-proof) on any page of the site"
    resolved = 0
    for page, r in pages.items():
        for x in r["xrefs"]:
            url = urllib.parse.urlsplit(x["raw"])
            target_page = page if not url.path else os.path.normpath(
                (Path(page).parent / urllib.parse.unquote(url.path)).as_posix())
            key = f"{Path(target_page).as_posix()}#{urllib.parse.unquote(url.fragment)}"
            text = " ".join(x["text"].split())
            if not text or "??" in text:
                problems.append(f"{page}: link to {x['raw']} shows {text!r}: an unresolved reference")
                continue
            if key not in targets:
                continue
            resolved += 1
            named = _NUMBERED_TEXT.search(text)
            if named and named.group(0) != targets[key]:
                problems.append(f"{page}: link text {text!r} names {named.group(0)}, but its "
                                f"target {key} is {targets[key]}")
    assert resolved, "no cross-reference to an exercise or theorem on any page of the site"
    assert not problems, "\n".join(problems)


@pytest.mark.slow
def test_cross_references_land_on_their_targets(visits):
    """Every cross-reference in the text of a page (a link to a #target: theorems, exercises,
    solutions, equations, sections, citations), followed as a reader does, brings its target
    into view: visible (not inside a collapsed block) and not hidden under the sticky header.
    Links within a page are clicked; links from another page arrive with the fragment."""
    pages = _reader(visits)
    landings = [(page, x) for page, r in pages.items() for x in r["landings"]]
    assert landings, "no cross-reference on any page of the site"
    problems = [f"{page}: #{x['fragment']} (a link from {x['from']}): {x['problem']}"
                for page, x in landings if x["problem"]]
    assert not problems, f"{len(problems)} of {len(landings)} landings missed:\n" + "\n".join(problems)


@pytest.mark.slow
def test_the_landing_check_sees_a_missing_target_and_a_covered_link(server, browser, visits):
    """The landing check itself: on a page with cross-references inside it, a fragment with no
    element is reported, and so is every link once a transparent layer lies over the page
    (the WebDriver click is intercepted; the others fail their hit test), so a landing that
    passes was really clicked and looked at."""
    pages = _reader(visits)
    page = min((p for p, r in pages.items()
                if sum(x["raw"].startswith("#") for x in r["xrefs"]) >= 2),
               key=lambda p: len(pages[p]["xrefs"]))
    browser.get(f"http://127.0.0.1:{server.server_port}/{page}")
    browser.execute_async_script(_REPORT)
    xrefs = browser.execute_script(_ELEMENTS)["xrefs"]
    missing = [x for x in _landings(browser, xrefs, {"no-such-id"}) if x["problem"]]
    assert missing == [{"from": "another page", "fragment": "no-such-id",
                        "problem": "no element with this id"}]
    browser.execute_script("const veil = document.createElement('div');"
                           "veil.style = 'position: fixed; inset: 0; z-index: 9999';"
                           "document.body.appendChild(veil);")
    clicks = [x["problem"] for x in _landings(browser, xrefs, set())]
    assert len(clicks) >= 2 and clicks[0].startswith("the click failed"), (page, clicks)
    assert all(p.startswith("the link is covered by <div") for p in clicks[1:]), (page, clicks)


@pytest.mark.slow
def test_no_code_or_output_line_is_cut_off_at_the_column(visits):
    """No line of code, and no printed line of output, runs past the page's column (so that a
    reader would have to scroll sideways to see its end): every <pre> of the article, with every
    solution and collapsed block opened, fits its width (scrollWidth <= clientWidth) in a
    laptop's window (COLUMN_WINDOW, 1280 px)."""
    pages = {p: r for p, r in _reader(visits).items()
             if not p.startswith("_modules/")}  # the package's source, 110 columns, scrolls
    problems = [f"{page}: {o['kind']} line of {o['chars']} characters is cut: its column holds "
                f"{o['fits']}{' (inside a solution or box, narrower than the page)' if o['boxed'] else ''}"
                f": {o['line']!r}"
                for page, r in pages.items() for o in r["overflow"]]
    assert not problems, f"{len(problems)} block(s) with cut lines:\n" + "\n".join(problems)


@pytest.mark.slow
def test_no_page_is_wider_than_a_phone(visits):
    """At 390 px no page is wider than the screen: code wraps, and wide tables and display
    maths scroll inside their own box (book.css)."""
    wide = [f"{page}: {r['narrow']['width']} px wide, {r['narrow']['wide']}"
            for page, r in _reader(visits).items()
            if not page.startswith("_modules/")
            and r["narrow"]["width"] > r["narrow"]["client"] + 1]
    assert not wide, f"{len(wide)} page(s) wider than {NARROW_WINDOW[0]} px:\n" + "\n".join(wide)


@pytest.mark.slow
def test_lecture_pages_show_outputs_reproducibility_and_a_notebook_download(visits, server):
    lectures = [p for p in visits if is_lecture(p)]
    assert lectures, "no lecture page (lectures/*.html or book/model.html) in the site"

    def check(page, r):
        if not is_lecture(page):
            return
        if r["outputs"] == 0:
            yield "no executed cell output on the page"
        if "Reproducibility" not in r["text"]:
            yield "no reproducibility block (text 'Reproducibility')"
        own = [u for u in r["ipynb"] if u.endswith("/" + page[:-5].rsplit("/", 1)[-1] + ".ipynb")]
        if not own:
            yield f"no .ipynb download of this page (links: {r['ipynb']})"
            return
        try:
            with urllib.request.urlopen(own[0], timeout=10) as response:  # the local server
                nb = json.load(response)
        except (OSError, ValueError) as exc:
            yield f"the .ipynb download {own[0]} is not valid JSON: {exc}"
            return
        if nb.get("nbformat") != 4 or not nb.get("cells"):
            yield f"the .ipynb download is not a notebook with cells (nbformat={nb.get('nbformat')})"
            return
        code = [c for c in nb["cells"] if c.get("cell_type") == "code"]
        if not code or not any(c.get("outputs") for c in code):
            yield "the .ipynb download has no executed code cell"

    problems = _problems(visits, check)
    assert not problems, "\n".join(problems)


@pytest.mark.slow
def test_every_link_a_reader_can_follow_answers(visits, server):
    """Every link of every page, as the reader's browser holds it once the page's own scripts
    have run (the download menu, the PDFs' links), is followed on the site's server: none
    answers an error (404 and the like). Links outside the site are not followed (offline)."""
    import urllib.error

    base = f"http://127.0.0.1:{server.server_port}/"
    first: dict[str, str] = {}
    for page, r in visits.items():
        for href in r["hrefs"]:
            if href.startswith(base):
                first.setdefault(urllib.parse.urldefrag(href)[0], page)
    assert len(first) > 50, f"only {len(first)} links on the site's pages"
    broken = []
    for url, page in sorted(first.items()):
        try:
            with urllib.request.urlopen(urllib.request.Request(url, method="HEAD"),
                                        timeout=10) as response:
                status = response.status
        except urllib.error.HTTPError as exc:
            status = exc.code
        if status >= 400:
            broken.append(f"{page}: {url[len(base):]} answered {status}")
    assert not broken, f"{len(broken)} of {len(first)} links broken:\n  " + "\n  ".join(broken)


def test_the_site_links_only_the_pdfs_it_lists():
    """The build writes no link into ``pdf/``: a link a page's source writes there is a
    placeholder (``data-se-pdf``), which ``pdf-links.js`` makes a link where ``_static/pdfs.js``
    lists its file; and that list names exactly the PDFs in the site's ``pdf/`` folder (none
    after the build alone, every printed one after ``bash scripts/pdf.sh``)."""
    from standarderror_book.sphinxext.site import read_pdf_manifest

    _require_site()
    folder = SITE / "pdf"
    printed = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*.pdf")) \
        if folder.is_dir() else []
    assert read_pdf_manifest(SITE) == printed, "_static/pdfs.js does not list the printed PDFs"
    linked, placeholders = [], 0
    for page in site_pages():
        html = (SITE / page).read_text(encoding="utf-8", errors="replace")
        placeholders += html.count("data-se-pdf=")
        for tag, ref in _parse(SITE / page).refs:
            url = urllib.parse.urlsplit(ref)
            if url.scheme or url.netloc or not url.path:
                continue
            path = os.path.normpath((Path(page).parent / urllib.parse.unquote(url.path)).as_posix())
            if Path(path).parts[:1] == ("pdf",):
                linked.append(f"{page}: <{tag}> {ref}")
    assert not linked, "links into pdf/ written by the build:\n  " + "\n  ".join(linked)
    assert placeholders, "no PDF placeholder on any page (the landing page links book.pdf)"


@pytest.mark.slow
def test_the_pdf_links_appear_only_where_a_pdf_was_printed(browser, tmp_path):
    """On a copy of the site: with no PDF printed, no page links one (the landing page's
    book.pdf stays a placeholder, the download menus offer none); with the book's PDF and one
    page's printed, exactly those are linked, where they belong, and each answers."""
    from standarderror_book.sphinxext.site import pdf_manifest_text

    _require_site()
    copy = tmp_path / "html"
    shutil.copytree(SITE, copy, ignore=shutil.ignore_patterns("pdf"))
    intro, lecture, other = "book/intro", "lectures/ep3_temperature", "lectures/ep1_conformal"
    script = ("return Array.from(document.querySelectorAll('a[href]'))"
              ".map(a => a.getAttribute('href')).filter(h => /[.]pdf([#?].*)?$/.test(h)).sort();")

    def visit(printed: list[str]) -> dict[str, list[str]]:
        (copy / "_static" / "pdfs.js").write_text(pdf_manifest_text(printed))
        httpd = serve(copy)  # a new port, a new origin: no cached pdfs.js
        try:
            base = f"http://127.0.0.1:{httpd.server_port}/"
            found = {}
            for page in (intro, lecture, other):
                browser.get(base + page + ".html")
                found[page] = browser.execute_script(script)
                for href in found[page]:
                    url = urllib.parse.urljoin(base + page + ".html", href)
                    with urllib.request.urlopen(url, timeout=10) as response:
                        assert response.status == 200, (page, href)
            browser.get(base + intro + ".html")
            placeholder = browser.execute_script(
                "const a = document.querySelector('a[data-se-pdf=\"book.pdf\"]');"
                "return a ? a.hasAttribute('href') : null;")
            found["placeholder linked"] = placeholder
            return found
        finally:
            httpd.shutdown()
            httpd.server_close()

    none = visit([])
    assert none == {intro: [], lecture: [], other: [], "placeholder linked": False}, none
    (copy / "pdf" / "lectures").mkdir(parents=True)
    for name in ("book.pdf", f"{lecture}.pdf"):
        (copy / "pdf" / name).write_bytes(b"%PDF-1.4\n%%EOF\n")
    some = visit(["book.pdf", f"{lecture}.pdf"])
    # the landing page: its placeholder, and its download menu's book entry (no page PDF)
    assert some == {intro: ["../pdf/book.pdf", "../pdf/book.pdf"],
                    lecture: ["../pdf/book.pdf", "../pdf/lectures/ep3_temperature.pdf"],
                    other: ["../pdf/book.pdf"], "placeholder linked": True}, some


@pytest.mark.slow
def test_every_pinned_number_carries_its_note(visits):
    """Every pinned number of the site is focusable (tabindex 0) and described
    (``aria-describedby``) by a note, hidden until hover or focus, that names the pin, shows
    the full-precision value the code computed (the quote is that value at the quote's
    precision, by the build's own rule), states the rule it was checked by, and links to the
    code cell that computed it (an id on that page)."""
    from standarderror_book.page import check_quote

    problems, count, ids = [], 0, {}
    for page, r in visits.items():
        for pin in r["pins"]:
            count += 1
            where = f"{page}: pin {pin['quoted']!r} ({pin['name']})"
            if not (pin["wrapped"] and pin["noteInWrap"] and pin["tabindex"] == "0"):
                problems.append(f"{where}: not a focusable number with its note {pin}")
                continue
            if not pin["hiddenOnLoad"]:
                problems.append(f"{where}: its note shows before hover or focus")
            if not pin["name"] or not pin["rule"]:
                problems.append(f"{where}: the note lacks the name or the rule: {pin}")
            try:
                ok = check_quote(pin["quoted"], float(pin["value"]))[0]
            except (TypeError, ValueError) as exc:
                ok = f"{exc}"
            if ok is not True:
                problems.append(f"{where}: the note's value {pin['value']!r} is not the quote's ({ok})")
            link = urllib.parse.urlsplit(pin["link"] or "")
            if link.fragment != f"se-pinned-{pin['name']}":
                problems.append(f"{where}: no link to the cell that pinned it ({pin['link']!r})")
                continue
            target = page if not link.path else os.path.normpath(
                (Path(page).parent / link.path).as_posix())
            if target not in ids:
                ids[target] = _parse(SITE / target).ids if (SITE / target).is_file() else set()
            if link.fragment not in ids[target]:
                problems.append(f"{where}: {pin['link']} names no element of {target}")
    assert count > 100, f"only {count} pinned numbers on the site"
    assert not problems, f"{len(problems)} of {count} pins:\n" + "\n".join(problems[:40])


# The first pinned number of the article a reader meets with everything closed: visible, not
# in a collapsed block, whose cell is on this page and not in a collapsed block either.
_FIRST_PIN = r"""
const closed = el => !!el.closest('.toggle-hidden, details:not([open])');
return Array.from(document.querySelectorAll('article .se-pin-wrap > .pin')).find(pin => {
  const note = document.getElementById(pin.getAttribute('aria-describedby'));
  const a = note && note.querySelector('a.se-pin-source');
  const href = a ? a.getAttribute('href') : '';
  const cell = href.startsWith('#') ? document.getElementById(href.slice(1)) : null;
  return pin.getClientRects().length && !closed(pin) && cell && !closed(cell);
}) || null;
"""
_NOTE_SHOWN = r"""
const pin = arguments[0];
const note = document.getElementById(pin.getAttribute('aria-describedby'));
const a = document.activeElement;
return {shown: getComputedStyle(note).display !== 'none' && note.getBoundingClientRect().height > 0,
        active: a === pin ? 'pin' : (a && a.classList.contains('se-pin-source') ? 'link' : a.tagName)};
"""


@pytest.mark.slow
def test_a_pinned_numbers_note_opens_on_hover_and_focus_and_leads_to_its_cell(server, browser, visits):
    """On a lecture, as a reader with a mouse and a reader with a keyboard: the note of a pinned
    number is hidden, shows while the pointer is on the number, and hides when it leaves; Tab
    from before the number focuses it and shows the note, a second Tab reaches the note's link
    with the note still open, and Enter on it brings the code cell that computed the value into
    view; Escape closes the note with focus still on the number. Chromium's accessibility tree
    gives the number the note's text as its description (what a screen reader reads)."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    base = f"http://127.0.0.1:{server.server_port}/"
    page = "lectures/ep3_temperature.html"
    browser.get(base + page)
    browser.execute_async_script(_REPORT)
    pin = browser.execute_script(_FIRST_PIN)
    assert pin is not None, f"{page}: no visible pinned number whose cell is on the page"
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'});", pin)
    shown = lambda: browser.execute_script(_NOTE_SHOWN, pin)["shown"]  # noqa: E731
    assert not shown(), "the note shows before hover or focus"
    ActionChains(browser).move_to_element(pin).perform()
    assert not _wait_for(lambda: not shown()), "the note does not show on hover"
    away = browser.find_element(By.CSS_SELECTOR, "header.bd-header, .bd-header")  # sticky: in view
    ActionChains(browser).move_to_element(away).perform()
    assert not _wait_for(shown), "the note stays after the pointer left"
    # the keyboard: from a focusable element just before the number
    browser.execute_script(
        "const b = document.createElement('button'); b.id = 'se-test-before'; b.textContent = '.';"
        "arguments[0].closest('.se-pin-wrap').before(b); b.focus();", pin)
    ActionChains(browser).send_keys(Keys.TAB).perform()
    state = browser.execute_script(_NOTE_SHOWN, pin)
    assert state == {"shown": True, "active": "pin"}, f"after Tab: {state}"
    description = _ax_description(browser, "[id='se-test-before'] + .se-pin-wrap > .pin")
    name = browser.execute_script(
        "return document.getElementById(arguments[0].getAttribute('aria-describedby'))"
        ".querySelector('.se-pin-name').textContent;", pin)
    assert name in description and "checked by the build" in description, description
    ActionChains(browser).send_keys(Keys.TAB).perform()
    state = browser.execute_script(_NOTE_SHOWN, pin)
    assert state == {"shown": True, "active": "link"}, f"after a second Tab: {state}"
    ActionChains(browser).send_keys(Keys.ENTER).perform()
    fragment = f"se-pinned-{name}"
    assert not _wait_for(lambda: browser.execute_script("return location.hash;") != "#" + fragment)
    assert not _wait_for(lambda: browser.execute_script(_LANDED, fragment)), (
        f"the cell {fragment} is not in view: {browser.execute_script(_LANDED, fragment)}")
    # the id sits on the cell, or (a cell that pinned several names) on a span at its start
    assert browser.execute_script(
        "return !!document.getElementById(arguments[0]).closest('div.cell');", fragment)
    # Escape closes the note, focus stays on the number
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'});"
                           "document.getElementById('se-test-before').focus();", pin)
    ActionChains(browser).send_keys(Keys.TAB).perform()
    assert shown()
    ActionChains(browser).send_keys(Keys.ESCAPE).perform()
    state = browser.execute_script(_NOTE_SHOWN, pin)
    assert state == {"shown": False, "active": "pin"}, f"after Escape: {state}"


def _ax_description(browser, selector: str) -> str:
    """The accessible description Chromium computes for the element at ``selector``."""
    root = browser.execute_cdp_cmd("DOM.getDocument", {"depth": 0})["root"]["nodeId"]
    node = browser.execute_cdp_cmd("DOM.querySelector", {"nodeId": root, "selector": selector})
    tree = browser.execute_cdp_cmd("Accessibility.getPartialAXTree",
                                   {"nodeId": node["nodeId"], "fetchRelatives": False})
    for ax in tree["nodes"]:
        if ax.get("description"):
            return ax["description"].get("value", "")
    return ""


@pytest.mark.slow
def test_search_finds_pages(server, browser, visits):
    from selenium.webdriver.support.ui import WebDriverWait

    base = f"http://127.0.0.1:{server.server_port}/"
    for word in SEARCH_WORDS:
        browser.get(base + "search.html?q=" + urllib.parse.quote(word))
        WebDriverWait(browser, 30).until(lambda d: d.execute_script(
            "const s = document.querySelector('#search-results');"
            "return s && (s.querySelectorAll('li').length > 0 || "
            "/found|did not match/i.test(s.innerText));"))
        hits = browser.execute_script(
            "return Array.from(document.querySelectorAll('#search-results li a'))"
            ".map(a => a.getAttribute('href'));")
        browser.save_screenshot(str(SHOTS / f"search-{word}.png"))
        assert _console_errors(browser) == []
        assert hits, f"searching for {word!r} found nothing"
        for href in hits:
            path = urllib.parse.urlsplit(href).path
            assert (SITE / path).is_file(), f"search result {href} points to no page"
    # "temperature": the lectures on it come before the API reference, and no snippet shows
    # raw TeX; the search page shows one search box, its own
    browser.get(base + "search.html?q=temperature")
    WebDriverWait(browser, 30).until(lambda d: d.execute_script(
        "const s = document.querySelector('#search-results');"
        "return s && s.querySelectorAll('li p.context').length >= 3;"))
    hits = browser.execute_script(
        "return Array.from(document.querySelectorAll('#search-results li')).map(li => "
        "[li.querySelector('a').getAttribute('href'), "
        "(li.querySelector('p.context') || {}).textContent || '']);")
    first_api = next((i for i, (h, _) in enumerate(hits) if "/api/" in h or "api/" in h[:4]),
                     len(hits))
    lectures = [i for i, (h, _) in enumerate(hits) if "lectures/" in h]
    assert lectures and max(lectures) < first_api, [h for h, _ in hits][:12]
    raw = [(h, t[:80]) for h, t in hits if re.search(r"\\[(\[]|\\[A-Za-z]+\{", t)]
    assert not raw, f"snippets with raw TeX: {raw[:3]}"
    boxes = browser.execute_script(
        "return Array.from(document.querySelectorAll('input[type=search], input[name=q]'))"
        ".filter(i => i.offsetParent !== null && i.getBoundingClientRect().width > 0).length;")
    assert boxes == 1, f"{boxes} search boxes on the search page"


@pytest.mark.slow
def test_light_and_dark_screenshots_of_a_lecture_figure(server, browser, visits):
    """Screenshots of the first lecture figure in both themes, for a person to look at; the
    test checks that the dark theme really switched and the figure stays an opaque card."""
    pages = [p for p in visits if is_lecture(p) and any(i["corner"] for i in visits[p]["imgs"])]
    if not pages:
        pytest.fail("no lecture page with a figure to photograph")
    page = "book/model.html" if "book/model.html" in pages else pages[0]
    base = f"http://127.0.0.1:{server.server_port}/"
    for mode in ("light", "dark"):
        browser.get(base + page)
        browser.execute_script(
            "localStorage.setItem('mode', arguments[0]); localStorage.setItem('theme', arguments[0]);"
            "document.documentElement.dataset.mode = arguments[0];"
            "document.documentElement.dataset.theme = arguments[0];", mode)
        browser.refresh()
        theme = browser.execute_script("return document.documentElement.dataset.theme;")
        assert theme == mode, f"the {mode} theme did not take (data-theme={theme!r})"
        background = browser.execute_script(
            "const img = document.querySelector('.cell_output img');"
            "img.scrollIntoView({block: 'center'});"
            "return getComputedStyle(document.body).backgroundColor;")
        rgb = [int(v) for v in re.findall(r"\d+", background)[:3]]
        if mode == "dark":
            assert sum(rgb) < 3 * 100, f"dark theme body background is {background}"
        else:
            assert sum(rgb) > 3 * 200, f"light theme body background is {background}"
        time.sleep(0.3)
        browser.save_screenshot(str(SHOTS / f"figure-{mode}.png"))
    browser.execute_script("localStorage.clear();")


# --------------------------------------------------------------------------------------------
# Jupyter: the "open the repository in Jupyter Lab" path (README, docs/jupyter.md)


def _notebook_sources() -> list[str]:
    pages = [p.relative_to(ROOT).as_posix() for p in sorted((ROOT / "lectures").glob("*.md"))
             if not p.name.startswith("_")]
    return pages + ["book/model.md"]


# The lecture the browser opens, and what it must show once its first code cells have run.
LAB_LECTURE = "lectures/ep3_temperature.md"
# Printed by the first code cell: Theorem thm-ep3-argmax (temperature keeps every argmax).
LAB_FIRST_OUTPUT = "identical predictions at every T: True"
# Where the test puts its copy of the page's downloaded notebook (inside the served root).
LAB_IPYNB_DIR = ROOT / "_build" / "jupyterlab-test"
_PIN_ROLE = re.compile(r"\{pin\}`([^`]+)`")


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """``jupyter lab`` on the repository, as the README starts it, on 127.0.0.1 with a token.

    Its own runtime, config, user-settings and workspace folders (so nothing of the person's
    own JupyterLab leaks in); the venv's settings overrides (scripts/setup.sh) do apply: among
    them autosave off, so that opening and running a lecture never writes to it."""
    import socket
    import subprocess
    import sys

    try:
        import jupytext  # noqa: F401

        import jupyterlab  # noqa: F401
    except ImportError as exc:
        _unavailable(f"{exc.name} is not installed (it is in the book extra: pip install -e '.[book]')")
    tmp = tmp_path_factory.mktemp("lab")
    settings = tmp / "settings"
    for rel, value in {
        "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {"fetchNews": "false"},
    }.items():
        (settings / rel).parent.mkdir(parents=True, exist_ok=True)
        (settings / rel).write_text(json.dumps(value))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    token = "site-test-token"
    env = dict(os.environ, JUPYTER_RUNTIME_DIR=str(tmp / "runtime"),
               JUPYTER_CONFIG_DIR=str(tmp / "config"), JUPYTERLAB_SETTINGS_DIR=str(settings),
               JUPYTERLAB_WORKSPACES_DIR=str(tmp / "workspaces"))
    cmd = [sys.executable, "-m", "jupyterlab", "--no-browser", "--ServerApp.ip=127.0.0.1",
           f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
           f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={ROOT}",
           "--LabApp.news_url=", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
           "--LabApp.extension_manager=readonly"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-root")  # CI runs as root
    log = open(tmp / "lab.log", "w")
    proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)
    base = f"http://127.0.0.1:{port}"

    def call(path, method="GET"):
        req = urllib.request.Request(base + path, method=method,
                                     headers={"Authorization": f"token {token}"})
        with urllib.request.urlopen(req, timeout=30) as response:
            return response.read().decode()

    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                call("/api/status")
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail("jupyter lab did not start:\n" + (tmp / "lab.log").read_text()[-3000:])
                time.sleep(0.5)
        yield {"base": base, "token": token, "call": call, "log": tmp / "lab.log"}
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


@pytest.mark.slow
def test_jupyter_lab_opens_the_lectures_as_notebooks(lab):
    """``jupyter lab`` on the repository serves every MyST lecture as a notebook (jupytext's
    contents manager), the Lab front end carries jupytext's, jupyterlab-myst's and the book's
    pin extension, and the venv's settings make "Jupytext Notebook" the default viewer of
    Markdown and MyST files (a double click opens a lecture as a notebook) and turn autosave
    off. Talks to a real
    server on 127.0.0.1 through its REST API; the browser test below clicks."""
    page = lab["call"]("/lab")
    for extension in ("jupyterlab-jupytext", "jupyterlab-myst", "standarderror-pins"):
        assert extension in page, (f"the Lab page does not load {extension}: run scripts/setup.sh "
                                   "(it installs the book extra and the pin extension)")
    docmanager = json.loads(lab["call"]("/lab/api/settings/@jupyterlab/docmanager-extension:plugin"))
    viewers = {**docmanager["schema"]["properties"]["defaultViewers"].get("default", {}),
               **docmanager["settings"].get("defaultViewers", {})}  # defaults, then the user's
    for file_type in ("markdown", "myst"):
        assert viewers.get(file_type) == "Jupytext Notebook", (
            f"the default viewer of {file_type} files is {viewers.get(file_type)!r}, not "
            "'Jupytext Notebook': scripts/setup.sh copies jupyterlab/overrides.json to the venv's "
            "share/jupyter/lab/settings/overrides.d/")
    autosave = docmanager["settings"].get(
        "autosave", docmanager["schema"]["properties"]["autosave"].get("default"))
    assert autosave is False, (
        "JupyterLab autosaves: opening a lecture would rewrite it through jupytext (the kernel "
        "changes its metadata); jupyterlab/overrides.json turns autosave off")
    for page in _notebook_sources():
        model = json.loads(lab["call"](f"/api/contents/{urllib.parse.quote(page)}?type=notebook&content=1"))
        assert model["type"] == "notebook", f"{page} opens as {model['type']}, not as a notebook"
        cells = model["content"]["cells"]
        code = [c for c in cells if c["cell_type"] == "code"]
        source = (ROOT / page).read_text()
        assert len(code) == source.count("```{code-cell}"), (
            f"{page}: {len(code)} code cells in Jupyter, {source.count('```{code-cell}')} in the file")
        assert model["content"]["metadata"]["kernelspec"]["name"] == "python3"


@pytest.mark.slow  # starts JupyterLab's contents manager (imports jupyter_server) and saves every lecture
def test_saving_a_lecture_from_jupyter_keeps_its_front_matter_and_cells(tmp_path):
    """Saving a lecture from JupyterLab (jupytext's contents manager, the repository's
    ``jupytext.toml``) keeps what the book needs: the front matter's ``settings`` and
    ``mystnb``, and every cell with its source and its options. Without the config a save
    dropped both keys. (The layout may change: YAML comments and line breaks are not kept.)"""
    import asyncio

    try:
        import jupytext
        from jupyter_server.services.contents.largefilemanager import AsyncLargeFileManager
        from jupytext.async_contentsmanager import build_async_jupytext_contents_manager_class
    except ImportError as exc:
        _unavailable(f"{exc.name} is not installed (it is in the book extra: pip install -e '.[book]')")
    shutil.copy(ROOT / "jupytext.toml", tmp_path / "jupytext.toml")
    pages = _notebook_sources()
    for page in pages:
        (tmp_path / page).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / page, tmp_path / page)
    manager = build_async_jupytext_contents_manager_class(AsyncLargeFileManager)(root_dir=str(tmp_path))

    async def open_and_save(page):
        model = await manager.get(page, type="notebook", content=True)
        await manager.save(model, page)

    for page in pages:
        asyncio.run(open_and_save(page))
        before, after = jupytext.read(ROOT / page), jupytext.read(tmp_path / page)
        for key in ("settings", "mystnb", "kernelspec"):
            assert after.metadata.get(key) == before.metadata.get(key), f"{page}: a save changed {key}"
        assert [(c.cell_type, c.source, c.metadata) for c in after.cells] == [
            (c.cell_type, c.source, c.metadata) for c in before.cells], f"{page}: a save changed its cells"


def _pin_quotes(markdown: str) -> dict[str, str]:
    """``{pin}`[page:]name=literal``` quotes of a Markdown text: role text -> quoted literal."""
    return {body: body.partition("=")[2].strip() for body in _PIN_ROLE.findall(markdown)}


def _plain_sentence(markdown: str) -> str:
    """The first sentence of ``markdown`` with a pin and no other markup, as a reader reads it."""
    for sentence in re.split(r"(?<=[.:;])\s+", " ".join(markdown.split())):
        if "{pin}" not in sentence:
            continue
        plain = _PIN_ROLE.sub(lambda m: m.group(1).partition("=")[2].strip(), sentence)
        if not re.search(r"[*_`$\[\]{}<>#]", plain):
            return plain
    raise AssertionError("no sentence with a pin and no other markup in the first Markdown cell")


# In the page: the open notebook (the visible one in the main area), read as a reader sees it.
_NOTEBOOK_STATE = r"""
const panel = Array.from(document.querySelectorAll('#jp-main-dock-panel .jp-NotebookPanel'))
  .find(p => !p.classList.contains('lm-mod-hidden'));
const editor = Array.from(document.querySelectorAll('#jp-main-dock-panel .jp-FileEditor'))
  .find(p => p.offsetParent !== null);
const tab = document.querySelector('#jp-main-dock-panel .lm-TabBar-tab.lm-mod-current');
if (!panel) return {notebook: false, editor: !!editor, tab: tab ? tab.innerText : null};
const cells = Array.from(panel.querySelectorAll('.jp-Notebook-cell'));
const code = cells.filter(c => c.classList.contains('jp-CodeCell'));
const markdown = cells.filter(c => c.classList.contains('jp-MarkdownCell'));
const rendered = markdown.map(c => {
  const r = c.querySelector('.myst, .jp-RenderedMarkdown');
  return r && !c.querySelector('.jp-InputArea-editor:not(.lm-mod-hidden)') ? r.textContent : null;
});
const indicator = panel.querySelector('.jp-Notebook-ExecutionIndicator');
return {
  notebook: true, editor: !!editor, tab: tab ? tab.innerText : null,
  code: code.length, markdown: markdown.length, rendered: rendered,
  pins: Array.from(panel.querySelectorAll('.se-pin')).map(e => [e.textContent, e.title]),
  kernel: indicator ? indicator.getAttribute('data-status') : null,
  outputs: code.slice(0, 3).map(c => ({
    text: Array.from(c.querySelectorAll('.jp-OutputArea-output')).map(o => o.innerText).join('\n'),
    images: c.querySelectorAll('.jp-OutputArea-output img').length,
    prompt: (c.querySelector('.jp-InputPrompt') || {}).innerText || ''})),
};
"""

# In the page: the file browser's entry of that name (null while it is not listed).
_LISTING_ITEM = r"""
return Array.from(document.querySelectorAll('.jp-DirListing-item')).find(e =>
  e.getClientRects().length > 0 &&
  (e.querySelector('.jp-DirListing-itemText') || {}).textContent.trim() === arguments[0]) || null;
"""


# In the page: the file browser's folder, as its breadcrumbs show it ("/lectures/"), and the
# titles of the open tabs.
_WHERE = r"""
const crumbs = document.querySelector('.jp-FileBrowser .jp-BreadCrumbs');
return [crumbs ? crumbs.textContent.replace(/\s+/g, '') : null,
        Array.from(document.querySelectorAll('#jp-main-dock-panel .lm-TabBar-tab'))
          .map(t => t.textContent.trim())];
"""


def _double_click(driver, wait, name, opened):
    """Double click ``name`` in JupyterLab's file browser, as a person opens a file or folder,
    until ``opened(folder, tabs)`` (from ``_WHERE``) says it took effect."""
    from selenium.common.exceptions import (
        ElementNotInteractableException,
        StaleElementReferenceException,
        TimeoutException,
    )
    from selenium.webdriver.common.action_chains import ActionChains

    short = type(wait)(driver, 15)
    for _ in range(4):  # the listing may re-render between finding an entry and clicking it
        if opened(*driver.execute_script(_WHERE)):
            return
        item = wait.until(lambda d: d.execute_script(_LISTING_ITEM, name),
                          f"{name!r} never appeared in the file browser")
        try:
            ActionChains(driver).double_click(item).perform()
            short.until(lambda d: opened(*d.execute_script(_WHERE)))
            return
        except (StaleElementReferenceException, ElementNotInteractableException, TimeoutException):
            continue
    pytest.fail(f"a double click on {name!r} in the file browser did not open it; the browser "
                f"shows {driver.execute_script(_WHERE)}")


def _wait_state(driver, wait, ready, what: str) -> dict:
    """Wait until the open notebook's state satisfies ``ready``; else fail, showing that state."""
    from selenium.common.exceptions import TimeoutException

    try:
        return wait.until(lambda d: (lambda s: s if ready(s) else None)(d.execute_script(_NOTEBOOK_STATE)))
    except TimeoutException:
        s = driver.execute_script(_NOTEBOOK_STATE) or {}
        seen = {k: s.get(k) for k in ("tab", "notebook", "editor", "code", "markdown", "kernel", "outputs")}
        seen["pins"] = len(s.get("pins") or [])
        pytest.fail(f"{what}; after {getattr(wait, '_timeout', '?')} s the notebook shows "
                    f"{json.dumps(seen)[:2500]}")


def _open_and_run(driver, wait, path: str, markdown: str, n_quotes: int, n_code: int, shot: Path,
                  sentence_from: str | None = None):
    """Open ``path`` by double clicks from the file browser's root, check that it is a notebook
    with ``n_code`` code cells, run its first two code cells with Shift+Enter and check their
    outputs, and check that rendered Markdown shows each of its ``n_quotes`` pinned numbers as
    its literal (``markdown``: the Markdown cells' text), and a sentence with a pin, as a
    reader reads it, of ``sentence_from`` (default: ``markdown``)."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    driver.find_element(By.CSS_SELECTOR, ".jp-BreadCrumbs-home").click()
    wait.until(lambda d: d.execute_script(_WHERE)[0] in ("", "/"), "the file browser never went home")
    *folders, name = path.split("/")
    for k, folder in enumerate(folders):
        here = "/" + "".join(f + "/" for f in folders[:k + 1])
        _double_click(driver, wait, folder, lambda crumbs, tabs, here=here: crumbs.endswith(here))
    _double_click(driver, wait, name, lambda crumbs, tabs: name in tabs)
    state = _wait_state(driver, wait, lambda s: s["tab"] and name in s["tab"] and (
        s["notebook"] or s["editor"]), f"a double click on {path} opened nothing")
    assert state["notebook"] and not state["editor"], (
        f"a double click opens {path} as a text file, not as a notebook: the venv lacks the "
        "default-viewer override (run scripts/setup.sh)")
    state = _wait_state(
        driver, wait, lambda s: s["notebook"] and s["code"] == n_code and s["kernel"] == "idle"
        and len(s["pins"]) >= n_quotes,
        f"{path}: not {n_code} code cells, an idle kernel and {n_quotes} pinned numbers shown")
    # Rendered Markdown: each pinned number reads as its literal, never as role syntax.
    quotes = _pin_quotes(markdown)
    rendered = [" ".join(t.split()) for t in state["rendered"] if t]
    assert rendered, f"{path}: no Markdown cell is rendered"
    sentence = _plain_sentence(sentence_from or markdown)
    assert any(sentence in t for t in rendered), (
        f"{path}: no rendered Markdown cell reads {sentence!r}; the first one reads:\n{rendered[0][:600]}")
    for t in filter(None, state["rendered"]):
        assert "{pin}" not in t, f"{path}: a rendered Markdown cell shows role syntax:\n{t[:600]}"
        shown = [body for body in quotes if body in t]
        assert not shown, f"{path}: a rendered cell shows the pin's name with its number: {shown[:3]}"
    strange = [pin for pin in state["pins"] if pin[0] not in quotes.values()]
    assert bool(state["pins"]) == bool(n_quotes) and not strange, (
        f"{path}: pins shown that the source does not quote: {strange}")
    assert len(state["pins"]) == n_quotes, (
        f"{path}: {len(state['pins'])} pinned numbers shown, {n_quotes} quotes in its Markdown cells")
    # Run the first two code cells through the UI: click into each, Shift+Enter.
    for k in range(2):
        cell = driver.find_elements(
            By.CSS_SELECTOR, "#jp-main-dock-panel .jp-NotebookPanel:not(.lm-mod-hidden) .jp-CodeCell")[k]
        driver.execute_script("arguments[0].scrollIntoView({block: 'center'});", cell)
        cell.find_element(By.CSS_SELECTOR, ".jp-InputArea-editor").click()
        ActionChains(driver).key_down(Keys.SHIFT).send_keys(Keys.ENTER).key_up(Keys.SHIFT).perform()
    state = _wait_state(driver, type(wait)(driver, 150),
                        lambda s: s["outputs"][1]["images"] and s["kernel"] == "idle",
                        f"{path}: the first two code cells did not show their outputs")
    # JupyterLab renders only the cells near the viewport: bring the first one back to read it.
    first = driver.find_elements(
        By.CSS_SELECTOR, "#jp-main-dock-panel .jp-NotebookPanel:not(.lm-mod-hidden) .jp-CodeCell")[0]
    driver.execute_script("arguments[0].scrollIntoView({block: 'start'});", first)
    state = _wait_state(driver, wait, lambda s: s["outputs"][0]["text"],
                        f"{path}: the first code cell's output is not shown")
    first_out, second_out = state["outputs"][0], state["outputs"][1]
    assert LAB_FIRST_OUTPUT in first_out["text"], f"{path}: first cell printed:\n{first_out['text'][:800]}"
    assert "Error" not in first_out["text"] + second_out["text"], first_out["text"] + second_out["text"]
    assert "[1]" in first_out["prompt"] and "[2]" in second_out["prompt"], (first_out, second_out)
    cells = driver.find_elements(
        By.CSS_SELECTOR, "#jp-main-dock-panel .jp-NotebookPanel:not(.lm-mod-hidden) .jp-Notebook-cell")
    driver.execute_script("arguments[0].scrollIntoView({block: 'start'});", cells[0])
    driver.save_screenshot(str(shot.with_name(shot.stem + "-top.png")))
    code = [c for c in cells if "jp-CodeCell" in c.get_attribute("class")]
    driver.execute_script("arguments[0].scrollIntoView({block: 'start'});", code[0])
    driver.save_screenshot(str(shot.with_name(shot.stem + "-run.png")))
    return state


@pytest.mark.slow
def test_jupyter_lab_opens_runs_and_renders_a_lecture_in_the_browser(lab):
    """A reader's path through JupyterLab, in headless Chromium: double click ``lectures`` then
    ``ep3_temperature.md`` in the file browser; it opens as a notebook with every code cell;
    its rendered Markdown (jupyterlab-myst, and the book's pin extension) reads each ``{pin}``
    quote as its number; Shift+Enter on the first two code cells prints the table and draws the
    figure. Then the same for the page's notebook download (``.ipynb`` from the built site when
    there is one, else made by jupytext from the page), with its outputs cleared first: the
    download's Markdown is plain (its quotes are numbers already, no pin to render), and reads
    the same sentence.
    Screenshots (the top, and the cells run): ``_build/screenshots/jupyterlab-*.png``."""
    import jupytext
    import nbformat
    from selenium.webdriver.support.ui import WebDriverWait

    source = ROOT / LAB_LECTURE
    before = source.read_bytes()
    n_code = source.read_text().count("```{code-cell}")
    markdown = "\n\n".join(c.source for c in jupytext.read(source).cells if c.cell_type == "markdown")
    stem = source.stem
    download = SITE / "_sources" / "lectures" / f"{stem}.ipynb"
    nb = nbformat.read(download, as_version=4) if download.is_file() else jupytext.read(source)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    LAB_IPYNB_DIR.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, LAB_IPYNB_DIR / f"{stem}.ipynb")
    nb_markdown = "\n\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    SHOTS.mkdir(parents=True, exist_ok=True)
    profile = tempfile.mkdtemp(prefix="lab-test-chromium-")
    driver = _chromium(profile, window="1400,1000")
    try:
        wait = WebDriverWait(driver, 60)
        driver.get(f"{lab['base']}/lab?token={lab['token']}")
        wait.until(lambda d: d.execute_script(_LISTING_ITEM, "lectures"), "JupyterLab never loaded")
        _open_and_run(driver, wait, LAB_LECTURE, markdown, len(_PIN_ROLE.findall(markdown)), n_code,
                      SHOTS / f"jupyterlab-{stem}")
        for kernel in json.loads(lab["call"]("/api/kernels")):  # one kernel at a time: CPU
            lab["call"](f"/api/kernels/{kernel['id']}", method="DELETE")
        ipynb = (LAB_IPYNB_DIR / f"{stem}.ipynb").relative_to(ROOT).as_posix()
        _open_and_run(driver, wait, ipynb, nb_markdown, len(_PIN_ROLE.findall(nb_markdown)), n_code,
                      SHOTS / f"jupyterlab-{stem}-ipynb", sentence_from=markdown)
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)
        shutil.rmtree(LAB_IPYNB_DIR, ignore_errors=True)
    assert source.read_bytes() == before, f"opening and running {LAB_LECTURE} changed the file"
