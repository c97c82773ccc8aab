// The PDFs of the book (bash scripts/pdf.sh prints them into the site, under pdf/): in every
// page's download menu, the ".pdf" entry downloads that page's printed PDF (solutions open,
// numbered pages) instead of opening the browser's print dialog, and a "book .pdf" entry
// downloads the whole book. Both links are relative, so they work offline and from a copy
// of the site opened from disk (file://). tests/test_pdf.py checks them.
(() => {
  const addLinks = () => {
    const menu = document.querySelector(".dropdown-download-buttons .dropdown-menu");
    const source = menu && menu.querySelector("a.btn-download-source-button");
    if (!source || menu.querySelector("a.btn-download-pdf-file")) return;
    // "../_sources/lectures/ep1_conformal.md" -> prefix "../", page "lectures/ep1_conformal"
    const m = (source.getAttribute("href") || "").match(/^(.*?)_sources\/(.+?)(\.[^./]+)(\.txt)?$/);
    if (!m) return;
    const item = (href, text, title, cls) => {
      const li = document.createElement("li");
      const a = document.createElement("a");
      a.href = href;
      a.className = "btn btn-sm dropdown-item " + cls;
      a.title = title;
      a.setAttribute("download", "");
      a.innerHTML = '<span class="btn__icon-container"><i class="fas fa-file-pdf"></i></span>' +
                    '<span class="btn__text-container"></span>';
      a.querySelector(".btn__text-container").textContent = text;
      li.appendChild(a);
      return li;
    };
    const page = item(m[1] + "pdf/" + m[2] + ".pdf", ".pdf",
                      "Download this page as PDF (solutions open)", "btn-download-pdf-file");
    const book = item(m[1] + "pdf/book.pdf", "book .pdf", "Download the whole book as PDF",
                      "btn-download-book-pdf");
    const print = menu.querySelector(".btn-download-pdf-button");
    if (print && print.closest("li")) {
      print.closest("li").replaceWith(page);
    } else {
      menu.appendChild(page);
    }
    page.after(book);
  };
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", addLinks);
  } else {
    addLinks();
  }
})();
