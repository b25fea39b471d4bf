"""The radix tree of a `cache.tree` event: a flat node list, turned into the shapes readers need.

`nested` gives the same shape as `RadixCache.snapshot()`, so a test can compare a replayed tree with
the live one without the tracer importing the engine.
"""

from __future__ import annotations

from typing import Any

Node = dict[str, Any]


def nested(nodes: list[Node]) -> dict[str, Any]:
    """The tree as {id, key, value, lock_ref, children} with children ordered by their first token."""
    if not nodes:
        return {"id": 0, "key": [], "value": [], "lock_ref": 1, "children": []}
    children: dict[Any, list[Node]] = {}
    root = None
    for n in nodes:
        if n.get("parent") is None:
            root = n
        else:
            children.setdefault(n["parent"], []).append(n)

    def build(n: Node) -> dict[str, Any]:
        kids = sorted(children.get(n["id"], []), key=lambda c: c["key"][0] if c["key"] else -1)
        return {"id": n["id"], "key": list(n["key"]), "value": list(n["value"]), "lock_ref": n["lock_ref"],
                "children": [build(c) for c in kids]}

    if root is None:
        raise ValueError("cache.tree has no root node (a node whose parent is null)")
    return build(root)


def tree_slots(nodes: list[Node]) -> set[int]:
    """Every KV slot the tree holds."""
    return {s for n in nodes for s in n.get("value", [])}


def slot_tokens(nodes: list[Node]) -> dict[int, int]:
    """KV slot -> the token id whose K/V it holds, for every slot in the tree."""
    return {s: t for n in nodes for t, s in zip(n.get("key", []), n.get("value", []))}


def evictable_size(nodes: list[Node]) -> int:
    """Tokens in unlocked nodes: what eviction could free (the root holds none)."""
    return sum(len(n.get("key", [])) for n in nodes
               if n.get("parent") is not None and n.get("lock_ref", 0) == 0)


def render(nodes: list[Node], max_tokens: int = 8) -> list[str]:
    """Indented text lines, one per node: `[id] key -> slots lock=n`."""
    lines: list[str] = []

    def short(xs: list[int]) -> str:
        if len(xs) <= max_tokens:
            return str(xs)
        return f"[{', '.join(map(str, xs[:max_tokens]))}, … +{len(xs) - max_tokens}]"

    def walk(n: dict[str, Any], depth: int) -> None:
        label = "root" if depth == 0 else f"{short(n['key'])} -> {short(n['value'])}"
        lines.append(f"{'  ' * depth}[{n['id']}] {label} lock={n['lock_ref']}")
        for c in n["children"]:
            walk(c, depth + 1)

    walk(nested(nodes), 0)
    return lines
