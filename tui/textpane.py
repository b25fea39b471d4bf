"""A scrollable pane of rich text, the shape most panes take."""

from __future__ import annotations

from rich.text import Text
from textual.containers import VerticalScroll
from textual.widgets import Static

from tui.frame import Frame


class TextPane(VerticalScroll):
    """Subclasses say what to show in `render_text`; `text` keeps the last of it (tests read `.plain`)."""

    DEFAULT_CSS = """
    TextPane { height: 1fr; }
    TextPane > Static { width: 1fr; height: auto; }
    """

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.text = Text()
        self._body = Static()
        self._frame: Frame | None = None

    def compose(self):
        yield self._body

    def show(self, frame: Frame) -> None:
        self._frame = frame
        self.text = self.render_text(frame)
        self._body.update(self.text)

    def on_resize(self) -> None:
        if self._frame is not None:  # some panes lay out to the width
            self.show(self._frame)

    def render_text(self, frame: Frame) -> Text:
        raise NotImplementedError
