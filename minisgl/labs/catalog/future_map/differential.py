"""The future_map lab's differential check: your FutureMap and the engine's, made with the same
max_running_requests, driven through the same rounds the overlap loop makes: each round allocates one index
per row, stores the round's sampled tokens at them, and the next round's input ids (real ids and the last
round's placeholders) are resolved. After every call: its answer, then the ring's size, future_ct and the
buffer."""

from __future__ import annotations

import torch
from hypothesis import strategies as st

from minisgl.labs.differential import Log, call, same

ROUND = st.tuples(st.integers(1, 4),  # rows in the round (at most max_running_requests, 4 at most)
                  st.lists(st.integers(0, 49151), min_size=4, max_size=4),  # tokens its rows sample
                  st.lists(st.integers(0, 3), max_size=4))  # real input ids mixed into the next round's
OPS = st.tuples(st.integers(1, 4), st.lists(ROUND, min_size=1, max_size=12))


def operations():
    return OPS


# always tried first: a ring of 4 indices that a batch straddles, and one batch exactly the ring's size
EXAMPLES = [(1, [(3, [5, 6, 7, 8], []), (2, [9, 10, 11, 12], [0]), (1, [1, 2, 3, 4], [3])]),
            (1, [(4, [1, 2, 3, 4], [2, 0]), (4, [5, 6, 7, 8], [])])]


def state(fm) -> tuple:
    return fm.size, fm.future_ct, fm.token_ids_buf.tolist()


def drive(ops, mine_ns, ref_ns, log: Log) -> None:
    max_running, rounds = ops
    code = f"fm = FutureMap({max_running})"
    ref, mine = call(code, lambda: ref_ns.FutureMap(max_running), lambda: mine_ns.FutureMap(max_running),
                     state, "-> (size, future_ct, token_ids_buf)")
    log.step(code)
    last: list[int] = []
    for bs, tokens, real in rounds:
        bs = min(bs, max_running)
        if last:  # this round's input ids: the last round's placeholders among real ids
            ids = [-k for k in last] + list(real)
            code = f"fm.resolve_future_token_ids(torch.tensor({ids}))"
            call(code, lambda: ref.resolve_future_token_ids(torch.tensor(ids)),
                 lambda: mine.resolve_future_token_ids(torch.tensor(ids)), lambda t: t.tolist())
            log.step(code, ref.resolve_future_token_ids(torch.tensor(ids)).tolist())
        code = f"fm.alloc_future_indices({bs})"
        got, _ = call(code, lambda: ref.alloc_future_indices(bs), lambda: mine.alloc_future_indices(bs))
        log.step(code, got)
        code = f"fm.store_to_future_map({got}, {tokens[:bs]})"
        call(code, lambda: ref.store_to_future_map(got, tokens[:bs]),
             lambda: mine.store_to_future_map(got, tokens[:bs]))
        log.step(code)
        same(f"after {code}, (size, future_ct, token_ids_buf)", state(ref), state(mine))
        last = got
