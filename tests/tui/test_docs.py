"""The replay page documents every key the app binds, and is in the site's navigation."""

from __future__ import annotations

from pathlib import Path

from tui.keys import KEYS

ROOT = Path(__file__).resolve().parents[2]


def test_the_replay_page_lists_every_key():
    page = (ROOT / "lessons" / "docs" / "replay.md").read_text()
    keys = page.split("## Keys", 1)[1].split("\n## ", 1)[0]
    for key in KEYS:
        assert key.label in keys, key
    assert "replay.md" in (ROOT / "mkdocs.yml").read_text()
