"""The lesson site in a real browser: Debian's chromium, driven by Playwright (never a downloaded browser).

Every page is opened once, on a desktop screen: it loads with no console error, every image and SVG has a
size, every mermaid block has become an SVG, and on a lesson page (both languages) every text of every
figure is measured at its rendered size: a Graphviz SVG shown as an <img> is laid out again, inline, at the
size the <img> has on the page; a mermaid diagram is measured where the theme drew it; under 11 px fails,
with page, figure and size. The language switch leads to the Chinese page. A screenshot of each page is
kept under build/lessons-screenshots/ (not committed).
"""

from __future__ import annotations

import functools
import http.server
import shutil
import threading
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.lessons.test_site import SLUGS

pytestmark = pytest.mark.slow

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
SHOTS = Path(__file__).resolve().parents[2] / "build" / "lessons-screenshots"
# as the machine's own probe ran it: no sandbox as root, and no background calls to the (closed) network
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync"]


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


@pytest.fixture(scope="module")
def site_url(built_site: Path):
    handler = functools.partial(_QuietHandler, directory=str(built_site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join(10)


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass


@pytest.fixture(scope="module")
def browser():
    if CHROMIUM is None:
        pytest.skip("no chromium on this machine (`make test` installs Debian's package where it runs as root)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (make test does)")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
        yield b
        b.close()


def _pages(site: Path) -> list[str]:
    """Every page of both languages except the 404 page."""
    return sorted("/" + p.relative_to(site).as_posix().removesuffix("index.html")
                  for p in site.rglob("index.html"))


def lesson_pages(site: Path) -> list[str]:
    return [p for p in _pages(site) if "/lessons/" in p and p.rstrip("/").split("/")[-1] != "lessons"]


# the theme draws each mermaid diagram into a closed shadow root; open it so the test can see the SVG
OPEN_SHADOWS = """{
  const attach = Element.prototype.attachShadow;
  Element.prototype.attachShadow = function (init) { return attach.call(this, {...init, mode: 'open'}); };
}"""

CHECK = """() => {
  const bad = [];
  for (const img of document.querySelectorAll('article img')) {
    if (!img.complete || img.naturalWidth === 0) bad.push('image without a size: ' + img.src);
  }
  for (const svg of document.querySelectorAll('article svg')) {
    const r = svg.getBoundingClientRect();
    if (r.width === 0 || r.height === 0) bad.push('svg without a size');
  }
  const mermaid = [...document.querySelectorAll('article .mermaid')];
  const drawn = mermaid.filter(el => (el.shadowRoot || el).querySelector('svg'));
  return {bad, mermaid: mermaid.length, drawn: drawn.length};
}"""


@dataclass
class Visits:
    errors: list[str] = field(default_factory=list)  # console errors, page errors, failed loads
    problems: list[str] = field(default_factory=list)  # an image or SVG without a size, mermaid not drawn
    mermaid_pages: int = 0
    measured: dict[str, dict] = field(default_factory=dict)  # a lesson page -> MEASURE's answer


@pytest.fixture(scope="module")
def visits(browser, site_url: str, built_site: Path) -> Visits:
    """Every page opened once (what each test below reads of it)."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    out = Visits()
    page = browser.new_page(viewport=VIEWPORT)
    page.add_init_script(OPEN_SHADOWS)
    page.on("console", lambda m: out.errors.append(f"{page.url}: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: out.errors.append(f"{page.url}: {e}"))
    # a request cut short by going to the next page (the search worker's) is not a failure
    page.on("requestfailed", lambda r: out.errors.append(f"{page.url}: failed to load {r.url} ({r.failure})")
            if r.failure != "net::ERR_ABORTED" else None)
    lessons = set(lesson_pages(built_site))
    for path in _pages(built_site):
        page.goto(site_url + path, wait_until="load")
        if page.locator("article .mermaid").count():
            out.mermaid_pages += 1
            page.wait_for_function("() => [...document.querySelectorAll('article .mermaid')]"
                                   ".every(el => (el.shadowRoot || el).querySelector('svg'))", timeout=20000)
        found = page.evaluate(CHECK)
        out.problems += [f"{path}: {b}" for b in found["bad"]]
        if found["drawn"] != found["mermaid"]:
            out.problems.append(f"{path}: {found['mermaid'] - found['drawn']} mermaid block(s) not drawn")
        if path in lessons:
            out.measured[path] = page.evaluate(MEASURE)
        page.screenshot(path=str(SHOTS / ((path.strip("/").replace("/", "_") or "home") + ".png")))
    page.close()
    return out


def test_every_page_loads_cleanly_in_chromium(visits: Visits):
    assert not visits.errors, "\n".join(visits.errors[:30])
    assert not visits.problems, "\n".join(visits.problems[:30])
    assert visits.mermaid_pages > 0, "no page drew a mermaid diagram"


def test_every_figure_text_is_readable_at_the_column_width(visits: Visits):
    pages = list(visits.measured)
    assert any(p.startswith("/zh/") for p in pages) and any(not p.startswith("/zh/") for p in pages), pages
    small, counted, widths = [], 0, set()
    for path, found in visits.measured.items():
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


def test_the_language_switch_leads_to_the_chinese_lesson(browser, site_url: str):
    """Open a lesson, choose 中文 in the header's language menu, and land on the same lesson in Chinese; then back."""
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    slug = SLUGS[0]
    page.goto(f"{site_url}/lessons/{slug}/")
    assert page.locator("html").get_attribute("lang") == "en"
    for lang, path in (("zh", f"/zh/lessons/{slug}/"), ("en", f"/lessons/{slug}/")):
        page.hover(".md-header .md-select")
        page.locator(f'.md-header a[hreflang="{lang}"]').first.click()
        page.wait_for_url(f"{site_url}{path}")
        assert page.locator("html").get_attribute("lang").startswith(lang)
    page.close()
