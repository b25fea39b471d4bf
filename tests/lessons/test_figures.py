"""Every lesson figure is readable at the page's column width, and opens full size in a lightbox.

Chromium (Debian's, through Playwright, as test_browser.py drives it) opens each lesson page in both
languages with the viewport that gives the content column its real width (about 810 px), and measures the
rendered size of every text of every figure: a Graphviz SVG shown as an <img> is laid out again, inline,
at the size the <img> has on the page; a mermaid diagram is measured where the theme drew it. Text under
11 px fails, with page, figure and size. Then a click on a figure opens it in the lightbox with its caption.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.lessons.test_browser import OPEN_SHADOWS, _pages, browser, site_url  # noqa: F401 (fixtures)

pytestmark = pytest.mark.slow

MIN_PX = 11.0
# a desktop screen: Material shows both sidebars, its content column is about 810 px wide and the article in
# it, where a figure is at most as wide, about 757 px
VIEWPORT = {"width": 1920, "height": 1080}
COLUMN = (740, 860)  # the article's width there, in CSS px

MEASURE = """async () => {
  const figures = [];
  const heading = el => {
    let h = null;
    for (const x of document.querySelectorAll('article h1, article h2, article h3')) {
      if (x.compareDocumentPosition(el) & Node.DOCUMENT_POSITION_FOLLOWING) h = x;
    }
    return h ? h.textContent.replace('¶', '').trim() : '';
  };
  const scale = el => { const m = el.getScreenCTM(); return m ? Math.hypot(m.a, m.b) : 0; };
  const texts = svg => {
    const out = [];
    for (const t of svg.querySelectorAll('text')) {
      const px = parseFloat(getComputedStyle(t).fontSize) * scale(t);
      if (t.textContent.trim()) out.push([px, t.textContent]);
    }
    for (const fo of svg.querySelectorAll('foreignObject')) {
      const s = scale(fo);
      for (const el of fo.querySelectorAll('*')) {
        const own = [...el.childNodes].filter(n => n.nodeType === 3 && n.textContent.trim());
        if (own.length) out.push([parseFloat(getComputedStyle(el).fontSize) * s, el.textContent]);
      }
    }
    return out;
  };
  const host = document.createElement('div');
  host.style.cssText = 'position:absolute;left:0;top:0;visibility:hidden';
  document.body.appendChild(host);
  for (const img of document.querySelectorAll('article img')) {
    const r = img.getBoundingClientRect();
    if (!img.src.endsWith('.svg') || r.width === 0) continue;
    host.innerHTML = await (await fetch(img.src)).text();
    const svg = host.querySelector('svg');
    svg.setAttribute('width', r.width + 'px');
    svg.setAttribute('height', r.height + 'px');
    figures.push({name: decodeURI(new URL(img.src).pathname.split('/figures/').pop()), near: heading(img),
                  width: r.width, texts: texts(svg)});
  }
  host.remove();
  let k = 0;
  for (const m of document.querySelectorAll('article .mermaid')) {
    const svg = (m.shadowRoot || m).querySelector('svg');
    k += 1;
    if (!svg) continue;
    figures.push({name: 'mermaid diagram ' + k, near: heading(m), width: svg.getBoundingClientRect().width,
                  texts: texts(svg)});
  }
  const article = document.querySelector('article').getBoundingClientRect().width;
  return {article, figures: figures.map(f => {
    const least = f.texts.reduce((a, b) => (b[0] < a[0] ? b : a), [Infinity, '']);
    return {name: f.name, near: f.near, width: Math.round(f.width), n: f.texts.length,
            px: Math.round(least[0] * 10) / 10, text: least[1].trim().slice(0, 40)};
  })};
}"""


def lesson_pages(site: Path) -> list[str]:
    return [p for p in _pages(site) if "/lessons/" in p and p.rstrip("/").split("/")[-1] != "lessons"]


def open_page(browser, url: str):  # noqa: F811 (the fixture's value)
    page = browser.new_page(viewport=VIEWPORT)
    page.add_init_script(OPEN_SHADOWS)
    page.goto(url, wait_until="load")
    if page.locator("article .mermaid").count():
        page.wait_for_function("() => [...document.querySelectorAll('article .mermaid')]"
                               ".every(el => (el.shadowRoot || el).querySelector('svg'))", timeout=20000)
    return page


def test_every_figure_text_is_readable_at_the_column_width(
        browser, site_url: str, built_site: Path):  # noqa: F811 (fixtures)
    pages = lesson_pages(built_site)
    assert any(p.startswith("/zh/") for p in pages) and any(not p.startswith("/zh/") for p in pages), pages
    small, counted, widths = [], 0, set()
    for path in pages:
        page = open_page(browser, site_url + path)
        found = page.evaluate(MEASURE)
        page.close()
        widths.add(round(found["article"]))
        for f in found["figures"]:
            assert f["n"] > 0, f"{path}: {f['name']} has no text to measure"
            counted += 1
            if f["px"] < MIN_PX:
                small.append(f"{path}: {f['name']} (under '{f['near']}', shown {f['width']} px wide): "
                             f"text at {f['px']} px ({f['text']!r})")
    assert all(COLUMN[0] <= w <= COLUMN[1] for w in widths), f"the column is {widths} px wide, not about 810"
    assert counted > 2 * 10, f"only {counted} figures found on {len(pages)} lesson pages"
    assert not small, f"{len(small)} figure(s) with text under {MIN_PX} px:\n" + "\n".join(small)


def test_a_figure_opens_full_size_in_the_lightbox_with_its_caption(
        browser, site_url: str, built_site: Path):  # noqa: F811 (fixtures)
    page = open_page(browser, site_url + "/lessons/one-request/")
    link = page.locator("article a.glightbox").first
    img = link.locator("img")
    alt, href, shown = img.get_attribute("alt"), link.evaluate("a => a.href"), img.bounding_box()
    assert alt and href.endswith(".svg"), (alt, href)
    img.click()
    slide = page.locator(".glightbox-container .gslide.current")
    big = slide.locator(".gslide-image img")
    big.wait_for(state="visible")
    assert big.evaluate("el => el.src") == href  # the same SVG file, not a copy drawn at the column's size
    natural = big.evaluate("el => el.naturalWidth")
    assert natural > shown["width"], f"the file is {natural} px wide, as in the column ({shown['width']} px)"
    assert slide.locator(".gslide-title").inner_text().strip() == alt
    page.keyboard.press("Escape")
    page.close()


@pytest.mark.parametrize("lang", ["", "zh/"])
def test_a_mermaid_figure_opens_full_size_in_the_lightbox(
        browser, site_url: str, built_site: Path, lang: str):  # noqa: F811 (fixtures)
    page = open_page(browser, site_url + f"/{lang}lessons/processes-messages/")
    figure = page.locator("article div.mermaid[data-lightbox]").first
    figure.wait_for(state="visible")
    shown = figure.bounding_box()["width"]
    words = figure.evaluate("el => (el.shadowRoot || el).querySelector('svg').textContent")
    figure.click()
    big = page.locator(".glightbox-container .gslide.current .mermaid-lightbox svg")
    big.wait_for(state="attached")
    assert big.evaluate("svg => svg.getBoundingClientRect().width") > shown  # drawn again, at its own width
    assert "ChatCompletionRequest" in words and "ChatCompletionRequest" in big.text_content()
    assert ("已结束" in big.text_content()) == (lang == "zh/")
    page.keyboard.press("Escape")
    page.close()
