"""The detokenizer's side of streaming: --stream-interval sends tokens in groups, a character split across
tokens is held back until it is whole, and a stop string is trimmed from what the client sees."""

from __future__ import annotations

from minisgl.scenarios.base import Look, Scenario, Submit
from minisgl.scenarios.look import events

INTERVAL = 3


def look_at(trace) -> Look:
    held = events(trace, "detok.decoded", lambda ev: ev.rid == "ZH" and ev.get("held_back_tokens"))
    trimmed = events(trace, "detok.decoded", lambda ev: ev.get("stop_trimmed"))
    sends = events(
        trace, "ipc.send", lambda ev: ev.get("msg") == "BatchTokenIDOutput" and "ZH" in (ev.rids or [])
    )
    lines = [
        f"ZH: {len(sends)} BatchTokenIDOutput message(s) for its tokens: one every {INTERVAL} tokens, "
        "plus the first and the last"
    ]
    if held:
        lines.append(
            f"round {held[0].round}: {held[0].get('held_back_tokens')} token(s) held back: the bytes so "
            "far end inside a character"
        )
    if trimmed:
        lines.append(f"{trimmed[0].rid}: the stop string is trimmed from the text the client sees")
    return Look(lines, rid="ZH", round=held[0].round if held else None)


SCENARIO = Scenario(
    name="stream_detok",
    title="Streaming: intervals, held-back bytes, stop strings",
    teaches="incremental detokenization: read_offset and surr_offset, UTF-8 hold-back, stop trimming",
    lesson="detokenizer",
    flags={"max_total_tokens": 128, "stream_interval": INTERVAL},
    steps=(
        Submit(0, "ZH", text="北京是中国的首都。上海是中国的", max_new_tokens=8, stream=True),
        Submit(
            0,
            "STOP",
            chat="List three prime numbers.",
            max_new_tokens=24,
            stream=True,
            params={"stop": ["These are"]},
        ),
    ),
    look_at=look_at,
)
