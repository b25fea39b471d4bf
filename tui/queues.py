"""The queues pane: waiting_queue, running_batch and chunked_req at the cursor, and the KV pool's counts."""

from __future__ import annotations

from rich.text import Text

from tracer.fmt import short_rid
from tui.frame import Frame
from tui.kv_grid import slot_kinds
from tui.textpane import TextPane


class QueuesPane(TextPane):
    def render_text(self, frame: Frame) -> Text:
        state = frame.state
        if state is None:
            return Text("no events yet", style="dim")
        text = Text()
        text.append(f"round {state.round if state.round is not None else '-'}\n\n", style="bold")
        for name, rids in (("waiting_queue", state.waiting), ("running_batch", state.running),
                           ("chunked_req", [state.chunked] if state.chunked else [])):
            text.append(f"{name:<14}", style="cyan")
            text.append(f"({len(rids)})  ")
            if not rids:
                text.append("empty", style="dim")
            for i, rid in enumerate(rids):
                if i:
                    text.append(", ")
                style = f"bold {frame.color(rid)}" + (" underline" if rid == frame.rid else "")
                text.append(short_rid(rid), style=style)
                status = state.reqs[rid].status if rid in state.reqs else None
                if status in ("retracted",):
                    text.append(f" ({status})", style="dim")
            text.append("\n")
        batch = state.batch
        text.append(f"\n{'this batch':<14}", style="cyan")
        if batch is None:
            text.append("not formed yet", style="dim")
        else:
            text.append(f"{batch.mode} ")
            text.append(", ".join(short_rid(r) for r in batch.rids))
        kinds = list(slot_kinds(state).values())
        tree = kinds.count("tree-in-use") + kinds.count("tree-evictable")
        held = len(kinds) - tree - kinds.count("allocated")
        text.append(f"\n{'KV slots':<14}", style="cyan")
        text.append(f"{state.free_slots if state.free_slots is not None else '?'} free · {held} held by "
                    f"requests · {tree} in the radix tree ({kinds.count('tree-evictable')} evictable) · "
                    f"{kinds.count('allocated')} allocated\n")
        return text
