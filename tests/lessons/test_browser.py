"""The lesson site in a real browser: Debian's chromium, driven by Playwright (never a downloaded browser).

Every page loads with no console error, every image and SVG has a size, every mermaid block has become an
SVG, and the language switch leads to the Chinese page. A screenshot of each page is kept under
build/lessons-screenshots/ (not committed).
"""

from __future__ import annotations

import functools
import http.server
import shutil
import threading
from pathlib import Path

import pytest

from tests.lessons.test_site import SLUGS

pytestmark = pytest.mark.slow

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
SHOTS = Path(__file__).resolve().parents[2] / "build" / "lessons-screenshots"
# as the machine's own probe ran it: no sandbox as root, and no background calls to the (closed) network
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync"]


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


def test_every_page_loads_cleanly_in_chromium(browser, site_url: str, built_site: Path):
    SHOTS.mkdir(parents=True, exist_ok=True)
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.add_init_script(OPEN_SHADOWS)
    errors: list[str] = []
    page.on("console", lambda m: errors.append(f"{page.url}: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(f"{page.url}: {e}"))
    # a request cut short by going to the next page (the search worker's) is not a failure
    page.on("requestfailed", lambda r: errors.append(f"{page.url}: failed to load {r.url} ({r.failure})")
            if r.failure != "net::ERR_ABORTED" else None)
    problems, mermaid_pages = [], 0
    for path in _pages(built_site):
        page.goto(site_url + path, wait_until="load")
        if page.locator("article .mermaid").count():
            mermaid_pages += 1
            page.wait_for_function("() => [...document.querySelectorAll('article .mermaid')]"
                                   ".every(el => (el.shadowRoot || el).querySelector('svg'))", timeout=20000)
        found = page.evaluate(CHECK)
        problems += [f"{path}: {b}" for b in found["bad"]]
        if found["drawn"] != found["mermaid"]:
            problems.append(f"{path}: {found['mermaid'] - found['drawn']} mermaid block(s) not drawn")
        page.screenshot(path=str(SHOTS / ((path.strip("/").replace("/", "_") or "home") + ".png")))
    page.close()
    assert not errors, "\n".join(errors[:30])
    assert not problems, "\n".join(problems[:30])
    assert mermaid_pages > 0, "no page drew a mermaid diagram"


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
