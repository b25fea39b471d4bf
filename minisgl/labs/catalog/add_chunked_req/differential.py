"""The add_chunked_req lab's differential check: a long prompt prefilled a chunk per round, as the scheduler
does it. Its first chunk is cut by the engine's add_one_req; then each round builds a PrefillAdder with new
budgets (prefill rows, chunk rows, a MIXED round's decode rows, the KV room others leave free) and asks your
add_chunked_req and the engine's, each in its own engine, for the next chunk; an admitted chunk then runs
(its KV slots are taken and cache_unfinished_req caches it). The budgets are sized against the tokens still
to prefill (equal, one less, one more), so the last chunk, an exact fit and no room at all are all met.
Compared after every call: the request returned, the budgets, can_run_list, the admission record the trace is
made from, the request's fill_ids and extend_input_len, and the tree's locks."""

from __future__ import annotations

from hypothesis import strategies as st

from minisgl.labs.catalog.add_one_req.differential import HEADER, Twin, compare_state, tokens
from minisgl.labs.differential import Log

HEADER = HEADER + (
    "from minisgl.mem_cache.cache_manager import CacheManager",
    "from minisgl.mem_cache.memory_pool import ReqToTokenPool",
    "from minisgl.scheduler.schedule_batch import ScheduleBatch",
)
# the round runs: the chunk takes its KV slots, then cache_unfinished_req makes it the cached prefix
RUN = ("b = ScheduleBatch.init_new([L], req_to_token, pool, cache); b.prepare_for_extend(); "
       "cache.cache_unfinished_req(L)")

SETUP = st.fixed_dictionaries({
    "prompt": st.integers(4, 40),
    "cached": st.integers(0, 6),  # its first tokens an earlier request left in the tree
    "other": st.integers(0, 4),  # another prompt in the tree: evictable room
    "first_chunk": st.integers(1, 8),  # --chunked-prefill-size of the first round
    "ratio": st.sampled_from((0.5, 1.0, 0.7)),
})
SIZE_BY = st.sampled_from(("rest", "many", "few"))  # against the tokens still to prefill, many more, or a few
OFFSET = st.sampled_from((0, 1, -1, 0, 2, -2))
# a round: (chunk rows, offset; prefill rows, offset; decode rows of a MIXED round; KV room, offset)
ROUND = st.tuples(SIZE_BY, OFFSET, SIZE_BY, OFFSET, st.sampled_from((0, 0, 2)), SIZE_BY, OFFSET)


def operations():
    return st.tuples(SETUP, st.lists(ROUND, min_size=1, max_size=4))


def sized(by: str, d: int, rest: int) -> int:
    return {"rest": rest, "many": rest + 8, "few": 2}[by] + d


def drive(ops, mine_ns, ref_ns, log: Log) -> None:
    setup, rounds = ops
    n, cached = setup["prompt"], min(setup["cached"], setup["prompt"] - 2)
    twin = Twin("add_chunked_req", mine_ns, ref_ns, log, HEADER)
    twin.run(f"tree, pool = RadixCache(), TokenToKVPool({n + setup['other'] + 16}, 1, 1, 1, torch.float32)")
    twin.run("req_to_token = ReqToTokenPool(4, 64); cache = CacheManager(tree, req_to_token, pool)")
    if cached:
        twin.run(f"tree.insert({tokens(100, cached)}, pool.alloc({cached}))")
    if setup["other"]:
        twin.run(f"tree.insert({tokens(900, setup['other'])}, pool.alloc({setup['other']}))")
    twin.run(f"L = Req('L', {tokens(100, n)}, SamplingParams(max_new_tokens=5), set())")
    twin.run("L.init_next_round_input(tree)")
    first = min(setup["first_chunk"], n - cached - 1)  # cut: at least one token is left for this lab
    twin.run(f"a = PrefillAdder(tree, pool, [], {setup['ratio']}, 64, {first}, 8)")
    twin.run("a.add_one_req(L)  # the first chunk, by the engine's add_one_req")
    twin.run(RUN)
    held = None
    for k, (chunk_by, cd, rows_by, rd, decode_rows, room_by, kd) in enumerate(rounds):
        if held:
            twin.run(f"pool.free({held})")
            held = None
        rest = n - len(twin.ref("L").prefix_indices)
        chunk, rows = max(1, sized(chunk_by, cd, rest)), max(1, sized(rows_by, rd, rest) + decode_rows)
        tree, pool = twin.ref("tree"), twin.ref("pool")
        room = max(0, sized(room_by, kd, rest))
        hold = pool.available_size() - max(0, room - tree.evictable_size())
        if hold > 0:  # others take KV slots: this much room is left
            held = f"h{k}"
            twin.run(f"{held} = pool.alloc({hold})")
        twin.run("L.init_next_round_input()")
        twin.run(f"a = PrefillAdder(tree, pool, [], {setup['ratio']}, {rows}, {chunk}, 8, "
                 f"mixed_decode_rows={decode_rows}, has_chunked_req=True)")
        code = "add_chunked_req(a, L)"
        twin.call(code, "left", show=lambda r: getattr(r, "rid", r))
        compare_state(code, twin, ["L"])
        if twin.ref("left") is None:
            return  # the last chunk: the request goes on to decode
        if twin.ref("a.can_run_list"):
            twin.run(RUN)
