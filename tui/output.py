"""The output pane: the selected request's text as the client has received it up to the cursor — the SSE
chunks of a served request, or the detokenizer's output in an offline trace (which streams no SSE)."""

from __future__ import annotations

from rich.text import Text

from tui.frame import Frame
from tui.index import streamed_text
from tui.textpane import TextPane


class OutputPane(TextPane):
    def render_text(self, frame: Frame) -> Text:
        rid = frame.rid
        if rid is None:
            return Text("no request in the trace yet", style="dim")
        info = frame.index.requests[rid]
        text = Text()
        text.append("Request ")
        text.append(rid, style=f"bold {frame.color(rid)}")
        if info.endpoint:
            text.append(f"  {info.endpoint}")
        text.append("\n\nprompt", style="cyan")
        if info.prompt_text is not None:
            text.append(f" ({len(info.prompt_ids or [])} tokens): {info.prompt_text}\n")
        elif info.prompt_ids is not None:
            text.append(f" ({len(info.prompt_ids)} token ids): {' '.join(map(str, info.prompt_ids))}\n")
        else:
            text.append(": not in the trace\n", style="dim")
        if info.chunks:
            n = streamed_text(info.chunks, frame.cursor)[1]
            text.append(f"\nclient text after {n} of {len(info.chunks)} SSE chunk(s)", style="cyan")
        elif info.decoded:
            n = streamed_text(info.decoded, frame.cursor)[1]
            text.append(f"\ndetokenized text after {n} of {len(info.decoded)} detok.decoded (no SSE chunks "
                        "in this trace)", style="cyan")
        else:
            n = 0
            text.append("\nno streamed text in this trace (level 1 records no tokens)", style="cyan")
        text.append(":\n")
        if n:
            parts = info.chunks or info.decoded
            earlier = "".join(d for _, d in parts[: n - 1])
            text.append(earlier)
            text.append(parts[n - 1][1], style=f"bold {frame.color(rid)}")  # the newest piece
        else:
            text.append("(nothing yet)", style="dim")
        text.append("\n")
        return text
