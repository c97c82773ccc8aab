"""The book's PDF (``bash scripts/pdf.sh``), tested as a reader of the printed book meets it.

``scripts/pdf.sh`` prints the built site (``_build/html``) with headless Chromium into
``_build/pdf/book.pdf`` and one PDF per page, and copies them into the site (``_build/html/pdf``).
What the tests expect comes from the sources and the built HTML, never from the script that
made the PDF: the pages and their order from ``_toc.yml``, each page's title from its first
heading, the quoted numbers from the ``{pin}`name=value``` quotes of its source, the exercises
from its ``{exercise}`` directives, and the solutions' text and the figures from the HTML.
The PDF is read with Debian's poppler-utils (``pdfinfo``, ``pdftotext``, ``pdftoppm``,
``pdfimages``) and pypdf (its bookmarks and links).

* the book opens, has a title page, and a bookmark and a contents entry, with the right page
  number, for every page of the table of contents, in that order; every page's own PDF opens
  and has as many pages as that page has in the book;
* every page carries its page number;
* every page's text contains every number its source quotes (at the quoted value), the title
  of every exercise, and a passage of every solution (a solution printed closed has no text);
* every figure of the built page is an image of its pages, and none is blank; the first page
  of every page of the table of contents is not blank;
* no link of any PDF points at the server the pages were printed from;
* the site links the PDFs: the landing page links the book, every page's download menu links
  its own PDF and the book's (checked in the browser, on the site opened from disk: offline).

Where it runs: skipped, with the reason, without a built PDF (``bash scripts/book.sh`` then
``bash scripts/pdf.sh``), poppler-utils, pypdf, or (the download-menu test) the browser; with
``SITE_REQUIRED=1`` (``.ci/run``) each of these is a failure.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import tempfile
import unicodedata
import urllib.parse
from html.parser import HTMLParser
from pathlib import Path

import pytest

from standarderror_book.browser import Unavailable, chromium

# poppler's programs run on the printed book, and one test opens the browser: seconds a test,
# 13 to 15 s in all, which the fast tier paid wherever a book PDF had been printed
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
SITE = Path(os.environ.get("SITE_HTML", ROOT / "_build" / "html"))
PDF = Path(os.environ.get("PDF_DIR", SITE.parent / "pdf"))
BOOK = PDF / "book.pdf"
REQUIRED = os.environ.get("SITE_REQUIRED", "").strip().lower() not in ("", "0", "false", "no")
POPPLER = ("pdfinfo", "pdftotext", "pdftoppm", "pdfimages")


def _unavailable(reason: str):
    if REQUIRED:
        pytest.fail(f"{reason} (SITE_REQUIRED is set, so this is a failure: .ci/run builds the "
                    "book, installs the browser and poppler-utils, and prints the PDF first)")
    pytest.skip(reason)


def _require():
    missing = [tool for tool in POPPLER if shutil.which(tool) is None]
    if missing:
        _unavailable(f"{', '.join(missing)} not found: install poppler-utils "
                     "(bash scripts/setup_browser.sh installs it with the browser)")
    try:
        import pypdf  # noqa: F401
    except ImportError:
        _unavailable("pypdf is not installed (it is in the book extra: pip install -e '.[book]')")
    if not BOOK.is_file():
        _unavailable(f"no book PDF at {BOOK}: build the book (bash scripts/book.sh), then print "
                     "it (bash scripts/pdf.sh)")


def _run(*args: str) -> str:
    out = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, f"{' '.join(args)} failed ({out.returncode}): {out.stderr[-2000:]}"
    return out.stdout


_QUOTES = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"'})


def norm(text: str) -> str:
    """Text as compared: NFKC (ligatures apart), curly quotes as straight ones (Sphinx's smart
    quotes curl the source's), one space for any run of white space."""
    text = unicodedata.normalize("NFKC", text).translate(_QUOTES)
    return re.sub(r"\s+", " ", text).strip()


# --------------------------------------------------------------------------------------------
# What the sources say


def toc_levels() -> list[tuple[str, int]]:
    """(docname, depth of its bookmark) for the pages of ``_toc.yml``, in reading order: the
    landing page at the top, a chapter under its part (or at the top without parts), a
    section under its chapter."""
    import yaml

    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    pages = [(toc["root"], 0)]

    def walk(items, depth):
        for item in items or []:
            if "file" in item:
                pages.append((item["file"], depth))
            walk(item.get("sections"), depth + 1)

    for part in toc.get("parts", []):
        walk(part.get("chapters"), 1)
    walk(toc.get("chapters"), 0)
    return pages


def toc_pages() -> list[str]:
    """The docnames of ``_toc.yml``, in reading order."""
    return [docname for docname, _ in toc_levels()]


def _body_lines(docname: str) -> list[str]:
    """The lines of a page's source outside its front matter."""
    lines = (ROOT / f"{docname}.md").read_text(encoding="utf-8").splitlines()
    if lines and lines[0].strip() == "---":
        end = next(i for i in range(1, len(lines)) if lines[i].strip() == "---")
        lines = lines[end + 1:]
    return lines


def source_title(docname: str) -> str:
    """The page's first level-1 heading, outside front matter and code, markup stripped."""
    fence = None
    for line in _body_lines(docname):
        m = re.match(r"^(`{3,}|~{3,})", line)
        if m:
            if fence is None:
                fence = m.group(1)
            elif line.startswith(fence):
                fence = None
            continue
        if fence is None and line.startswith("# "):
            return norm(line[2:].replace("`", "").replace("*", ""))
    raise AssertionError(f"{docname}.md has no level-1 heading")


_PIN = re.compile(r"\{pin\}`([^`]+)`")


def source_pins(docname: str) -> list[tuple[str, str]]:
    """(name, quoted value) of every ``{pin}`name=value``` quote of the page."""
    out = []
    for quote in _PIN.findall("\n".join(_body_lines(docname))):
        name, sep, value = quote.partition("=")
        assert sep, f"{docname}: malformed pin quote {quote!r}"
        out.append((name.strip(), value.strip()))
    return out


def source_exercises(docname: str) -> list[str]:
    """The title of every exercise of the page ('' for an untitled one)."""
    return [norm(t.replace("`", "")) for t in
            re.findall(r"^`{3,}\{exercise\}[ \t]*(.*)$", "\n".join(_body_lines(docname)), re.M)]


class _Article(HTMLParser):
    """From a built page: its figures (``<img>`` of the article) and, for every solution, the
    runs of its prose between formulas (the text a printed solution must show)."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.depth = 0
        self.article = None  # depth of <article>
        self.solution = None  # depth of the solution's <div>
        self.title = None  # depth of the solution's title
        self.math = None  # depth of a formula
        self.para = None  # depth of a <p> in a solution
        self.note = None  # depth of a pinned number's note (shown on hover, never printed)
        self.images: list[str] = []
        self.solutions: list[list[str]] = []
        self.run: list[str] = []

    VOID = {"img", "br", "hr", "meta", "link", "input", "wbr", "source", "col", "area", "embed"}

    def _end_run(self):
        text = norm("".join(self.run))
        if text and self.solutions:
            self.solutions[-1].append(text)
        self.run = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        cls = (a.get("class") or "").split()
        if tag == "article" and "bd-article" in cls:
            self.article = self.depth
        if tag == "img" and self.article is not None:
            self.images.append(a.get("src") or "")
        if tag in self.VOID:
            return
        self.depth += 1
        if "se-pin-note" in cls and self.note is None:
            self.note = self.depth
        if tag == "div" and "solution" in cls and "admonition" in cls and self.solution is None:
            self.solution = self.depth
            self.solutions.append([])
        elif self.solution is not None:
            if "admonition-title" in cls and self.title is None:
                self.title = self.depth
            if self.math is None and ("math" in cls or tag in ("code", "pre")):
                self._end_run()
                self.math = self.depth
            if tag == "p" and self.para is None and self.title is None:
                self.para = self.depth

    def handle_endtag(self, tag):
        if tag in self.VOID:
            return
        if self.note == self.depth:
            self.note = None
        if self.math == self.depth:
            self.math = None
        if self.title == self.depth:
            self.title = None
        if self.para == self.depth:
            self._end_run()
            self.para = None
        if self.solution == self.depth:
            self.solution = None
        if self.article == self.depth:
            self.article = None
        self.depth -= 1

    def handle_data(self, data):
        if self.para is not None and self.math is None and self.title is None and self.note is None:
            self.run.append(data)


@functools.cache
def built(docname: str) -> _Article:
    parser = _Article()
    parser.feed((SITE / f"{docname}.html").read_text(encoding="utf-8", errors="replace"))
    return parser


# --------------------------------------------------------------------------------------------
# What the PDF says


@functools.cache
def book_text() -> list[str]:
    """The text of every page of the book (pdftotext, in reading order)."""
    return _run("pdftotext", "-enc", "UTF-8", str(BOOK), "-").split("\f")


@functools.cache
def book_layout() -> list[str]:
    return _run("pdftotext", "-layout", "-enc", "UTF-8", str(BOOK), "-").split("\f")


@functools.cache
def bookmarks() -> list[tuple[int, str, int]]:
    """(depth, title, page index) of every bookmark of the book, in order."""
    from pypdf import PdfReader

    reader = PdfReader(str(BOOK))
    out = []

    def walk(items, depth):
        for item in items:
            if isinstance(item, list):
                walk(item, depth + 1)
            else:
                out.append((depth, norm(str(item.title)), reader.get_destination_page_number(item)))

    walk(reader.outline, 0)
    return out


@functools.cache
def page_labels() -> list[str]:
    from pypdf import PdfReader

    return list(PdfReader(str(BOOK)).page_labels)


@functools.cache
def chapters() -> dict[str, range]:
    """The pages of the book each page of the table of contents fills: from its bookmark to
    the next one's (the last: to the end)."""
    pages = toc_pages()
    marks = bookmarks()
    starts, i = {}, 0
    for docname, depth in toc_levels():
        title = source_title(docname)
        while i < len(marks) and (marks[i][1], marks[i][0]) != (title, depth):
            i += 1
        assert i < len(marks), (f"no bookmark {title!r} at depth {depth} ({docname}) after the "
                                f"previous page's: bookmarks {[m[:2] for m in marks]}")
        starts[docname] = marks[i][2]
        i += 1
    ends = [starts[d] for d in pages[1:]] + [len(book_text()) - 1]  # pdftotext ends with \f
    return {d: range(starts[d], end) for d, end in zip(pages, ends)}


def chapter_text(docname: str) -> str:
    return norm(" ".join(book_text()[i] for i in chapters()[docname]))


@functools.cache
def images() -> list[dict]:
    """Every image drawn in the book (pdfimages -list): page (1-based), kind, size, object."""
    rows = []
    for line in _run("pdfimages", "-list", str(BOOK)).splitlines()[2:]:
        f = line.split()
        rows.append({"page": int(f[0]), "num": int(f[1]), "type": f[2],
                     "width": int(f[3]), "height": int(f[4])})
    return rows


# --------------------------------------------------------------------------------------------
# The tests


def test_the_book_and_every_page_pdf_open():
    """pdfinfo opens the book and every page's PDF; A4; a title page before the contents; a
    page's own PDF has as many pages as it fills in the book."""
    _require()
    info = _run("pdfinfo", str(BOOK))
    assert re.search(r"Page size:\s+59[0-9.]+ x 84[0-9.]+ pts \(A4\)", info), info
    npages = int(re.search(r"Pages:\s+(\d+)", info).group(1))
    assert npages == len(book_text()) - 1
    title = norm(book_text()[0])
    import yaml

    book_title = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))["title"]
    assert norm(book_title) in title, f"the first page is not the title page: {title[:200]!r}"
    for docname, pages in chapters().items():
        own = PDF / f"{docname}.pdf"
        assert own.is_file(), f"no PDF of {docname} at {own}"
        n = int(re.search(r"Pages:\s+(\d+)", _run("pdfinfo", str(own))).group(1))
        assert n == len(pages) > 0, f"{own}: {n} pages, but {docname} fills {len(pages)} in the book"
        copy = SITE / "pdf" / f"{docname}.pdf"
        assert copy.is_file() and copy.stat().st_size == own.stat().st_size, (
            f"{copy}: the site's copy of the page's PDF is missing or differs")
    assert (SITE / "pdf" / "book.pdf").stat().st_size == BOOK.stat().st_size


def test_a_bookmark_and_a_contents_entry_for_every_page_in_order():
    """Every page of _toc.yml has a bookmark (chapters() finds them in the table's order) and
    a line of the printed contents that names it with the page number it starts on."""
    _require()
    ranges = chapters()
    starts = [r.start for r in ranges.values()]
    assert starts == sorted(starts) and len(set(starts)) == len(starts), (
        f"pages out of order or missing in the book: {dict(zip(ranges, starts))}")
    labels = page_labels()
    first_main = ranges[toc_pages()[0]].start
    front = norm(" ".join(book_text()[:first_main]))
    assert "Contents" in front, "no contents page before the first page"
    contents = "\n".join(book_layout()[:first_main]).translate(_QUOTES)
    for docname, pages in ranges.items():
        title, label = source_title(docname), labels[pages.start]
        # A contents line: the title (it may wrap), dot leaders, the page number at the end.
        words = title.split()
        pattern = r"\s+".join(map(re.escape, words)) + r"[\s.·…_-]*" + re.escape(label) + r"\s*$"
        assert re.search(pattern, contents, re.M), (
            f"the contents have no line {title!r} ... {label} ({docname})")
        assert norm(title) in norm(book_text()[pages.start]), (
            f"page {label} does not show {title!r} ({docname}): "
            f"{norm(book_text()[pages.start])[:200]!r}")


def test_every_page_is_numbered():
    """The page number is printed at the foot of every page after the front matter (as the
    PDF's page label, counted from 1), and of every page of a page's own PDF (from 1)."""
    _require()
    labels = page_labels()
    first_main = chapters()[toc_pages()[0]].start
    assert labels[first_main] == "1"
    layout = book_layout()
    wrong = []
    for i in range(first_main, len(layout) - 1):
        lines = [ln.strip() for ln in layout[i].splitlines() if ln.strip()]
        if not lines or lines[-1] != labels[i] or labels[i] != str(i - first_main + 1):
            wrong.append(f"page {i + 1}: label {labels[i]}, last line {lines[-1:]!r}")
    assert not wrong, "pages without their number at the foot:\n  " + "\n  ".join(wrong[:20])
    for docname in toc_pages():
        pages = _run("pdftotext", "-layout", str(PDF / f"{docname}.pdf"), "-").split("\f")[:-1]
        for k, text in enumerate(pages, 1):
            lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
            assert lines and lines[-1] == str(k), f"{docname}.pdf page {k}: foot {lines[-1:]!r}"


def test_every_quoted_number_is_in_the_text_of_its_page():
    """Every ``{pin}`` quote of a page's source appears, at its quoted value, in the text of
    that page in the book: the numbers the build checked are the numbers printed (including
    those inside solutions, which are printed open)."""
    _require()
    missing, checked = [], 0
    for docname in toc_pages():
        pins = source_pins(docname)
        if not pins:
            continue
        text = chapter_text(docname)
        for name, value in pins:
            checked += 1
            if not re.search(r"(?<![\w.])" + re.escape(norm(value)) + r"(?![\w])", text):
                missing.append(f"{docname}: {name}={value}")
    assert checked > 100, f"only {checked} quoted numbers found in the sources"
    assert not missing, (f"{len(missing)} of {checked} quoted numbers not in the PDF's text:\n  "
                         + "\n  ".join(missing))


def test_every_exercise_and_its_open_solution_is_printed():
    """Every exercise of a page is printed under its title (or, untitled, as a numbered
    exercise), with as many solutions; and a passage of every solution's prose (as built in
    the HTML) is in the PDF's text, which a solution printed closed would not be."""
    _require()
    problems, n_ex, n_sol = [], 0, 0
    for docname in toc_pages():
        exercises = source_exercises(docname)
        solutions = built(docname).solutions
        if not exercises and not solutions:
            continue
        text = chapter_text(docname)
        for title in exercises:
            n_ex += 1
            if title and title not in text:
                problems.append(f"{docname}: exercise title {title!r} not printed")
        numbered = re.findall(r"\bExercise (\d+(?:\.\d+)*)(?: \(|\b)", text)
        if len(set(numbered)) < len(exercises):
            problems.append(f"{docname}: {len(exercises)} exercises, but the text numbers only "
                            f"{sorted(set(numbered))}")
        if text.count("Solution to Exercise") < len(solutions):
            problems.append(f"{docname}: {len(solutions)} solutions built, "
                            f"{text.count('Solution to Exercise')} printed")
        for k, runs in enumerate(solutions, 1):
            n_sol += 1
            words = max(runs, key=len, default="").split()
            if len(words) < 6:
                problems.append(f"{docname}: solution {k} has no prose run to look for: {runs}")
                continue
            sample = " ".join(words[:12])
            if sample not in text:
                problems.append(f"{docname}: solution {k} not printed open (no {sample!r})")
    assert not problems, "\n".join(problems)
    assert n_ex >= 10 and n_sol >= 10, f"only {n_ex} exercises and {n_sol} solutions found"


def _pixels(png: Path):
    import numpy as np
    from matplotlib import image

    a = np.asarray(image.imread(str(png)), dtype=float)
    if a.ndim == 3:
        a = a[..., :3].mean(axis=2)
    return a / (a.max() if a.max() > 1 else 1.0)


def _png_size(path: Path) -> tuple[int, int] | None:
    """(width, height) from a PNG's header, None if the file is not a PNG."""
    head = path.read_bytes()[:24]
    if head[:8] != b"\x89PNG\r\n\x1a\n":
        return None
    return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")


def test_every_figure_is_printed_and_not_blank(tmp_path):
    """Each figure of a built page (an ``<img>`` of its article, a PNG) is an image of the
    same pixel size on that page's pages of the book (so a figure that did not load, or a box
    drawn in its place, does not count), and none of them is one flat colour."""
    _require()
    from collections import Counter

    problems, matched, total = [], [], 0
    for docname, pages in chapters().items():
        want = Counter()
        for src in built(docname).images:
            path = (SITE / docname).parent / urllib.parse.unquote(src.split("?")[0])
            size = _png_size(path) if path.is_file() else None
            if size is None:
                problems.append(f"{docname}: figure {src} is not a PNG of the built site")
                continue
            want[size] += 1
        total += sum(want.values())
        here = [r for r in images() if r["type"] == "image" and r["page"] - 1 in pages]
        have = Counter((r["width"], r["height"]) for r in here)
        for size, n in want.items():
            if have[size] < n:
                problems.append(f"{docname}: {n} figure(s) of {size[0]}x{size[1]} px built, "
                                f"{have[size]} printed")
        matched += [r for r in here if (r["width"], r["height"]) in want]
    assert not problems, "\n".join(problems)
    assert total > 20, f"only {total} figures found in the built pages"
    _run("pdfimages", "-png", str(BOOK), str(tmp_path / "img"))
    blank = []
    for row in matched:
        png = tmp_path / f"img-{row['num']:03d}.png"
        a = _pixels(png)
        if a.std() < 0.01:
            blank.append(f"image {row['num']} on page {row['page']} ({row['width']}x"
                         f"{row['height']}) is one flat colour (std {a.std():.4f})")
    assert not blank, "\n".join(blank)


def test_the_first_page_of_every_page_is_not_blank(tmp_path):
    """pdftoppm renders the first page of every page of the table of contents with ink on it:
    at least 2% of its pixels are not white."""
    _require()
    blank = []
    for docname, pages in chapters().items():
        n = pages.start + 1
        prefix = tmp_path / re.sub(r"\W", "_", docname)
        _run("pdftoppm", "-gray", "-r", "30", "-png", "-f", str(n), "-l", str(n), str(BOOK),
             str(prefix))
        png = next(tmp_path.glob(prefix.name + "*.png"))
        ink = float((_pixels(png) < 0.9).mean())
        if ink < 0.02:
            blank.append(f"{docname}: page {n} has ink on {ink:.1%} of its pixels")
    assert not blank, "\n".join(blank)


def test_no_link_points_at_the_print_server():
    """The pages were printed from a server on 127.0.0.1 that is gone: no link of the book or
    of a page's PDF may lead there (links between pages are links inside the book)."""
    _require()
    from pypdf import PdfReader

    bad = []
    for path in [BOOK] + [PDF / f"{d}.pdf" for d in toc_pages()]:
        for i, page in enumerate(PdfReader(str(path)).pages, 1):
            for ref in page.get("/Annots") or []:
                action = ref.get_object().get("/A")
                uri = str(action.get_object().get("/URI", "")) if action is not None else ""
                if re.match(r"https?://(127\.0\.0\.1|localhost|book\.invalid)", uri):
                    bad.append(f"{path.name} page {i}: {uri}")
    assert not bad, f"{len(bad)} links to the print server:\n  " + "\n  ".join(bad[:20])


def test_the_site_links_the_pdfs_offline():
    """The landing page's book.pdf (a placeholder in the build's HTML, ``data-se-pdf``) and
    every page's download menu (the script that puts its own PDF and the book's there) link
    the printed PDFs: in the browser, on the site opened from disk (file://, nothing served),
    the landing page's link and the menu's two links lead to the PDFs, which exist."""
    _require()
    intro = SITE / f"{toc_pages()[0]}.html"
    assert 'data-se-pdf="book.pdf"' in intro.read_text(encoding="utf-8"), (
        "the landing page has no placeholder for the book's PDF")
    for docname in toc_pages():
        page = (SITE / f"{docname}.html").read_text(encoding="utf-8")
        assert re.search(r'<script src="[^"]*_static/pdf-links\.js', page), (
            f"{docname}.html does not load _static/pdf-links.js")
    profile = tempfile.mkdtemp(prefix="pdf-test-chromium-")
    try:
        driver = chromium(profile)
    except Unavailable as exc:
        shutil.rmtree(profile, ignore_errors=True)
        _unavailable(str(exc))
    try:
        driver.get(intro.as_uri())
        hrefs = driver.execute_script(
            "return Array.from(document.querySelectorAll('a[data-se-pdf]')).map(a => a.href);")
        targets = {Path(urllib.parse.unquote(urllib.parse.urlsplit(u).path)) for u in hrefs}
        assert SITE / "pdf" / "book.pdf" in targets, f"the landing page links no book PDF: {hrefs}"
        for docname in ("lectures/ep3_temperature", "book/api/tiny"):
            if docname not in toc_pages():
                continue
            driver.get((SITE / f"{docname}.html").as_uri())
            links = driver.execute_script(
                "return Array.from(document.querySelectorAll("
                "'.dropdown-download-buttons a[href$=\".pdf\"]')).map(a => a.href);")
            files = sorted(Path(urllib.parse.unquote(urllib.parse.urlsplit(u).path)) for u in links)
            assert files == sorted([SITE / "pdf" / f"{docname}.pdf", SITE / "pdf" / "book.pdf"]), (
                f"{docname}: the download menu links {links}")
            assert all(f.is_file() for f in files), f"{docname}: missing {files}"
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)
