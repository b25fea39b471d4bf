"""Lab radix_cache (your file). RadixCache: a radix tree over token ids whose nodes hold the KV slots of those
tokens (page size 1).

Requests that share a prompt prefix reuse the same KV slots instead of recomputing them. Every
edge of the tree holds a run of token ids (`key`) and the KV slots computed for them (`value`).
Besides keys and values the tree keeps two things: a lock count per node (a running request locks
the path to its cached prefix, so it cannot be evicted) and a logical clock for LRU eviction.

That is all it does. It never allocates or frees a KV slot and never reads a request: `insert`
returns how much was cached already and `evict` returns the slots it dropped, and the CacheManager
(cache_manager.py) frees them and keeps each request's `req_to_token` row right. The interface it
implements, and the ownership rule for `insert`, are in base_prefix_cache.py.
"""

from __future__ import annotations

import heapq  # noqa: F401  (evict uses it)

import torch

from minisgl.mem_cache.base_prefix_cache import BasePrefixCache, MatchResult


class TreeNode:
    """One edge of the radix tree: a run of tokens and the KV slots that hold them."""

    def __init__(self, id: int, key: list[int] | None = None, value: torch.Tensor | None = None):
        self.id = id
        self.children: dict[int, TreeNode] = {}
        self.parent: TreeNode | None = None
        self.key: list[int] = key if key is not None else []
        self.value: torch.Tensor = value if value is not None else torch.empty(0, dtype=torch.int64)
        self.lock_ref = 0
        self.last_access_time = 0

    def __lt__(self, other: TreeNode) -> bool:
        return (self.last_access_time, self.id) < (other.last_access_time, other.id)

    def __repr__(self) -> str:
        return f"TreeNode(id={self.id}, key={self.key}, lock_ref={self.lock_ref})"


def _key_match(key0: list[int], key1: list[int]) -> int:
    """Length of the common prefix of two token lists."""
    i = 0
    for a, b in zip(key0, key1):
        if a != b:
            break
        i += 1
    return i


class RadixCache(BasePrefixCache):
    """Prefix cache shared by all requests; evicts unlocked leaves, least recently used first."""

    def __init__(self, device: str | torch.device = "cpu"):
        self.device = torch.device(device)
        self._reset_state()

    # ---- lifecycle -------------------------------------------------------------------------------
    def _reset_state(self) -> None:
        """Counters restart too, so replaying the same operations rebuilds an identical snapshot."""
        self._next_id = 0
        self._clock = 0
        self.root_node = self._new_root()
        self.evictable_size_ = 0
        self.protected_size_ = 0

    def _new_root(self) -> TreeNode:
        root = self._new_node([], torch.empty(0, dtype=torch.int64, device=self.device))
        root.lock_ref = 1
        return root

    def reset(self) -> torch.Tensor:
        """Drop the whole tree; returns the slots it held (the caller frees them). Refused while locked."""
        if self.protected_size_ > 0:
            raise RuntimeError(
                f"cannot flush the radix cache: {self.protected_size_} token(s) are locked "
                "by running requests"
            )
        values = self.all_values()
        self._reset_state()
        return values

    # ---- lookup and insertion --------------------------------------------------------------------
    def match_prefix(self, key: list[int]) -> MatchResult:
        """Longest cached prefix of `key`; splits a node so the match always ends on a node boundary.

        Walk down from the root while the next token has a child. At each child, count how many of its
        tokens match (`_key_match`). A partial match splits the child (`_split_node`) so the match ends on a
        node boundary. Collect each matched node's `value` and concatenate them. Every node you visit (the
        root included) gets `last_access_time = now`, with ONE `self._tick()` per call.
        """
        raise NotImplementedError("TODO: match_prefix")

    def insert(self, key: list[int], value: torch.Tensor) -> int:
        """Add key -> value; returns how many leading tokens were already cached.

        The tree takes value[returned:]; the caller still owns (and should free) its own slots
        value[:returned], which duplicate ones the tree already holds.
        """
        if len(key) != value.numel():
            raise ValueError(f"insert: {len(key)} token(s) but {value.numel()} KV slot(s)")
        return self._insert_helper(self.root_node, list(key), value.to(torch.int64).clone(), self._tick())

    def _insert_helper(self, node: TreeNode, key: list[int], value: torch.Tensor, now: int) -> int:
        """Insert key -> value below `node`; returns how many leading tokens were there already.

        Walk down like match_prefix (splitting on a partial match, stamping last_access_time = now),
        adding up how many tokens were already there. Whatever is left of `key` becomes one new leaf
        (`self._new_node`) under the last node, and counts as evictable.
        """
        raise NotImplementedError("TODO: _insert_helper")

    def _split_node(self, child: TreeNode, split_len: int) -> TreeNode:
        """Cut `child` after split_len tokens; the new upper node inherits its lock count and parent.

        The new upper node takes the first split_len tokens and slots, the child keeps the rest;
        the upper node takes the child's place under its parent and inherits lock_ref and last_access_time.
        """
        raise NotImplementedError("TODO: _split_node")

    # ---- locking ---------------------------------------------------------------------------------
    def inc_lock_ref(self, node: TreeNode) -> int:
        """Protect the path root -> node from eviction; returns the change in evictable_size.

        From node up to (not including) the root: a node going from 0 to 1 locks moves its tokens
        from evictable to protected.
        """
        raise NotImplementedError("TODO: inc_lock_ref")

    def dec_lock_ref(self, node: TreeNode) -> int:
        """Undo one inc_lock_ref(node); returns the change in evictable_size.

        The mirror of inc_lock_ref; a node already at 0 is a bug in the caller: raise RuntimeError.
        """
        raise NotImplementedError("TODO: dec_lock_ref")

    # ---- eviction --------------------------------------------------------------------------------
    def evict(self, num_tokens: int) -> list[torch.Tensor]:
        """Drop unlocked leaves, least recently used first, until num_tokens slots came out (or none is left).

        Returns each dropped leaf's slots in the order dropped; the caller frees them. A parent left
        childless and unlocked becomes a leaf and a candidate in turn.

        Use a heap of the unlocked leaves (TreeNode orders by last_access_time, then id) and
        `_delete_leaf`; push a parent that became an unlocked, childless non-root node.
        """
        raise NotImplementedError("TODO: evict")

    def _delete_leaf(self, node: TreeNode) -> TreeNode:
        parent = node.parent
        assert parent is not None
        del parent.children[node.key[0]]
        self.evictable_size_ -= len(node.key)
        node.parent = None
        return parent

    def _collect_leaves(self) -> list[TreeNode]:
        leaves, stack = [], [self.root_node]
        while stack:
            node = stack.pop()
            if not node.children and node is not self.root_node:
                leaves.append(node)
            stack.extend(node.children.values())
        return leaves

    # ---- sizes and inspection --------------------------------------------------------------------
    def evictable_size(self) -> int:
        return self.evictable_size_

    def protected_size(self) -> int:
        return self.protected_size_

    def total_size(self) -> int:
        return sum(len(n.key) for n in self._iter_nodes())

    def all_values(self) -> torch.Tensor:
        values = [n.value for n in self._iter_nodes() if n.value.numel()]
        return torch.cat(values) if values else torch.empty(0, dtype=torch.int64, device=self.device)

    def snapshot(self) -> dict:
        """The tree as plain dicts and lists (children ordered by first token) for tests and trace diffs."""
        return self._snapshot_helper(self.root_node)

    def _snapshot_helper(self, node: TreeNode) -> dict:
        return {
            "id": node.id,
            "key": list(node.key),
            "value": node.value.tolist(),
            "lock_ref": node.lock_ref,
            "children": [self._snapshot_helper(node.children[t]) for t in sorted(node.children)],
        }

    def tree_nodes(self) -> list[dict]:
        """Every node as a flat record (the `cache.tree` trace event): id, parent, key, value, lock_ref and
        last_access_time (the LRU stamp that decides the order of eviction)."""
        return [
            {"id": n.id, "parent": None if n.parent is None else n.parent.id, "key": list(n.key),
             "value": n.value.tolist(), "lock_ref": n.lock_ref, "last_access_time": n.last_access_time}
            for n in self._iter_nodes()
        ]

    def pretty_print(self) -> str:
        lines: list[str] = []
        self._print_helper(self.root_node, 0, lines)
        lines.append(
            f"#tokens: {self.total_size()}, evictable: {self.evictable_size_}, "
            f"protected: {self.protected_size_}"
        )
        return "\n".join(lines)

    def _print_helper(self, node: TreeNode, indent: int, lines: list[str]) -> None:
        label = "root" if node is self.root_node else f"{node.key} -> {node.value.tolist()}"
        lines.append(f"{' ' * indent}[{node.id}] {label} lock={node.lock_ref}")
        for t in sorted(node.children):
            self._print_helper(node.children[t], indent + 2, lines)

    # ---- helpers ---------------------------------------------------------------------------------
    def _iter_nodes(self) -> list[TreeNode]:
        nodes, stack = [], [self.root_node]
        while stack:
            node = stack.pop()
            nodes.append(node)
            stack.extend(node.children[t] for t in sorted(node.children, reverse=True))
        return nodes

    def _new_node(self, key: list[int], value: torch.Tensor) -> TreeNode:
        node = TreeNode(self._next_id, key, value)
        self._next_id += 1
        return node

    def _tick(self) -> int:
        self._clock += 1
        return self._clock
