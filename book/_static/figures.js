// Every figure of a page opens at full size: each image of the article that is not already a
// link becomes one, to the image file itself, so that a two-panel figure shrunk to a phone's
// width can be tapped and read (book.css shows a zoom cursor). The link names what it opens.
(() => {
  const setup = () => {
    document.querySelectorAll(".bd-article img").forEach(img => {
      if (img.closest("a") || !img.getAttribute("src")) return;
      const link = document.createElement("a");
      link.href = img.currentSrc || img.src;
      link.className = "se-full-size";
      const alt = (img.getAttribute("alt") || "").trim();
      link.setAttribute("aria-label", "Open the figure at full size" + (alt ? ": " + alt : ""));
      img.replaceWith(link);
      link.appendChild(img);
    });
  };
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", setup);
  } else {
    setup();
  }
})();
