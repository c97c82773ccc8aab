// The site search (Sphinx's searchtools.js reads this Scorer before it starts): Sphinx's own
// weights, and one rule of the book's: a lecture ranks above the API reference and the
// reference pages for the same words, since a reader searching "temperature" wants the lecture
// on it first. Snippets show maths as text, not as raw TeX: Sphinx cuts a result's snippet from
// the page's HTML, where MathJax has not run, so each maths element is replaced by its source
// without the TeX markup (\hat{p}_T -> p̂_T is beyond this; it becomes hat p_T).
var Scorer = {
  score: result => {
    const [docname, , , , score] = result;
    if (docname.startsWith("lectures/")) return score + 30;
    if (docname === "book/model" || docname === "book/notation") return score + 20;
    return score;
  },
  objNameMatch: 11,
  objPartialMatch: 6,
  objPrio: {0: 15, 1: 5, 2: -5},
  objPrioDefault: 0,
  title: 15,
  partialTitle: 7,
  term: 5,
  partialTerm: 2,
};

const seMathAsText = tex => tex
  .replace(/^\s*(\\\(|\\\[|\$\$?)/, "").replace(/(\\\)|\\\]|\$\$?)\s*$/, "")
  .replace(/\\(left|right|big|Big|bigl|bigr|,|;|!|quad|qquad)\b/g, " ")
  .replace(/\\(mathrm|mathbf|mathcal|operatorname|text|textrm)\s*\{([^}]*)\}/g, "$2")
  .replace(/\\([A-Za-z]+)/g, "$1")
  .replace(/[{}]/g, "")
  .replace(/\s+/g, " ").trim();

window.addEventListener("DOMContentLoaded", () => {
  if (typeof Search === "undefined") return;
  Search.htmlToText = (htmlString, anchor) => {
    const page = new DOMParser().parseFromString(htmlString, "text/html");
    page.querySelectorAll(".headerlink, script, style").forEach(el => el.remove());
    page.querySelectorAll(".math").forEach(el => {
      el.replaceWith(page.createTextNode(" " + seMathAsText(el.textContent) + " "));
    });
    const block = (anchor && page.querySelector(`[role="main"] ${anchor}`))
      || page.querySelector('[role="main"]');
    return block ? block.textContent.replace(/\s+/g, " ") : "";
  };
});
