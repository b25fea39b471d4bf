from minisgl.labs.lab import Lab

LAB = Lab(
    name="radix_cache",
    title="The radix tree: match_prefix, insert, lock counts and eviction",
    component="radix_cache",
    file="radix_cache.py",
    lesson="radix-cache",
    scenario="radix_cache",
    boundaries=("radix_boundaries",),
    view="radix",
    order=5,
    sglang="python/sglang/srt/mem_cache/radix_cache.py: RadixCache.match_prefix, insert, _split_node, "
           "inc_lock_ref, dec_lock_ref, evict",
    hints=(
        "Start with _split_node and match_prefix: the tests for a hit, a miss and a partial match need only "
        "those. A partial match must split, so the tree never returns half a node's slots.",
        "insert walks exactly like match_prefix, but adds a leaf for the tokens that are left. Only the new "
        "leaf's tokens become evictable; what was already there keeps its lock state.",
        "Lock counts: walk from the node up to the root (not including it). Only the 0 -> 1 and 1 -> 0 "
        "changes move a node's tokens between evictable and protected; return the change in evictable size.",
        "evict: heapify the unlocked leaves (TreeNode sorts by last_access_time, then id), pop until enough "
        "slots came out, and push a parent that just became an unlocked childless node. The trace compares "
        "node ids, so create nodes only with self._new_node and tick the clock once per match_prefix/insert.",
    ),
)
