"""Print the built book to PDF: ``_build/pdf/book.pdf`` and one PDF per page.

Run through ``bash scripts/pdf.sh`` after ``bash scripts/book.sh``. Nothing is executed again:
the pages are the HTML of the build (``_build/html``), whose every quoted number the build has
checked against the code, printed by headless Chromium (Debian's ``chromium`` and
``chromedriver``, installed by ``bash scripts/setup_browser.sh``) through the Chrome DevTools
Protocol's ``Page.printToPDF``, with the theme's print stylesheet (no sidebars, no header).

What the script does, in order:

1. reads the table of contents (``_toc.yml``) for the reading order, the parts and the
   chapters' sections;
2. serves ``_build/html`` on 127.0.0.1 and, in a browser with every route to the outside world
   closed, loads every page, waits for MathJax and for every image, opens every collapsed block
   (the sphinx-exercise solutions, any ``<details>``), checks that nothing is left closed or
   unloaded, and prints it (A4, a running head with the page's title, an outline from its
   headings);
3. writes the title page and a table of contents with page numbers, and prints them;
4. stamps page numbers, from a sheet of empty pages that Chromium numbers itself (its
   header/footer ``pageNumber``), merged onto the pages with pypdf (each page's PDF counts
   from 1; the book counts its main matter from 1 after the front matter, whose pages are
   labelled i, ii, ...), turns the links between pages
   into links inside the book (a page's own PDF drops them: their targets are other files),
   adds the bookmarks (part, chapter, section, headings) and writes
   ``_build/pdf/<page>.pdf`` for every page and ``_build/pdf/book.pdf``;
5. copies the PDFs into the site, ``_build/html/pdf/``, where the landing page's link and the
   ``.pdf`` entry of every page's download menu (``book/_static/pdf-links.js``) point.

Why Chromium and not LaTeX: the browser is already installed for the site test, the HTML is
what the build checked (a LaTeX build would be a second Sphinx build, with its own rendering
of every directive, and a TeX Live installation in CI), and MathJax, the theorems, the
figures and the theme's print stylesheet already print cleanly. ``--wrapped`` reports code
lines too long for the printed column (the print stylesheet wraps them rather than cut them).

Any page that does not load, any figure that does not load, any block that stays closed makes
the script fail with the page named. ``tests/test_pdf.py`` checks the result.
"""

from __future__ import annotations

import argparse
import base64
import concurrent.futures
import html
import io
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path

from standarderror_book.browser import Unavailable, chromium, require, serve

ROOT = Path(__file__).resolve().parents[1]

# A4 in inches (Page.printToPDF takes inches), and the margins. The running head sits in the
# top margin, the page number in the bottom one.
PAPER = (8.27, 11.69)
MARGIN = {"marginTop": 0.75, "marginBottom": 0.75, "marginLeft": 0.55, "marginRight": 0.55}
# The pages print at this scale: the column is then as wide as on a wide screen (about 90
# monospace characters; the site keeps code within 88), and the text a book's size (9.6 pt).
SCALE = 0.75
FONT = "'DejaVu Sans', 'Helvetica', 'Arial', sans-serif"


@dataclass
class Entry:
    """One page of the table of contents."""

    docname: str  # e.g. "lectures/ep3_temperature"
    part: str | None  # the caption of its part (None: the landing page)
    level: int  # 0 chapter, 1 section of a chapter
    title: str = ""
    pdf: bytes = b""
    pages: int = 0
    outline: list = field(default_factory=list)  # [(title, page index, children)]
    seconds: float = 0.0
    wrapped: list = field(default_factory=list)  # code lines too long for the printed column
    dests: dict = field(default_factory=dict)  # its anchors in its printed pages

    @property
    def html(self) -> str:
        return self.docname + ".html"


def read_toc(path: Path) -> list[Entry]:
    """The pages of ``_toc.yml`` (jb-book format) in reading order."""
    import yaml

    toc = yaml.safe_load(path.read_text(encoding="utf-8"))
    entries = [Entry(toc["root"], None, 0)]

    def walk(items, part, level):
        for item in items or []:
            if "file" in item:
                entries.append(Entry(item["file"], part, level))
            walk(item.get("sections"), part, level + 1)

    for part in toc.get("parts", []):
        walk(part.get("chapters"), part.get("caption"), 0)
    walk(toc.get("chapters"), None, 0)
    return entries


# --------------------------------------------------------------------------------------------
# The browser


def start_browser(profile: str):
    """One printing browser: headless Chromium, offline, at the printed column's window."""
    return chromium(profile, window="1000,1400", timeout=120)


# Runs in a loaded page: waits for MathJax, fonts and images, opens every collapsed block,
# and reports what a printed page would be missing.
_PREPARE = r"""
const done = arguments[arguments.length - 1];
const frames = () => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
(async () => {
  if (window.MathJax && MathJax.startup && MathJax.startup.promise) {
    await MathJax.startup.promise;
  }
  await document.fonts.ready;
  const article = document.querySelector('article.bd-article') || document.body;
  const imgs = Array.from(article.querySelectorAll('img'));
  imgs.forEach(img => { img.loading = 'eager'; });
  await Promise.all(imgs.map(img => img.decode().catch(() => null)));
  // No transitions: an opened block must print fully opaque, not half way through fading in.
  const style = document.createElement('style');
  style.textContent = '*, *::before, *::after { transition: none !important; ' +
                      'animation: none !important; }';
  document.head.appendChild(style);
  document.querySelectorAll('.toggle-hidden').forEach(el => el.classList.remove('toggle-hidden'));
  document.querySelectorAll('.toggle-button-hidden')
          .forEach(el => el.classList.remove('toggle-button-hidden'));
  document.querySelectorAll('details').forEach(d => { d.open = true; });
  await frames();
  const hidden = Array.from(article.querySelectorAll('.solution, .toggle, details'))
    .filter(el => {
      const body = Array.from(el.children).filter(c => !c.classList.contains('admonition-title')
                                                   && c.tagName !== 'SUMMARY');
      return body.length && !body.some(c => getComputedStyle(c).visibility !== 'hidden'
                                            && getComputedStyle(c).opacity === '1'
                                            && c.getBoundingClientRect().height > 0);
    }).map(el => el.id || el.className);
  const h1 = article.querySelector('h1');
  done({
    title: h1 ? h1.textContent.replace(/[#\u00b6]\s*$/, '').trim() : document.title,
    hidden: hidden,
    broken: imgs.filter(img => !(img.complete && img.naturalWidth > 0))
                .map(img => img.getAttribute('src')),
    mathErrors: document.querySelectorAll('mjx-merror, [data-mjx-error]').length,
    untypeset: Array.from(document.querySelectorAll('.math'))
                 .filter(m => !m.querySelector('mjx-container')).length,
    failed: performance.getEntriesByType('resource')
              .filter(r => r.responseStatus >= 400).map(r => `${r.name} (${r.responseStatus})`),
  });
})().catch(e => done({error: String(e)}));
"""


# Under print media, at the printed column's width: the lines of code and output that do not
# fit (the print stylesheet wraps them rather than cutting them; the script reports them).
_WRAPPED = r"""
const article = document.querySelector('article.bd-article') || document.body;
const out = [];
article.querySelectorAll('pre').forEach(pre => {
  const old = pre.style.whiteSpace;
  pre.style.whiteSpace = 'pre';
  if (pre.scrollWidth > pre.clientWidth + 1) {
    const lines = pre.textContent.split('\n');
    const longest = lines.reduce((a, b) => (b.length > a.length ? b : a), '');
    out.push(longest.slice(0, 100));
  }
  pre.style.whiteSpace = old;
});
return out;
"""


def wrapped_lines(driver) -> list[str]:
    width = (PAPER[0] - MARGIN["marginLeft"] - MARGIN["marginRight"]) * 96 / SCALE
    driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"media": "print"})
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {
        "width": round(width), "height": 1400, "deviceScaleFactor": 1, "mobile": False})
    try:
        return driver.execute_script(_WRAPPED)
    finally:
        driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
        driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"media": ""})


def _template(text: str, align: str = "left") -> str:
    return (f'<div style="font-family:{FONT};font-size:7.5pt;color:#666;width:100%;'
            f'margin:0 {MARGIN["marginLeft"]}in;text-align:{align};">{text}</div>')


def print_pdf(driver, head: str = "", outline: bool = True, scale: float = 1.0) -> bytes:
    params = {
        "paperWidth": PAPER[0], "paperHeight": PAPER[1], **MARGIN, "scale": scale,
        "printBackground": True, "preferCSSPageSize": False,
        "displayHeaderFooter": bool(head),
        "headerTemplate": _template(html.escape(head)) if head else "<span></span>",
        "footerTemplate": "<span></span>",
        "generateDocumentOutline": outline,
    }
    data = driver.execute_cdp_cmd("Page.printToPDF", params)["data"]
    return base64.b64decode(data)


# Chromium names a destination in the PDF only for an id that a link of the same page points
# to. The ids other pages link to get such a link, empty and one pixel wide (relink drops it
# again), so that a link from another page can land on its target rather than the page's top.
_ANCHORS = r"""
const box = document.createElement('div');
box.className = 'pdf-anchors';
box.style.cssText = 'position:absolute;left:0;top:0;width:1px;height:1px;overflow:hidden;';
for (const id of arguments[0]) {
  if (!document.getElementById(id)) continue;
  const a = document.createElement('a');
  a.href = '#' + encodeURIComponent(id);
  a.style.cssText = 'display:inline-block;width:1px;height:1px;';
  box.appendChild(a);
}
(document.querySelector('article.bd-article') || document.body).appendChild(box);
"""


def linked_anchors(html_dir: Path, entries: list[Entry]) -> dict[str, set[str]]:
    """For each page: the ids of it that links on other pages point to."""
    pages = {e.html for e in entries}
    found: dict[str, set[str]] = {p: set() for p in pages}
    for e in entries:
        text = (html_dir / e.html).read_text(encoding="utf-8", errors="replace")
        for ref in re.findall(r'href="([^"#]*\.html)#([^"]+)"', text):
            target = os.path.normpath((Path(e.html).parent / html.unescape(ref[0])).as_posix())
            if target in found and target != e.html:
                found[target].add(urllib.parse.unquote(html.unescape(ref[1])))
    return found


def print_page(driver, base: str, entry: Entry, book_title: str, anchors=(),
               wrapped: bool = False) -> None:
    start = time.time()
    driver.get(base + entry.html)
    report = driver.execute_async_script(_PREPARE)
    if anchors:
        driver.execute_script(_ANCHORS, sorted(anchors))
    problems = []
    if "error" in report:
        problems.append(f"preparing the page failed: {report['error']}")
    else:
        if report["hidden"]:
            problems.append(f"blocks still closed after opening: {report['hidden']}")
        if report["failed"]:
            problems.append(f"files of the site that did not load: {report['failed']}")
        if report["broken"]:
            problems.append(f"images that did not load: {report['broken']}")
        if report["mathErrors"] or report["untypeset"]:
            problems.append(f"{report['mathErrors']} MathJax errors, "
                            f"{report['untypeset']} formulas not typeset")
    if problems:
        raise RuntimeError(f"{entry.html}: " + "; ".join(problems))
    entry.title = report["title"]
    if wrapped:  # a relayout at the printed width: seconds per page, so only when asked
        entry.wrapped = wrapped_lines(driver)
    entry.pdf = print_pdf(driver, head=f"{book_title} \u00b7 {entry.title}", scale=SCALE)
    entry.seconds = time.time() - start


# --------------------------------------------------------------------------------------------
# Front matter, page numbers, links, bookmarks


def _git_commit() -> str:
    try:
        out = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, check=True, timeout=10)
        return out.stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def front_html(title: str, author: str, entries: list[Entry], start: dict[str, int],
               built: str) -> str:
    """The title page and the table of contents (``start``: docname -> first page number)."""
    rows, part = [], object()
    for e in entries:
        if e.part != part and e.part is not None:
            rows.append(f'<li class="part">{html.escape(e.part)}</li>')
        part = e.part
        href = f"https://book.invalid/page/{start[e.docname]}"
        rows.append(f'<li class="l{e.level}"><a href="{href}"><span class="t">'
                    f'{html.escape(e.title)}</span><span class="n">{start[e.docname]}</span>'
                    f"</a></li>")
    return f"""<!doctype html><html><head><meta charset="utf-8"><style>
body {{ font-family: {FONT}; color: #222; margin: 0; }}
.title {{ height: 9.5in; display: flex; flex-direction: column; justify-content: center;
          break-after: page; }}
.title h1 {{ font-size: 28pt; line-height: 1.2; margin: 0 0 0.4in 0; }}
.title p {{ font-size: 12pt; margin: 0.08in 0; }}
.title .small {{ font-size: 9.5pt; color: #555; margin-top: 0.5in; max-width: 5.5in; }}
h2 {{ font-size: 18pt; margin: 0 0 0.25in 0; }}
ul {{ list-style: none; padding: 0; margin: 0; font-size: 10.5pt; }}
li {{ margin: 0.05in 0; }}
li.part {{ font-weight: bold; margin-top: 0.18in; }}
li.l1 {{ padding-left: 0.3in; font-size: 9.5pt; }}
a {{ color: inherit; text-decoration: none; display: flex; align-items: flex-end; }}
a .t {{ flex: 0 1 auto; }}
a::after {{ content: ""; order: 1; flex: 1 1 auto; border-bottom: 1px dotted #999;
           margin: 0 0.08in; }}
a .n {{ order: 2; }}
</style></head><body>
<div class="title"><h1>{html.escape(title)}</h1><p>{html.escape(author)}</p>
<p class="small">{html.escape(built)}</p></div>
<h2>Contents</h2><ul>{''.join(rows)}</ul></body></html>"""


def numbers_html(count: int) -> str:
    """``count`` empty pages whose footer is the page number (1, 2, ...): stamped onto pages."""
    return ("<!doctype html><html><head><meta charset='utf-8'><style>"
            "html,body{margin:0;background:transparent}"
            "div{height:1px;break-after:page}</style></head><body>"
            + "<div></div>" * count + "</body></html>")


def print_numbers(driver, folder: Path, count: int):
    from pypdf import PdfReader

    path = folder / "numbers.html"
    path.write_text(numbers_html(count), encoding="utf-8")
    driver.get(path.as_uri())
    params = {
        "paperWidth": PAPER[0], "paperHeight": PAPER[1], **MARGIN,
        "printBackground": False, "displayHeaderFooter": True,
        "headerTemplate": "<span></span>",
        "footerTemplate": _template('<span class="pageNumber"></span>', "center"),
    }
    data = base64.b64decode(driver.execute_cdp_cmd("Page.printToPDF", params)["data"])
    reader = PdfReader(io.BytesIO(data))
    if len(reader.pages) != count:
        raise RuntimeError(f"the page-number sheet has {len(reader.pages)} pages, not {count}")
    return reader


def read_outline(reader) -> list:
    """A printed page's outline (from its headings) as [(title, page index, children)]."""

    def walk(items):
        out = []
        for item in items:
            if isinstance(item, list):
                if out:
                    out[-1][2].extend(walk(item))
                else:
                    out.extend(walk(item))
                continue
            try:
                page = reader.get_destination_page_number(item)
            except Exception:  # noqa: BLE001 (an entry without a page: leave it out)
                continue
            out.append((str(item.title).strip(), page, []))
        return out

    tree = walk(reader.outline)
    # The page's own title (its h1) is the chapter's bookmark already: list what is under it.
    if len(tree) == 1:
        tree = tree[0][2]
    return tree


def _local_target(uri: str, base: str):
    """(html path, fragment) if ``uri`` is a page of the served site, else None."""
    if not uri.startswith(base):
        return None
    url = urllib.parse.urlsplit(uri)
    path = urllib.parse.unquote(url.path).lstrip("/")
    if path.endswith("/") or not path:
        path += "index.html"
    return path, urllib.parse.unquote(url.fragment)


@dataclass
class Span:
    """A printed page inside a PDF being written: where it starts, and its anchors."""

    html: str
    first: int  # index of its first page in the writer
    dests: dict  # anchor name -> (page index within the span, top or None)


def named_dests(reader) -> dict:
    """A printed page's named destinations (Chromium names them after the HTML ids that
    links of the page point to): name -> (page index, top)."""
    out = {}
    for name, dest in reader.named_destinations.items():
        try:
            page = reader.get_destination_page_number(dest)
        except Exception:  # noqa: BLE001
            continue
        top = dest.get("/Top") if hasattr(dest, "get") else None
        out[str(name).lstrip("/")] = (page, None if top is None else float(top))
    return out


def relink(writer, spans: list[Span], base: str, front: int | None) -> dict:
    """Rewrite the links of ``writer`` so that none needs the site or a name shared between
    pages: a link within a page, or to another page of ``spans``, becomes an explicit
    destination (the anchor if that page has it, else its first page); a link to a page that
    is not in this PDF is dropped, its text kept (a page's own PDF: the other pages are other
    files); the contents' links (``book.invalid/page/N``) go to page N of the main matter, which
    starts at index ``front``. Links to the outside world stay. Returns counts by kind."""
    from pypdf.generic import ArrayObject, DictionaryObject, FloatObject, NameObject, NullObject, NumberObject

    by_html = {s.html: s for s in spans}
    counts = {"within": 0, "between": 0, "contents": 0, "dropped": 0, "outside": 0}

    def goto(span: Span, anchor: str):
        page, top = span.dests.get(anchor, (0, None)) if anchor else (0, None)
        return ArrayObject([writer.pages[span.first + page].indirect_reference,
                            NameObject("/XYZ"), NullObject(),
                            NullObject() if top is None else FloatObject(top), NumberObject(0)])

    for span_index, span in enumerate(spans):
        end = spans[span_index + 1].first if span_index + 1 < len(spans) else len(writer.pages)
        for i in range(span.first, end):
            page = writer.pages[i]
            if page.get("/Annots") is None:
                continue
            keep = ArrayObject()
            for ref in page["/Annots"].get_object():
                annot = ref.get_object()
                if annot.get("/Subtype") != "/Link":
                    keep.append(ref)
                    continue
                action = annot.get("/A")
                action = action.get_object() if action is not None else None
                uri = str(action.get("/URI", "")) if action is not None else ""
                dest = None
                rect = [float(x) for x in annot.get("/Rect", [0, 0, 9, 9])]
                if "/Dest" in annot and abs(rect[2] - rect[0]) < 2 and abs(rect[3] - rect[1]) < 2:
                    continue  # an anchor's one-pixel link (_ANCHORS): not the reader's
                if "/Dest" in annot:  # a named destination within the page
                    dest = goto(span, str(annot["/Dest"]).lstrip("/"))
                    del annot["/Dest"]
                    counts["within"] += 1
                elif (m := re.match(r"https://book\.invalid/page/(\d+)$", uri)) and front is not None:
                    n = int(m.group(1))
                    dest = ArrayObject([writer.pages[front + n - 1].indirect_reference,
                                        NameObject("/XYZ"), NullObject(), NullObject(),
                                        NumberObject(0)])
                    counts["contents"] += 1
                elif (local := _local_target(uri, base) if uri else None) is not None:
                    target = by_html.get(local[0])
                    if target is None:
                        counts["dropped"] += 1
                        continue
                    dest = goto(target, local[1])
                    counts["within" if target is span else "between"] += 1
                else:
                    counts["outside"] += 1
                if dest is not None:
                    annot[NameObject("/A")] = DictionaryObject({
                        NameObject("/S"): NameObject("/GoTo"), NameObject("/D"): dest})
                keep.append(ref)
            page[NameObject("/Annots")] = keep
    # Every link now carries its destination: the pages' names (which repeat from page to
    # page, e.g. every lecture's "exercises") are not needed, and would clash.
    names = writer.root_object.get("/Names")
    if names is not None and "/Dests" in names.get_object():
        del names.get_object()["/Dests"]
    return counts


def stamp(writer, page_range, numbers, first_number: int = 1) -> None:
    for k, i in enumerate(page_range):
        writer.pages[i].merge_page(numbers.pages[first_number - 1 + k])


def build(html_dir: Path, out: Path, jobs: int, toc: Path, wrapped: bool = False) -> dict:
    import yaml
    from pypdf import PdfReader, PdfWriter
    from pypdf.constants import PageLabelStyle

    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    book_title = config.get("title", "")
    author = config.get("author", "")
    entries = read_toc(toc)
    missing = [e.html for e in entries if not (html_dir / e.html).is_file()]
    if missing:
        raise SystemExit(f"pdf: no built page for {missing} in {html_dir}: build the book first "
                         "(bash scripts/book.sh)")
    t0 = time.time()
    httpd = serve(html_dir)
    base = f"http://127.0.0.1:{httpd.server_address[1]}/"
    tmp = Path(tempfile.mkdtemp(prefix="pdf-"))
    drivers = []
    try:
        jobs = max(1, min(jobs, len(entries)))
        with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
            starting = [pool.submit(start_browser, str(tmp / f"profile{k}")) for k in range(jobs)]
            for f in starting:
                try:
                    drivers.append(f.result())
                except Exception as exc:  # noqa: BLE001 (the others must still be closed)
                    failed = exc
            if len(drivers) < jobs:
                raise RuntimeError(f"pdf: the browser did not start: {failed}")
        t_start = time.time() - t0
        anchors = linked_anchors(html_dir, entries)
        # Largest pages first, so no browser is left with a long page at the end.
        queue = sorted(entries, key=lambda e: -(html_dir / e.html).stat().st_size)
        lock = threading.Lock()

        def worker(driver):
            while True:
                with lock:
                    if not queue:
                        return
                    entry = queue.pop(0)
                print_page(driver, base, entry, book_title, anchors.get(entry.html, ()),
                           wrapped)

        with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
            for f in [pool.submit(worker, d) for d in drivers]:
                f.result()
        t_print = time.time() - t0 - t_start

        readers = {}
        for e in entries:
            readers[e.docname] = PdfReader(io.BytesIO(e.pdf))
            e.dests = named_dests(readers[e.docname])
            e.pages = len(readers[e.docname].pages)
            e.outline = read_outline(readers[e.docname])
        # Main-matter page numbers: the landing page is page 1.
        start, n = {}, 1
        for e in entries:
            start[e.docname] = n
            n += e.pages
        total = n - 1
        commit = _git_commit()
        built = ("Printed from the executed build of the book: every number in it was computed "
                 "when the book was built and checked against the text. Solutions are printed "
                 f"open. {time.strftime('%Y-%m-%d')}" + (f", commit {commit}." if commit else "."))
        front_path = tmp / "front.html"
        front_path.write_text(front_html(book_title, author, entries, start, built),
                              encoding="utf-8")
        drivers[0].get(front_path.as_uri())
        front = PdfReader(io.BytesIO(print_pdf(drivers[0], outline=False)))
        numbers = print_numbers(drivers[0], tmp, max(total, max(e.pages for e in entries)))
    finally:
        for d in drivers:
            try:
                d.quit()
            except Exception:  # noqa: BLE001
                pass
        httpd.shutdown()
        httpd.server_close()
        shutil.rmtree(tmp, ignore_errors=True)

    for old in out.rglob("*.pdf") if out.exists() else []:
        old.unlink()  # no PDF of a page the table of contents no longer has
    out.mkdir(parents=True, exist_ok=True)
    # One PDF per page, numbered from 1, its headings as bookmarks.
    for e in entries:
        w = PdfWriter()
        w.append(readers[e.docname], import_outline=False)
        stamp(w, range(len(w.pages)), numbers)
        relink(w, [Span(e.html, 0, e.dests)], base, None)
        top = w.add_outline_item(title=e.title, page_number=0)
        _add_outline(w, e.outline, top, 0)
        w.add_metadata({"/Title": f"{e.title} \u2014 {book_title}", "/Author": author})
        path = out / (e.docname + ".pdf")
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as fh:
            w.write(fh)

    # The book.
    w = PdfWriter()
    w.append(front, import_outline=False)
    nfront = len(w.pages)
    spans, first_page = [Span("", 0, {})], {}
    for e in entries:
        first_page[e.html] = len(w.pages)
        spans.append(Span(e.html, len(w.pages), e.dests))
        w.append(readers[e.docname], import_outline=False)
    stamp(w, range(nfront, len(w.pages)), numbers)
    links = relink(w, spans, base, nfront)
    w.set_page_label(0, nfront - 1, style=PageLabelStyle.LOWERCASE_ROMAN)
    w.set_page_label(nfront, len(w.pages) - 1, style=PageLabelStyle.DECIMAL, start=1)
    w.add_outline_item(title="Title page", page_number=0)
    w.add_outline_item(title="Contents", page_number=1 if nfront > 1 else 0)
    parents, part_item, part = {}, None, object()
    for e in entries:
        page = first_page[e.html]
        if e.part != part:
            part = e.part
            part_item = w.add_outline_item(title=part, page_number=page) if part is not None else None
        parent = part_item if e.level == 0 else parents.get(e.level - 1, part_item)
        item = w.add_outline_item(title=e.title, page_number=page, parent=parent)
        parents[e.level] = item
        _add_outline(w, e.outline, item, page)
    w.add_metadata({"/Title": book_title, "/Author": author,
                    "/Subject": "Printed from the executed build (bash scripts/pdf.sh)"})
    w.page_mode = "/UseOutlines"
    with open(out / "book.pdf", "wb") as fh:
        w.write(fh)

    site = html_dir / "pdf"
    if site.exists():
        shutil.rmtree(site)
    shutil.copytree(out, site)
    return {"pages": len(w.pages), "entries": len(entries), "start_s": t_start,
            "print_s": t_print, "total_s": time.time() - t0,
            "slowest": sorted(((e.seconds, e.html) for e in entries), reverse=True)[:3],
            "wrapped": {e.html: e.wrapped for e in entries if e.wrapped}, "links": links}


def _add_outline(writer, tree, parent, offset: int) -> None:
    for title, page, children in tree:
        item = writer.add_outline_item(title=title, page_number=offset + page, parent=parent)
        _add_outline(writer, children, item, offset)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--html", type=Path, default=ROOT / "_build" / "html")
    ap.add_argument("--out", type=Path, default=ROOT / "_build" / "pdf")
    ap.add_argument("--toc", type=Path, default=ROOT / "_toc.yml")
    ap.add_argument("--jobs", type=int, default=min(4, os.cpu_count() or 1),
                    help="browsers printing at once (default: min(4, CPUs))")
    ap.add_argument("--wrapped", action="store_true",
                    help="also report the code lines too long for the printed column (slower)")
    args = ap.parse_args(argv)
    try:
        require()
    except Unavailable as exc:
        raise SystemExit(f"pdf: {exc}") from None
    info = build(args.html, args.out, args.jobs, args.toc, args.wrapped)
    print(f"pdf: {info['entries']} pages of the table of contents, {info['pages']} PDF pages "
          f"-> {args.out / 'book.pdf'} (and one PDF per page; copied to "
          f"{args.html / 'pdf'}) in {info['total_s']:.0f} s (browsers {info['start_s']:.0f} s, "
          f"printing {info['print_s']:.0f} s); slowest pages: "
          + ", ".join(f"{name} {s:.1f} s" for s, name in info["slowest"]))
    print("pdf: links in the book: " + ", ".join(f"{v} {k}" for k, v in info["links"].items()))
    for page, lines in info["wrapped"].items():
        print(f"pdf: {page}: {len(lines)} code block(s) wrap at the printed margin, e.g. "
              f"{lines[0]!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
