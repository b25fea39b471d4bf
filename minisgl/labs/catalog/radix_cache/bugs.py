"""One-line bugs learners write in the radix tree (see minisgl/labs/bugs.py)."""

from minisgl.labs.bugs import Bug

BUGS = (
    Bug("evict_one_too_many", "evict keeps popping while it has freed exactly enough",
        "while num_evicted < num_tokens and leaves:", "while num_evicted <= num_tokens and leaves:"),
    Bug("insert_no_lru", "insert walks the tree without refreshing the LRU stamps it passes",
        "            child = node.children[key[0]]\n            child.last_access_time = now\n"
        "            prefix_len = _key_match(child.key, key)\n            if prefix_len < len(child.key):\n"
        "                child = self._split_node(child, prefix_len)",
        "            child = node.children[key[0]]\n"
        "            prefix_len = _key_match(child.key, key)\n            if prefix_len < len(child.key):\n"
        "                child = self._split_node(child, prefix_len)"),
    Bug("split_forgets_stamp", "the upper half of a split node starts with a fresh access time",
        "        new_node.last_access_time = child.last_access_time\n", ""),
    Bug("split_forgets_lock", "the upper half of a split node starts unlocked",
        "        new_node.lock_ref = child.lock_ref\n", ""),
    Bug("leaf_no_stamp", "a new leaf keeps the access time 0",
        "            leaf.last_access_time = now\n", ""),
    Bug("lock_counts_every_lock", "every inc_lock_ref moves the tokens to protected, not only the first",
        "            if node.lock_ref == 0:\n                self.evictable_size_ -= len(node.key)",
        "            if node.lock_ref >= 0:\n                self.evictable_size_ -= len(node.key)"),
    Bug("unlock_at_zero",
        "dec_lock_ref releases the tokens when the count reaches 0, tested before the decrement",
        "            if node.lock_ref == 1:", "            if node.lock_ref == 0:"),
    Bug("lock_stops_early", "inc_lock_ref locks the node but not the path above it",
        "            node.lock_ref += 1\n            assert node.parent is not None\n"
        "            node = node.parent",
        "            node.lock_ref += 1\n            assert node.parent is not None\n            break"),
    Bug("evict_no_parent", "evict never considers a parent that its eviction left childless",
        "                heapq.heappush(leaves, parent)", "                pass"),
    Bug("evict_locked_parent", "evict pushes a childless parent even while a request holds it",
        "not parent.children and parent.lock_ref == 0:", "not parent.children:"),
    Bug("evict_most_recent", "evict drops the most recently used leaf first",
        "            node = heapq.heappop(leaves)", "            node = max(leaves); leaves.remove(node)"),
    Bug("match_whole_child", "a partial match returns the whole child's slots, not the split node's",
        "                node = self._split_node(child, prefix_len)\n"
        "                values.append(node.value)",
        "                values.append(child.value)\n"
        "                node = self._split_node(child, prefix_len)"),
    Bug("match_no_root_stamp", "match_prefix stamps the nodes below the root but not the root",
        "        node = self.root_node\n        node.last_access_time = now\n        values",
        "        node = self.root_node\n        values"),
    Bug("insert_counts_whole_child", "insert adds the child's whole length to what was cached, split or not",
        "            total_prefix_len += prefix_len", "            total_prefix_len += len(node.key)"),
)
