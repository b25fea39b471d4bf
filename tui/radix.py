"""The radix tree at the cursor, as a Tree widget: each node's tokens (with their text where the trace
has it), the KV slots holding them, and its lock count. Nodes on the selected request's path (their
slots are in its req_to_token row) are drawn in its colour."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.widgets import Tree
from textual.widgets.tree import TreeNode

from tracer.fmt import ranges
from tracer.tree import evictable_size, nested
from tui.frame import Frame

MAX_TOKENS = 12  # tokens spelled out per node label


class RadixPane(Tree):
    def __init__(self, **kwargs):
        super().__init__("radix tree", **kwargs)
        self.show_root = True
        self._shown: tuple | None = None
        self.labels: list[str] = []  # the plain label of every node, depth-first (tests read it)

    def show(self, frame: Frame) -> None:
        nodes = frame.state.tree if frame.state else []
        mine = frozenset(s for s in frame.rid_row.values() if s is not None)
        key = (id(nodes), len(nodes), frame.rid, mine)
        if key == self._shown:
            return
        self._shown = key
        self.clear()
        self.labels = []
        if not nodes:
            self.root.set_label(Text("radix tree: empty (no cache.tree event yet)", style="dim"))
            return
        root = nested(nodes)
        self.root.set_label(Text(f"root · {len(nodes) - 1} node(s) · {evictable_size(nodes)} evictable "
                                 "token(s)", style="bold"))
        self.labels.append(self.root.label.plain)
        for child in root["children"]:
            self._add(self.root, child, frame, mine)
        self.root.expand_all()

    def _add(self, parent: TreeNode, node: dict[str, Any], frame: Frame, mine: frozenset[int]) -> None:
        label = node_label(node, frame, mine)
        self.labels.append(label.plain)
        branch = parent.add(label, data=node["id"], expand=True)
        for child in node["children"]:
            self._add(branch, child, frame, mine)
        if not node["children"]:
            branch.allow_expand = False


def node_label(node: dict[str, Any], frame: Frame, mine: frozenset[int]) -> Text:
    """`[id] slots 5-6 lock=1  2 tok  ' one two'`: what the node holds first, so a narrow pane keeps it."""
    on_path = bool(mine) and set(node["value"]) <= mine
    style = f"bold {frame.color(frame.rid)}" if on_path else ("" if node["lock_ref"] > 0 else "dim")
    text = Text(f"[{node['id']}] ", style="dim")
    text.append(f"slots {ranges(node['value'])}  lock={node['lock_ref']}  ", style=style)
    text.append(f"{len(node['key'])} tok  ", style="dim")
    text.append(tokens_preview(node["key"], frame), style=style)
    return text


def tokens_preview(tokens: list[int], frame: Frame) -> str:
    """The tokens' text where the trace has it (quoted), their ids where not."""
    texts = [frame.index.text_of(t) for t in tokens[:MAX_TOKENS]]
    if all(t is not None for t in texts):
        out = repr("".join(texts))
    else:
        out = " ".join(str(t) for t in tokens[:MAX_TOKENS])
    return out + (f" … +{len(tokens) - MAX_TOKENS}" if len(tokens) > MAX_TOKENS else "")
