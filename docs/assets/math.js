/* Typeset math with the site's own copy of KaTeX (docs/assets/vendor/katex): no CDN.
   Pages: pymdownx.arithmatex (generic) wraps TeX in .arithmatex as \( \) or \[ \].
   Notebook pages: markdown cells keep Jupyter's $ and $$ delimiters. */
(function () {
  function typeset(root) {
    if (typeof renderMathInElement !== "function") return;
    root.querySelectorAll(".arithmatex").forEach(function (el) {
      renderMathInElement(el, {
        delimiters: [
          { left: "\\(", right: "\\)", display: false },
          { left: "\\[", right: "\\]", display: true },
        ],
        throwOnError: false,
      });
    });
    root.querySelectorAll(".jp-RenderedMarkdown, .jp-MarkdownOutput").forEach(function (el) {
      renderMathInElement(el, {
        delimiters: [
          { left: "$$", right: "$$", display: true },
          { left: "$", right: "$", display: false },
        ],
        throwOnError: false,
      });
    });
  }
  if (typeof document$ !== "undefined") {
    document$.subscribe(function () { typeset(document.body); });
  } else {
    document.addEventListener("DOMContentLoaded", function () { typeset(document.body); });
  }
})();
