"""The radix_cache lab's differential check: your RadixCache and the engine's, fed the same calls the engine
makes (match_prefix, insert, a request locking its matched prefix and later unlocking it, evict, reset), and
compared after every call: each return value, then the whole tree (ids, keys, slots, lock counts and LRU
stamps of every node) and the evictable and protected sizes."""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from minisgl.labs.differential import Log, Mismatch, call, observe, same

TOKENS = st.integers(1, 2)  # a small alphabet: shared prefixes, splits and re-inserts are frequent
KEYS = st.lists(TOKENS, min_size=1, max_size=5)
OPS = st.one_of(
    st.tuples(st.just("insert"), KEYS),
    st.tuples(st.just("match"), KEYS),
    st.tuples(st.just("lock"), KEYS),  # a request: match_prefix, then inc_lock_ref(last_node)
    # one of the locks still held ends; with `again`, it is released a second time, which must be refused
    # once nobody holds the node
    st.tuples(st.just("unlock"), st.tuples(st.integers(0, 3), st.booleans())),
    st.tuples(st.just("evict"), st.integers(0, 8)),
    st.tuples(st.just("reset"), st.just(0)),
)


def operations():
    return st.lists(OPS, min_size=2, max_size=16)


# always tried first: an eviction that empties a locked node of its only child ([2] under the locked [1, 1])
# and must then pass it over for the next leaf
EXAMPLES = [[("insert", [1, 1, 2]), ("lock", [1, 1]), ("insert", [2]), ("evict", 2)]]


def _slots(xs):
    """A tensor of KV slots as a list; with its dtype when that is not int64 (slots index the pool)."""
    out = [int(x) for x in xs.tolist()]
    return out if xs.dtype == torch.int64 else (out, str(xs.dtype))


def tree(cache) -> list[tuple]:
    """Every node from the root, depth first, children by first token: (id, parent id, key, slots, lock_ref,
    last_access_time)."""
    out, stack = [], [cache.root_node]
    while stack:
        n = stack.pop()
        parent = getattr(n, "parent", None)
        out.append((getattr(n, "id", None), None if parent is None else getattr(parent, "id", None),
                    list(n.key), _slots(n.value), n.lock_ref, getattr(n, "last_access_time", None)))
        stack.extend(n.children[t] for t in sorted(n.children, reverse=True))
    return out


FIELDS = ("id", "parent", "key", "slots", "lock_ref", "last_access_time")


def compare_state(step: str, mine, ref) -> None:
    exp, got = tree(ref), observe(f"after {step}, walking the tree from root_node", lambda: tree(mine))
    for i, (a, b) in enumerate(zip(exp, got)):
        if a != b:
            f = next(k for k, x, y in zip(FIELDS, a, b) if x != y)
            raise Mismatch(f"after {step}, tree node #{i} in depth-first order (id {a[0]}): its {f}",
                           a[FIELDS.index(f)], b[FIELDS.index(f)])
    same(f"after {step}, the number of nodes in the tree", len(exp), len(got))
    call(f"c.evictable_size()  # after {step}", ref.evictable_size, mine.evictable_size)
    call(f"c.protected_size()  # after {step}", ref.protected_size, mine.protected_size)


def drive(ops, mine_ns, ref_ns, log: Log) -> None:
    log.step("import torch")
    log.step("c = RadixCache()")
    ref, mine = ref_ns.RadixCache(), mine_ns.RadixCache()
    compare_state("RadixCache()", mine, ref)
    next_slot, locks = 100, []  # locks: (name in the example, reference node, learner's node)
    for op, arg in ops:
        if op == "insert":
            value = list(range(next_slot, next_slot + len(arg)))
            next_slot += len(arg)
            code = f"c.insert({arg}, torch.tensor({value}))"
            r, _ = call(code, lambda: ref.insert(arg, torch.tensor(value)),
                        lambda: mine.insert(arg, torch.tensor(value)))
            log.step(code, r)
        elif op in ("match", "lock"):
            name = f"n{len(log.lines)}"
            code = f"{name} = c.match_prefix({arg})"
            show = lambda m: (_slots(m.device_indices), getattr(m.last_node, "id", None))  # noqa: E731
            r, m = call(code, lambda: ref.match_prefix(arg), lambda: mine.match_prefix(arg), show,
                        "-> (device_indices, last_node.id)")
            log.step(code, f"device_indices {show(r)[0]}, last_node.id {show(r)[1]}")
            if op == "lock":
                code = f"c.inc_lock_ref({name}.last_node)"
                d, _ = call(code, lambda: ref.inc_lock_ref(r.last_node),
                            lambda: mine.inc_lock_ref(m.last_node))
                log.step(code, d)
                locks.append((name, r.last_node, m.last_node))
        elif op == "unlock":
            if not locks:
                continue
            name, rn, mn = locks.pop(arg[0] % len(locks))
            code = f"c.dec_lock_ref({name}.last_node)"
            d, _ = call(code, lambda: ref.dec_lock_ref(rn), lambda: mine.dec_lock_ref(mn))
            log.step(code, d)
            if arg[1] and rn.lock_ref == 0 and rn is not ref.root_node:
                compare_state(code, mine, ref)
                d, _ = call(code, lambda: ref.dec_lock_ref(rn), lambda: mine.dec_lock_ref(mn))
                log.step(code, d)
        elif op == "evict":
            code = f"c.evict({arg})"
            show = lambda vs: [_slots(v) for v in vs]  # noqa: E731
            r, _ = call(code, lambda: ref.evict(arg), lambda: mine.evict(arg), show,
                        "(slots of each dropped leaf)")
            log.step(code, show(r))
        elif op == "reset":
            if locks:
                continue  # the engine flushes the cache only while no request holds a lock
            code = "c.reset()"
            show = lambda v: sorted(_slots(v))  # noqa: E731
            r, _ = call(code, ref.reset, mine.reset, show, "(the slots it held, sorted)")
            log.step(code, show(r))
        compare_state(log.lines[-1].split("#")[0].strip(), mine, ref)
