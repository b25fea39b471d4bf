// Every mermaid figure opens full size in the lightbox, as the Graphviz figures do (mkdocs-glightbox).
// The theme draws each mermaid diagram inside a closed shadow root, out of reach of a script; so the
// diagram's source is kept here before the theme replaces it, and a click draws it again with mermaid,
// at its natural width (without the settings that fit it to the column), in a GLightbox slide.
(() => {
  const sources = [...document.querySelectorAll("pre.mermaid")].map(pre => pre.textContent);
  const natural = source => source.replace(/^---\nconfig:[\s\S]*?\n---\n/, "");
  let drawn = 0;

  async function open(k) {
    const { svg } = await window.mermaid.render(`minisgl-lightbox-${++drawn}`, natural(sources[k]));
    const box = GLightbox({
      elements: [{ content: `<div class="mermaid-lightbox">${svg}</div>`, width: "95vw", height: "auto" }],
      openEffect: "none", closeEffect: "none",
    });
    box.open();
  }

  function arm() {
    const shown = document.querySelectorAll("article div.mermaid");
    if (shown.length !== sources.length) return false;  // a diagram the theme has not mounted yet
    shown.forEach((el, k) => {
      if (el.dataset.lightbox) return;
      el.dataset.lightbox = "mermaid";
      el.title = document.documentElement.lang.startsWith("zh") ? "点击放大" : "Click to enlarge";
      el.addEventListener("click", () => open(k));
    });
    return true;
  }

  if (sources.length && window.mermaid && window.GLightbox) {
    const watch = new MutationObserver(() => arm() && watch.disconnect());
    document.addEventListener("DOMContentLoaded", () => {
      if (!arm()) watch.observe(document.body, { childList: true, subtree: true });
    });
  }
})();
