"""The add_one_req lab's differential check: your add_one_req and the engine's, each on its own PrefillAdder
built the same way (a real RadixCache holding finished prompts, some of them locked by running requests, a
KV pool partly held by others, the round's budgets), walking the same waiting queue as the scheduler does:
in order, stopping at the first request not admitted whole. The requests are sized against the budgets left
(equal, one less, one more), so every boundary is met. Compared after every call: the result, the budgets,
can_run_list, new_chunked_req, the admission record the trace is made from, each request's extend range,
and the tree's locks and evictable size."""

from __future__ import annotations

import math
from dataclasses import asdict

from hypothesis import strategies as st

from minisgl.labs.differential import Log, call, same

HEADER = (
    "import torch",
    "from minisgl.mem_cache.memory_pool import TokenToKVPool",
    "from minisgl.mem_cache.radix_cache import RadixCache",
    "from minisgl.sampling.sampling_params import SamplingParams",
    "from minisgl.scheduler.req import Req",
    "from minisgl.scheduler.schedule_policy import PrefillAdder",
)

def setups(idle: bool):
    """The round's world. An idle one (nothing running, no chunked request) with a tight KV pool is where
    the first request's exception, the KV room's cut of a chunk and the lock given back are met."""
    running = st.lists(st.tuples(st.integers(0, 3), st.integers(1, 8), st.integers(1, 12)),
                       min_size=1, max_size=3)
    return st.fixed_dictionaries({
        "cached": st.lists(st.integers(1, 8), min_size=1, max_size=3),  # prompts finished requests left
        # running requests: (cached prompt whose prefix they lock, past the last: none; length; future tokens)
        "running": st.just([]) if idle else running,
        "held": st.integers(0, 6),  # KV slots held outside the tree (the running requests' own tokens)
        # free KV slots beyond the running requests' reservation: tight, or room for every prompt
        "free": st.integers(0, 6) if idle else st.integers(-2, 8) | st.integers(30, 60),
        "ratio": st.sampled_from((1.0, 0.5, 0.7)),
        # rem_input_tokens at the start (a MIXED round's decode rows already out)
        "rows": st.integers(-1, 2) | st.integers(3, 24) | st.integers(12, 40),
        "chunk": st.none() | st.integers(1, 6) | st.integers(4, 24),
        "slots": st.sampled_from((4, 3, 4, 2, 1, 0)),  # requests that may still join the running ones
        "mixed": st.sampled_from((True, False, True)),  # a MIXED round: decode rows come out of the rows
        "has_chunked_req": st.just(False) if idle else st.sampled_from((False, True, False)),
    })


# what a request's new tokens are sized against: "fit" is a few that every budget left admits whole
SIZE_BY = st.sampled_from(("fit", "rows", "few", "chunk", "room", "fit", "limit", "room"))
OFFSET = st.sampled_from((0, 1, -1, 0, 2, -2))  # from that budget: equal most often, else just off it
# (cached prompt it shares a prefix with, past the last: none; prefix length; size_by; offset;
#  future tokens "few" or against rem_total_tokens; offset)
WAITING = st.lists(st.tuples(st.integers(0, 3), st.integers(1, 8), SIZE_BY, OFFSET,
                             st.sampled_from(("few", "total")), OFFSET), min_size=3, max_size=5)


def operations():
    return st.tuples(setups(False) | setups(True), WAITING)


# always tried first: an idle engine whose KV room is exactly one slot (the one cached token it may evict),
# and a 1-token prompt that fits it exactly
EXAMPLES = [({"cached": [1], "running": [], "held": 0, "free": 0, "ratio": 1.0, "rows": 10, "chunk": None,
              "slots": 4, "mixed": False, "has_chunked_req": False}, [(3, 1, "room", 0, "few", 0)])]


def tokens(start: int, n: int) -> str:
    return f"list(range({start}, {start + n}))"


IMPORTED: dict[tuple, dict] = {}


class Twin:
    """Two namespaces, the engine's (envs[0]) and the learner's (envs[1]), running the same code; each line
    run goes into the log, so the replay is exactly what ran."""

    def __init__(self, name: str, mine_ns, ref_ns, log: Log, header=HEADER):
        if header not in IMPORTED:  # the imports run once: each example starts from a copy of their names
            IMPORTED[header] = {}
            exec("\n".join(header), IMPORTED[header])  # noqa: S102
        self.envs = tuple({**IMPORTED[header], name: getattr(ns, name)} for ns in (ref_ns, mine_ns))
        self.log = log
        for line in header:
            log.step(line)

    def run(self, code: str) -> None:
        compiled = compile(code, "<example>", "exec")
        for env in self.envs:
            exec(compiled, env)  # noqa: S102
        self.log.step(code)

    def ref(self, expr: str):
        return eval(expr, self.envs[0])

    def call(self, code: str, target: str = "", show=str):
        """Evaluate `code` in both, compare what they return (as `show` shows it), keep it as `target`."""
        r, m = call(code, lambda: eval(code, self.envs[0]), lambda: eval(code, self.envs[1]), show)
        if target:
            self.envs[0][target], self.envs[1][target] = r, m
        self.log.step(f"{target} = {code}" if target else code, show(r))
        return r


def locks(tree) -> list[tuple]:
    """(key, lock_ref) of every node, depth first, children by first token."""
    out, stack = [], [tree.root_node]
    while stack:
        n = stack.pop()
        out.append((list(n.key), n.lock_ref))
        stack.extend(n.children[t] for t in sorted(n.children, reverse=True))
    return out


def compare_state(step: str, twin: Twin, reqs: list[str]) -> None:
    """The adder, the last admission record, the requests and the tree, engine's against the learner's."""
    (a0, a1), (t0, t1) = (env["a"] for env in twin.envs), (env["tree"] for env in twin.envs)
    same(f"after {step}, a.budgets()", a0.budgets(), a1.budgets())
    same(f"after {step}, the rids in a.can_run_list", [r.rid for r in a0.can_run_list],
         [r.rid for r in a1.can_run_list])
    same(f"after {step}, a.new_chunked_req", getattr(a0.new_chunked_req, "rid", None),
         getattr(a1.new_chunked_req, "rid", None))
    same(f"after {step}, len(a.log) (one record per request looked at)", len(a0.log), len(a1.log))
    if a0.log:
        exp, got = asdict(a0.log[-1]), asdict(a1.log[-1])
        for f in exp:
            same(f"after {step}, a.log[-1].{f} (the trace's sched.admission event)", exp[f], got[f])
    for name in reqs:
        r0, r1 = twin.envs[0][name], twin.envs[1][name]
        for f in ("fill_ids", "extend_input_len"):
            same(f"after {step}, {name}.{f}", getattr(r0, f), getattr(r1, f))
    same(f"after {step}, tree.evictable_size()", t0.evictable_size(), t1.evictable_size())
    same(f"after {step}, tree.protected_size()", t0.protected_size(), t1.protected_size())
    same(f"after {step}, (key, lock_ref) of each tree node, depth first", locks(t0), locks(t1))


def unlocked(tree, key: list[int]) -> int:
    """How many of key's cached tokens locking its match would take out of the evictable ones."""
    node, n = tree.root_node, 0
    while key and key[0] in node.children:
        child = node.children[key[0]]
        m = next((i for i, (x, y) in enumerate(zip(child.key, key)) if x != y), min(len(child.key), len(key)))
        n += m if child.lock_ref == 0 else 0
        if m < len(child.key):
            break
        node, key = child, key[m:]
    return n


def build(twin: Twin, setup: dict) -> None:
    """The round's world: the tree, the pool, the running requests and the adder."""
    cached = setup["cached"]
    free = max(0, math.ceil(sum(f for _, _, f in setup["running"]) * setup["ratio"]) + setup["free"])
    twin.run(f"tree, pool = RadixCache(), TokenToKVPool({sum(cached) + setup['held'] + free}, 1, 1, 1, "
             "torch.float32)")
    for i, n in enumerate(cached):
        twin.run(f"tree.insert({tokens(100 * (i + 1), n)}, pool.alloc({n}))")
    if setup["held"]:
        twin.run(f"pool.alloc({setup['held']})  # held by the running requests' own tokens")
    running = []
    for j, (i, n, future) in enumerate(setup["running"]):
        name = f"R{j}"
        running.append(name)
        params = f"SamplingParams(max_new_tokens={future})"
        twin.run(f"{name} = Req({name!r}, {tokens(100 * (i + 1), n)}, {params}, set())")
        if i < len(cached):
            twin.run(f"{name}.init_next_round_input(tree); tree.inc_lock_ref({name}.last_node)")
    mixed = len(running) if setup["mixed"] else 0
    rows = max(1, setup["rows"] + mixed)  # --max-prefill-tokens
    twin.run(f"a = PrefillAdder(tree, pool, [{', '.join(running)}], {setup['ratio']}, {rows}, "
             f"{setup['chunk']}, {len(running) + setup['slots']}, mixed_decode_rows={mixed}, "
             f"has_chunked_req={setup['has_chunked_req']})")


def size(a, by: str, d: int, lock: int) -> int:
    """New tokens: a few, or against a budget left (rows, chunk rows, the chunk limit, KV room after the
    lock)."""
    rows = a.rem_input_tokens
    chunk = rows if a.rem_chunk_tokens is None else a.rem_chunk_tokens
    room = a.rem_kv_room - lock
    if by == "fit":
        return max(1, min(3 + d, rows, chunk, room))
    return max(1, {"few": 3, "rows": rows, "chunk": chunk, "limit": min(rows, chunk), "room": room}[by] + d)


def drive(ops, mine_ns, ref_ns, log: Log) -> None:
    setup, waiting = ops
    twin = Twin("add_one_req", mine_ns, ref_ns, log)
    build(twin, setup)
    cached, names = setup["cached"], []
    for k, (i, p, by, d, future_by, fd) in enumerate(waiting):
        name = "ABCDE"[k]
        prefix = []
        if i < len(cached):
            p = min(p, cached[i])
            prefix = list(range(100 * (i + 1), 100 * (i + 1) + p))
        a = twin.ref("a")
        new = size(a, by, d, unlocked(twin.ref("tree"), prefix))
        total = math.floor(a.rem_total_tokens) - new  # the most future tokens that still fit
        future = max(1, total + fd if future_by == "total" else min(3 + fd, total) if by == "fit" else 3 + fd)
        prompt = (f"{tokens(prefix[0], p)} + " if prefix else "") + tokens(1000 + 100 * k, new)
        twin.run(f"{name} = Req({name!r}, {prompt}, SamplingParams(max_new_tokens={future}), set())")
        twin.run(f"{name}.init_next_round_input(tree)")
        names.append(name)
        code = f"add_one_req(a, {name})"
        result = twin.call(code)
        compare_state(code, twin, names)
        if getattr(result, "name", None) != "CONTINUE":
            break  # the scheduler's walk stops here
