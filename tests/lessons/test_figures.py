"""Every lesson figure opens full size in a lightbox: a Graphviz figure (its own SVG file, with its caption)
and a mermaid one (drawn again from its source), in chromium as test_browser.py drives it (which also
measures every figure's text at the column width)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.lessons.test_browser import OPEN_SHADOWS, VIEWPORT, browser, site_url  # noqa: F401 (fixtures)

pytestmark = pytest.mark.slow

def open_page(browser, url: str):  # noqa: F811 (the fixture's value)
    page = browser.new_page(viewport=VIEWPORT)
    page.add_init_script(OPEN_SHADOWS)
    page.goto(url, wait_until="load")
    if page.locator("article .mermaid").count():
        page.wait_for_function("() => [...document.querySelectorAll('article .mermaid')]"
                               ".every(el => (el.shadowRoot || el).querySelector('svg'))", timeout=20000)
    return page


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
