"""Colours: one per request (the same in every pane), and the KV pool's other owners."""

from __future__ import annotations

RID_COLORS = ("dodger_blue1", "dark_orange", "medium_purple1", "spring_green2", "hot_pink", "gold1",
              "turquoise2", "salmon1")
TREE_IN_USE = "steel_blue"  # in the radix tree and locked: a running request reads it
TREE_EVICTABLE = "grey42"  # in the radix tree, no request holds it: eviction may free it
ALLOCATED = "yellow3"  # taken by kv.alloc, not yet assigned to a request
FREE = "grey35"

