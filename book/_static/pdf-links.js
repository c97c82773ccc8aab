// The PDFs of the book (bash scripts/pdf.sh prints them into the site, under pdf/), linked
// only where the file exists: _static/pdfs.js (window.sePdfs) names the printed PDFs; the
// build writes it empty and the PDF step with what it printed (standarderror_book/sphinxext/site.py).
// In every page's download menu, a ".pdf" entry downloads that page's printed PDF (solutions
// open, numbered pages) instead of opening the browser's print dialog, and a "book .pdf" entry
// downloads the whole book, each where it was printed; a placeholder the build left for a link
// into pdf/ (data-se-href, data-se-pdf: the landing page's book.pdf) becomes a link where its
// file was printed. All links are relative, so they work offline and from a copy of the site
// opened from disk (file://). tests/test_site.py and tests/test_pdf.py check them.
(() => {
  const printed = new Set(Array.isArray(window.sePdfs) ? window.sePdfs : []);
  const placeholders = () => {
    document.querySelectorAll("a[data-se-pdf]").forEach(a => {
      if (!a.hasAttribute("href") && printed.has(a.dataset.sePdf)) {
        a.setAttribute("href", a.dataset.seHref);
      }
    });
  };
  const menuLinks = () => {
    const menu = document.querySelector(".dropdown-download-buttons .dropdown-menu");
    const source = menu && menu.querySelector("a.btn-download-source-button");
    if (!source || menu.querySelector("a.btn-download-pdf-file, a.btn-download-book-pdf")) return;
    // "../_sources/lectures/ep1_conformal.md" -> prefix "../", page "lectures/ep1_conformal"
    const m = (source.getAttribute("href") || "").match(/^(.*?)_sources\/(.+?)(\.[^./]+)(\.txt)?$/);
    if (!m) return;
    const item = (file, text, title, cls) => {
      const li = document.createElement("li");
      const a = document.createElement("a");
      a.href = m[1] + "pdf/" + file;
      a.className = "btn btn-sm dropdown-item " + cls;
      a.title = title;
      a.setAttribute("download", "");
      a.innerHTML = '<span class="btn__icon-container"><i class="fas fa-file-pdf"></i></span>' +
                    '<span class="btn__text-container"></span>';
      a.querySelector(".btn__text-container").textContent = text;
      li.appendChild(a);
      return li;
    };
    const entries = [];
    if (printed.has(m[2] + ".pdf")) {
      entries.push(item(m[2] + ".pdf", ".pdf", "Download this page as PDF (solutions open)",
                        "btn-download-pdf-file"));
    }
    if (printed.has("book.pdf")) {
      entries.push(item("book.pdf", "book .pdf", "Download the whole book as PDF",
                        "btn-download-book-pdf"));
    }
    if (!entries.length) return;
    const print = menu.querySelector(".btn-download-pdf-button");
    const first = entries[0];
    if (print && print.closest("li") && first.querySelector(".btn-download-pdf-file")) {
      print.closest("li").replaceWith(first);
    } else {
      menu.appendChild(first);
    }
    let last = first;
    entries.slice(1).forEach(li => { last.after(li); last = li; });
  };
  const addLinks = () => { placeholders(); menuLinks(); };
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", addLinks);
  } else {
    addLinks();
  }
})();
