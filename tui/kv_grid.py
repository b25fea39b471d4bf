"""The KV pool as a grid: every slot coloured by what holds it — a request, the radix tree (locked by a
running request, or unreferenced and evictable), kv.alloc's not-yet-assigned rows, or nobody (free).
The selected request's slots (its req_to_token row and the slots it owns) are marked with `*`."""

from __future__ import annotations

from collections import Counter

from rich.text import Text

from tracer.state import TREE, UNASSIGNED, RoundState
from tui.frame import Frame
from tui.palette import ALLOCATED, FREE, TREE_EVICTABLE, TREE_IN_USE
from tui.textpane import TextPane

NUMBERED_UP_TO = 512  # larger pools are drawn one character per slot


class KVGrid(TextPane):
    def render_text(self, frame: Frame) -> Text:
        if frame.state is None:
            return Text("no events yet", style="dim")
        return kv_text(frame, max(self.size.width - 2, 20))


def slot_kinds(state: RoundState) -> dict[int, str]:
    """Every held slot -> a rid, "tree-in-use", "tree-evictable" or "allocated"."""
    locked = {s for n in state.tree if n.get("lock_ref", 0) > 0 and n.get("parent") is not None
              for s in n.get("value", [])}
    kinds = {}
    for slot, owner in state.slot_owner.items():
        if owner == TREE:
            kinds[slot] = "tree-in-use" if slot in locked else "tree-evictable"
        elif owner == UNASSIGNED:
            kinds[slot] = "allocated"
        else:
            kinds[slot] = owner
    return kinds


def kv_text(frame: Frame, width: int) -> Text:
    state = frame.state
    kinds = slot_kinds(state)
    size = state.kv_size or max(kinds, default=0)
    slots = sorted(set(range(1, size + 1)) | set(kinds))  # slot 0 is the pool's padding slot
    mine = {s for s in frame.rid_row.values() if s is not None}
    if frame.rid is not None:
        mine |= {s for s, k in kinds.items() if k == frame.rid}
    styles = {"tree-in-use": TREE_IN_USE, "tree-evictable": TREE_EVICTABLE, "allocated": ALLOCATED}
    text = Text()
    text.append(f"KV pool at round {state.round if state.round is not None else '-'}: ", style="bold")
    free = len(slots) - len(kinds)
    text.append(f"{size} slots, {free} free\n")
    numbered = len(slots) <= NUMBERED_UP_TO
    per_line = max(width // 5, 1) if numbered else max(width - 8, 8)
    for i, slot in enumerate(slots):
        if i % per_line == 0:
            if i:
                text.append("\n")
            if not numbered:
                text.append(f"{slot:>6}  ", style="dim")
        kind = kinds.get(slot)
        bg = FREE if kind is None else styles.get(kind, frame.color(kind))
        style = f"black on {bg}" if kind is not None else "grey50"
        if slot in mine:
            style += " bold underline"
        if numbered:
            text.append(f"{slot:>3}{'*' if slot in mine else ' '}", style=style)
            text.append(" ")
        else:
            text.append("*" if slot in mine else ("·" if kind is None else "■"), style=style)
    text.append("\n\n")
    counts = Counter(kinds.values())
    for rid in frame.index.rids:
        if counts.get(rid):
            text.append("■", style=frame.color(rid))
            text.append(f" {frame.rid_label(rid)} {counts[rid]}  ")
    for kind, label in (("tree-in-use", "tree, in use"), ("tree-evictable", "tree, evictable"),
                        ("allocated", "allocated")):
        text.append("■", style=styles[kind])
        text.append(f" {label} {counts.get(kind, 0)}  ")
    text.append("·", style="grey50")
    text.append(f" free {free}\n")
    if frame.rid is not None:
        text.append("* ", style="bold")
        text.append(frame.rid_label(frame.rid), style=f"bold {frame.color(frame.rid)}")
        text.append(f": {len(mine)} slot(s) in its row or owned by it")
    return text
